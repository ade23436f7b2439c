package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/console"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// soldOut asks for one unit of p through the buyer API and wants the sold-out answer.
func (h *harness) soldOut(p domain.Product, key string) {
	h.t.Helper()
	tok, _, err := h.tokens.Issue("buyer-2", h.clock.Now(), time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	r := h.do("POST", "/api/order", strings.NewReader(fmt.Sprintf(`{"product_id":%d,"qty":1}`, p.ID())),
		"Content-Type", "application/json", "Authorization", "Bearer "+tok, httpapi.HeaderIdempotencyKey, key)
	wantStatus(h.t, r, 409)
}

func TestDashboardShowsTheSaleToEveryRole(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("flash card", 500)
	h.paidOrder(p, []string{"CODE-0001"}, 1)
	h.soldOut(p, "key-0000002")
	h.soldOut(p, "key-0000003")
	if _, err := h.shop.Catalogue.CreateProduct(context.Background(), application.NewProduct{Name: "later card", Price: 500, MaxPerOrder: 1,
		Sale: domain.SaleRules{StartsAt: start.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	frozen := h.product("frozen card", 500)
	if err := h.shop.Catalogue.FreezeProduct(context.Background(), frozen.ID(), "test"); err != nil {
		t.Fatal(err)
	}

	for _, role := range []domain.Role{domain.RoleViewer, domain.RoleOperator, domain.RoleAdmin} {
		b := h.login(h.operator("op-"+string(role), role))
		r := b.get("/console/dashboard")
		wantStatus(t, r, 200)
		for _, want := range []string{"flash card", `data-field="paid">1<`, `data-field="stock">0<`,
			`data-field="success">100% of 1<`, "this instance only", `id="dash-alerts"`,
			`<script src="/console/static/dashboard.js" defer></script>`, `href="/console/dashboard"`,
			"later card</a> <span class=\"hint\">starts 2025-03-01 13:00:00 UTC</span>"} {
			if !strings.Contains(r.body, want) {
				t.Fatalf("%s: dashboard lacks %q:\n%s", role, want, r.body)
			}
		}
		if strings.Contains(r.body, "frozen card") {
			t.Fatalf("the dashboard shows a frozen product")
		}
	}
	wantLoginRedirect(t, h.do("GET", "/console/dashboard", nil))
	wantLoginRedirect(t, h.do("GET", "/console/dashboard/events", nil))

	js := h.do("GET", "/console/static/dashboard.js", nil)
	wantStatus(t, js, 200)
	if ct := js.header.Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Fatalf("dashboard.js served as %q, want a JavaScript type", ct)
	}
	if !strings.Contains(js.body, "EventSource") {
		t.Fatalf("dashboard.js: %s", js.body)
	}
}

// streamServer serves the harness's shop with the console configured by cfg on a real
// listener (an event stream needs one: Fiber's Test reads whole answers) and returns its address,
// an admin session cookie and a function that shuts the server down (also run at cleanup).
func streamServer(t *testing.T, h *harness, cfg console.Config) (string, string, func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	app := httpapi.New(httpapi.DefaultConfig(adminToken), apiServices(h.shop), h.tokens, h.clock, log)
	cfg.AdminToken, cfg.TokenSecret = adminToken, tokenSecret
	console.Mount(app, cfg, consoleServices(h.shop), h.clock, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			if err := app.ShutdownWithTimeout(5 * time.Second); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			<-served //nolint:errcheck // app.Listener's error after a shutdown says nothing
		})
	}
	t.Cleanup(shutdown)
	base := "http://" + ln.Addr().String()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r, err := noRedirect.PostForm(base+"/console/login", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Body.Close()
	for _, c := range r.Cookies() {
		if c.Name == console.CookieName {
			return base, c.Name + "=" + c.Value, shutdown
		}
	}
	t.Fatalf("login: %s, no cookie", r.Status)
	return "", "", nil
}

// openStream opens the event stream; cancel ends it from the client's side.
func openStream(t *testing.T, base, cookie string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/console/dashboard/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", cookie)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return r, cancel
}

// snapshot is the part of an event the test reads.
type snapshot struct {
	At       string `json:"at"`
	Products []struct {
		Name    string `json:"name"`
		Paid    int64  `json:"paid"`
		Stock   int64  `json:"stock"`
		SoldOut struct {
			Points string `json:"points"`
		} `json:"sold_out"`
	} `json:"products"`
	AlertsOpen int64                          `json:"alerts_open"`
	Ready      []struct{ Name, State string } `json:"ready"`
	Queues     []struct {
		Name     string `json:"name"`
		Messages int64  `json:"messages"`
	} `json:"queues"`
}

// nextSnapshot reads the stream up to its next snapshot event.
func nextSnapshot(t *testing.T, rd *bufio.Reader) snapshot {
	t.Helper()
	event := ""
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before a snapshot: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "snapshot":
			var s snapshot
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &s); err != nil {
				t.Fatalf("snapshot %q: %v", line, err)
			}
			return s
		}
	}
}

