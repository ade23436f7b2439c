package storefront

import (
	"context"
	"crypto/rand"
	"embed"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"cardshop/adapters/i18n"
	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

//go:embed static
var staticFS embed.FS

// Sales is what the storefront calls of the sales use cases (application.Sales): the
// public catalogue, the gate's clock, and the guest orders.
type Sales interface {
	Catalogue(ctx context.Context) (*application.CatalogueSnapshot, error)
	SaleClock(ctx context.Context) time.Time
	PlaceGuestOrder(ctx context.Context, g application.GuestOrder) (application.GuestPlaced, error)
	GuestOrder(ctx context.Context, no domain.OrderNo, secret string) (application.OrderView, error)
	GuestOrderStatus(ctx context.Context, no domain.OrderNo, secret string) (domain.Order, error)
	LookupGuestOrder(ctx context.Context, no domain.OrderNo, email, secret string) (domain.Order, error)
	QuoteCoupon(ctx context.Context, p domain.ProductID, amount domain.Money, code string) (domain.CouponCode, domain.Money, error)
}

// Payments is what the storefront calls of the payment use cases (application.Payments).
type Payments interface {
	Providers() []domain.Provider
	CreatePayment(ctx context.Context, cmd application.NewPayment) (domain.Payment, bool, error)
	OrderPayments(ctx context.Context, no domain.OrderNo) ([]domain.Payment, error)
}

// BuyerCheck is what the bot defence looks at before an order is reserved: the client's
// address, the e-mail address typed, and the human-check widget's token ("" without one).
type BuyerCheck struct {
	IP, Email, HumanToken string
}

// Screen is the bot defence: human check, blocklists. Check returns nil to let the order go
// on; any error refuses it (the buyer sees a refusal page, nothing is reserved).
type Screen interface {
	Check(ctx context.Context, b BuyerCheck) error
}

// The human-check widgets the checkout form can show.
const (
	WidgetTurnstile = "turnstile"
	WidgetHCaptcha  = "hcaptcha"
)

// Widget is the human-check widget shown on the checkout form: its provider (WidgetTurnstile
// or WidgetHCaptcha) and the site key. The zero Widget shows none.
type Widget struct {
	Provider string
	SiteKey  string
}

// Config configures the storefront.
type Config struct {
	// Secret keys the CSRF tokens (CARDSHOP_TOKEN_SECRET; its own derived key). Empty: a random
	// key per process, so forms do not survive a restart (tests only).
	Secret string
	// Lang is the language of a visitor with no choice and no Accept-Language match.
	Lang i18n.Lang
	// Limiter limits order lookups per client IP and per order number (LookupsPerWindow per
	// LookupWindow, each); the API's limiter, so with Redis the budget is shared. Nil: no limit.
	Limiter          webkit.Limiter
	LookupsPerWindow int
	LookupWindow     time.Duration
	// CheckoutsPerWindow bounds the orders one client IP may send per CheckoutWindow (on
	// Limiter; CARDSHOP_RATE_PER_IP, as the API's); 0: no bound.
	CheckoutsPerWindow int
	CheckoutWindow     time.Duration
	// Screen is the bot defence called before every order; nil: none. Widget is the human
	// check shown on the form (the zero Widget: none).
	Screen Screen
	Widget Widget
	// PayOrigins are the origins ("https://checkout.stripe.com") a pay form's 303 may lead
	// to: browsers apply the form-action policy to a form's redirects too.
	PayOrigins []string
	// MorePayOrigins, when set, adds origins to PayOrigins at each pay page: those of the
	// payment channels in force now (configured in the console, they change without a restart).
	MorePayOrigins func() []string
}

// OrderPath is the order page's path, "{order_no}" standing for the order's number: where a
// provider sends the buyer back after paying (CARDSHOP_RETURN_URL's default with the shop on).
const OrderPath = "/orders/{order_no}"

// Default lookup limit: ten a minute per client IP and per order number. The secret has 128
// random bits or more, so the limit is not what keeps it from being guessed; it keeps a
// script from spending the service's database reads.
const (
	DefaultLookupsPerWindow = 10
	DefaultLookupWindow     = time.Minute
)

// shop holds the handlers' dependencies.
type shop struct {
	cfg      Config
	sales    Sales
	payments Payments
	clock    domain.Clock
	log      *slog.Logger
	msgs     *i18n.Catalogue
	pages    pages
	csrfKey  []byte
	csp      string // the policy of every page; payCSP of the pages with a pay form
	payCSP   string
	etags    *etagCache
}

// Mount adds the storefront's routes at "/" to app (the API's app: it shares its middleware —
// request ids, metrics, panics recovered — but answers HTML itself). Mount it after the API,
// the console and the dev pay pages: its catch-all answers every other path with its own
// not-found page.
func Mount(app *fiber.App, cfg Config, sales Sales, payments Payments, clock domain.Clock, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Lang == "" {
		cfg.Lang = i18n.Chinese
	}
	if cfg.Limiter != nil && (cfg.LookupsPerWindow <= 0 || cfg.LookupWindow <= 0) {
		cfg.LookupsPerWindow, cfg.LookupWindow = DefaultLookupsPerWindow, DefaultLookupWindow
	}
	if cfg.Limiter == nil || cfg.CheckoutWindow <= 0 {
		cfg.CheckoutsPerWindow = 0
	}
	msgs, err := i18n.Load()
	if err != nil {
		return err
	}
	key, err := csrfKey(cfg.Secret)
	if err != nil {
		return err
	}
	s := &shop{cfg: cfg, sales: sales, payments: payments, clock: clock, log: log, msgs: msgs,
		pages: parsePages(), csrfKey: key, etags: &etagCache{}}
	s.csp, s.payCSP = policies(cfg)

	app.Use("/static/shop", s.headers, filesystem.New(filesystem.Config{Root: http.FS(staticFS), PathPrefix: "static",
		MaxAge: 3600}))
	for _, r := range []struct {
		method, path string
		h            []fiber.Handler
	}{
		{"GET", "/", []fiber.Handler{s.cataloguePage}},
		{"GET", "/p/:id", []fiber.Handler{s.productPage}},
		{"GET", "/lang", []fiber.Handler{s.switchLang}},
		{"GET", "/favicon.ico", []fiber.Handler{noIcon}},
		{"POST", "/checkout/review", []fiber.Handler{s.sameSite, s.parseForm, s.review}},
		{"POST", "/checkout", []fiber.Handler{s.sameSite, s.parseForm, s.csrf, s.checkout}},
		{"GET", "/lookup", []fiber.Handler{s.lookupPage}},
		{"POST", "/lookup", []fiber.Handler{s.sameSite, s.parseForm, s.csrf, s.lookup}},
		{"GET", "/orders/:no", []fiber.Handler{s.orderPage}},
		{"POST", "/orders/:no/pay", []fiber.Handler{s.sameSite, s.parseForm, s.csrf, s.pay}},
		{"GET", "/orders/:no/pay/:provider", []fiber.Handler{s.qrPage}},
		{"GET", "/orders/:no/qr.png", []fiber.Handler{s.qrImage}},
		{"GET", "/orders/:no/status.json", []fiber.Handler{s.statusJSON}},
		{"GET", "/orders/:no/codes.txt", []fiber.Handler{s.codesTXT}},
	} {
		app.Add(r.method, r.path, append([]fiber.Handler{s.headers}, r.h...)...)
	}
	// Every other path not the API's, the console's or the dev pay pages' is the shop's
	// not-found page; theirs go on to the API's JSON not-found answer.
	app.Use(func(c *fiber.Ctx) error {
		for _, p := range []string{"/api/", "/admin/", "/console/", "/dev/"} {
			if strings.HasPrefix(c.Path(), p) {
				return c.Next()
			}
		}
		return s.secured(c, func(c *fiber.Ctx) error {
			return s.message(c, fiber.StatusNotFound, "storefront.not_found", "/")
		})
	})
	return nil
}

// noIcon answers the browsers' /favicon.ico (asked by pages without an icon of their own,
// the dev provider's pay page) with no content, cached for a day, rather than a 404 page.
func noIcon(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "public, max-age=86400")
	return c.SendStatus(fiber.StatusNoContent)
}

