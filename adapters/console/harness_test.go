package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/authtoken"
	"cardshop/adapters/console"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/adapters/ratelimit"
	"cardshop/application"
	"cardshop/domain"
)

const (
	adminToken    = "admin-token-0123456789"
	paymentSecret = "payment-secret-0123456789"
	tokenSecret   = "token-secret-0123456789"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// harness is a Shop on the memory adapters behind the service's Fiber app (the JSON API with
// the console mounted, as bootstrap wires it), with a fake clock.
type harness struct {
	t      testing.TB
	app    *fiber.App
	shop   *application.App
	clock  *memory.FakeClock
	signer *paysig.Signer
	tokens *authtoken.Issuer
	ledger *outageLedger
	gate   *memory.Gate
	logs   *syncBuffer // the service's log
	mailer *mailCounter
}

// syncBuffer is the service log: handlers may write to it concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// outageLedger is the memory ledger whose operator reads fail while down is set, and whose
// logouts fail while logoutDown is set, as a database that went away.
type outageLedger struct {
	*memory.Ledger
	down, logoutDown atomic.Bool
}

func (l *outageLedger) Operators() domain.OperatorRepo {
	return outageOperators{l.Ledger.Operators(), &l.down, &l.logoutDown}
}

type outageOperators struct {
	domain.OperatorRepo
	down, logoutDown *atomic.Bool
}

func (o outageOperators) EndSessions(ctx context.Context, n domain.OperatorName, at time.Time) error {
	if o.logoutDown.Load() {
		return fmt.Errorf("operators: %w", domain.ErrUnavailable)
	}
	return o.OperatorRepo.EndSessions(ctx, n, at)
}

func (o outageOperators) Operator(ctx context.Context, n domain.OperatorName) (domain.Operator, error) {
	if o.down.Load() {
		return domain.Operator{}, fmt.Errorf("operators: %w", domain.ErrUnavailable)
	}
	return o.OperatorRepo.Operator(ctx, n)
}

// newHarness builds the service; logins are limited to logins a minute per IP (0: the default).
func newHarness(t testing.TB, logins int) *harness {
	t.Helper()
	h := &harness{t: t, clock: memory.NewFakeClock(start), ledger: &outageLedger{Ledger: memory.NewLedger()}, logs: &syncBuffer{}}
	log := slog.New(slog.NewJSONHandler(h.logs, nil))
	queue := memory.NewDelayQueue(h.clock)
	t.Cleanup(queue.Close)
	var err error
	if h.signer, err = paysig.New(paymentSecret, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if h.tokens, err = authtoken.New(tokenSecret); err != nil {
		t.Fatal(err)
	}
	cfg := application.DefaultConfig()
	cfg.OrderAccessKey = "console-test-order-access-key-0123"
	h.gate = memory.NewGate(h.clock)
	h.mailer = &mailCounter{}
	h.shop, err = application.New(cfg, application.Deps{Ledger: h.ledger, Gate: h.gate,
		Queue: queue, Publisher: memory.NewPublisher(), Verifier: h.signer, Alerter: memory.NewAlerts(log),
		Mailer: h.mailer, Channels: channelKit{}, Clock: h.clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h.app = httpapi.New(httpapi.DefaultConfig(adminToken), apiServices(h.shop), h.tokens, h.clock, log)
	if logins == 0 {
		logins = console.DefaultLoginsPerWindow
	}
	console.Mount(h.app, console.Config{AdminToken: adminToken, TokenSecret: tokenSecret,
		Limiter: ratelimit.NewMemory(h.clock.Now), LoginsPerWindow: logins, LoginWindow: time.Minute}, h.services(), h.clock, log)
	return h
}

// resp is an answer read whole.
type resp struct {
	status int
	header http.Header
	body   string
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends one request; hdr are name, value pairs.
func (h *harness) do(method, target string, body io.Reader, hdr ...string) resp {
	h.t.Helper()
	req := httptest.NewRequest(method, target, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := h.app.Test(req, 30_000)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: string(b)}
}

// postForm posts a urlencoded form, with cookie when it is not empty.
func (h *harness) postForm(target string, form url.Values, cookie string, hdr ...string) resp {
	h.t.Helper()
	hdr = append(hdr, "Content-Type", "application/x-www-form-urlencoded")
	if cookie != "" {
		hdr = append(hdr, "Cookie", cookie)
	}
	return h.do("POST", target, strings.NewReader(form.Encode()), hdr...)
}

// operator creates an operator and returns its token.
func (h *harness) operator(name string, role domain.Role) string {
	h.t.Helper()
	_, tok, err := h.shop.Admin.CreateOperator(context.Background(), name, string(role))
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// browser is a logged-in console session: its cookie and the CSRF token its pages carry.
type browser struct {
	h      *harness
	cookie string // "cardshop_console=…"
	csrf   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// login logs in with token and reads the CSRF token off the home page.
func (h *harness) login(token string) *browser {
	h.t.Helper()
	r := h.postForm("/console/login", url.Values{"token": {token}}, "")
	if r.status != fiber.StatusSeeOther || r.header.Get("Location") != "/console" {
		h.t.Fatalf("login: %s", r)
	}
	b := &browser{h: h, cookie: sessionCookie(h.t, r)}
	home := b.get("/console")
	if home.status != 200 {
		h.t.Fatalf("home after login: %s", home)
	}
	m := csrfField.FindStringSubmatch(home.body)
	if m == nil {
		h.t.Fatalf("no csrf field on the home page: %s", home.body)
	}
	b.csrf = m[1]
	return b
}

// sessionCookie is the name=value of the response's session cookie.
func sessionCookie(t testing.TB, r resp) string {
	t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == console.CookieName && c.Value != "" {
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("no session cookie: %v", r.header.Values("Set-Cookie"))
	return ""
}

func (b *browser) get(target string) resp {
	b.h.t.Helper()
	return b.h.do("GET", target, nil, "Cookie", b.cookie)
}

// post sends a form with the session's CSRF token.
func (b *browser) post(target string, form url.Values) resp {
	b.h.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", b.csrf)
	return b.h.postForm(target, form, b.cookie)
}

func wantStatus(t testing.TB, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
}

func wantLoginRedirect(t testing.TB, r resp) {
	t.Helper()
	if r.status != fiber.StatusSeeOther || r.header.Get("Location") != "/console/login" {
		t.Fatalf("want a redirect to the login page, got %s (Location %q)", r, r.header.Get("Location"))
	}
}

// product creates a product through the use case.
func (h *harness) product(name string, price domain.Money) domain.Product {
	h.t.Helper()
	p, err := h.shop.Catalogue.CreateProduct(context.Background(), application.NewProduct{Name: name, Price: price, MaxPerOrder: 5})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) reload(id domain.ProductID) domain.Product {
	h.t.Helper()
	p, err := h.shop.Catalogue.Product(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// paidOrder sells qty units of a product stocked with codes through the buyer API and pays
// for it with a signed callback: a PAID order holding codes.
func (h *harness) paidOrder(p domain.Product, codes []string, qty int) string {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.shop.Catalogue.ImportCodes(ctx, p.ID(), strings.NewReader(strings.Join(codes, "\n")+"\n")); err != nil {
		h.t.Fatal(err)
	}
	tok, _, err := h.tokens.Issue("buyer-1", h.clock.Now(), time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	r := h.do("POST", "/api/order", strings.NewReader(fmt.Sprintf(`{"product_id":%d,"qty":%d}`, p.ID(), qty)),
		"Content-Type", "application/json", "Authorization", "Bearer "+tok, httpapi.HeaderIdempotencyKey, "key-0000001")
	wantStatus(h.t, r, 201)
	var o struct {
		OrderNo string `json:"order_no"`
		Amount  int64  `json:"amount"`
	}
	if err := json.Unmarshal([]byte(r.body), &o); err != nil {
		h.t.Fatal(err)
	}
	body, ts, sig, err := h.signer.SignedBody(paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: o.Amount,
		PaymentRef: "pay-" + o.OrderNo}, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	wantStatus(h.t, h.do("POST", "/api/payments/callback", bytes.NewReader(body), "Content-Type", "application/json",
		paysig.HeaderTimestamp, ts, paysig.HeaderSignature, sig), 200)
	return o.OrderNo
}

func (h *harness) orderStatus(no string) domain.OrderStatus {
	h.t.Helper()
	v, err := h.shop.Sales.AdminOrder(context.Background(), domain.OrderNo(no))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.Order.Status()
}

// auditJSON is an entry of GET /admin/audit.
type auditJSON struct {
	ID       int64  `json:"id"`
	Operator string `json:"operator"`
	Role     string `json:"role"`
	Action   string `json:"action"`
	Target   string `json:"target"`
	Params   string `json:"params"`
	Result   string `json:"result"`
	Client   string `json:"client_addr"`
}

// audit reads the audit log through the admin API, newest first.
func (h *harness) audit() []auditJSON {
	h.t.Helper()
	r := h.do("GET", "/admin/audit", nil, "Authorization", "Bearer "+adminToken)
	wantStatus(h.t, r, 200)
	var out struct {
		Entries []auditJSON `json:"entries"`
	}
	if err := json.Unmarshal([]byte(r.body), &out); err != nil {
		h.t.Fatal(err)
	}
	return out.Entries
}

// apiServices and consoleServices are the services of a that the API and the console take.
func apiServices(a *application.App) httpapi.Services {
	return httpapi.Services{Sales: a.Sales, Payments: a.Payments, Catalogue: a.Catalogue, Admin: a.Admin}
}

// services are the shop's services and the reports on the memory ledger's sales report.
func (h *harness) services() console.Services {
	h.t.Helper()
	svc := consoleServices(h.shop)
	r, err := application.NewReports(h.ledger.Ledger, h.ledger, h.clock, domain.Currency{})
	if err != nil {
		h.t.Fatal(err)
	}
	svc.Reports = r
	return svc
}

func consoleServices(a *application.App) console.Services {
	return console.Services{Sales: a.Sales, Payments: a.Payments, Catalogue: a.Catalogue, Admin: a.Admin, Guard: a.Guard,
		AlertChannels: a.AlertChannels, Channels: a.Channels, Coupons: a.Coupons}
}