// waitFor polls ok for up to five seconds.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
	}
}

func TestDashboardEventsStreamSnapshotsAndEndWithTheClientOrTheService(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("flash card", 500)
	h.paidOrder(p, []string{"CODE-0001"}, 1)
	h.soldOut(p, "key-0000002")
	for _, a := range []domain.Alert{{Kind: "paid_unfulfilled", Product: p.ID(), OrderNo: "o-1"}, {Kind: "stock_inconsistency", Product: p.ID()}} {
		if _, err := h.ledger.Alerts().Raise(context.Background(), a, h.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	base, cookie, shutdown := streamServer(t, h, console.Config{DashboardEvery: 20 * time.Millisecond, DashboardStreams: 1,
		Stop: stop,
		Readiness: []webkit.ReadinessCheck{{Name: "mariadb", Check: func(context.Context) error { return nil }},
			{Name: "redis", Check: func(context.Context) error { return errors.New("down") }}},
		Queues: func(context.Context) (map[string]int64, error) { return map[string]int64{"order-timeouts": 7}, nil }})

	// This operator reads times in Shanghai's zone: the stream's copy of the shared snapshot is
	// in it (the harness clock's 12:00 UTC is 20:00 CST).
	r, cancel := openStream(t, base, cookie+"; "+console.ZoneCookieName+"=Asia/Shanghai")
	if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") ||
		r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("stream answer %s, %v", r.Status, r.Header)
	}
	rd := bufio.NewReader(r.Body)
	for range 2 {
		s := nextSnapshot(t, rd)
		if len(s.Products) != 1 || s.Products[0].Name != "flash card" || s.Products[0].Paid != 1 || s.Products[0].Stock != 0 ||
			s.Products[0].SoldOut.Points == "" || s.At != "2025-03-01 20:00:00 CST" || s.AlertsOpen != 2 {
			t.Fatalf("snapshot %+v", s)
		}
		if len(s.Ready) != 2 || s.Ready[0] != (struct{ Name, State string }{"mariadb", "ok"}) || s.Ready[1].State != "fail" {
			t.Fatalf("readiness %+v, want mariadb ok and redis fail", s.Ready)
		}
		if len(s.Queues) != 1 || s.Queues[0].Messages != 7 {
			t.Fatalf("queues %+v", s.Queues)
		}
	}

	// The only stream slot is taken: one more dashboard is refused, not queued.
	r2, cancel2 := openStream(t, base, cookie)
	_ = r2.Body.Close()
	cancel2()
	if r2.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream over the limit: %s, want 503", r2.Status)
	}

	// The client goes away: its stream ends and gives its slot back (the slot is released
	// when the stream's writer returns, so a new stream proves no writer goroutine is left).
	cancel()
	_ = r.Body.Close()
	var r3 *http.Response
	waitFor(t, "the slot of a closed stream is given back", func() bool {
		var c3 context.CancelFunc
		r3, c3 = openStream(t, base, cookie)
		if r3.StatusCode == 200 {
			return true
		}
		_ = r3.Body.Close()
		c3()
		return false
	})

	// The service stops: the open stream ends at once, so the graceful shutdown need not wait.
	close(stop)
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, r3.Body); ended <- err }()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("stream ended with %v, want a clean end", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end when the service stopped")
	}
	_ = r3.Body.Close()

	// No goroutine is left running the console's code (a stream's writer, a sampler's read),
	// while the server still runs: the streams did not wait for its shutdown.
	waitFor(t, "no goroutine runs the console's code", func() bool {
		buf := make([]byte, 1<<20)
		return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("cardshop/adapters/console."))
	})
	shutdown()
}
