package httpapi

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"

	"cardshop/adapters/authtoken"
	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// Config configures the HTTP adapter.
type Config struct {
	// AccessLog writes one log line per request (accessLog), the query string left out.
	AccessLog bool
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
	Readiness []webkit.ReadinessCheck
	// ReadinessTimeout bounds each readiness check; zero means webkit.DefaultReadinessTimeout.
	ReadinessTimeout time.Duration
	// DevPay, when set, serves the built-in dev provider's pay pages (GET /dev/pay/{order_no}
	// and POST /dev/pay/{order_no}/confirm); nil: those paths do not exist.
	DevPay DevPages
	// Replies answer each enabled payment provider's notifications, by its name: what the
	// provider expects when one is accepted or refused. A provider without one is unknown here.
	Replies map[domain.Provider]NotifyReplier
	// RequestTimeout is the deadline of every /api request (0: none): each call it makes to a
	// dependency (Redis, MariaDB, RabbitMQ, a payment provider) ends by then at the latest, and
	// a request that reaches it answers 503 with Retry-After. Work that must finish whatever the
	// request does (giving a reservation back, a batch its member joined) runs on its own
	// bounded context.
	RequestTimeout time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client
	// (webkit.ClientIP): the address every per-IP limit, blocklist check, audit entry and log
	// line uses. None (the zero value): the peer's address.
	TrustedProxies webkit.TrustedProxies
	// AuthFailures records the refused admin tokens (log and audit log, bounded); share one
	// with the console so that its bound per instance is one. Nil: New makes its own on the
	// RateLimits' Limiter.
	AuthFailures *webkit.AuthFailures
}

// NotifyReplier is a payment provider's answer to its notifications, written as it is: accepted
// (also a duplicate) or refused (the provider resends). Every provider adapter has one.
type NotifyReplier interface {
	Reply(accepted bool) (status int, contentType string, body []byte)
}

// AdminAuthFailuresPerIP bounds the refused admin tokens of one client address recorded per
// AuthFailureWindow (see AuthFailures); /admin itself is not rate limited.
const AdminAuthFailuresPerIP = 10

// DefaultConfig returns the default body limits, with no rate limits.
func DefaultConfig(adminToken string) Config {
	return Config{AdminToken: adminToken, MaxBodyBytes: 64 << 10, MaxImportBytes: webkit.DefaultMaxImportBytes,
		ReadinessTimeout: webkit.DefaultReadinessTimeout, RequestTimeout: DefaultRequestTimeout}
}

// DefaultRequestTimeout is Config.RequestTimeout's default: under the 10 s after which a load
// balancer or a storefront commonly gives up, and above the slowest dependency call a healthy
// request makes (a payment provider's API, a batch's COMMIT under load).
const DefaultRequestTimeout = 5 * time.Second

// The addresses this adapter serves that others are sent to: a provider's notifications
// ("{provider}" its name) and a buyer's order ("{order_no}" its number). Prefix the public URL.
const (
	NotifyPath = "/api/payments/{provider}/notify"
	OrderPath  = "/api/orders/{order_no}"
)

// Services are the use cases the API calls.
type Services struct {
	Sales     *application.Sales
	Payments  *application.Payments
	Catalogue *application.Catalogue
	Admin     *application.Admin
	// Guard is the bot defence: the blocklists' admin routes and the order's IP check. Nil:
	// New takes none and serves neither.
	Guard *application.Guard
	// Reports export orders (POST /admin/orders/export). Nil: no export route.
	Reports *application.Reports
	// Coupons runs the coupons' admin routes (/admin/coupons). Nil: none.
	Coupons *application.Coupons
}

// Server holds the handlers' dependencies.
type Server struct {
	cfg       Config
	sales     *application.Sales
	payments  *application.Payments
	products  *application.Catalogue
	operators *application.Admin
	guard     *application.Guard   // nil: no blocklist routes, no IP check
	reports   *application.Reports // nil: no export route
	coupons   *application.Coupons // nil: no coupon routes
	tokens    *authtoken.Issuer
	clock     domain.Clock
	log       *slog.Logger

	limiterWarnings limiterWarnings
	rendered        atomic.Pointer[renderedCatalogue] // the public catalogue, encoded
}

// deadline gives the request's context the API's deadline (Config.RequestTimeout).
func (s *Server) deadline(c *fiber.Ctx) error {
	if s.cfg.RequestTimeout <= 0 {
		return c.Next()
	}
	ctx := withLazyDeadline(c.UserContext(), s.cfg.RequestTimeout)
	defer ctx.release()
	c.SetUserContext(ctx)
	return c.Next()
}

