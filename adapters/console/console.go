package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
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

// Config configures the console.
type Config struct {
	// AdminToken is the shared CARDSHOP_ADMIN_TOKEN: it logs in as the legacy admin.
	AdminToken string
	// TokenSecret is CARDSHOP_TOKEN_SECRET: the session cookies' key is derived from it.
	TokenSecret string
	// Limiter limits login attempts per client IP (LoginsPerWindow per LoginWindow); the
	// API's limiter too, so that with Redis the budget is shared by every instance. Nil: no limit.
	Limiter         webkit.Limiter
	LoginsPerWindow int
	LoginWindow     time.Duration
	// TimeZone is CARDSHOP_CONSOLE_TIMEZONE: the zone pages show and read times in until an
	// operator picks another on the settings page (per browser). Nil: UTC.
	TimeZone *time.Location
	// MaxImportBytes bounds an uploaded file of codes: webkit.DefaultMaxImportBytes unless set.
	// Zero: the API's default.
	MaxImportBytes int64
	// Readiness are the checks of GET /readyz: the dashboard shows each dependency's state.
	Readiness []webkit.ReadinessCheck
	// Queues reads the delay queue's backlog, messages by queue name (RabbitMQ's queues, or the
	// memory queue's pending closes); nil: the dashboard shows none.
	Queues func(context.Context) (map[string]int64, error)
	// Stop is closed when the service shuts down: open dashboard streams end, so that the
	// server's graceful shutdown does not wait on them. Nil: they end with their client or
	// their lifetime only.
	Stop <-chan struct{}
	// DashboardEvery is how often the dashboard's numbers are read and streamed,
	// DashboardStreams how many streams may be open at once on this instance, and
	// StreamLifetime how long one stream lasts before the browser must reconnect. Zero: the
	// defaults.
	DashboardEvery   time.Duration
	DashboardStreams int
	StreamLifetime   time.Duration
	// Lang is the language of an operator with no choice made and no Accept-Language match;
	// empty: English (a browser always sends Accept-Language: this is curl's and scripts').
	Lang i18n.Lang
	// AuthFailures records failed and rate-limited logins (the API's, shared, so that its
	// bound per instance is one); nil: the console makes its own on Limiter.
	AuthFailures *webkit.AuthFailures
}

// Default login limit: ten attempts a minute per client IP. A token has 256 random bits, so
// the limit is not what keeps it from being guessed; it keeps a script from spending the
// service's database reads and filling the log.
const (
	DefaultLoginsPerWindow = 10
	DefaultLoginWindow     = time.Minute
)

// Services are the use cases the console calls.
type Services struct {
	Sales     *application.Sales
	Payments  *application.Payments
	Catalogue *application.Catalogue
	Admin     *application.Admin
	// Guard is the bot defence: the Blocklist page and the dashboard's refusals. Nil: neither.
	Guard *application.Guard
	// Channels are the payment channels configured here (admins only). Nil: no Payments page.
	Channels *application.Channels
	// Reports are the dashboard's money and the orders' export. Nil: neither.
	Reports *application.Reports
	// AlertChannels runs the alert channels page (alert_channels.go). Nil: no such page.
	AlertChannels *application.AlertChannels
	// Coupons runs the Coupons page (coupons.go). Nil: no such page.
	Coupons *application.Coupons
}

// console holds the handlers' dependencies.
type console struct {
	cfg         Config
	seal        sealer
	sales       *application.Sales
	payments    *application.Payments
	catalogue   *application.Catalogue
	operators   *application.Admin
	guard       *application.Guard    // nil: no Blocklist page
	payChannels *application.Channels // nil: no Payments page
	reports     *application.Reports  // nil: no money on the dashboard, no export
	clock       domain.Clock
	log         *slog.Logger
	pages       pages
	msgs        *i18n.Catalogue // the texts of every page, in each language
	jobs        *importJobs     // the code imports running or finished on this instance

	dash    *sampler      // the dashboard's numbers, shared by every page and stream
	streams chan struct{} // one token per open dashboard stream
	// voids are the voids of codes waiting for confirmation on this instance.
	voids *pendingVoids
	// channels runs the alert channels page; nil: no such page.
	channels *application.AlertChannels
	// couponsSvc runs the Coupons page; nil: no such page.
	couponsSvc *application.Coupons
}

