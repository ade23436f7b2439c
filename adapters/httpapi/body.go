package httpapi

// Request bodies: one reader per request, bounded reads, strict JSON, and the draining that
// keeps a streamed body's unread rest from being parsed as the next request
// (TestUnreadBodiesDoNotBecomeRequests in body_test.go).

import (
	"bytes"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/strictjson"
	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// decodeJSON strictly decodes a bounded JSON body into v with strictjson: duplicate keys (also
// in another letter case), keys that are not exactly a field's name, wrong types and trailing
// data are refused. An empty body decodes as {} when allowEmpty. The Content-Type is not
// checked (curl -d sends a form type): the body must be JSON whatever it says.
func (s *Server) decodeJSON(c *fiber.Ctx, v any, allowEmpty bool) error {
	b, err := webkit.ReadBody(c, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	return decodeBody(b, v, allowEmpty)
}

// decodeBody is decodeJSON's decoding of a body already read.
func decodeBody(b []byte, v any, allowEmpty bool) error {
	if len(bytes.TrimSpace(b)) == 0 {
		if allowEmpty {
			return nil
		}
		return domain.Invalid("body", "a JSON object is required")
	}
	return strictjson.Decode(b, v)
}
