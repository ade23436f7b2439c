package console

import (
	"net/url"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/httpapi"
	"cardshop/domain"
)

// maxFormBytes bounds a console form's body; the largest, the product form, is far smaller.
const maxFormBytes = 64 << 10

const formKey = "console.form"

// parseForm reads a POST's urlencoded body once, bounded, through the API's body reader (the
// app streams request bodies, and fasthttp's own form parsing would read a stream unbounded).
func (k *console) parseForm(c *fiber.Ctx) error {
	if c.Method() != fiber.MethodPost {
		return c.Next()
	}
	b, err := httpapi.ReadBody(c, maxFormBytes)
	if err != nil {
		return k.fail(c, err)
	}
	v, err := url.ParseQuery(string(b))
	if err != nil {
		return k.fail(c, domain.Invalid("form", "could not be read"))
	}
	c.Locals(formKey, v)
	return c.Next()
}

// formValue is a field of the POST's form ("" when absent).
func formValue(c *fiber.Ctx, name string) string {
	v, _ := c.Locals(formKey).(url.Values)
	return v.Get(name)
}
