package storefront

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	qrcode "github.com/skip2/go-qrcode"

	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// orderCookie holds an order's access secret, scoped to that order's path, so the pages of
// one order never send another's secret.
const orderCookie = "shop_order"

// orderCookieTTL is how long a browser keeps an order's access: a month, to come back for
// the codes.
const orderCookieTTL = 30 * 24 * time.Hour

// orderPath is the order page's path.
func orderPath(no domain.OrderNo) string { return "/orders/" + url.PathEscape(string(no)) }

// grant gives the browser access to an order: its secret in an HttpOnly cookie of the order's
// path (Secure over HTTPS, SameSite=Lax so the provider's return link still carries it).
func (s *shop) grant(c *fiber.Ctx, no domain.OrderNo, secret string) {
	c.Cookie(&fiber.Cookie{Name: orderCookie, Value: secret, Path: orderPath(no),
		Expires: s.clock.Now().Add(orderCookieTTL), HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: secure(c)})
}

// orderView is an order as its pages show it.
type orderView struct {
	No          domain.OrderNo
	Path        string
	Product     string
	Qty         int
	Amount      string
	Coupon      domain.CouponCode // the coupon the order carries, or ""
	Discount    string            // what it took off
	Status      string            // message id
	Pending     bool
	Paid        bool
	SecondsLeft int64
	Providers   []domain.Provider
	Preferred   domain.Provider
	Codes       []string
	CSRF        string // the pay form's token
}

// orderView is what the order's pages show of o (its codes are added by the order page only).
func (s *shop) orderView(c *fiber.Ctx, o domain.Order) orderView {
	v := orderView{No: o.No(), Path: orderPath(o.No()), Qty: o.Qty(),
		Status:  "storefront.order_" + strings.ToLower(o.Status().String()),
		Pending: o.Status() == domain.StatusPending, Paid: o.Status() == domain.StatusPaid}
	if snap, err := s.sales.Catalogue(c.UserContext()); err == nil {
		v.Amount = money(snap.Currency, o.Amount())
		if o.Coupon() != "" {
			v.Coupon, v.Discount = o.Coupon(), money(snap.Currency, o.Discount())
		}
		if it, ok := snap.Item(o.Product()); ok {
			v.Product = it.Name
		}
	}
	if v.Pending {
		v.SecondsLeft = left(o.ExpiresAt().Sub(s.clock.Now()))
		v.Providers = s.payments.Providers()
	}
	return v
}

// access reads the order number of the path and the secret of its cookie; ok is false when
// either is missing or malformed.
func access(c *fiber.Ctx) (domain.OrderNo, string, bool) {
	no, err := domain.ParseOrderNo(c.Params("no"))
	secret := c.Cookies(orderCookie)
	return no, secret, err == nil && secret != ""
}

// notFound is the answer to every order page without access: the same whether the order
// exists or not.
func (s *shop) notFound(c *fiber.Ctx) error {
	return s.message(c, fiber.StatusNotFound, "storefront.order_not_found", "/lookup")
}

// orderAccess checks the browser's access to the order of the path and loads it (without
// codes, no reveal).
func (s *shop) orderAccess(c *fiber.Ctx) (domain.Order, string, error) {
	no, secret, ok := access(c)
	if !ok {
		return domain.Order{}, "", domain.ErrOrderNotFound
	}
	o, err := s.sales.GuestOrderStatus(c.UserContext(), no, secret)
	return o, secret, err
}

// denied answers a failed access: not found for a wrong or missing secret, else the failure.
func (s *shop) denied(c *fiber.Ctx, err error) error {
	if errors.Is(err, domain.ErrOrderNotFound) || errors.Is(err, domain.ErrInvalidInput) {
		return s.notFound(c)
	}
	return s.unavailable(c, err)
}

