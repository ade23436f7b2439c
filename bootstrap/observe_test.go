package bootstrap_test

import (
	"runtime"
	"strings"
	"testing"

	"go.uber.org/fx"

	"cardshop/bootstrap"
)

// Both adapter sets wire, metrics decorators and readiness checks included.
func TestModuleValidatesBothAdapterSets(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{bootstrap.AdaptersMemory, bootstrap.AdaptersReal} {
		cfg.Adapters = set
		if err := fx.ValidateApp(bootstrap.Module(cfg), fx.NopLogger); err != nil {
			t.Errorf("%s adapter set: %v", set, err)
		}
	}
}

// The memory service is ready at once and its /metrics shows the timed gate and ledger (the
// decorators reach the use cases), the outbox backlog and the delay queue.
func TestMemoryServiceMetricsAndReadiness(t *testing.T) {
	c := startService(t)

	var ready struct {
		Status string `json:"status"`
	}
	c.want(200, "GET", "/readyz", "", "", &ready)
	if ready.Status != "ready" {
		t.Fatalf("readyz status %q", ready.Status)
	}
	c.want(201, "POST", "/admin/products", adminToken, `{"id":7,"name":"Metered","price":100,"max_per_order":1}`, nil)
	c.want(200, "POST", "/admin/products/7/codes", adminToken, "METER-0001", nil)
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"meter"}`, &tok)
	c.want(201, "POST", "/api/order", tok.Token, `{"product_id":7,"qty":1}`, nil, "Idempotency-Key", "meter-key-0001")
	// The service wires the bot defence: a blocked address is refused and counted.
	c.want(201, "POST", "/admin/blocklist", adminToken, `{"kind":"ip","value":"127.0.0.0/8"}`, nil)
	c.want(403, "POST", "/api/order", tok.Token, `{"product_id":7,"qty":1}`, nil, "Idempotency-Key", "meter-key-0002")

	status, body := c.do("GET", "/metrics", "", "")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	out := string(body)
	for _, want := range []string{
		`cardshop_orders_total{outcome="created"} 1`,
		`cardshop_gate_duration_seconds_count{op="Reserve"} 1`,
		`cardshop_ledger_tx_duration_seconds_count `,
		`cardshop_outbox_backlog `,
		`cardshop_delay_queue_pending 1`,
		`cardshop_bot_refusals_total{reason="blocked_ip"} 1`,
		`cardshop_bot_refusals_total{reason="human_passed_open"} 0`,
		`go_goroutines `,
		// The release the instance runs (a test binary: the module's "(devel)").
		`cardshop_build_info{commit=`,
		`goversion="` + runtime.Version() + `",version="(devel)"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(out, "cardshop_ledger_retries_total") {
		t.Error("the memory set exports MySQL retries")
	}
}
