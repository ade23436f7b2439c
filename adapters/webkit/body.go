package webkit

// Request bodies: one reader per request, bounded reads, and the draining that keeps a
// streamed body's unread rest from being parsed as the next request.

import (
	"bytes"
	"errors"
	"io"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// bodyKey stores a request's bodyReader in the context's locals.
const bodyKey = "cardshop.body"

// drainLimit is how much of a body no handler read is discarded to keep a keep-alive
// connection; a longer rest closes the connection instead.
const drainLimit = 64 << 10

// bodyReader is the request body as one reader for the whole request. It remembers reaching
// the end, because reading a chunked fasthttp stream past its end reads the next request.
type bodyReader struct {
	r      io.Reader
	eof    bool
	broken bool
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.broken {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.r.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		b.eof = true
	case err != nil:
		b.broken = true
	}
	return n, err
}

// requestBody returns the request's body reader: the stream when the server streams (never
// c.Body(), which would read a whole upload into memory first), else the buffered body.
func requestBody(c *fiber.Ctx) *bodyReader {
	if b, ok := c.Locals(bodyKey).(*bodyReader); ok {
		return b
	}
	b := &bodyReader{}
	if st := c.Context().RequestBodyStream(); st != nil {
		b.r = st
	} else {
		b.r = bytes.NewReader(c.Body())
	}
	c.Locals(bodyKey, b)
	return b
}

// FinishBody, a middleware, keeps keep-alive connections in step. With StreamRequestBody, fasthttp leaves
// whatever part of a body the handler did not read on the connection and parses it as the
// next request: a refused upload, a 401, or a GET with a body would smuggle its rest in as a
// request of its own. After every handler a short rest is drained; a long one, or a body that
// could not be read, closes the connection.
func FinishBody(c *fiber.Ctx) error {
	err := c.Next()
	if c.Context().RequestBodyStream() == nil {
		return err
	}
	b := requestBody(c)
	if !b.eof && !b.broken {
		_, _ = io.CopyN(io.Discard, b, drainLimit)
	}
	if !b.eof {
		c.Context().SetConnectionClose()
	}
	return err
}

// ReadBody reads the request body, at most limit bytes (ErrBodyTooLarge past it), through the
// request's one reader (BodyReader), so that FinishBody knows where the body ended.
func ReadBody(c *fiber.Ctx, limit int64) ([]byte, error) {
	if n := c.Request().Header.ContentLength(); n > 0 && int64(n) > limit {
		return nil, ErrBodyTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(requestBody(c), limit+1))
	if err != nil {
		return nil, domain.Invalid("body", "could not be read")
	}
	if int64(len(b)) > limit {
		return nil, ErrBodyTooLarge
	}
	return b, nil
}

// DefaultMaxImportBytes bounds one upload of codes, whichever door it comes through.
const DefaultMaxImportBytes = 1 << 30

// BodyReader is the request's one body reader (the stream when the server streams, never
// c.Body(), which would read a whole upload into memory first): a file upload reads its
// multipart body through it, bounded by its own limits.
func BodyReader(c *fiber.Ctx) io.Reader { return requestBody(c) }