// Mount adds the console's routes under /console to app (the JSON API's app: the console
// shares its middleware — request ids, metrics, panics recovered — but answers HTML itself,
// never through the API's JSON error handler).
func Mount(app *fiber.App, cfg Config, svc Services, clock domain.Clock, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Limiter != nil && (cfg.LoginsPerWindow <= 0 || cfg.LoginWindow <= 0) {
		cfg.LoginsPerWindow, cfg.LoginWindow = DefaultLoginsPerWindow, DefaultLoginWindow
	}
	if cfg.TimeZone == nil {
		cfg.TimeZone = time.UTC
	}
	if cfg.Lang == "" {
		cfg.Lang = i18n.English
	}
	msgs := catalogue()
	if cfg.AuthFailures == nil {
		cfg.AuthFailures = webkit.NewAuthFailures(svc.Admin, cfg.Limiter, clock, log)
	}
	if cfg.MaxImportBytes <= 0 {
		cfg.MaxImportBytes = webkit.DefaultMaxImportBytes
	}
	if cfg.DashboardEvery <= 0 {
		cfg.DashboardEvery = DefaultDashboardEvery
	}
	if cfg.DashboardStreams <= 0 {
		cfg.DashboardStreams = DefaultDashboardStreams
	}
	if cfg.StreamLifetime <= 0 {
		cfg.StreamLifetime = DefaultStreamLifetime
	}
	k := &console{cfg: cfg, seal: newSealer(cfg.TokenSecret), sales: svc.Sales, payments: svc.Payments,
		catalogue: svc.Catalogue, operators: svc.Admin, guard: svc.Guard, reports: svc.Reports, channels: svc.AlertChannels, payChannels: svc.Channels, couponsSvc: svc.Coupons, clock: clock, log: log, pages: parsePages(), msgs: msgs,
		dash:    &sampler{catalogue: svc.Catalogue, guard: svc.Guard, checks: cfg.Readiness, queues: cfg.Queues, every: cfg.DashboardEvery, log: log},
		streams: make(chan struct{}, cfg.DashboardStreams)}
	k.jobs = newImportJobs(clock)
	k.voids = &pendingVoids{clock: clock, byID: map[string]pendingVoid{}}
	g := app.Group("/console", securityHeaders)
	g.Use("/static", filesystem.New(filesystem.Config{Root: http.FS(staticFS), PathPrefix: "static"}))
	g.Get("/lang", k.switchLang)
	g.Get("/login", k.loginPage)
	g.Post("/login", k.sameOrigin, k.parseForm, k.login)

	// Everything else needs a session; every POST also the session's CSRF token.
	in := g.Group("", k.authenticated, k.sameOrigin, k.parseForm, k.csrf)
	in.Post("/logout", k.logout)
	in.Get("/", k.home)
	for _, r := range routes(k) {
		in.Add(r.method, r.path, k.need(r.role, r.action), r.handler)
	}
	in.Use(func(c *fiber.Ctx) error { return k.errorPage(c, fiber.StatusNotFound, "console.error.no_page") })
}

// route is one console screen or action: the least role that may use it (the admin API's
// role for the same thing) and, for a write, the action the audit log records.
type route struct {
	method, path string
	role         domain.Role
	action       string
	handler      fiber.Handler
}

