package httpapi

import (
	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
)

// ErrorStatuses returns every stable error code the error handler can answer with, and its
// status: the error table's rows, the internal error, and the codes of Fiber's own errors.
func ErrorStatuses() map[string]int {
	out := map[string]int{webkit.Internal.Code: webkit.Internal.Status}
	for _, row := range webkit.Rows() {
		out[row.Answer.Code] = row.Answer.Status
	}
	for _, e := range []*fiber.Error{fiber.ErrNotFound, fiber.ErrMethodNotAllowed, fiber.ErrRequestEntityTooLarge,
		fiber.ErrTooManyRequests, fiber.ErrBadRequest} {
		api := webkit.Lookup(e)
		out[api.Code] = api.Status
	}
	return out
}
