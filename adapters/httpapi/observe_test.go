package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
	"cardshop/adapters/metrics"
	"cardshop/adapters/paysig"
	"cardshop/adapters/webkit"
)

func withMetrics(m *metrics.Metrics) option {
	return func(c *httpapi.Config) { c.Metrics = m }
}

func withReadiness(checks ...webkit.ReadinessCheck) option {
	return func(c *httpapi.Config) { c.Readiness = checks }
}

// scrape reads GET /metrics: no token needed.
func (h *harness) scrape() string {
	h.t.Helper()
	r := h.do("GET", "/metrics", nil)
	wantStatus(h.t, r, 200)
	return string(r.body)
}

func wantLine(t *testing.T, exposition, line string) {
	t.Helper()
	for _, l := range strings.Split(exposition, "\n") {
		if l == line {
			return
		}
	}
	t.Errorf("/metrics has no line %q", line)
}

// Orders and callbacks are counted by outcome, requests are timed by route pattern, and no
// order number, buyer id or code reaches the metrics.
func TestMetricsCountOutcomesWithoutIdentifiers(t *testing.T) {
	m := metrics.New()
	h := newHarness(t, withMetrics(m))
	h.createProduct(1, 500, 2)
	h.importCodes(1, "METRIC-CODE-0001", "METRIC-CODE-0002")
	const buyer = "metrics-buyer-7f3a"
	tok := h.token(buyer)

	o := h.placeOrder(tok, "key-m0000001", 1, 2)
	wantStatus(t, h.order(tok, "key-m0000001", `{"product_id":1,"qty":2}`), 200)
	wantError(t, h.order(tok, "key-m0000002", `{"product_id":1,"qty":1}`), 409, "sold_out")
	wantError(t, h.order("", "key-m0000003", `{"product_id":1,"qty":1}`), 401, "unauthorized")
	wantError(t, h.callback(paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: o.Amount + 1, PaymentRef: "m-1"}), 422, "amount_mismatch")
	h.pay(o)
	r := h.do("POST", "/api/payments/callback", strings.NewReader(`{}`), paysig.HeaderTimestamp, "1", paysig.HeaderSignature, "00")
	wantError(t, r, 401, "invalid_signature")
	got := h.getOrder(tok, o.OrderNo)
	wantStatus(t, got, 200)
	wantError(t, h.do("GET", "/no/such/route-"+o.OrderNo, nil), 404, "route_not_found")
	wantStatus(t, h.admin("GET", "/admin/products/1/reconcile", ""), 200)

	out := h.scrape()
	for _, l := range []string{
		`cardshop_orders_total{outcome="created"} 1`,
		`cardshop_orders_total{outcome="replayed"} 1`,
		`cardshop_orders_total{outcome="sold_out"} 1`,
		`cardshop_orders_total{outcome="rejected"} 1`,
		`cardshop_orders_total{outcome="frozen"} 0`,
		`cardshop_orders_total{outcome="error"} 0`,
		`cardshop_callbacks_total{outcome="success"} 1`,
		`cardshop_callbacks_total{outcome="amount_mismatch"} 1`,
		`cardshop_callbacks_total{outcome="invalid_signature"} 1`,
		`cardshop_callbacks_total{outcome="error"} 0`,
		`cardshop_http_request_duration_seconds_count{method="POST",route="/api/order",status_class="2xx"} 2`,
		`cardshop_http_request_duration_seconds_count{method="POST",route="/api/order",status_class="4xx"} 2`,
		`cardshop_http_request_duration_seconds_count{method="GET",route="/api/orders/:order_no",status_class="2xx"} 1`,
		`cardshop_http_request_duration_seconds_count{method="GET",route="unmatched",status_class="4xx"} 1`,
		`cardshop_reconcile_differences_total 0`,
	} {
		wantLine(t, out, l)
	}
	if !strings.Contains(out, `cardshop_http_request_duration_seconds_bucket{method="POST",route="/api/order",status_class="2xx",le="0.001"}`) {
		t.Error("no histogram bucket line for POST /api/order")
	}
	if !strings.Contains(out, "go_goroutines ") || !strings.Contains(out, "process_") {
		t.Error("no Go runtime or process metrics")
	}
	for _, secret := range []string{o.OrderNo, buyer, "METRIC-CODE", tok, "key-m000000"} {
		if strings.Contains(out, secret) {
			t.Errorf("/metrics holds %q", secret)
		}
	}
}

