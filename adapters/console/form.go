package console

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/url"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
)

// maxFormBytes bounds a console form's body; the largest, the product form, is far smaller.
// In a multipart form (the file upload) it bounds the fields before the file.
const maxFormBytes = 64 << 10

const (
	formKey   = "console.form"
	uploadKey = "console.upload"
)

// parseForm reads a POST's form once, bounded, through the API's body reader (the app streams
// request bodies, and fasthttp's own form parsing would read a stream unbounded). A multipart
// form (the code import's) is read up to its first file: its fields before it — the CSRF
// token first — are the form, and the file is left unread in the stream for the handler,
// which copies it under its own limit; so a post refused for its CSRF token or its role never
// has its file read, let alone stored.
func (k *console) parseForm(c *fiber.Ctx) error {
	if c.Method() != fiber.MethodPost {
		return c.Next()
	}
	if mt, params, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType)); err == nil && mt == fiber.MIMEMultipartForm {
		return k.parseMultipart(c, params["boundary"])
	}
	b, err := webkit.ReadBody(c, maxFormBytes)
	if err != nil {
		return k.fail(c, err)
	}
	v, err := url.ParseQuery(string(b))
	if err != nil {
		return k.fail(c, invalid("form", "console.err.form_unreadable"))
	}
	c.Locals(formKey, v)
	return c.Next()
}

// parseMultipart reads a multipart form's fields up to its first file part (see parseForm).
func (k *console) parseMultipart(c *fiber.Ctx, boundary string) error {
	if boundary == "" {
		return k.fail(c, invalid("form", "console.err.form_unreadable"))
	}
	mr := multipart.NewReader(webkit.BodyReader(c), boundary)
	v := url.Values{}
	left := int64(maxFormBytes)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return k.fail(c, invalid("form", "console.err.form_unreadable"))
		}
		if part.FileName() != "" {
			c.Locals(uploadKey, part)
			break
		}
		b, err := io.ReadAll(io.LimitReader(part, left+1))
		if err != nil {
			return k.fail(c, invalid("form", "console.err.form_unreadable"))
		}
		if left -= int64(len(b)); left < 0 {
			return k.fail(c, webkit.ErrBodyTooLarge)
		}
		v.Add(part.FormName(), string(b))
	}
	c.Locals(formKey, v)
	return c.Next()
}

// formValue is a field of the POST's form ("" when absent).
func formValue(c *fiber.Ctx, name string) string {
	v, _ := c.Locals(formKey).(url.Values)
	return v.Get(name)
}

// formValues is every value of a field of the POST's form (a group of checkboxes).
func formValues(c *fiber.Ctx, name string) []string {
	v, _ := c.Locals(formKey).(url.Values)
	return v[name]
}

// upload is the POST's file part, unread (nil when the form has none).
func upload(c *fiber.Ctx) *multipart.Part {
	p, _ := c.Locals(uploadKey).(*multipart.Part)
	return p
}