// orderPage is GET /orders/{no}. With ?key= (the e-mail's link) the key is checked, put in
// the order's cookie, and the browser sent to the URL without it, so the secret leaves the
// address bar and the history. Without, the cookie is the access. The page shows the
// status, the pay form while PENDING, and once PAID the codes (that is the reveal).
func (s *shop) orderPage(c *fiber.Ctx) error {
	if key := c.Query("key"); key != "" {
		no, err := domain.ParseOrderNo(c.Params("no"))
		if err != nil {
			return s.notFound(c)
		}
		if _, err := s.sales.GuestOrderStatus(c.UserContext(), no, key); err != nil {
			return s.denied(c, err)
		}
		s.grant(c, no, key)
		return c.Redirect(orderPath(no), fiber.StatusSeeOther)
	}
	o, secret, err := s.orderAccess(c)
	if err != nil {
		return s.denied(c, err)
	}
	v := s.orderView(c, o)
	if o.Status() == domain.StatusPaid {
		full, err := s.sales.GuestOrder(c.UserContext(), o.No(), secret)
		if err != nil {
			return s.denied(c, err)
		}
		for _, card := range full.Cards {
			v.Codes = append(v.Codes, card.Code.Reveal())
		}
	}
	tok, err := s.csrfToken(c)
	if err != nil {
		return s.internal(c, "csrf token", err)
	}
	v.CSRF = tok
	pv := view{Title: "storefront.title_order", CSRF: tok, Data: v}
	if len(v.Codes) > 0 {
		pv.Scripts = append(pv.Scripts, "/static/shop/copy.js")
	}
	if v.Pending {
		withPayForm(c)
	}
	return s.render(c, fiber.StatusOK, "order", v.Path, pv)
}

// pay is POST /orders/{no}/pay: the order's payment at the chosen provider (the same one
// again on a second click). A pay-URL provider is a 303 to it; a QR provider is a 303 to the
// QR page. An order no longer payable goes back to its page.
func (s *shop) pay(c *fiber.Ctx) error {
	o, _, err := s.orderAccess(c)
	if err != nil {
		return s.denied(c, err)
	}
	back := orderPath(o.No())
	provider, err := domain.ParseProvider(formValue(c, "provider"))
	if err != nil {
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_provider", back)
	}
	p, _, err := s.payments.CreatePayment(c.UserContext(), newPayment(o, provider, webkit.ClientIP(c)))
	switch {
	case errors.Is(err, domain.ErrProviderUnknown):
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_provider", back)
	case errors.Is(err, domain.ErrOrderNotPayable):
		return c.Redirect(back, fiber.StatusSeeOther)
	case err != nil:
		return s.unavailable(c, err)
	case p.Status == domain.PaymentPaid:
		return c.Redirect(back, fiber.StatusSeeOther)
	case p.PayURL != "" && httpURL(p.PayURL):
		return c.Redirect(p.PayURL, fiber.StatusSeeOther)
	case p.QRCode != "":
		return c.Redirect(back+"/pay/"+url.PathEscape(string(provider)), fiber.StatusSeeOther)
	}
	s.log.ErrorContext(c.UserContext(), "storefront: payment has neither a pay URL nor a QR code",
		"order_no", o.No(), "provider", provider)
	return s.message(c, fiber.StatusBadGateway, "storefront.unavailable", back)
}

// httpURL reports whether u is an absolute http(s) URL: nothing else is a redirect target.
func httpURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "https" || p.Scheme == "http") && p.Host != ""
}

// qrData is the QR page's.
type qrData struct {
	Order    orderView
	Provider domain.Provider
	Image    string
	Status   string
}

// openQR is the order's open payment at the provider of the path with a QR code; ok is false
// when there is none (the order moved on, or it was never created).
func (s *shop) openQR(c *fiber.Ctx, o domain.Order, provider string) (domain.Payment, bool, error) {
	ps, err := s.payments.OrderPayments(c.UserContext(), o.No())
	if err != nil {
		return domain.Payment{}, false, err
	}
	for _, p := range ps {
		if string(p.Provider) == provider && p.Status == domain.PaymentOpen && p.QRCode != "" {
			return p, true, nil
		}
	}
	return domain.Payment{}, false, nil
}

