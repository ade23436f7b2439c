package httpapi

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
)

// accessLog writes one line per request once it is answered: method, path, status, bytes,
// duration (and, through the log handler, the request id). The query string is never written:
// it can hold a secret (the shop's order page takes its access secret as ?key=, a signed pay
// link its signature). An error the chain returns is answered here, by the app's error
// handler, so that the line holds the status the client gets.
func accessLog(log *slog.Logger) fiber.Handler {
	return func(c *fiber.Ctx) error {
		start := time.Now()
		if err := c.Next(); err != nil {
			if herr := c.App().ErrorHandler(c, err); herr != nil {
				_ = c.SendStatus(fiber.StatusInternalServerError)
			}
		}
		log.InfoContext(c.UserContext(), "access", "method", c.Method(), "path", c.Path(),
			"status", c.Response().StatusCode(), "bytes", len(c.Response().Body()),
			"duration_ms", float64(time.Since(start).Microseconds())/1000)
		return nil
	}
}
