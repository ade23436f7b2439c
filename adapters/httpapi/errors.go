package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// apiError is one row of the error table: an HTTP status, a stable code clients can switch
// on, and a message safe to show (never the internal error text).
type apiError struct {
	status  int
	code    string
	message string
}

// errorTable maps domain errors to responses. The first match wins, so more specific errors
// come before their parents (ErrNotDue wraps ErrInvalidTransition).
var errorTable = []struct {
	err error
	api apiError
}{
	{domain.ErrInvalidIdempotencyKey, apiError{400, "invalid_idempotency_key", "Idempotency-Key header is required: 8 to 64 characters of A-Z a-z 0-9 . _ : -"}},
	{domain.ErrQtyOutOfRange, apiError{400, "qty_out_of_range", "qty must be between 1 and the product's per-order limit"}},
	{domain.ErrInvalidInput, apiError{400, "invalid_request", "the request is not valid"}},
	{domain.ErrBadSignature, apiError{401, "invalid_signature", "the callback signature is missing, forged or stale"}},
	{domain.ErrUnauthorized, apiError{401, "unauthorized", "missing or invalid credentials"}},
	{domain.ErrProductNotFound, apiError{404, "product_not_found", "no such product"}},
	{domain.ErrOrderNotFound, apiError{404, "order_not_found", "no such order"}},
	{domain.ErrProviderUnknown, apiError{404, "provider_not_found", "no such payment provider is enabled"}},
	{domain.ErrOrderNotPayable, apiError{409, "order_not_payable", "the order is not awaiting payment"}},
	{domain.ErrRefundRefused, apiError{409, "refund_refused", "the payment provider refused the refund; the order is unchanged"}},
	{domain.ErrRefundInProgress, apiError{409, "refund_in_progress", "the order's money is being returned, or was: its codes are not handed over"}},
	{domain.ErrSoldOut, apiError{409, "sold_out", "sold out"}},
	{domain.ErrProductExists, apiError{409, "product_exists", "a product with this id already exists"}},
	{domain.ErrRequestInProgress, apiError{409, "request_in_progress", "the original request with this Idempotency-Key is still running; retry shortly"}},
	{domain.ErrInvalidTransition, apiError{409, "invalid_order_state", "the order's state does not allow this"}},
	{domain.ErrIdempotencyMismatch, apiError{422, "idempotency_key_reused", "this Idempotency-Key was used with a different request"}},
	{domain.ErrAmountMismatch, apiError{422, "amount_mismatch", "the paid amount does not match the order"}},
	{domain.ErrProductFrozen, apiError{423, "product_frozen", "the product is not on sale"}},
	{domain.ErrProductNotFrozen, apiError{409, "product_not_frozen", "freeze the product first: codes are voided only while it is frozen"}},
	{domain.ErrVoidExceedsFreeStock, apiError{409, "void_exceeds_free_stock", "more of these codes are sellable than the gate has free: the others are promised to orders in flight; nothing was voided"}},
	{domain.ErrForbidden, apiError{403, "forbidden", "your role does not allow this"}},
	{domain.ErrOperatorExists, apiError{409, "operator_exists", "an operator with this name exists"}},
	{domain.ErrOperatorNotFound, apiError{404, "operator_not_found", "no such operator"}},
	{domain.ErrAlertNotFound, apiError{404, "alert_not_found", "no such alert"}},
	{domain.ErrAlertAcknowledged, apiError{409, "alert_acknowledged", "the alert was acknowledged already"}},
	{domain.ErrBuyerLimit, apiError{429, "buyer_limit", "you have reserved as many units of this product as one buyer may for now; retry later"}},
	{domain.ErrFulfilOverLimit, apiError{429, "buyer_limit", "fulfilling this order would give its buyer more units of the product than its buyer_limit allows; refund it, or fulfil it once the buyer holds less"}},
	{domain.ErrBuyerHoldingLimit, apiError{429, "buyer_limit", "you already hold as many units of this product as one buyer may (its buyer_limit)"}},
	{domain.ErrSaleNotStarted, apiError{409, "sale_not_started", "the sale of this product has not started; retry after the seconds in Retry-After"}},
	{domain.ErrPaidAfterSaleEnded, apiError{409, "sale_ended", "this order was paid after the product's sale ended: it is never fulfilled; refund it"}},
	{domain.ErrSaleEnded, apiError{409, "sale_ended", "the sale of this product has ended"}},
	{errBodyTooLarge, apiError{413, "body_too_large", "the request body is too large"}},
	{errRateLimited, apiError{429, "rate_limited", "too many requests; retry after the seconds in Retry-After"}},
	{domain.ErrGateNotReady, apiError{503, "stock_gate_not_ready", "stock for this product is being rebuilt; retry shortly"}},
	{domain.ErrUnavailable, apiError{503, "service_unavailable", "a dependency is unavailable; retry shortly"}},
	// The request's deadline (Config.RequestTimeout) passed while a dependency had not answered.
	{context.DeadlineExceeded, apiError{503, "service_unavailable", "a dependency is unavailable; retry shortly"}},
}