// qrPage is GET /orders/{no}/pay/{provider}: the QR code to scan, the amount and the time
// left. It follows the order (a small script polls the status; without it a meta refresh
// reloads) and moves on to the order page once the order is no longer PENDING.
func (s *shop) qrPage(c *fiber.Ctx) error {
	o, _, err := s.orderAccess(c)
	if err != nil {
		return s.denied(c, err)
	}
	back := orderPath(o.No())
	if o.Status() != domain.StatusPending {
		return c.Redirect(back, fiber.StatusSeeOther)
	}
	provider := c.Params("provider")
	if _, ok, err := s.openQR(c, o, provider); err != nil {
		return s.unavailable(c, err)
	} else if !ok {
		return c.Redirect(back, fiber.StatusSeeOther)
	}
	d := qrData{Order: s.orderView(c, o), Provider: domain.Provider(provider), Status: back + "/status.json",
		Image: back + "/qr.png?" + url.Values{"provider": {provider}}.Encode()}
	return s.render(c, fiber.StatusOK, "qr", c.Path(), view{Title: "storefront.title_qr", Refresh: 15,
		Scripts: []string{"/static/shop/follow.js"}, Data: d})
}

// qrImage is GET /orders/{no}/qr.png?provider=: the QR code of the order's open payment,
// drawn here (the provider's content never leaves for a third-party image service).
func (s *shop) qrImage(c *fiber.Ctx) error {
	o, _, err := s.orderAccess(c)
	if err != nil {
		return s.denied(c, err)
	}
	p, ok, err := s.openQR(c, o, c.Query("provider"))
	if err != nil {
		return s.unavailable(c, err)
	}
	if !ok || o.Status() != domain.StatusPending {
		return s.notFound(c)
	}
	png, err := qrcode.Encode(p.QRCode, qrcode.Medium, 320)
	if err != nil {
		return s.internal(c, "qr code", err)
	}
	c.Set(fiber.HeaderContentType, "image/png")
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Send(png)
}

// statusJSON is GET /orders/{no}/status.json: {"status":…} for the QR page's script, with an
// ETag so an unchanged status is a 304.
func (s *shop) statusJSON(c *fiber.Ctx) error {
	o, _, err := s.orderAccess(c)
	if err != nil {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"status": "unknown"})
	}
	st := o.Status().String()
	etag := `"` + st + `"`
	c.Set(fiber.HeaderETag, etag)
	c.Set(fiber.HeaderCacheControl, "private, no-cache")
	if c.Get(fiber.HeaderIfNoneMatch) == etag {
		return c.SendStatus(fiber.StatusNotModified)
	}
	return c.JSON(fiber.Map{"status": st})
}

// codesTXT is GET /orders/{no}/codes.txt: a PAID order's codes, one a line, as a download
// never stored by a cache.
func (s *shop) codesTXT(c *fiber.Ctx) error {
	no, secret, ok := access(c)
	if !ok {
		return s.notFound(c)
	}
	v, err := s.sales.GuestOrder(c.UserContext(), no, secret)
	if err != nil {
		return s.denied(c, err)
	}
	if v.Order.Status() != domain.StatusPaid || len(v.Cards) == 0 {
		return s.notFound(c)
	}
	var b strings.Builder
	for _, card := range v.Cards {
		b.WriteString(card.Code.Reveal())
		b.WriteString("\r\n")
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="order-`+string(no)+`.txt"`)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.SendString(b.String())
}

// newPayment is the payment request of a guest order: the order's own buyer (the
// application's guest buyer id), so no other buyer's token could reach it.
func newPayment(o domain.Order, provider domain.Provider, ip string) application.NewPayment {
	return application.NewPayment{Buyer: o.Buyer(), OrderNo: o.No(), Provider: provider, ClientIP: ip}
}