// New builds the Fiber app with every route. The app streams request bodies (so a large code
// import is never held in memory) and therefore bounds every other body itself. It panics
// when cfg.RateLimits sets a limit without a Limiter or a Window.
func New(cfg Config, svc Services, tokens *authtoken.Issuer, clock domain.Clock, log *slog.Logger) *fiber.App {
	cfg.RateLimits.check()
	if log == nil {
		log = slog.Default()
	}
	if cfg.AuthFailures == nil {
		cfg.AuthFailures = webkit.NewAuthFailures(svc.Admin, cfg.RateLimits.Limiter, clock, log)
	}
	s := &Server{cfg: cfg, sales: svc.Sales, payments: svc.Payments, products: svc.Catalogue, operators: svc.Admin,
		guard: svc.Guard, reports: svc.Reports, coupons: svc.Coupons, tokens: tokens, clock: clock, log: log}
	app := fiber.New(fiber.Config{
		AppName:           "cardshop",
		ErrorHandler:      errorHandler(log),
		StreamRequestBody: true,
		// Without Immutable, c.Get and c.Params return strings that alias fasthttp's buffers,
		// which the next request on the connection overwrites; the buyer id (from the token
		// header) and the idempotency key outlive the request in orders and gate claims.
		Immutable: true,
		// fasthttp would otherwise parse a multipart body that fits BodyLimit as it reads the
		// request, on any route, and serve the body re-encoded (fields first, files last): the
		// console's upload reads its multipart stream itself, in the order the browser sent it.
		DisablePreParseMultipartForm: true,
		BodyLimit:                    int(cfg.MaxBodyBytes),
		DisableStartupMessage:        true,
		ReadTimeout:                  30 * time.Second,
		IdleTimeout:                  60 * time.Second,
	})
	if !cfg.TrustedProxies.Empty() {
		app.Use(webkit.ClientAddresses(cfg.TrustedProxies))
	}
	if cfg.Metrics != nil {
		app.Use(s.observe)
	}
	app.Use(webkit.FinishBody)
	app.Use(recover.New())
	app.Use(requestid.New())
	app.Use(withRequestID)
	if cfg.AccessLog {
		app.Use(accessLog(log))
	}

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
	// Every route that calls a dependency runs under the request's deadline (the catalogue
	// answers from memory).
	// A blocked client address is refused after the per-IP limit (so refusals cost a blocked
	// client its budget too) and before the token is checked.
	order := []fiber.Handler{s.deadline, s.limitIP}
	if s.guard != nil {
		order = append(order, s.blockIP)
	}
	// The per-buyer limit is charged inside placeOrder, after the answers it gives from memory.
	api.Post("/order", append(order, s.buyer, s.placeOrder)...)
	api.Get("/orders/:order_no", s.deadline, s.limitIP, s.buyer, s.getOrder)
	api.Post("/orders/:order_no/payment", s.deadline, s.limitIP, s.buyer, s.createPayment)
	api.Post("/payments/callback", s.deadline, s.paymentCallback)
	// A provider's notifications, by whatever method it uses (epay usually GET); never rate
	// limited, like the callback.
	api.Get("/payments/:provider/notify", s.deadline, s.providerNotify)
	api.Post("/payments/:provider/notify", s.deadline, s.providerNotify)

	if cfg.DevPay != nil {
		app.Get("/dev/pay/:order_no", s.devPayPage)
		app.Post("/dev/pay/:order_no/confirm", s.devPayConfirm)
	}

	// Every admin route names the least role that may call it and, for a write, the action
	// the audit log records (see adminRoutes).
	admin := app.Group("/admin", s.admin)
	for _, r := range adminRoutes(s) {
		var handlers []fiber.Handler
		if r.action != "" { // first: a write the role refuses is recorded too (403 forbidden)
			handlers = append(handlers, s.audited(r.action, r.body))
		}
		handlers = append(handlers, s.need(r.role), r.handler)
		admin.Add(r.method, r.path, handlers...)
	}
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

// admin authenticates the caller of an admin route: the shared admin token (compared in
// constant time; an admin named "admin-token"), or an operator's token (looked up on every
// request, so a rotated or removed token stops working at once on every instance). The
// identity is kept for the role check and the audit log.
//
// A refused token (none, malformed, unknown, replaced) is logged and audited as
// admin.auth_failed, within AuthFailures' bounds, naming only the operator it claimed.
func (s *Server) admin(c *fiber.Ctx) error {
	tok := bearer(c)
	if tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) == 1 {
		c.Locals(identityKey, application.LegacyAdminIdentity)
		return c.Next()
	}
	id, err := s.operators.Authenticate(c.UserContext(), tok)
	if errors.Is(err, domain.ErrUnauthorized) {
		s.cfg.AuthFailures.Refused(c, webkit.ActionAuthFailed, tok, webkit.AuditResult(0, err), AdminAuthFailuresPerIP)
	}
	if err != nil {
		return err
	}
	c.Locals(identityKey, id)
	return c.Next()
}

const identityKey = "cardshop.identity"

func identityOf(c *fiber.Ctx) application.Identity {
	id, _ := c.Locals(identityKey).(application.Identity)
	return id
}

// need refuses a caller whose role does not allow role (403 forbidden).
func (s *Server) need(role domain.Role) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if !identityOf(c).Role.Allows(role) {
			return &forbidden{have: identityOf(c).Role, need: role}
		}
		return c.Next()
	}
}

// forbidden is ErrForbidden with the roles, for the message.
type forbidden struct{ have, need domain.Role }

func (f *forbidden) Error() string {
	return fmt.Sprintf("%s: the role %s may not do this, it needs %s", domain.ErrForbidden, f.have, f.need)
}

func (f *forbidden) Unwrap() error { return domain.ErrForbidden }

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