// policies are the Content-Security-Policy of every page, and of the pages holding a pay
// form (whose 303 may lead to a provider). No inline script or style anywhere; the captcha
// provider's origins only when a widget is configured.
func policies(cfg Config) (page, pay string) {
	script, frame, connect, style := []string{"'self'"}, []string{}, []string{"'self'"}, []string{"'self'"}
	switch cfg.Widget.Provider {
	case WidgetTurnstile:
		o := "https://challenges.cloudflare.com"
		script, frame, connect = append(script, o), append(frame, o), append(connect, o)
	case WidgetHCaptcha:
		o := []string{"https://hcaptcha.com", "https://*.hcaptcha.com"}
		script, frame, connect, style = append(script, o...), append(frame, o...), append(connect, o...), append(style, o...)
	}
	base := "default-src 'none'; script-src " + strings.Join(script, " ") + "; style-src " + strings.Join(style, " ") +
		"; img-src 'self' data:; connect-src " + strings.Join(connect, " ")
	if len(frame) > 0 {
		base += "; frame-src " + strings.Join(frame, " ")
	}
	tail := "; frame-ancestors 'none'; base-uri 'none'"
	page = base + "; form-action 'self'" + tail
	pay = page
	if len(cfg.PayOrigins) > 0 {
		pay = base + "; form-action 'self' " + strings.Join(cfg.PayOrigins, " ") + tail
	}
	return page, pay
}

const payFormKey = "storefront.payform"

// withPayForm marks the page as holding a pay form: it gets the policy that lets the form's
// redirect reach the providers.
func withPayForm(c *fiber.Ctx) { c.Locals(payFormKey, true) }

// headers sets the storefront's security headers on every answer, the static files'
// included. The Referrer-Policy is no-referrer: an order page's first URL holds its key.
// Pages are not stored by caches unless the handler says otherwise (the catalogue's ETag).
func (s *shop) headers(c *fiber.Ctx) error {
	return s.secured(c, func(c *fiber.Ctx) error { return c.Next() })
}

// secured runs h with the storefront's headers (see headers).
func (s *shop) secured(c *fiber.Ctx, h fiber.Handler) error {
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	err := h(c)
	csp := s.csp
	if pay, _ := c.Locals(payFormKey).(bool); pay {
		csp = s.payCSP
		if s.cfg.MorePayOrigins != nil {
			if more := s.cfg.MorePayOrigins(); len(more) > 0 {
				cfg := s.cfg
				cfg.PayOrigins = append(slices.Clone(cfg.PayOrigins), more...)
				_, csp = policies(cfg)
			}
		}
	}
	c.Set("Content-Security-Policy", csp)
	if c.Response().Header.Peek(fiber.HeaderCacheControl) == nil {
		c.Set(fiber.HeaderCacheControl, "no-store")
	}
	return err
}

// randomToken is n random bytes, URL-safe base64.
func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return b64(b), nil
}
