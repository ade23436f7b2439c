package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// errorRows is the error table (webkit.Rows), read once: plainHeads holds by its index.
var errorRows = webkit.Rows()

// errorBody is every error response.
type errorBody struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Import is the report of an import that stopped on this error: what it imported first.
	Import *importResponse `json:"import,omitempty"`
}

// plainHeads holds, by the index of errorRows, the start of the JSON body answering that row's
// error itself (the sentinel, not wrapped): errorBody{Code, Message, RequestID} encoded with
// encoding/json up to the request id's opening quote, `{"code":"sold_out","message":"sold
// out","request_id":"`. A sentinel's answer differs only by its request id, so the error
// handler appends the id and `"}` instead of encoding the body again — the same bytes
// (TestPlainErrorBodies), for the answer a flash sale gives hundreds of thousands of times.
var plainHeads = func() [][]byte {
	heads := make([][]byte, len(errorRows))
	for i, row := range errorRows {
		b, err := json.Marshal(errorBody{Code: row.Answer.Code, Message: row.Answer.Message, RequestID: "X"})
		if err != nil {
			panic(err)
		}
		heads[i] = bytes.TrimSuffix(b, []byte(`X"}`))
	}
	return heads
}()

// plainError returns the errorRows index of err when err is one of the table's sentinels
// itself: then no errors.As of the error handler can match, and the answer is the row's.
func plainError(err error) (int, bool) {
	for i, row := range errorRows {
		if err == row.Err {
			return i, true
		}
	}
	return 0, false
}

// jsonPlain reports whether s is written into a JSON string as it is by encoding/json (no
// escaping): the request ids the service generates (UUIDs) always are.
func jsonPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// errorHandler is installed as Fiber's error handler: handlers just return err.
func errorHandler(log *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		if i, ok := plainError(err); ok {
			if id := requestID(c); id != "" && jsonPlain(id) {
				api := errorRows[i].Answer
				logError(c, log, api, id, err)
				c.Locals(errorCodeKey, api.Code)
				if api.Status == fiber.StatusServiceUnavailable {
					c.Set(fiber.HeaderRetryAfter, "1")
				}
				head := plainHeads[i]
				b := make([]byte, 0, len(head)+len(id)+2)
				b = append(append(append(b, head...), id...), `"}`...)
				c.Status(api.Status).Response().SetBodyRaw(b)
				c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
				return nil
			}
		}
		api := webkit.Lookup(err)
		body := errorBody{Code: api.Code, Message: api.Message, RequestID: requestID(c)}
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			body.Field, body.Message = ve.Field, ve.Error()
		}
		var fb *forbidden
		if errors.As(err, &fb) {
			body.Message = fmt.Sprintf("the role %s may not do this; it needs %s", fb.have, fb.need)
		}
		var imp *importFailed
		if errors.As(err, &imp) {
			body.Import = &imp.rep
			body.Message += fmt.Sprintf("; lines 1 to %d were imported or reported (import.through_line), send the rest from line %d",
				imp.rep.ThroughLine, imp.rep.ThroughLine+1)
		}
		logError(c, log, api, body.RequestID, err)
		c.Locals(errorCodeKey, api.Code)
		if api.Status == fiber.StatusServiceUnavailable {
			c.Set(fiber.HeaderRetryAfter, "1")
		}
		var exceeds *domain.VoidExceedsError
		if errors.As(err, &exceeds) {
			body.Message += fmt.Sprintf(" (%d of the codes are voidable, %d units are free)", exceeds.Voidable, exceeds.Free)
		}
		var early *domain.SaleNotStartedError
		if errors.As(err, &early) {
			c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(retryAfterSeconds(early.StartsIn), 10))
		}
		return c.Status(api.Status).JSON(body)
	}
}

// logError logs a refused or failed request. A refused request (4xx) is the business working
// as intended — a flash sale answers hundreds of thousands of sold_out — so it logs at debug;
// 5xx at error.
func logError(c *fiber.Ctx, log *slog.Logger, api webkit.Answer, requestID string, err error) {
	level := slog.LevelDebug
	if api.Status >= 500 {
		level = slog.LevelError
	}
	if log.Enabled(c.UserContext(), level) {
		log.Log(c.UserContext(), level, "request failed", "request_id", requestID, "method", c.Method(),
			"path", c.Path(), "status", api.Status, "code", api.Code, "err", err.Error())
	}
}
