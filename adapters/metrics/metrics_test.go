package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"cardshop/adapters/memory"
	"cardshop/adapters/metrics"
	"cardshop/domain"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// histogramCount returns how many observations the histogram name{label=value} holds.
func histogramCount(t *testing.T, reg prometheus.Gatherer, name, label, value string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || hasLabel(m, label, value) {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// The gate decorator times every operation under its own name and changes no result or error.
func TestGatePassesThroughAndTimes(t *testing.T) {
	m := metrics.New()
	ctx := context.Background()
	clock := memory.NewFakeClock(start)
	raw := memory.NewGate(clock)
	g := m.Gate(raw)
	const p = domain.ProductID(7)

	if err := g.Rebuild(ctx, p, domain.GateLevels{Stock: 2}); err != nil {
		t.Fatal(err)
	}
	r := domain.Reservation{Product: p, Buyer: "b", Key: "key-00000001", Qty: 2, OrderNo: "o1", Fingerprint: "7:2", KeyTTL: time.Minute}
	res, err := g.Reserve(ctx, r)
	if err != nil || res.Outcome != domain.Reserved || res.Left != 0 {
		t.Fatalf("reserve: %+v, %v", res, err)
	}
	r2 := r
	r2.Key, r2.OrderNo, r2.Qty = "key-00000002", "o2", 1
	if res, err := g.Reserve(ctx, r2); err != nil || res.Outcome != domain.SoldOut {
		t.Fatalf("second reserve: %+v, %v", res, err)
	}
	// A ValidationError passes through unchanged.
	bad := r
	bad.Qty = 0
	_, err = g.Reserve(ctx, bad)
	var ve *domain.ValidationError
	if _, rawErr := raw.Reserve(ctx, bad); !errors.As(err, &ve) || err.Error() != rawErr.Error() {
		t.Fatalf("invalid reserve: %v, want %v", err, rawErr)
	}
	holds, err := g.Holds(ctx, p, 0, 10)
	if err != nil || len(holds) != 1 || holds[0].OrderNo != "o1" {
		t.Fatalf("holds: %+v, %v", holds, err)
	}
	if ok, err := g.ReleaseOrphan(ctx, holds[0]); err != nil || !ok {
		t.Fatalf("release orphan: %v, %v", ok, err)
	}
	if ok, err := g.Cancel(ctx, r); err != nil || ok {
		t.Fatalf("cancel after release: %v, %v", ok, err)
	}
	if ok, err := g.Apply(ctx, domain.GateChange{Product: p, Ref: "import-1", Stock: 3}); err != nil || !ok {
		t.Fatalf("apply: %v, %v", ok, err)
	}
	if err := g.Forget(ctx, p, []domain.OrderNo{"o1"}); err != nil {
		t.Fatal(err)
	}
	if err := g.SetFrozen(ctx, p, true); err != nil {
		t.Fatal(err)
	}
	l, ok, err := g.Levels(ctx, p)
	if want, _, _ := raw.Levels(ctx, p); err != nil || !ok || l != want || l.Stock != 5 || !l.Frozen {
		t.Fatalf("levels: %+v %v %v, raw %+v", l, ok, err, want)
	}
	if _, ok, _ := g.Levels(ctx, 99); ok {
		t.Fatal("levels of an unknown product: ok")
	}
	if many, err := g.LevelsMany(ctx, []domain.ProductID{p, 99}); err != nil || len(many) != 1 || many[p] != l {
		t.Fatalf("levels many: %+v %v, want only %d with %+v", many, err, p, l)
	}
	gc, ok := g.(domain.GateClock)
	if !ok {
		t.Fatal("the timed gate hides the gate's clock")
	}
	if at, err := gc.GateTime(ctx); err != nil || !at.Equal(clock.Now()) {
		t.Fatalf("gate time: %v %v, want the gate's clock %v", at, err, clock.Now())
	}

	for op, want := range map[string]uint64{"Reserve": 3, "Cancel": 1, "Apply": 1, "Levels": 2, "LevelsMany": 1, "Rebuild": 1,
		"SetFrozen": 1, "Holds": 1, "Forget": 1, "ReleaseOrphan": 1, "GateTime": 1} {
		if got := histogramCount(t, m.Registry(), "cardshop_gate_duration_seconds", "op", op); got != want {
			t.Errorf("op %s: %d observations, want %d", op, got, want)
		}
	}
}

// leasedGate is a memory gate whose lease covers the product it names.
type leasedGate struct {
	*memory.Gate
	p domain.ProductID
}

func (g leasedGate) SoldOutByLease(r domain.Reservation) bool { return r.Product == g.p }

// The timed gate passes domain.SoldOutLeases through, and says false for a gate without leases.
func TestGateSoldOutByLeasePassesThrough(t *testing.T) {
	m := metrics.New()
	raw := memory.NewGate(memory.NewFakeClock(start))
	leases, ok := m.Gate(leasedGate{Gate: raw, p: 7}).(domain.SoldOutLeases)
	if !ok || !leases.SoldOutByLease(domain.Reservation{Product: 7}) || leases.SoldOutByLease(domain.Reservation{Product: 8}) {
		t.Fatal("the timed gate does not pass the lease's answers through")
	}
	if m.Gate(raw).(domain.SoldOutLeases).SoldOutByLease(domain.Reservation{Product: 7}) {
		t.Fatal("a gate without leases answered sold out by lease")
	}
}

// The ledger decorator times Atomically, commits and rolls back exactly as the ledger does,
// and hands out the ledger's own repositories.
func TestLedgerPassesThroughAndTimes(t *testing.T) {
	m := metrics.New()
	ctx := context.Background()
	raw := memory.NewLedger()
	l := m.Ledger(raw)

	p, err := domain.NewProduct(1, "Gift", 500, 2, start)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Atomically(ctx, func(tx domain.Store) error {
		_, err := tx.Products().Create(ctx, p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	p2, _ := domain.NewProduct(2, "Gone", 500, 2, start)
	err = l.Atomically(ctx, func(tx domain.Store) error {
		if _, err := tx.Products().Create(ctx, p2); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Atomically returned %v, want the function's own error", err)
	}
	if _, err := l.Products().Product(ctx, 1); err != nil {
		t.Fatalf("committed product: %v", err)
	}
	if _, err := raw.Products().Product(ctx, 2); !errors.Is(err, domain.ErrProductNotFound) {
		t.Fatalf("rolled-back product: %v", err)
	}
	if _, err := l.Products().Product(ctx, 2); !errors.Is(err, domain.ErrProductNotFound) {
		t.Fatalf("getter through the decorator: %v", err)
	}
	if got := histogramCount(t, m.Registry(), "cardshop_ledger_tx_duration_seconds", "", ""); got != 2 {
		t.Fatalf("%d transactions observed, want 2", got)
	}
}

// Values read at scrape time: the outbox backlog (left out when it fails), the delay queue
// and the ledger retries.
func TestScrapeTimeValues(t *testing.T) {
	m := metrics.New()
	var fail error
	m.WatchOutboxBacklog(func(ctx context.Context) (int64, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("backlog read without a deadline")
		}
		return 4, fail
	})
	m.WatchDelayQueue(func() int { return 3 })
	m.WatchLedgerRetries(map[string]func() int64{"deadlock": func() int64 { return 2 }, "lock_wait_timeout": func() int64 { return 0 }})
	m.ReconcileDifferences(3)
	m.ReconcileDifferences(0)

	want := `
# HELP cardshop_delay_queue_pending Order closes scheduled and not yet delivered (in-memory delay queue).
# TYPE cardshop_delay_queue_pending gauge
cardshop_delay_queue_pending 3
# HELP cardshop_ledger_retries_total Ledger transactions run again, by reason.
# TYPE cardshop_ledger_retries_total counter
cardshop_ledger_retries_total{reason="deadlock"} 2
cardshop_ledger_retries_total{reason="lock_wait_timeout"} 0
# HELP cardshop_outbox_backlog Outbox messages not yet relayed.
# TYPE cardshop_outbox_backlog gauge
cardshop_outbox_backlog 4
# HELP cardshop_reconcile_differences_total Differences found by reconciliations, summed over every run.
# TYPE cardshop_reconcile_differences_total counter
cardshop_reconcile_differences_total 3
`
	names := []string{"cardshop_delay_queue_pending", "cardshop_ledger_retries_total", "cardshop_outbox_backlog", "cardshop_reconcile_differences_total"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	fail = errors.New("database down")
	if n, err := testutil.GatherAndCount(m.Registry(), "cardshop_outbox_backlog"); err != nil || n != 0 {
		t.Fatalf("backlog with a failing read: %d series, %v", n, err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "cardshop_delay_queue_pending 3") {
		t.Fatalf("handler: %d %s", rec.Code, rec.Body)
	}
}

// Two instances have their own registries: nothing collides, nothing is shared.
func TestInstancesDoNotCollide(t *testing.T) {
	a, b := metrics.New(), metrics.New()
	a.Order("created")
	a.Order("created")
	b.Order("created")
	for m, want := range map[*metrics.Metrics]string{a: "2", b: "1"} {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if line := `cardshop_orders_total{outcome="created"} ` + want; !strings.Contains(rec.Body.String(), line+"\n") {
			t.Errorf("no line %q", line)
		}
	}
}

// The webhook decorator counts each attempt by outcome, times it, and passes errors through.
func TestNotifierCountsAttempts(t *testing.T) {
	m := metrics.New()
	raw := memory.NewNotifier()
	n := m.Notifier(raw)
	raw.FailNext(2)
	ctx := context.Background()
	var errs int
	for range 5 {
		if err := n.Notify(ctx, domain.Notification{ID: "e1", Type: "order.delivered"}); err != nil {
			if !errors.Is(err, domain.ErrUnavailable) {
				t.Fatalf("Notify error %v, want the notifier's own", err)
			}
			errs++
		}
	}
	if errs != 2 || len(raw.Sent()) != 3 {
		t.Fatalf("%d errors, %d sent; want 2 and 3", errs, len(raw.Sent()))
	}
	m.WatchWebhookBacklog(func(context.Context) (int64, error) { return 7, nil })
	m.WatchMailBacklog(func(context.Context) (int64, error) { return 2, nil })
	want := `
# HELP cardshop_mail_backlog Order e-mails not yet sent to buyers (nor given up).
# TYPE cardshop_mail_backlog gauge
cardshop_mail_backlog 2
# HELP cardshop_webhook_backlog Webhook events not yet accepted by the storefront.
# TYPE cardshop_webhook_backlog gauge
cardshop_webhook_backlog 7
# HELP cardshop_webhook_deliveries_total Attempts to deliver an event to the storefront's webhook, by outcome: delivered (2xx) or failed (retried later).
# TYPE cardshop_webhook_deliveries_total counter
cardshop_webhook_deliveries_total{outcome="delivered"} 3
cardshop_webhook_deliveries_total{outcome="failed"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "cardshop_mail_backlog", "cardshop_webhook_backlog", "cardshop_webhook_deliveries_total"); err != nil {
		t.Fatal(err)
	}
	if got := histogramCount(t, m.Registry(), "cardshop_webhook_duration_seconds", "", ""); got != 5 {
		t.Fatalf("%d attempts timed, want 5", got)
	}
}

// Queue depths are read at scrape time, one series per queue, none when the read fails.
func TestQueueDepths(t *testing.T) {
	m := metrics.New()
	var fail error
	m.WatchQueueDepths(func(ctx context.Context) (map[string]int, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("queue depths read without a deadline")
		}
		return map[string]int{"order-timeouts": 2, "delay.900000": 5}, fail
	})
	want := `
# HELP cardshop_broker_queue_messages Messages ready in each RabbitMQ queue of the service (a delay bucket's message carries a group of order closes).
# TYPE cardshop_broker_queue_messages gauge
cardshop_broker_queue_messages{queue="delay.900000"} 5
cardshop_broker_queue_messages{queue="order-timeouts"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "cardshop_broker_queue_messages"); err != nil {
		t.Fatal(err)
	}
	fail = errors.New("broker down")
	if n, err := testutil.GatherAndCount(m.Registry(), "cardshop_broker_queue_messages"); err != nil || n != 0 {
		t.Fatalf("with a failing read: %d series, %v", n, err)
	}
}

// The close schedule's confirms are read at scrape time.
func TestCloseConfirms(t *testing.T) {
	m := metrics.New()
	unconfirmed, lost := int64(7), int64(0)
	m.WatchCloseConfirms(func() (int64, int64) { return unconfirmed, lost })
	want := func(u, l int64) {
		t.Helper()
		exp := fmt.Sprintf(`
# HELP cardshop_close_schedule_lost_total Placed orders answered before their close message was confirmed whose message then failed; the sweeper closes them.
# TYPE cardshop_close_schedule_lost_total counter
cardshop_close_schedule_lost_total %d
# HELP cardshop_close_schedule_unconfirmed Placed orders answered before the message scheduling their close was confirmed, still unconfirmed.
# TYPE cardshop_close_schedule_unconfirmed gauge
cardshop_close_schedule_unconfirmed %d
`, l, u)
		if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(exp), "cardshop_close_schedule_unconfirmed", "cardshop_close_schedule_lost_total"); err != nil {
			t.Fatal(err)
		}
	}
	want(7, 0)
	unconfirmed, lost = 0, 3
	want(0, 3)
}

// The group commit's measurements: a batch's size, each member's wait, each fallback by
// reason (every reason exported at 0 from the start).
func TestLedgerBatchMeasurements(t *testing.T) {
	m := metrics.New()
	m.LedgerBatchSize(3)
	m.LedgerBatchSize(1)
	for range 4 {
		m.LedgerBatchWait(200 * time.Microsecond)
	}
	m.LedgerBatchFallback("duplicate_key")
	if got := histogramCount(t, m.Registry(), "cardshop_ledger_batch_size", "", ""); got != 2 {
		t.Errorf("%d batch sizes observed, want 2", got)
	}
	if got := histogramCount(t, m.Registry(), "cardshop_ledger_batch_wait_seconds", "", ""); got != 4 {
		t.Errorf("%d batch waits observed, want 4", got)
	}
	want := `
# HELP cardshop_ledger_batch_fallbacks_total Group-committed batches rolled back and written one order at a time, by reason: duplicate_key, unavailable, error.
# TYPE cardshop_ledger_batch_fallbacks_total counter
cardshop_ledger_batch_fallbacks_total{reason="duplicate_key"} 1
cardshop_ledger_batch_fallbacks_total{reason="error"} 0
cardshop_ledger_batch_fallbacks_total{reason="unavailable"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "cardshop_ledger_batch_fallbacks_total"); err != nil {
		t.Error(err)
	}
}

// The gate's sold-out leases: answers given under one, and leases granted or refused (both
// results exported at 0 from the start).
func TestGateLeaseMeasurements(t *testing.T) {
	m := metrics.New()
	want := `
# HELP cardshop_gate_leases_total Sold-out leases asked of Redis by result: granted, or refused (the product has stock again, is frozen, fenced or outside its sale window).
# TYPE cardshop_gate_leases_total counter
cardshop_gate_leases_total{result="granted"} 0
cardshop_gate_leases_total{result="refused"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "cardshop_gate_leases_total"); err != nil {
		t.Fatal(err)
	}
	m.GateLeaseGrant(true)
	m.GateLeaseGrant(false)
	m.GateLeaseGrant(false)
	for range 5 {
		m.GateLeaseAnswer()
	}
	want = `
# HELP cardshop_gate_lease_answers_total New orders the gate answered sold out under a sold-out lease, without a Redis round trip.
# TYPE cardshop_gate_lease_answers_total counter
cardshop_gate_lease_answers_total 5
# HELP cardshop_gate_leases_total Sold-out leases asked of Redis by result: granted, or refused (the product has stock again, is frozen, fenced or outside its sale window).
# TYPE cardshop_gate_leases_total counter
cardshop_gate_leases_total{result="granted"} 1
cardshop_gate_leases_total{result="refused"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "cardshop_gate_lease_answers_total", "cardshop_gate_leases_total"); err != nil {
		t.Error(err)
	}
}

// Refused payment notifications are exported by provider and reason, read at scrape time.
func TestRefusedNotifications(t *testing.T) {
	m := metrics.New()
	counts := map[[2]string]int64{{"epay", "bad_signature"}: 10000, {"epay", "invalid"}: 3, {"stripe", "bad_signature"}: 0}
	m.WatchRefusedNotifications(func(add func(provider, reason string, n int64)) {
		for k, n := range counts {
			add(k[0], k[1], n)
		}
	})
	want := `
# HELP cardshop_payment_notifications_refused_total Payment notifications refused before verification, by provider and reason (bad_signature, invalid, unavailable, other); the notification log keeps them as one record per provider, sender address and minute.
# TYPE cardshop_payment_notifications_refused_total counter
cardshop_payment_notifications_refused_total{provider="epay",reason="bad_signature"} 10000
cardshop_payment_notifications_refused_total{provider="epay",reason="invalid"} 3
cardshop_payment_notifications_refused_total{provider="stripe",reason="bad_signature"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "cardshop_payment_notifications_refused_total"); err != nil {
		t.Fatal(err)
	}
}

// TestBotRefusals: every reason is exported from registration on (zero included) and each
// scrape reads the counts anew.
func TestBotRefusals(t *testing.T) {
	m := metrics.New()
	var blocked atomic.Int64
	m.WatchBotRefusals(func() map[string]int64 {
		return map[string]int64{"blocked_ip": blocked.Load(), "human_failed": 0}
	})
	want := func(ip int64) string {
		return fmt.Sprintf(`
# HELP cardshop_bot_refusals_total Buyers refused by the bot defence (or let through unchecked: human_passed_open), by reason.
# TYPE cardshop_bot_refusals_total counter
cardshop_bot_refusals_total{reason="blocked_ip"} %d
cardshop_bot_refusals_total{reason="human_failed"} 0
`, ip)
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want(0)), "cardshop_bot_refusals_total"); err != nil {
		t.Fatal(err)
	}
	blocked.Store(3)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want(3)), "cardshop_bot_refusals_total"); err != nil {
		t.Fatal(err)
	}
}
