package httpapi_test

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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/authtoken"
	"cardshop/adapters/devpay"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/application"
	"cardshop/domain"
)

const (
	adminToken    = "admin-token-0123456789"
	paymentSecret = "payment-secret-0123456789"
	tokenSecret   = "token-secret-0123456789"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// syncBuffer is the service log: handlers and timers may write to it concurrently.
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

// faultGate is the memory gate with one injectable fault: while fail holds an error, Reserve
// returns it, as a Redis adapter returns a connection error. While leased is set it also acts
// as the Redis gate holding a sold-out lease on every product without stock
// (domain.SoldOutLeases): SoldOutByLease is true for a key it never reserved, as the lease's
// claim bitmap says.
type faultGate struct {
	*memory.Gate
	fail    atomic.Pointer[error]
	leased  atomic.Bool
	claimed sync.Map // "<product>|<buyer>|<key>" of every keyed reservation it made
	byLease atomic.Int64
}

var _ domain.SoldOutLeases = (*faultGate)(nil)

func (g *faultGate) Reserve(ctx context.Context, r domain.Reservation) (domain.ReserveResult, error) {
	if err := g.fail.Load(); err != nil {
		return domain.ReserveResult{}, *err
	}
	res, err := g.Gate.Reserve(ctx, r)
	if err == nil && res.Outcome == domain.Reserved && r.Key != "" {
		g.claimed.Store(claimOf(r), true)
	}
	return res, err
}

func claimOf(r domain.Reservation) string { return fmt.Sprintf("%d|%s|%s", r.Product, r.Buyer, r.Key) }

func (g *faultGate) SoldOutByLease(r domain.Reservation) bool {
	if !g.leased.Load() || r.Key == "" {
		return false
	}
	if _, claimed := g.claimed.Load(claimOf(r)); claimed {
		return false
	}
	l, ok, err := g.Levels(context.Background(), r.Product)
	if err != nil || !ok || l.Stock > 0 {
		return false
	}
	g.byLease.Add(1)
	return true
}

func (g *faultGate) failWith(err error) {
	if err == nil {
		g.fail.Store(nil)
		return
	}
	g.fail.Store(&err)
}

// harness is a Shop on the memory adapters behind the Fiber app, with a fake clock.
type harness struct {
	t      testing.TB
	app    *fiber.App
	shop   *application.App
	clock  *memory.FakeClock
	ledger *memory.Ledger
	gate   *faultGate
	alerts *memory.Alerts
	signer *paysig.Signer
	tokens *authtoken.Issuer
	logs   *syncBuffer
	dev    *devpay.Gateway // the built-in dev payment provider, served by the app
}

type option func(*httpapi.Config)

// shopURL is the harness shop's public address (the dev provider's pay links start with it).
const shopURL = "http://shop.test"

func newHarness(t testing.TB, opts ...option) *harness {
	t.Helper()
	return newHarnessWith(t, nil, opts...)
}

// newHarnessWith is newHarness with the use cases' ports changed by deps first (nil: none).
func newHarnessWith(t testing.TB, deps func(*application.Deps), opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, clock: memory.NewFakeClock(start), ledger: memory.NewLedger(), logs: &syncBuffer{}}
	log := slog.New(httpapi.LogHandler(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	h.gate = &faultGate{Gate: memory.NewGate(h.clock)}
	h.alerts = memory.NewAlerts(log)
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
	cfg.ReplayWait = 50 * time.Millisecond
	cfg.NotifyURL, cfg.ReturnURL = shopURL+httpapi.NotifyPath, shopURL+httpapi.OrderPath
	if h.dev, err = devpay.New(devpay.Config{Secret: devpay.NewSecret(), BaseURL: shopURL, Now: h.clock.Now}); err != nil {
		t.Fatal(err)
	}
	d := application.Deps{Ledger: h.ledger, Gate: h.gate, Queue: queue, Gateways: []domain.PaymentGateway{h.dev},
		Publisher: memory.NewPublisher(), Verifier: h.signer, Alerter: h.alerts, Clock: h.clock, Logger: log}
	if deps != nil {
		deps(&d)
	}
	h.shop, err = application.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	hc := httpapi.DefaultConfig(adminToken)
	hc.DevPay, hc.Replies = devPages{h.dev}, map[domain.Provider]httpapi.NotifyReplier{h.dev.Provider(): h.dev}
	for _, o := range opts {
		o(&hc)
	}
	svc := services(h.shop)
	if svc.Reports, err = application.NewReports(h.ledger, h.ledger, h.clock, domain.Currency{}); err != nil {
		t.Fatal(err)
	}
	h.app = httpapi.New(hc, svc, h.tokens, h.clock, log)
	return h
}

// with returns the harness reporting to t (a fuzz target must not use the *testing.F).
func (h *harness) with(t testing.TB) *harness {
	c := *h
	c.t = t
	return &c
}

// resp is an answer read whole.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// decode strictly decodes the body into v.
func (r resp) decode(t testing.TB, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, r, err)
	}
}