// A reconciliation that finds differences adds them to the counter.
func TestMetricsCountReconcileDifferences(t *testing.T) {
	m := metrics.New()
	h := newHarness(t, withMetrics(m))
	h.createProduct(1, 500, 2)
	h.importCodes(1, "RECON-CODE-0001", "RECON-CODE-0002")
	l := h.levels(1)
	l.Stock += 3 // the gate promises more than the pool holds
	if err := h.gate.Rebuild(context.Background(), 1, l); err != nil {
		t.Fatal(err)
	}
	r := h.admin("GET", "/admin/products/1/reconcile", "")
	wantStatus(t, r, 200)
	var rep struct {
		Differences int `json:"differences"`
	}
	if err := json.Unmarshal(r.body, &rep); err != nil || rep.Differences == 0 {
		t.Fatalf("reconcile found no differences: %s", r.body)
	}
	wantLine(t, h.scrape(), fmt.Sprintf("cardshop_reconcile_differences_total %d", rep.Differences))
}

type readyJSON struct {
	Status  string            `json:"status"`
	Checks  map[string]string `json:"checks"`
	Failing []string          `json:"failing"`
}

func TestReadyz(t *testing.T) {
	ok := func(context.Context) error { return nil }
	t.Run("no checks: ready", func(t *testing.T) {
		h := newHarness(t)
		r := h.do("GET", "/readyz", nil)
		wantStatus(t, r, 200)
		var got readyJSON
		r.decode(t, &got)
		if got.Status != "ready" || len(got.Checks) != 0 {
			t.Fatalf("readyz %s", r.body)
		}
	})
	t.Run("every check passes", func(t *testing.T) {
		h := newHarness(t, withReadiness(webkit.ReadinessCheck{Name: "redis", Check: ok}, webkit.ReadinessCheck{Name: "mysql", Check: ok}))
		r := h.do("GET", "/readyz", nil)
		wantStatus(t, r, 200)
		var got readyJSON
		r.decode(t, &got)
		if got.Status != "ready" || got.Checks["redis"] != "ok" || got.Checks["mysql"] != "ok" || len(got.Failing) != 0 {
			t.Fatalf("readyz %s", r.body)
		}
	})
	t.Run("a failing and a hanging check: 503 naming them, no error text", func(t *testing.T) {
		hang := make(chan struct{})
		t.Cleanup(func() { close(hang) })
		h := newHarness(t, withReadiness(
			webkit.ReadinessCheck{Name: "redis", Check: ok},
			webkit.ReadinessCheck{Name: "mysql", Check: func(context.Context) error { return errors.New("dial tcp 10.0.0.7:3306: secret detail") }},
			webkit.ReadinessCheck{Name: "rabbitmq", Check: func(context.Context) error { <-hang; return nil }},
		), func(c *httpapi.Config) { c.ReadinessTimeout = 50 * time.Millisecond })
		r := h.do("GET", "/readyz", nil)
		wantStatus(t, r, 503)
		var got readyJSON
		r.decode(t, &got)
		if got.Status != "not_ready" || got.Checks["redis"] != "ok" || got.Checks["mysql"] != "fail" || got.Checks["rabbitmq"] != "timeout" ||
			strings.Join(got.Failing, ",") != "mysql,rabbitmq" {
			t.Fatalf("readyz %s", r.body)
		}
		if strings.Contains(string(r.body), "secret detail") || strings.Contains(string(r.body), "10.0.0.7") {
			t.Fatalf("readyz leaks the error text: %s", r.body)
		}
		if !strings.Contains(h.logs.String(), "secret detail") {
			t.Error("the failing check's error was not logged")
		}
	})
}

// /metrics and /readyz are never rate limited.
func TestProbesAreNotRateLimited(t *testing.T) {
	opt, _, lim := limited(httpapi.RateLimits{PerIP: 1, PerBuyer: 1, Window: time.Hour})
	h := newHarness(t, withMetrics(metrics.New()), opt)
	for range 5 {
		wantStatus(t, h.do("GET", "/readyz", nil), 200)
		wantStatus(t, h.do("GET", "/metrics", nil), 200)
	}
	if calls := lim.calls(); len(calls) != 0 {
		t.Fatalf("probes charged the limiter: %v", calls)
	}
}
