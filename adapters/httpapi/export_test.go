package httpapi

import "github.com/gofiber/fiber/v2"

// ErrorStatuses returns every stable error code the error handler can answer with, and its
// status: the error table's rows, the internal error, and the codes of Fiber's own errors.
func ErrorStatuses() map[string]int {
	out := map[string]int{errInternal.code: errInternal.status}
	for _, row := range errorTable {
		out[row.api.code] = row.api.status
	}
	for _, e := range []*fiber.Error{fiber.ErrNotFound, fiber.ErrMethodNotAllowed, fiber.ErrRequestEntityTooLarge,
		fiber.ErrTooManyRequests, fiber.ErrBadRequest} {
		api := lookup(e)
		out[api.code] = api.status
	}
	return out
}