// do sends one request through app.Test and checks the answer against openapi.json; hdr are
// name, value pairs.
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
	checkSpec(h.t, method, target, res.StatusCode, res.Header, b)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func bearer(tok string) string { return "Bearer " + tok }

// admin sends an authenticated admin request with a JSON (or text) body.
func (h *harness) admin(method, target, body string) resp {
	h.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return h.do(method, target, r, "Authorization", bearer(adminToken), "Content-Type", "application/json")
}

type productJSON struct {
	ID           int64      `json:"id"`
	Name         string     `json:"name"`
	Description  string     `json:"description"`
	Price        int64      `json:"price"`
	MinPerOrder  int        `json:"min_per_order"`
	MaxPerOrder  int        `json:"max_per_order"`
	CodeUses     int        `json:"code_uses"`
	Group        string     `json:"group"`
	Variant      string     `json:"variant"`
	Tiers        []tierJSON `json:"tiers"`
	StockDisplay string     `json:"stock_display"`
	StartsAt     *time.Time `json:"starts_at"`
	EndsAt       *time.Time `json:"ends_at"`
	BuyerLimit   int        `json:"buyer_limit"`
	RefundFrees  bool       `json:"refund_releases_limit"`
	LowStock     int        `json:"low_stock_threshold"`
	StockState   string     `json:"stock_state"`
	Frozen       bool       `json:"frozen"`
	FrozenReason string     `json:"frozen_reason"`
	CreatedAt    time.Time  `json:"created_at"`
}

type tierJSON struct {
	MinQty    int   `json:"min_qty"`
	UnitPrice int64 `json:"unit_price"`
}