// ErrBodyTooLarge is a body over its limit (413 body_too_large); the console's file upload
// refuses with it too, so its audit entry reads as the API's.
var ErrBodyTooLarge = errBodyTooLarge

var (
	errBodyTooLarge = errors.New("body too large")
	errRateLimited  = errors.New("rate limited") // over a RateLimits limit (ratelimit.go)
)

var errInternal = apiError{500, "internal_error", "internal error"}

// errorBody is every error response.
type errorBody struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Import is the report of an import that stopped on this error: what it imported first.
	Import *importResponse `json:"import,omitempty"`
}

func lookup(err error) apiError {
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return row.api
		}
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusNotFound:
			return apiError{404, "route_not_found", "no such endpoint"}
		case fiber.StatusMethodNotAllowed:
			return apiError{405, "method_not_allowed", "method not allowed"}
		case fiber.StatusRequestEntityTooLarge:
			return apiError{413, "body_too_large", "the request body is too large"}
		case fiber.StatusTooManyRequests:
			return apiError{429, "rate_limited", "too many requests"}
		}
		if fe.Code >= 400 && fe.Code < 500 {
			return apiError{fe.Code, "bad_request", "the request is not valid"}
		}
	}
	return errInternal
}

// plainHeads holds, by the index of errorTable, the start of the JSON body answering that row's
// error itself (the sentinel, not wrapped): errorBody{Code, Message, RequestID} encoded with
// encoding/json up to the request id's opening quote, `{"code":"sold_out","message":"sold
// out","request_id":"`. A sentinel's answer differs only by its request id, so the error
// handler appends the id and `"}` instead of encoding the body again — the same bytes
// (TestPlainErrorBodies), for the answer a flash sale gives hundreds of thousands of times.
var plainHeads = func() [][]byte {
	heads := make([][]byte, len(errorTable))
	for i, row := range errorTable {
		b, err := json.Marshal(errorBody{Code: row.api.code, Message: row.api.message, RequestID: "X"})
		if err != nil {
			panic(err)
		}
		heads[i] = bytes.TrimSuffix(b, []byte(`X"}`))
	}
	return heads
}()

// plainError returns the errorTable row of err when err is one of the table's sentinels
// itself: then no errors.As of the error handler can match, and the answer is the row's.
func plainError(err error) (int, bool) {
	for i, row := range errorTable {
		if err == row.err {
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
				api := errorTable[i].api
				logError(c, log, api, id, err)
				c.Locals(errorCodeKey, api.code)
				if api.status == fiber.StatusServiceUnavailable {
					c.Set(fiber.HeaderRetryAfter, "1")
				}
				head := plainHeads[i]
				b := make([]byte, 0, len(head)+len(id)+2)
				b = append(append(append(b, head...), id...), `"}`...)
				c.Status(api.status).Response().SetBodyRaw(b)
				c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
				return nil
			}
		}
		api := lookup(err)
		body := errorBody{Code: api.code, Message: api.message, RequestID: requestID(c)}
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
		c.Locals(errorCodeKey, api.code)
		if api.status == fiber.StatusServiceUnavailable {
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
		return c.Status(api.status).JSON(body)
	}
}

// logError logs a refused or failed request. A refused request (4xx) is the business working
// as intended — a flash sale answers hundreds of thousands of sold_out — so it logs at debug;
// 5xx at error.
func logError(c *fiber.Ctx, log *slog.Logger, api apiError, requestID string, err error) {
	level := slog.LevelDebug
	if api.status >= 500 {
		level = slog.LevelError
	}
	if log.Enabled(c.UserContext(), level) {
		log.Log(c.UserContext(), level, "request failed", "request_id", requestID, "method", c.Method(),
			"path", c.Path(), "status", api.status, "code", api.code, "err", err.Error())
	}
}

// Describe is how the API answers err: its status, stable code and a message safe to show
// (an invalid field's own message). The console shows the same words in its pages.
func Describe(err error) (status int, code, message string) {
	api := lookup(err)
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		return api.status, api.code, ve.Error()
	}
	return api.status, api.code, api.message
}