func routes(k *console) []route {
	// A read is open to viewers; a write (act) takes its action's role, and a screen leading to
	// one (its form or confirmation) the role of that action.
	const v, act = domain.RoleViewer, domain.Role("")
	rs := []route{
		{"GET", "/products", v, "", k.products},
		{"GET", "/products/new", roleOf("product.create"), "", k.newProductPage},
		{"POST", "/products", act, "product.create", k.createProduct},
		{"GET", "/products/:id", v, "", k.product},
		{"GET", "/products/:id/edit", roleOf("product.update"), "", k.editProductPage},
		{"POST", "/products/:id", act, "product.update", k.updateProduct},
		{"POST", "/products/:id/freeze", act, "product.freeze", k.freeze},
		{"POST", "/products/:id/unfreeze", act, "product.unfreeze", k.unfreeze},
		{"GET", "/products/:id/reconcile", v, "", k.reconcile},
		{"GET", "/products/:id/codes", v, "", k.codes},
		{"POST", "/products/:id/codes", act, "product.import", k.startImport},
		{"GET", "/products/:id/imports/:job", roleOf("product.import"), "", k.importJob},
		{"GET", "/products/:id/imports/:job/progress", roleOf("product.import"), "", k.importProgress},
		{"POST", "/products/:id/codes/void/confirm", roleOf("codes.void"), "", k.confirmVoid},
		{"POST", "/products/:id/codes/void", act, "codes.void", k.voidCodes},
		{"GET", "/products/:id/repair", roleOf("product.repair"), "", k.confirmRepair},
		{"POST", "/products/:id/repair", act, "product.repair", k.repair},
		{"GET", "/orders", v, "", k.orderLookup},
		{"GET", "/orders/:order_no", v, "", k.order},
		{"GET", "/orders/:order_no/refund", roleOf("order.refund"), "", k.confirmRefund},
		{"POST", "/orders/:order_no/refund", act, "order.refund", k.refund},
		{"GET", "/orders/:order_no/fulfil", roleOf("order.fulfil"), "", k.confirmFulfil},
		{"POST", "/orders/:order_no/fulfil", act, "order.fulfil", k.fulfil},
		{"POST", "/orders/:order_no/mail", act, application.ActionMailResent, k.resendMail},
		{"GET", "/orders/:order_no/confirm-payment", roleOf("order.confirm_payment"), "", k.manualPaymentForm},
		{"POST", "/orders/:order_no/confirm-payment", act, "order.confirm_payment", k.confirmPayment},
		{"GET", "/operators", domain.RoleAdmin, "", k.operatorsScreen},
		{"POST", "/operators", act, "operator.create", k.createOperator},
		{"POST", "/operators/:name/role", act, "operator.update", k.setOperatorRole},
		{"POST", "/operators/:name/rotate", act, "operator.rotate", k.rotateOperator},
		{"POST", "/operators/:name/disable", act, "operator.disable", k.disableOperator},
		{"POST", "/operators/:name/enable", act, "operator.enable", k.enableOperator},
		{"GET", "/audit", v, "", k.audit},
		{"GET", "/settings", v, "", k.settings},
		{"POST", "/settings", v, "", k.saveSettings},
		{"GET", "/alerts", v, "", k.alerts},
		{"POST", "/alerts/:alert_id/ack", act, "alert.ack", k.ackAlert},
		{"GET", "/dashboard", v, "", k.dashboard},
		{"GET", "/dashboard/events", v, "", k.dashboardEvents},
	}
	if k.guard != nil {
		rs = append(rs,
			route{"GET", "/blocklist", v, "", k.blocklist},
			route{"POST", "/blocklist", act, "blocklist.add", k.addBlock},
			route{"POST", "/blocklist/:block_id/remove", act, "blocklist.remove", k.removeBlock})
	}
	if k.couponsSvc != nil {
		rs = append(rs,
			route{"GET", "/coupons", v, "", k.coupons},
			route{"POST", "/coupons", act, application.ActionCouponCreate, k.createCoupon},
			route{"POST", "/coupons/:code/disable", act, application.ActionCouponDisable, k.disableCoupon},
			route{"POST", "/coupons/:code/enable", act, application.ActionCouponEnable, k.enableCoupon})
	}
	if k.payChannels != nil {
		rs = append(rs,
			route{"GET", "/payments", roleOf(application.ActionChannelSave), "", k.paymentChannels},
			route{"GET", "/payments/:provider", roleOf(application.ActionChannelSave), "", k.paymentChannel},
			route{"POST", "/payments/:provider", act, application.ActionChannelSave, k.savePaymentChannel},
			route{"POST", "/payments/:provider/disable", act, application.ActionChannelDisable, k.disablePaymentChannel},
			route{"POST", "/payments/:provider/test", act, application.ActionChannelTest, k.testPaymentChannel})
	}
	if k.reports != nil {
		rs = append(rs,
			route{"GET", "/dashboard/revenue.svg", v, "", k.revenueChart},
			route{"GET", "/exports", v, "", k.exportsPage},
			route{"POST", "/exports/orders", act, application.ActionOrdersExport, k.exportOrders})
	}
	if k.channels != nil {
		rs = append(rs,
			route{"GET", "/alerts/channels", roleOf(application.ActionAlertChannelCreate), "", k.alertChannels},
			route{"POST", "/alerts/channels", act, application.ActionAlertChannelCreate, k.createChannel},
			route{"GET", "/alerts/channels/:channel_id", roleOf(application.ActionAlertChannelUpdate), "", k.editChannel},
			route{"POST", "/alerts/channels/:channel_id", act, application.ActionAlertChannelUpdate, k.updateChannel},
			route{"POST", "/alerts/channels/:channel_id/test", act, application.ActionAlertChannelTest, k.testChannel},
			route{"POST", "/alerts/channels/:channel_id/remove", act, application.ActionAlertChannelRemove, k.removeChannel})
	}
	return withActionRoles(rs)
}

// roleOf is the action's role (application.ActionRole).
func roleOf(action string) domain.Role {
	role, ok := application.ActionRole(action)
	if !ok {
		panic("console: no role for the action " + action)
	}
	return role
}

// withActionRoles gives each write its action's role.
func withActionRoles(rs []route) []route {
	for i, r := range rs {
		if r.action != "" {
			rs[i].role = roleOf(r.action)
		}
	}
	return rs
}

// contentSecurityPolicy allows the console's own script and style files and nothing else: no
// inline script or style, no frame, no form posting elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the console's headers on every answer, the static files' included.
// Pages are never cached: they show buyers' orders and the audit log.
func securityHeaders(c *fiber.Ctx) error {
	c.Set("Content-Security-Policy", contentSecurityPolicy)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "same-origin")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	err := c.Next()
	if c.Response().Header.Peek(fiber.HeaderCacheControl) == nil {
		c.Set(fiber.HeaderCacheControl, "no-store")
	}
	return err
}

