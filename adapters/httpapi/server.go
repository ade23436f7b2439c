package httpapi

import (
	"crypto/subtle"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"

	"cardshop/adapters/authtoken"
	"cardshop/application"
	"cardshop/domain"
)

// Config configures the HTTP adapter.
type Config struct {
	// AdminToken authenticates the /admin endpoints ("Authorization: Bearer <token>").
	AdminToken string
	// MaxBodyBytes bounds every JSON body (the code import streams and is bounded by
	// MaxImportBytes instead).
	MaxBodyBytes int64
	// MaxImportBytes bounds one code import upload.
	MaxImportBytes int64
	// RateLimits limits requests per client IP and per buyer; the zero value is off.
	RateLimits RateLimits
	// Metrics, when set, records every request and serves GET /metrics (no token, no rate
	// limit: bind the service to a private interface or put /metrics behind the proxy's auth).
	Metrics Metrics
	// Readiness lists what GET /readyz checks; none means always ready.
	Readiness []ReadinessCheck
	// ReadinessTimeout bounds each readiness check; zero means DefaultReadinessTimeout.
	ReadinessTimeout time.Duration
	// DevPay, when set, serves the built-in dev provider's pay pages (GET /dev/pay/{order_no}
	// and POST /dev/pay/{order_no}/confirm); nil: those paths do not exist.
	DevPay DevPages
}

// DefaultConfig returns the default body limits, with no rate limits.
func DefaultConfig(adminToken string) Config {
	return Config{AdminToken: adminToken, MaxBodyBytes: 64 << 10, MaxImportBytes: 1 << 30,
		ReadinessTimeout: DefaultReadinessTimeout}
}

// Server holds the handlers' dependencies.
type Server struct {
	cfg    Config
	shop   *application.Shop
	tokens *authtoken.Issuer
	clock  domain.Clock
	log    *slog.Logger

	limiterWarnings limiterWarnings
	rendered        atomic.Pointer[renderedCatalogue] // the public catalogue, encoded
}

// New builds the Fiber app with every route. The app streams request bodies (so a large code
// import is never held in memory) and therefore bounds every other body itself. It panics
// when cfg.RateLimits sets a limit without a Limiter or a Window.
func New(cfg Config, shop *application.Shop, tokens *authtoken.Issuer, clock domain.Clock, log *slog.Logger) *fiber.App {
	cfg.RateLimits.check()
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, shop: shop, tokens: tokens, clock: clock, log: log}
	app := fiber.New(fiber.Config{
		AppName:           "cardshop",
		ErrorHandler:      errorHandler(log),
		StreamRequestBody: true,
		// Without Immutable, c.Get and c.Params return strings that alias fasthttp's buffers,
		// which the next request on the connection overwrites; the buyer id (from the token
		// header) and the idempotency key outlive the request in orders and gate claims.
		Immutable:             true,
		BodyLimit:             int(cfg.MaxBodyBytes),
		DisableStartupMessage: true,
		ReadTimeout:           30 * time.Second,
		IdleTimeout:           60 * time.Second,
	})
	if cfg.Metrics != nil {
		app.Use(s.observe)
	}
	app.Use(finishBody)
	app.Use(recover.New())
	app.Use(requestid.New())
	app.Use(withRequestID)

	// Probes, metrics and the API's description: no token and no rate limit (a scraper or an
	// orchestrator must never be refused); they reveal no order, buyer or code.
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Get("/readyz", s.readyz)
	if cfg.Metrics != nil {
		app.Get("/metrics", metricsHandler(cfg.Metrics))
	}
	app.Get("/openapi.json", serveOpenAPI)
	app.Get("/docs", serveDocs)

	// The per-IP limit is on each buyer route rather than on the group, so that the payment
	// callback is left out by construction (see RateLimits); it runs before the token check,
	// so guessing tokens is limited too.
	api := app.Group("/api")
	// The public catalogue: no token, and no per-IP limit. An answer costs a look-up in memory
	// (the snapshot refreshes by time, never per request), so refusing a burst saves nothing,
	// while a limit would refuse a storefront's servers or a CDN's edges that share addresses
	// during the very rush it is meant for.
	api.Get("/products", s.listCatalogue)
	api.Get("/products/:id", s.getCatalogueProduct)
	api.Post("/order", s.limitIP, s.buyer, s.limitBuyer, s.placeOrder)
	api.Get("/orders/:order_no", s.limitIP, s.buyer, s.getOrder)
	api.Post("/orders/:order_no/payment", s.limitIP, s.buyer, s.createPayment)
	api.Post("/payments/callback", s.paymentCallback)
	// A provider's notifications, by whatever method it uses (epay usually GET); never rate
	// limited, like the callback.
	api.Get("/payments/:provider/notify", s.providerNotify)
	api.Post("/payments/:provider/notify", s.providerNotify)

	if cfg.DevPay != nil {
		app.Get("/dev/pay/:order_no", s.devPayPage)
		app.Post("/dev/pay/:order_no/confirm", s.devPayConfirm)
	}

	admin := app.Group("/admin", s.admin)
	admin.Post("/products", s.createProduct)
	admin.Get("/products", s.listProducts)
	admin.Get("/products/:id", s.getProduct)
	admin.Patch("/products/:id", s.updateProduct)
	admin.Post("/products/:id/codes", s.importCodes)
	admin.Post("/products/:id/freeze", s.freezeProduct)
	admin.Post("/products/:id/unfreeze", s.unfreezeProduct)
	admin.Get("/products/:id/reconcile", s.reconcile)
	admin.Post("/products/:id/reconcile", s.reconcile)
	admin.Get("/orders/:order_no", s.adminOrder)
	admin.Get("/orders/:order_no/payments", s.listOrderPayments)
	admin.Get("/payments/notifications", s.listNotifications)
	admin.Post("/orders/:order_no/refund", s.refund)
	admin.Post("/orders/:order_no/fulfil", s.fulfil)
	admin.Post("/tokens", s.issueToken)
	return app
}

func requestID(c *fiber.Ctx) string {
	if id, ok := c.Locals(requestid.ConfigDefault.ContextKey).(string); ok {
		return id
	}
	return string(c.Response().Header.Peek(fiber.HeaderXRequestID))
}

const buyerKey = "cardshop.buyer"

func bearer(c *fiber.Ctx) string {
	h := c.Get(fiber.HeaderAuthorization)
	if len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// buyer authenticates a buyer token and stores the buyer id for the handler.
func (s *Server) buyer(c *fiber.Ctx) error {
	id, err := s.tokens.Verify(bearer(c), s.clock.Now())
	if err != nil {
		return err
	}
	c.Locals(buyerKey, id)
	return c.Next()
}

func buyerOf(c *fiber.Ctx) domain.BuyerID { return c.Locals(buyerKey).(domain.BuyerID) }

// admin authenticates the admin token in constant time.
func (s *Server) admin(c *fiber.Ctx) error {
	tok := bearer(c)
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) != 1 {
		return domain.ErrUnauthorized
	}
	return c.Next()
}

func productParam(c *fiber.Ctx) (domain.ProductID, error) {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, domain.ErrProductNotFound
	}
	return domain.ProductID(id), nil
}

func orderParam(c *fiber.Ctx) (domain.OrderNo, error) {
	return domain.ParseOrderNo(c.Params("order_no"))
}
