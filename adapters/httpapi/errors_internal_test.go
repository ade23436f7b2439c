package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/requestid"
	"github.com/gofiber/fiber/v2/utils"
)

// TestPlainErrorBodies checks the pre-encoded answers (plainHeads): for every sentinel of the
// error table, the error handler's answer to the sentinel itself is byte for byte the answer it
// encodes with encoding/json for the same sentinel wrapped (which takes the general path), for
// a generated request id and for client-sent ids, plain or needing escapes.
func TestPlainErrorBodies(t *testing.T) {
	var fail error
	app := fiber.New(fiber.Config{ErrorHandler: errorHandler(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	app.Use(requestid.New())
	app.Get("/", func(c *fiber.Ctx) error { return fail })
	type answer struct{ status, ctype, retryAfter, requestID, body string }
	do := func(err error, id string) answer {
		t.Helper()
		fail = err
		req := httptest.NewRequest("GET", "/", nil)
		if id != "" {
			req.Header.Set(fiber.HeaderXRequestID, id)
		}
		resp, err := app.Test(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return answer{resp.Status, resp.Header.Get(fiber.HeaderContentType), resp.Header.Get(fiber.HeaderRetryAfter),
			resp.Header.Get(fiber.HeaderXRequestID), string(b)}
	}
	for _, row := range errorRows {
		if _, ok := plainError(row.Err); !ok {
			t.Fatalf("%v: not found as a plain error", row.Err)
		}
		// "": the id requestid generates (a UUID), different for each request.
		for _, id := range []string{"", "client-id_1.2:3", `a"b<c>&d\e`} {
			plain, wrapped := do(row.Err, id), do(fmt.Errorf("wrapped: %w", row.Err), id)
			want, err := json.Marshal(errorBody{Code: row.Answer.Code, Message: row.Answer.Message, RequestID: plain.requestID})
			if err != nil {
				t.Fatal(err)
			}
			if plain.body != string(want) || plain.status != fmt.Sprintf("%d %s", row.Answer.Status, utils.StatusMessage(row.Answer.Status)) {
				t.Errorf("%v, request id %q: %s %s, want %d %s", row.Err, id, plain.status, plain.body, row.Answer.Status, want)
			}
			if id == "" {
				wrapped.requestID, wrapped.body = plain.requestID, strings.Replace(wrapped.body, wrapped.requestID, plain.requestID, 1)
			}
			if plain != wrapped {
				t.Errorf("%v, request id %q:\n sentinel %+v\n wrapped  %+v", row.Err, id, plain, wrapped)
			}
		}
	}
	if _, ok := plainError(fmt.Errorf("wrapped: %w", errorRows[0].Err)); ok {
		t.Fatal("a wrapped sentinel was taken for a plain one")
	}
}