const identityKey = "console.identity"
const sessionKey = "console.session"

func identityOf(c *fiber.Ctx) application.Identity {
	id, _ := c.Locals(identityKey).(application.Identity)
	return id
}

func sessionOf(c *fiber.Ctx) session {
	s, _ := c.Locals(sessionKey).(session)
	return s
}

// authenticated checks the session cookie and loads its operator, role read now. A bad or
// expired cookie, a removed operator, one whose token was rotated after the session began
// (rotation revokes every session), or a session issued at or before its identity's last
// logout (see logout), sends the browser to the login page with the cookie cleared.
//
// Only a session found invalid logs out: a ledger that cannot answer is an error page, so an
// outage does not throw every operator back to the login page.
func (k *console) authenticated(c *fiber.Ctx) error {
	s, err := k.seal.open(c.Cookies(CookieName), k.clock.Now())
	var id application.Identity
	if err == nil {
		id, err = k.identity(c.UserContext(), s)
	}
	switch {
	case errors.Is(err, errBadSession):
		k.clearCookie(c)
		return c.Redirect("/console/login", fiber.StatusSeeOther)
	case err != nil:
		return k.fail(c, err)
	}
	c.Locals(identityKey, id)
	c.Locals(sessionKey, s)
	return c.Next()
}

// identity resolves a verified session to its operator's identity now.
func (k *console) identity(ctx context.Context, s session) (application.Identity, error) {
	if s.Name == domain.LegacyAdmin {
		if subtle.ConstantTimeCompare([]byte(s.Admin), []byte(k.seal.adminPrint(k.cfg.AdminToken))) != 1 {
			return application.Identity{}, errBadSession
		}
		return k.notLoggedOut(ctx, s, application.LegacyAdminIdentity)
	}
	op, err := k.operators.Operator(ctx, string(s.Name))
	if errors.Is(err, domain.ErrOperatorNotFound) || errors.Is(err, domain.ErrInvalidInput) {
		return application.Identity{}, errBadSession
	}
	if err != nil {
		return application.Identity{}, err
	}
	if op.RotatedAt.UnixMicro() > s.IssuedAt || op.Disabled() {
		return application.Identity{}, errBadSession
	}
	return k.notLoggedOut(ctx, s, application.Identity{Name: op.Name, Role: op.Role})
}

// notLoggedOut refuses a session issued at or before its identity's last logout.
func (k *console) notLoggedOut(ctx context.Context, s session, id application.Identity) (application.Identity, error) {
	ended, err := k.operators.ConsoleSessionsEnded(ctx, id.Name)
	if err != nil {
		return application.Identity{}, err
	}
	if !ended.IsZero() && s.IssuedAt <= ended.UnixMicro() {
		return application.Identity{}, errBadSession
	}
	return id, nil
}

// sameOrigin refuses a POST whose Origin header names another host: a browser sends it with
// every cross-site form post, so this stops CSRF even before the token is looked at. A POST
// without Origin (older browsers, curl) relies on the token alone.
func (k *console) sameOrigin(c *fiber.Ctx) error {
	if c.Method() != fiber.MethodPost {
		return c.Next()
	}
	if o := c.Get(fiber.HeaderOrigin); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != string(c.Request().Host()) {
			k.log.WarnContext(c.UserContext(), "console: cross-origin post refused", "origin", o, "path", c.Path())
			return k.errorPage(c, fiber.StatusForbidden, "console.err.cross_site")
		}
	}
	return c.Next()
}

// csrf refuses a POST without the session's CSRF token (field "csrf"): nothing runs.
func (k *console) csrf(c *fiber.Ctx) error {
	if c.Method() != fiber.MethodPost {
		return c.Next()
	}
	if !csrfOK(formValue(c, "csrf"), sessionOf(c).CSRF) {
		k.log.WarnContext(c.UserContext(), "console: post without a valid csrf token refused",
			"operator", identityOf(c).Name, "path", c.Path())
		return k.errorPage(c, fiber.StatusForbidden, "console.err.csrf")
	}
	return c.Next()
}

// need refuses a role that may not do the route's thing with a 403 page; a refused write is
// recorded in the audit log (as the admin API records it).
func (k *console) need(role domain.Role, action string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id := identityOf(c)
		if id.Role.Allows(role) {
			return c.Next()
		}
		if action != "" {
			k.record(c, action, nil, fmt.Errorf("%w: needs %s", domain.ErrForbidden, role))
		}
		return k.errorPage(c, fiber.StatusForbidden,
			k.tr(c, "console.err.role", "Role", k.text(k.lang(c), "console.role."+string(id.Role)),
				"Need", k.text(k.lang(c), "console.role."+string(role))))
	}
}
