package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"cardshop/domain"
)

// Gate returns g with every call timed in cardshop_gate_duration_seconds{op}, op being the
// method's name. Results and errors pass through unchanged.
func (m *Metrics) Gate(g domain.StockGate) domain.StockGate {
	op := func(name string) prometheus.Observer { return m.gate.WithLabelValues(name) }
	return &timedGate{g: g,
		reserve: op("Reserve"), cancel: op("Cancel"), apply: op("Apply"), levels: op("Levels"), levelsMany: op("LevelsMany"),
		rebuild: op("Rebuild"), setFrozen: op("SetFrozen"), holds: op("Holds"), forget: op("Forget"),
		releaseOrphan: op("ReleaseOrphan"), beginRebuild: op("BeginRebuild"), finishRebuild: op("FinishRebuild"),
		abortRebuild: op("AbortRebuild"), setRules: op("SetRules"), heldCounts: op("HeldCounts"), couponCounts: op("CouponCounts"),
		gateTime: op("GateTime")}
}

// timedGate holds one observer per operation, resolved once: the hot path (Reserve) does no
// label lookup.
type timedGate struct {
	g                                                   domain.StockGate
	reserve, cancel, apply, levels, rebuild, setFrozen  prometheus.Observer
	holds, forget, releaseOrphan, levelsMany            prometheus.Observer
	beginRebuild, finishRebuild, abortRebuild, setRules prometheus.Observer
	heldCounts, couponCounts, gateTime                  prometheus.Observer
}

// errNoGateClock answers GateTime for a gate that cannot tell its time.
var errNoGateClock = errors.New("the stock gate has no clock of its own")

// GateTime passes domain.GateClock through when the gate has one (the catalogue measures the
// gate's clock through it).
func (t *timedGate) GateTime(ctx context.Context) (time.Time, error) {
	gc, ok := t.g.(domain.GateClock)
	if !ok {
		return time.Time{}, errNoGateClock
	}
	defer since(t.gateTime, time.Now())
	return gc.GateTime(ctx)
}

// SoldOutByLease passes domain.SoldOutLeases through when the gate keeps leases (the order's
// early sold-out answer asks it); it is not timed: it answers from memory.
func (t *timedGate) SoldOutByLease(r domain.Reservation) bool {
	l, ok := t.g.(domain.SoldOutLeases)
	return ok && l.SoldOutByLease(r)
}

func since(o prometheus.Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }

func (t *timedGate) Reserve(ctx context.Context, r domain.Reservation) (domain.ReserveResult, error) {
	defer since(t.reserve, time.Now())
	return t.g.Reserve(ctx, r)
}

func (t *timedGate) Cancel(ctx context.Context, r domain.Reservation) (bool, error) {
	defer since(t.cancel, time.Now())
	return t.g.Cancel(ctx, r)
}

func (t *timedGate) Apply(ctx context.Context, c domain.GateChange) (bool, error) {
	defer since(t.apply, time.Now())
	return t.g.Apply(ctx, c)
}

func (t *timedGate) Levels(ctx context.Context, p domain.ProductID) (domain.GateLevels, bool, error) {
	defer since(t.levels, time.Now())
	return t.g.Levels(ctx, p)
}

func (t *timedGate) LevelsMany(ctx context.Context, ids []domain.ProductID) (map[domain.ProductID]domain.GateLevels, error) {
	defer since(t.levelsMany, time.Now())
	return t.g.LevelsMany(ctx, ids)
}

func (t *timedGate) Rebuild(ctx context.Context, p domain.ProductID, l domain.GateLevels) error {
	defer since(t.rebuild, time.Now())
	return t.g.Rebuild(ctx, p, l)
}

func (t *timedGate) HeldCounts(ctx context.Context, p domain.ProductID) (map[domain.BuyerID]int64, error) {
	defer since(t.heldCounts, time.Now())
	return t.g.HeldCounts(ctx, p)
}

func (t *timedGate) CouponCounts(ctx context.Context, p domain.ProductID) (domain.CouponCounts, error) {
	defer since(t.couponCounts, time.Now())
	return t.g.CouponCounts(ctx, p)
}

func (t *timedGate) SetRules(ctx context.Context, p domain.ProductID, r domain.SaleRules) error {
	defer since(t.setRules, time.Now())
	return t.g.SetRules(ctx, p, r)
}

func (t *timedGate) SetFrozen(ctx context.Context, p domain.ProductID, frozen bool) error {
	defer since(t.setFrozen, time.Now())
	return t.g.SetFrozen(ctx, p, frozen)
}

func (t *timedGate) Holds(ctx context.Context, p domain.ProductID, minAge time.Duration, limit int) ([]domain.Hold, error) {
	defer since(t.holds, time.Now())
	return t.g.Holds(ctx, p, minAge, limit)
}

func (t *timedGate) Forget(ctx context.Context, p domain.ProductID, nos []domain.OrderNo) error {
	defer since(t.forget, time.Now())
	return t.g.Forget(ctx, p, nos)
}

func (t *timedGate) ReleaseOrphan(ctx context.Context, h domain.Hold) (bool, error) {
	defer since(t.releaseOrphan, time.Now())
	return t.g.ReleaseOrphan(ctx, h)
}

func (t *timedGate) BeginRebuild(ctx context.Context, p domain.ProductID, token string, ttl time.Duration) ([]domain.Hold, error) {
	defer since(t.beginRebuild, time.Now())
	return t.g.BeginRebuild(ctx, p, token, ttl)
}

func (t *timedGate) FinishRebuild(ctx context.Context, p domain.ProductID, plan domain.RebuildPlan) error {
	defer since(t.finishRebuild, time.Now())
	return t.g.FinishRebuild(ctx, p, plan)
}

func (t *timedGate) AbortRebuild(ctx context.Context, p domain.ProductID, token string) error {
	defer since(t.abortRebuild, time.Now())
	return t.g.AbortRebuild(ctx, p, token)
}

// Ledger returns l with every Atomically timed in cardshop_ledger_tx_duration_seconds (the
// whole call: retries and the error path included). The repositories (Products, Orders, …)
// are l's own, untimed.
func (m *Metrics) Ledger(l domain.Ledger) domain.Ledger {
	return &timedLedger{Ledger: l, tx: m.ledgerTx}
}

type timedLedger struct {
	domain.Ledger
	tx prometheus.Observer
}

func (t *timedLedger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	defer since(t.tx, time.Now())
	return t.Ledger.Atomically(ctx, fn)
}

// Notifier returns n with every attempt counted in cardshop_webhook_deliveries_total{outcome}
// and timed in cardshop_webhook_duration_seconds. Errors pass through unchanged.
func (m *Metrics) Notifier(n domain.Notifier) domain.Notifier {
	return &countedNotifier{n: n, delivered: m.webhooks.WithLabelValues("delivered"),
		failed: m.webhooks.WithLabelValues("failed"), time: m.webhookTime}
}

type countedNotifier struct {
	n                 domain.Notifier
	delivered, failed prometheus.Counter
	time              prometheus.Observer
}

func (c *countedNotifier) Notify(ctx context.Context, n domain.Notification) error {
	defer since(c.time, time.Now())
	err := c.n.Notify(ctx, n)
	if err != nil {
		c.failed.Inc()
	} else {
		c.delivered.Inc()
	}
	return err
}
