package bootstrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"

	"cardshop/adapters/authtoken"
	"cardshop/bootstrap"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func (c client) do(method, path, auth, body string, hdr ...string) (int, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return res.StatusCode, b
}

func (c client) want(status int, method, path, auth, body string, out any, hdr ...string) {
	c.t.Helper()
	got, b := c.do(method, path, auth, body, hdr...)
	if got != status {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, got, b, status)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// TestServiceEndToEnd starts the whole service on the memory adapters, sells codes through
// real HTTP and the `pay` command, and stops it gracefully.
func TestServiceEndToEnd(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	logs := &lockedBuffer{}
	app := fx.New(bootstrap.Module(cfg), fx.NopLogger,
		fx.Decorate(func(*slog.Logger) *slog.Logger {
			return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}))
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := app.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}
	t.Cleanup(stop)

	c := client{t: t, base: "http://" + cfg.HTTPAddr, http: &http.Client{Timeout: 10 * time.Second}}
	c.want(200, "GET", "/healthz", "", "", nil)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":42,"name":"Top-up 10","price":1000,"max_per_order":5}`, nil)
	secretCodes := []string{"E2E-SECRET-0001", "E2E-SECRET-0002", "E2E-SECRET-0003"}
	var imp struct {
		Added int `json:"added"`
	}
	c.want(200, "POST", "/admin/products/42/codes", adminToken, strings.Join(secretCodes, "\n"), &imp)
	if imp.Added != 3 {
		t.Fatalf("imported %d", imp.Added)
	}
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"erin"}`, &tok)
	var order struct {
		OrderNo string   `json:"order_no"`
		Status  string   `json:"status"`
		Amount  int64    `json:"amount"`
		Codes   []string `json:"codes"`
	}
	c.want(201, "POST", "/api/order", tok.Token, `{"product_id":42,"qty":2}`, &order, "Idempotency-Key", "e2e-key-0001")
	if order.Status != "PENDING" || order.Amount != 2000 {
		t.Fatalf("order %+v", order)
	}

	// The provider's callback, sent by the `pay` command (amount read with the admin token).
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	var out, errOut bytes.Buffer
	if code := bootstrap.Main([]string{"pay", "-url", c.base, "-order", order.OrderNo}, &out, &errOut); code != 0 {
		t.Fatalf("pay exited %d: %s %s", code, out.String(), errOut.String())
	}
	if !strings.HasPrefix(out.String(), "200 ") || !strings.Contains(out.String(), `"result":"success"`) {
		t.Fatalf("pay printed %q", out.String())
	}
	// A wrong amount is refused, and the command says so.
	out.Reset()
	errOut.Reset()
	if code := bootstrap.Main([]string{"pay", "-url", c.base, "-order", order.OrderNo, "-amount", "1"}, &out, &errOut); code != 1 {
		t.Fatalf("pay with a wrong amount exited %d", code)
	}
	if !strings.HasPrefix(out.String(), "422 ") {
		t.Fatalf("pay with a wrong amount printed %q", out.String())
	}

	order.Codes = nil
	c.want(200, "GET", "/api/orders/"+order.OrderNo, tok.Token, "", &order)
	if order.Status != "PAID" || len(order.Codes) != 2 {
		t.Fatalf("paid order %+v", order)
	}
	for _, code := range order.Codes {
		if !strings.HasPrefix(code, "E2E-SECRET-") {
			t.Fatalf("code %q", code)
		}
	}
	// The outbox relay runs in the background: the reconciliation drains it and agrees.
	var rec struct {
		OK bool `json:"ok"`
	}
	c.want(200, "POST", "/admin/products/42/reconcile?repair=true", adminToken, "", &rec)
	if !rec.OK {
		t.Fatal("reconcile after the sale disagrees")
	}

	checkConsole(t, c, "42", "Top-up 10", order.OrderNo, secretCodes)

	stop()
	if _, err := c.http.Get(c.base + "/healthz"); err == nil {
		t.Error("the server still answers after Stop")
	}
	logText := logs.String()
	if !strings.Contains(logText, "cardshop listening") {
		t.Errorf("the decorated logger was not used: %s", logText)
	}
	for _, code := range secretCodes {
		if strings.Contains(logText, code) {
			t.Fatalf("code %s in the service log", code)
		}
	}
}

func TestServiceRefusesATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_HTTP_ADDR=" + ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	app := fx.New(bootstrap.Module(cfg), fx.NopLogger,
		fx.Decorate(func(*slog.Logger) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = app.Start(ctx)
	if err == nil {
		_ = app.Stop(ctx)
		t.Fatal("started on a port in use")
	}
	if !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("error %q does not name the address", err)
	}
}

func TestMainCommands(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := bootstrap.Main(args, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	for _, arg := range []string{"help", "-h", "--help"} {
		if code, out, _ := run(arg); code != 0 || !strings.Contains(out, "Usage: cardshop") || !strings.Contains(out, "pay") {
			t.Errorf("%s: %d %q", arg, code, out)
		}
	}
	if code, out, errOut := run("frobnicate"); code != 2 || !strings.Contains(errOut, `"frobnicate"`) || !strings.Contains(errOut, "Usage") || out != "" {
		t.Errorf("unknown command: %d %q %q", code, out, errOut)
	}

	t.Setenv("CARDSHOP_TOKEN_SECRET", tokenSecret)
	code, out, errOut := run("token", "-buyer", "x")
	if code != 0 {
		t.Fatalf("token: %d %q", code, errOut)
	}
	issuer, err := authtoken.New(tokenSecret)
	if err != nil {
		t.Fatal(err)
	}
	buyer, err := issuer.Verify(strings.TrimSpace(out), time.Now())
	if err != nil || buyer != "x" {
		t.Fatalf("printed token %q verifies as %q, %v", out, buyer, err)
	}
	if _, err := issuer.Verify(strings.TrimSpace(out), time.Now().Add(25*time.Hour)); err == nil {
		t.Error("the default token outlives 24h")
	}
	code, out, _ = run("token", "-buyer", "x.y@z", "-ttl", "1m")
	if buyer, err := issuer.Verify(strings.TrimSpace(out), time.Now()); code != 0 || err != nil || buyer != "x.y@z" {
		t.Errorf("token with a ttl: %d %q %v", code, buyer, err)
	}
	for _, args := range [][]string{
		{"token"},                        // no buyer
		{"token", "-buyer", "has space"}, // invalid buyer
		{"token", "-buyer", "x", "-ttl", "0s"},
		{"token", "-buyer", "x", "-ttl", "9999h"},
		{"token", "-nope"},
	} {
		if code, out, _ := run(args...); code == 0 || out != "" {
			t.Errorf("%v: exit %d, printed %q", args, code, out)
		}
	}
	if code, _, _ := run("token", "-h"); code != 0 {
		t.Errorf("token -h exited %d", code)
	}
	t.Setenv("CARDSHOP_TOKEN_SECRET", "short")
	if code, _, errOut := run("token", "-buyer", "x"); code != 1 || !strings.Contains(errOut, "CARDSHOP_TOKEN_SECRET") {
		t.Errorf("token with a short secret: %d %q", code, errOut)
	}

	// pay: the order is required, the secret must be there.
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	if code, _, errOut := run("pay"); code != 1 || !strings.Contains(errOut, "-order") {
		t.Errorf("pay without -order: %d %q", code, errOut)
	}
	if code, _, _ := run("pay", "-h"); code != 0 {
		t.Errorf("pay -h exited %d", code)
	}
	t.Setenv("CARDSHOP_ADMIN_TOKEN", "")
	if code, _, errOut := run("pay", "-order", "123", "-url", "http://"+freeAddr(t)); code != 1 || !strings.Contains(errOut, "CARDSHOP_ADMIN_TOKEN") {
		t.Errorf("pay without an amount or admin token: %d %q", code, errOut)
	}
	t.Setenv("CARDSHOP_PAYMENT_SECRET", "")
	if code, _, errOut := run("pay", "-order", "123", "-amount", "1"); code != 1 || !strings.Contains(errOut, "CARDSHOP_PAYMENT_SECRET") {
		t.Errorf("pay without a secret: %d %q", code, errOut)
	}

	// serve with a broken configuration fails at once, naming the problem.
	t.Setenv("CARDSHOP_ADAPTERS", "bogus")
	if code, _, errOut := run("serve"); code != 1 || !strings.Contains(errOut, "CARDSHOP_ADAPTERS") {
		t.Errorf("serve with bad config: %d %q", code, errOut)
	}
	if code, _, errOut := run("serve", "-h"); code != 0 || !strings.Contains(errOut, "CARDSHOP_ADAPTERS") {
		t.Errorf("serve -h: %d %q", code, errOut)
	}
}
