package storefront_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/authtoken"
	"cardshop/adapters/devpay"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/adapters/ratelimit"
	"cardshop/adapters/storefront"
	"cardshop/application"
	"cardshop/domain"
)

const (
	adminToken    = "admin-token-0123456789"
	paymentSecret = "payment-secret-0123456789"
	tokenSecret   = "token-secret-0123456789"
	shopURL       = "http://shop.test"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// harness is the application on the memory adapters behind the service's Fiber app (the JSON
// API with the storefront mounted last, as bootstrap wires it), with a fake clock and the dev
// payment provider.
type harness struct {
	t      testing.TB
	app    *fiber.App
	shop   *application.App
	clock  *memory.FakeClock
	signer *paysig.Signer
	logs   *syncBuffer
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

// option changes the storefront's configuration or the application's ports.
type option struct {
	cfg  func(*storefront.Config)
	deps func(*application.Deps)
}

func newHarness(t testing.TB, opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, clock: memory.NewFakeClock(start), logs: &syncBuffer{}}
	log := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	queue := memory.NewDelayQueue(h.clock)
	t.Cleanup(queue.Close)
	var err error
	if h.signer, err = paysig.New(paymentSecret, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	tokens, err := authtoken.New(tokenSecret)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := devpay.New(devpay.Config{Secret: devpay.NewSecret(), BaseURL: shopURL, Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := application.DefaultConfig()
	cfg.NotifyURL, cfg.ReturnURL = shopURL+httpapi.NotifyPath, shopURL+"/orders/{order_no}"
	cfg.OrderAccessKey = "access-key-0123456789abcdef"
	cfg.OrderURL = shopURL + "/orders/{order_no}?key={key}"
	d := application.Deps{Ledger: memory.NewLedger(), Gate: memory.NewGate(h.clock), Queue: queue,
		Gateways: []domain.PaymentGateway{dev}, Publisher: memory.NewPublisher(), Verifier: h.signer,
		Alerter: memory.NewAlerts(log), Clock: h.clock, Logger: log}
	sc := storefront.Config{Secret: tokenSecret, Limiter: ratelimit.NewMemory(h.clock.Now)}
	for _, o := range opts {
		if o.deps != nil {
			o.deps(&d)
		}
		if o.cfg != nil {
			o.cfg(&sc)
		}
	}
	if h.shop, err = application.New(cfg, d); err != nil {
		t.Fatal(err)
	}
	h.app = httpapi.New(httpapi.DefaultConfig(adminToken), httpapi.Services{Sales: h.shop.Sales, Payments: h.shop.Payments,
		Catalogue: h.shop.Catalogue, Admin: h.shop.Admin}, tokens, h.clock, log)
	if err := storefront.Mount(h.app, sc, h.shop.Sales, h.shop.Payments, h.clock, log); err != nil {
		t.Fatal(err)
	}
	return h
}

// resp is an answer read whole.
type resp struct {
	status int
	header http.Header
	body   string
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// cookie is the value of the answer's cookie name ("" when it sets none).
func (r resp) cookie(name string) *http.Cookie {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

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

// browser is a visitor: the cookies the shop set, by name and path, and a language.
type browser struct {
	h       *harness
	lang    string // Accept-Language
	cookies map[string]*http.Cookie
}

func (h *harness) browser(lang string) *browser {
	return &browser{h: h, lang: lang, cookies: map[string]*http.Cookie{}}
}

// header is the Cookie header for path: the cookies whose path is a prefix of it.
func (b *browser) header(path string) string {
	var parts []string
	for _, c := range b.cookies {
		if c.Path == "" || c.Path == "/" || path == c.Path || strings.HasPrefix(path, c.Path+"/") {
			parts = append(parts, c.Name+"="+c.Value)
		}
	}
	return strings.Join(parts, "; ")
}

// keep stores the cookies an answer sets (a cleared one is removed).
func (b *browser) keep(r resp) {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		k := c.Name + " " + c.Path
		if c.MaxAge < 0 || c.Value == "" {
			delete(b.cookies, k)
			continue
		}
		b.cookies[k] = c
	}
}

func (b *browser) do(method, target string, body io.Reader, hdr ...string) resp {
	b.h.t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		b.h.t.Fatal(err)
	}
	hdr = append(hdr, "Accept-Language", b.lang)
	if c := b.header(u.Path); c != "" {
		hdr = append(hdr, "Cookie", c)
	}
	r := b.h.do(method, target, body, hdr...)
	b.keep(r)
	return r
}

func (b *browser) get(target string) resp {
	b.h.t.Helper()
	return b.do("GET", target, nil)
}

// post sends form as the browser's form would; with csrf "" the CSRF token of the last page
// read (b.csrf) is used.
func (b *browser) post(target string, form url.Values) resp {
	b.h.t.Helper()
	return b.do("POST", target, strings.NewReader(form.Encode()), "Content-Type", "application/x-www-form-urlencoded")
}

var (
	csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	keyField  = regexp.MustCompile(`name="key" value="([^"]+)"`)
)

// field is the value of the first match of re in body.
func field(t testing.TB, re *regexp.Regexp, body string) string {
	t.Helper()
	m := re.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in %s", re, body)
	}
	return m[1]
}

func wantStatus(t testing.TB, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
}

func wantContains(t testing.TB, r resp, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.body, p) {
			t.Fatalf("the page lacks %q: %s", p, r.body)
		}
	}
}

// product creates a product stocked with n codes ("CODE-<id>-<i>").
func (h *harness) product(p application.NewProduct, n int) domain.Product {
	h.t.Helper()
	ctx := context.Background()
	if p.MaxPerOrder == 0 {
		p.MaxPerOrder = 5
	}
	made, err := h.shop.Catalogue.CreateProduct(ctx, p)
	if err != nil {
		h.t.Fatal(err)
	}
	if n > 0 {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "CODE-%d-%04d\n", made.ID(), i)
		}
		if _, err := h.shop.Catalogue.ImportCodes(ctx, made.ID(), strings.NewReader(b.String())); err != nil {
			h.t.Fatal(err)
		}
	}
	return made
}

// pay pays an order with the signed callback, as a provider would.
func (h *harness) pay(no domain.OrderNo) {
	h.t.Helper()
	v, err := h.shop.Sales.AdminOrder(context.Background(), no)
	if err != nil {
		h.t.Fatal(err)
	}
	body, ts, sig, err := h.signer.SignedBody(paysig.Notice{OrderNo: string(no), Status: "paid", Amount: int64(v.Order.Amount()),
		PaymentRef: "pay-" + string(no)}, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	r := h.do("POST", "/api/payments/callback", bytes.NewReader(body), "Content-Type", "application/json",
		paysig.HeaderTimestamp, ts, paysig.HeaderSignature, sig)
	wantStatus(h.t, r, 200)
}
