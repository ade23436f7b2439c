package httpapi

import (
	"context"
	"net/url"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// DevPages are the pages of the built-in dev payment provider (adapters/devpay): a page with a
// "Pay" and a "Fail" button for an order's payment, and the confirmation that sends the
// provider's signed notification through deliver, the same path a real provider's takes.
type DevPages interface {
	PayPage(query url.Values) Page
	Confirm(ctx context.Context, form url.Values, deliver func(context.Context, domain.InboundRequest) error) Page
}

// Page is a page or a provider's reply, written as it is.
type Page struct {
	Status      int
	ContentType string
	Body        []byte
}

// devPayPage shows the dev provider's pay page of a signed link.
func (s *Server) devPayPage(c *fiber.Ctx) error {
	q := url.Values{}
	c.Request().URI().QueryArgs().VisitAll(func(k, v []byte) { q.Add(string(k), string(v)) })
	return writeReply(c, s.cfg.DevPay.PayPage(q))
}

// devPayConfirm takes the buyer's "Pay" or "Fail" and hands the dev provider's notification
// to the same use case as every provider's notify route.
func (s *Server) devPayConfirm(c *fiber.Ctx) error {
	b, err := webkit.ReadBody(c, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		return domain.Invalid("body", "not a form")
	}
	deliver := func(ctx context.Context, in domain.InboundRequest) error {
		return s.payments.HandleNotification(ctx, "dev", in, webkit.ClientIP(c))
	}
	return writeReply(c, s.cfg.DevPay.Confirm(c.UserContext(), form, deliver))
}

// writeReply writes a page or a provider reply as it is, never cached.
func writeReply(c *fiber.Ctx, r Page) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	if r.ContentType != "" {
		c.Set(fiber.HeaderContentType, r.ContentType)
	}
	return c.Status(r.Status).Send(r.Body)
}