type orderJSON struct {
	OrderNo    string     `json:"order_no"`
	ProductID  int64      `json:"product_id"`
	Qty        int        `json:"qty"`
	UnitPrice  int64      `json:"unit_price"`
	Amount     int64      `json:"amount"`
	Coupon     string     `json:"coupon"`
	Discount   int64      `json:"discount"`
	Currency   string     `json:"currency"`
	Status     string     `json:"status"`
	Reason     string     `json:"reason"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	PaidAt     *time.Time `json:"paid_at"`
	EndedAt    *time.Time `json:"ended_at"`
	BuyerID    string     `json:"buyer_id"`
	PaymentRef string     `json:"payment_ref"`
	RevealedAt *time.Time `json:"revealed_at"`
	Codes      []string   `json:"codes"`
}

// refundJSON is the refund's answer: the order and where its codes went.
type refundJSON struct {
	orderJSON
	CodesRecycled int `json:"codes_recycled"`
	CodesVoided   int `json:"codes_voided"`
}

type importJSON struct {
	Added        int   `json:"added"`
	Uses         int   `json:"uses"`
	Duplicates   int   `json:"duplicates"`
	InPool       int   `json:"in_pool"`
	Invalid      int   `json:"invalid"`
	InvalidLines []int `json:"invalid_lines"`
	Comments     int   `json:"comments"`
	Headers      int   `json:"headers"`
	Unterminated int   `json:"unterminated"`
	Skipped      []struct {
		Line   int    `json:"line"`
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	} `json:"skipped"`
	Truncated   bool `json:"truncated"`
	ThroughLine int  `json:"through_line"`
	Filled      int  `json:"filled"`
	Complete    bool `json:"complete"`
}

// skippedLines renders the lines not imported as "line:reason …".
func (r importJSON) skippedLines() string {
	var out []string
	for _, s := range r.Skipped {
		out = append(out, fmt.Sprintf("%d:%s", s.Line, s.Reason))
	}
	return strings.Join(out, " ")
}

type errorJSON struct {
	Code      string      `json:"code"`
	Message   string      `json:"message"`
	Field     string      `json:"field"`
	RequestID string      `json:"request_id"`
	Import    *importJSON `json:"import"`
}

// leakMarkers are pieces of internal error text that must never reach a client.
var leakMarkers = []string{"reserve stock", "load order", "load product", "record ", "memory", "json:", "%!", "goroutine", ".go:", "cardshop/"}

// wantError checks an error answer: status, stable code, a message, the request id, JSON, and
// no internal error text.
func wantError(t testing.TB, r resp, status int, code string) errorJSON {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q", ct)
	}
	var e errorJSON
	r.decode(t, &e)
	if e.Code != code {
		t.Fatalf("code %q, want %q: %s", e.Code, code, r.body)
	}
	if e.Message == "" || e.RequestID == "" {
		t.Fatalf("error without message or request_id: %s", r.body)
	}
	if e.RequestID != r.header.Get(fiber.HeaderXRequestID) {
		t.Errorf("request_id %q differs from the X-Request-ID header %q", e.RequestID, r.header.Get(fiber.HeaderXRequestID))
	}
	for _, m := range leakMarkers {
		if strings.Contains(string(r.body), m) {
			t.Fatalf("error body holds internal text %q: %s", m, r.body)
		}
	}
	return e
}

func wantStatus(t testing.TB, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
}

// createProduct creates a product with the given price and per-order limit.
func (h *harness) createProduct(id int64, price int64, max int) productJSON {
	h.t.Helper()
	r := h.admin("POST", "/admin/products", fmt.Sprintf(`{"id":%d,"name":"Gift card %d","price":%d,"max_per_order":%d}`, id, id, price, max))
	wantStatus(h.t, r, 201)
	var p productJSON
	r.decode(h.t, &p)
	return p
}

// importCodes imports codes as a text body, one per line.
func (h *harness) importCodes(id int64, codes ...string) importJSON {
	h.t.Helper()
	r := h.do("POST", fmt.Sprintf("/admin/products/%d/codes", id), strings.NewReader(strings.Join(codes, "\n")+"\n"),
		"Authorization", bearer(adminToken), "Content-Type", "text/plain")
	wantStatus(h.t, r, 200)
	var rep importJSON
	r.decode(h.t, &rep)
	return rep
}

// codes returns n distinct codes with a prefix.
func codes(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%06d", prefix, i)
	}
	return out
}

func (h *harness) token(buyer domain.BuyerID) string {
	h.t.Helper()
	tok, _, err := h.tokens.Issue(buyer, h.clock.Now(), time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// order posts an order body with a key and a buyer token.
func (h *harness) order(tok, key, body string) resp {
	h.t.Helper()
	hdr := []string{"Content-Type", "application/json"}
	if tok != "" {
		hdr = append(hdr, "Authorization", bearer(tok))
	}
	if key != "" {
		hdr = append(hdr, httpapi.HeaderIdempotencyKey, key)
	}
	return h.do("POST", "/api/order", strings.NewReader(body), hdr...)
}

// placeOrder places an order that must succeed.
func (h *harness) placeOrder(tok, key string, product int64, qty int) orderJSON {
	h.t.Helper()
	r := h.order(tok, key, fmt.Sprintf(`{"product_id":%d,"qty":%d}`, product, qty))
	wantStatus(h.t, r, 201)
	var o orderJSON
	r.decode(h.t, &o)
	return o
}

// callback sends a payment callback signed at the shop clock's time.
func (h *harness) callback(n paysig.Notice) resp {
	h.t.Helper()
	body, ts, sig, err := h.signer.SignedBody(n, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return h.do("POST", "/api/payments/callback", bytes.NewReader(body),
		"Content-Type", "application/json", paysig.HeaderTimestamp, ts, paysig.HeaderSignature, sig)
}

// pay pays an order in full and checks the answer.
func (h *harness) pay(o orderJSON) {
	h.t.Helper()
	r := h.callback(paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: o.Amount, PaymentRef: "pay-" + o.OrderNo})
	wantStatus(h.t, r, 200)
}

func (h *harness) getOrder(tok, no string) resp {
	h.t.Helper()
	return h.do("GET", "/api/orders/"+no, nil, "Authorization", bearer(tok))
}

func (h *harness) adminOrder(no string) orderJSON {
	h.t.Helper()
	r := h.admin("GET", "/admin/orders/"+no, "")
	wantStatus(h.t, r, 200)
	var o orderJSON
	r.decode(h.t, &o)
	return o
}

func (h *harness) levels(id int64) domain.GateLevels {
	h.t.Helper()
	l, _, err := h.gate.Levels(context.Background(), domain.ProductID(id))
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

func (h *harness) cardCounts(id int64) domain.CardCounts {
	h.t.Helper()
	c, err := h.ledger.Cards().Counts(context.Background(), domain.ProductID(id))
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// services are the API's services of a.
func services(a *application.App) httpapi.Services {
	return httpapi.Services{Sales: a.Sales, Payments: a.Payments, Catalogue: a.Catalogue, Admin: a.Admin, Guard: a.Guard, Coupons: a.Coupons}
}

// devPages serves the dev provider's pages to the API, as the service wires them.
type devPages struct{ g *devpay.Gateway }

func (d devPages) PayPage(query url.Values) httpapi.Page { return httpapi.Page(d.g.PayPage(query)) }

func (d devPages) Confirm(ctx context.Context, form url.Values, deliver func(context.Context, domain.InboundRequest) error) httpapi.Page {
	return httpapi.Page(d.g.Confirm(ctx, form, deliver))
}
