package httpapi

import (
	_ "embed"

	"github.com/gofiber/fiber/v2"
)

// openAPISpec is the OpenAPI 3.0 description of every route, kept by hand beside the handlers.
// The tests check that it names exactly the routes New registers and that every response they
// receive matches it, so a change to a handler that the file does not follow fails them.
//
//go:embed openapi.json
var openAPISpec []byte

// serveOpenAPI answers GET /openapi.json with the embedded description as it is.
func serveOpenAPI(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(openAPISpec)
}
