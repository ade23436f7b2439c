package httpapi

import (
	"context"
	"log/slog"

	"github.com/gofiber/fiber/v2"
)

type requestIDKey struct{}

// withRequestID puts the request id into the request's context, so every log line written
// with that context — by the handlers, the use cases or the adapters — carries it.
func withRequestID(c *fiber.Ctx) error {
	c.SetUserContext(context.WithValue(c.UserContext(), requestIDKey{}, requestID(c)))
	return c.Next()
}

// RequestIDFromContext returns the id of the HTTP request ctx belongs to, or "".
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// LogHandler wraps h so that every record logged with a request's context gets its
// "request_id" attribute (unless it already has one).
func LogHandler(h slog.Handler) slog.Handler { return requestIDHandler{h} }

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestIDFromContext(ctx); id != "" {
		has := false
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "request_id" {
				has = true
				return false
			}
			return true
		})
		if !has {
			r.AddAttrs(slog.String("request_id", id))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
