// Package historytest is the concurrent history test: N workers issue random use cases against
// one App at the same time, with random short pauses, over a few products with small pools;
// at checkpoints the workers stop, everything in flight settles (timeouts held back, the
// outbox drained) and every invariant is checked. A Backend supplies the driven ports — the
// memory adapters, or Redis, MariaDB and RabbitMQ — and the same history runs on either. The
// payment providers are the history's own, in process (providers.go): each keeps a ledger of
// the money it received and paid out, which the checks read as the provider's truth.
//
// Each worker i draws every random choice from its own generator, PCG(HISTORY_SEED, i). The
// seed fixes each worker's stream of draws; which orders a draw lands on depends on how the
// goroutines were scheduled, so a replay with the same seed runs the same operation streams,
// not the same interleaving. Settings (environment): HISTORY_SEED (default: random, printed),
// HISTORY_DURATION (default: the backend's CI budget), HISTORY_WORKERS (default 12),
// HISTORY_CHECK_EVERY (time between checkpoints, default 3s), HISTORY_MIX (weights replacing
// the defaults of opWeights, e.g. "repair=0" leaves the gate rebuilds out, "repair=100,pay-late=0"
// aims at them alone).
package historytest

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/paysig"
	"cardshop/application"
	"cardshop/domain"
)

// Ports are the driven adapters a Backend provides; the driver builds the App on them with
// its own verifier (paysig), alert recorder and a recorder around Publisher.
type Ports struct {
	Ledger    domain.Ledger
	Gate      domain.StockGate
	Queue     domain.DelayQueue
	Publisher domain.EventPublisher
	Clock     domain.Clock
	// Consume registers the handler of due order timeouts (the delay queue's consumer).
	Consume func(handler func(context.Context, domain.OrderNo) error)
	// NewProductID returns an id no other test or run uses; nil lets the catalogue choose.
	NewProductID func() domain.ProductID
}

// Backend is one adapter set the history runs on.
type Backend struct {
	Name string
	// Package is the package path to replay the test in, e.g. "./application/".
	Package string
	// Duration is the default length of a run (the CI budget).
	Duration time.Duration
	// Open returns the ports for an App with cfg (the delay queue needs the order timeout). It
	// stops the test (porttest.RequireService) when a service cannot be reached.
	Open func(t *testing.T, cfg application.Config) Ports
}

// Config is the App configuration of a history: orders expire within a second, so late
// payments, the sweeper and the delay queue all take part; idempotency keys are forgotten
// after a few seconds, so replays also reach the ledger's unique (buyer, key).
func Config() application.Config {
	c := application.DefaultConfig()
	c.OrderTimeout = time.Second
	c.IdempotencyTTL = 3 * time.Second
	c.OrphanAfter = 10 * time.Second
	c.RebuildDelay = 200 * time.Millisecond
	// A provider that cannot close a payment holds its order's close back this long past the
	// expiry; then the order closes and a payment still made there takes the late path.
	c.PaymentCloseGrace = 500 * time.Millisecond
	// Guest orders too (the storefront's): each paid one records its e-mail.
	c.OrderAccessKey = "history-order-access-key-0123456789"
	return c
}

const (
	productsN     = 3 // the products of the first histories; then the window and the scenarios' products
	windowProduct = productsN
	freezeProduct = productsN + 1 // refundThenFulfil's scenario (it freezes the product)
	limitProduct  = productsN + 2 // limitLate's scenario
	multiProduct  = 1             // a drawn product of multi-use codes
	multiUses     = 3             // how many times each of its codes is sold
	maxPerOrder   = 3
	initialCodes  = 12
	buyersN       = 6
	recentWindow  = 300 // workers pick orders among the last ones placed: contention
	logKeep       = 400 // operations kept for the failure report
	tailLines     = 60
	maxViolations = 40
	callbackKey   = "history-callback-secret-0123456789"
	drainTimeout  = 30 * time.Second
)

// settings are a run's knobs, from the environment.
type settings struct {
	seed       uint64
	duration   time.Duration
	workers    int
	checkEvery time.Duration
	mix        map[string]int // operation weights
	mixSpec    string
}

func loadSettings(t *testing.T, def time.Duration) settings {
	t.Helper()
	s := settings{seed: rand.Uint64() >> 1, duration: def, workers: 12, checkEvery: 3 * time.Second, mix: map[string]int{}}
	for name, w := range opWeights {
		s.mix[name] = w
	}
	if v := os.Getenv("HISTORY_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HISTORY_SEED=%q: want an unsigned integer", v)
		}
		s.seed = n
	}
	dur := func(name string, into *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a positive duration like 15s or 10m", name, v)
			}
			*into = d
		}
	}
	dur("HISTORY_DURATION", &s.duration)
	dur("HISTORY_CHECK_EVERY", &s.checkEvery)
	if v := os.Getenv("HISTORY_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 256 {
			t.Fatalf("HISTORY_WORKERS=%q: want 1 to 256", v)
		}
		s.workers = n
	}
	s.mixSpec = strings.TrimSpace(os.Getenv("HISTORY_MIX"))
	for _, item := range strings.Split(s.mixSpec, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, weight, _ := strings.Cut(item, "=")
		n, err := strconv.Atoi(weight)
		if _, known := opWeights[name]; !known || err != nil || n < 0 {
			t.Fatalf("HISTORY_MIX item %q: want operation=weight (weight ≥ 0) with an operation of: %s", item, strings.Join(opNames(), ", "))
		}
		s.mix[name] = n
	}
	return s
}

// product is one product of the run, with its sale rules.
type product struct {
	id    domain.ProductID
	price domain.Money
	rules domain.SaleRules
}

// orderRec is what the history knows of an order it placed.
type orderRec struct {
	no      domain.OrderNo
	product domain.ProductID
	buyer   domain.BuyerID
	key     string
	qty     int
	amount  domain.Money
	coupon  domain.CouponCode // the coupon it was placed with, or ""
	expires time.Time

	hint     atomic.Int32 // the status last seen, to aim operations; never trusted by checks
	accepted atomic.Bool  // a payment of the full amount was answered without error
	dirty    atomic.Bool  // an operation touched it since the last checkpoint
	// payments has a bit per provider the order has a payment at (providerBit).
	payments atomic.Uint32
	// firstPaid is when the first paid notice of the full amount was sent (Unix nanoseconds;
	// 0: none): the moment the buyer's money arrived, for the sale window's rule.
	firstPaid atomic.Int64
	revealed  atomic.Bool // the buyer was shown its codes
	private   atomic.Bool // a scenario plays it: the operations leave it alone

	decision *refundDecision // the operator's refund decision, once one was made (under history.mu)

	// Kept by the checkpoints (which run alone): the status and the codes last checked.
	checked domain.OrderStatus
	codes   []string
	rows    []int64 // the card rows (uses) of those codes
}

func (r *orderRec) status() domain.OrderStatus { return domain.OrderStatus(r.hint.Load()) }

// paidNow records that a payment of the order's full amount is being sent now.
func (r *orderRec) paidNow(at time.Time) { r.firstPaid.CompareAndSwap(0, at.UnixNano()) }

// refundDecision is what the operator asked of an order's refund; every refund of the order
// (a retry, a second operator) sends the same.
type refundDecision struct {
	void, recycle bool
	reason        string
}

func (d refundDecision) String() string {
	switch {
	case d.void:
		return "void"
	case d.recycle:
		return "recycle"
	}
	return "default"
}
func (r *orderRec) see(o domain.Order) {
	if o.No() == r.no {
		r.hint.Store(int32(o.Status()))
	}
}

type buyerKey struct {
	buyer domain.BuyerID
	key   string
}

// history is one run.
type history struct {
	t       *testing.T
	backend Backend
	s       settings
	cfg     application.Config
	ports   Ports
	shop    *application.App
	signer  *paysig.Signer
	alerts  *alertLog
	pub     *publishLog
	ops     *opLog
	pause   *pauser
	hpay    *fakeProvider // the idempotent provider
	epay    *fakeProvider // the epay-like provider
	nonce   string        // per run, not from the seed: ids stay unique on a database reused across runs
	start   time.Time

	products []product
	drawable int // products[:drawable] are drawn by the operations; the rest belong to scenarios
	buyers   []domain.BuyerID
	keySeq   atomic.Int64
	// scenarioBusy is set while a worker plays a scenario (payops.go): one at a time.
	scenarioBusy atomic.Bool
	limitBusy    atomic.Bool // the same for limitLate
	windowStash  []*orderRec // orders the window scenario placed before the sale's end (under mu)
	codeSeq      atomic.Int64

	mu         sync.Mutex
	orders     []*orderRec
	byKey      map[buyerKey]*orderRec
	byNo       map[domain.OrderNo]*orderRec
	codes      map[domain.ProductID][]string // imported codes, for duplicate imports
	codeOwner  map[int64]domain.OrderNo      // every code row (one use of a code) held by an order, at the last checkpoint
	coupons    []domain.Coupon               // the history's coupons (coupons.go)
	couponPeak map[domain.CouponCode]int64   // the most uses of each coupon on one product seen at a checkpoint
	violations []string
	counts     map[string]int // operation outcomes, for the summary
}

// Run runs a concurrent history on b and checks it; see the package documentation.
func Run(t *testing.T, b Backend) {
	s := loadSettings(t, b.Duration)
	replay := fmt.Sprintf("HISTORY_SEED=%d HISTORY_WORKERS=%d HISTORY_DURATION=%s", s.seed, s.workers, s.duration)
	if s.mixSpec != "" {
		replay += " HISTORY_MIX=" + s.mixSpec
	}
	t.Logf("concurrent history on %s: %s go test -race -run '^%s$' %s", b.Name, replay, t.Name(), b.Package)

	cfg := Config()
	ports := b.Open(t, cfg)
	signer, err := paysig.New(callbackKey, paysig.DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	h := &history{t: t, backend: b, s: s, cfg: cfg, ports: ports, signer: signer, alerts: newAlertLog(),
		pub: &publishLog{inner: ports.Publisher, delivered: map[domain.OrderNo]int{}}, ops: newOpLog(logKeep),
		pause: newPauser(), nonce: fmt.Sprintf("%08x", rand.Uint32()), byKey: map[buyerKey]*orderRec{}, byNo: map[domain.OrderNo]*orderRec{},
		codes: map[domain.ProductID][]string{}, codeOwner: map[int64]domain.OrderNo{}, counts: map[string]int{},
		couponPeak: map[domain.CouponCode]int64{},
		hpay:       newFakeProvider(idemProvider, false, ports.Clock, s.seed), epay: newFakeProvider(epayProvider, true, ports.Clock, s.seed)}
	h.shop, err = application.New(cfg, application.Deps{Ledger: ports.Ledger, Gate: ports.Gate, Queue: ports.Queue,
		Publisher: h.pub, Verifier: signer, Alerter: h.alerts, Clock: ports.Clock, Logger: slog.New(slog.DiscardHandler),
		Gateways: []domain.PaymentGateway{h.hpay, h.epay}, Mailer: nopMailer{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.pause.stop) // timeouts delivered after the test answer "unavailable"
	ports.Consume(func(ctx context.Context, no domain.OrderNo) error {
		if !h.pause.enter() {
			return fmt.Errorf("history checkpoint: %w", domain.ErrUnavailable)
		}
		defer h.pause.leave()
		return h.shop.Sales.CloseExpired(ctx, no)
	})
	h.setup()
	h.run(replay)
}

// setup creates the products and their first codes.
func (h *history) setup() {
	ctx := context.Background()
	for i := range buyersN {
		h.buyers = append(h.buyers, domain.BuyerID(fmt.Sprintf("h%s-b%d", h.nonce, i)))
	}
	prices := []domain.Money{1000, 2500, 499, 1500, 800, 300}
	// The sale of the window product ends early in the run (before the first checkpoint of a
	// default run): its late payments then arrive after ends_at for most of it.
	endsAt := h.ports.Clock.Now().Add(max(2*time.Second, h.s.duration/10)).Truncate(time.Millisecond)
	for i := range limitProduct + 1 {
		var id domain.ProductID
		if h.ports.NewProductID != nil {
			id = h.ports.NewProductID()
		}
		// Two of the products have a per-buyer limit (one whose refunds release it, one whose do
		// not): reconciliation then checks every buyer's count at the gate against the ledger.
		// The window product has a limit too, and a sale that ends during the run. The last two
		// are left to the scenarios (payops.go); the limit scenario's has a limit of one order's
		// most.
		rules := domain.SaleRules{}
		switch {
		case i < 2:
			rules.BuyerLimit = 2 * maxPerOrder
		case i == windowProduct:
			rules.BuyerLimit, rules.EndsAt = 2*maxPerOrder, endsAt
		case i == limitProduct:
			rules.BuyerLimit = maxPerOrder
		}
		// Product 1's codes are sold up to multiUses times each (multi-use codes): its pool, gate
		// and flow count uses, and no order may get one code twice.
		uses := 1
		if i == multiProduct {
			uses = multiUses
		}
		p, err := h.shop.Catalogue.CreateProduct(ctx, application.NewProduct{ID: id, Name: fmt.Sprintf("history %d", i),
			Price: prices[i%len(prices)], MaxPerOrder: maxPerOrder, Sale: rules, RefundReleasesLimit: i == 0 || i == limitProduct,
			CodeUses: uses})
		if err != nil {
			h.t.Fatalf("create product: %v", err)
		}
		h.products = append(h.products, product{id: p.ID(), price: p.Price(), rules: rules})
		codes := h.newCodes(i, initialCodes/uses)
		rep, err := h.shop.Catalogue.ImportCodes(ctx, p.ID(), strings.NewReader(strings.Join(codes, "\n")))
		if err != nil || rep.Added != len(codes) || rep.Uses != initialCodes {
			h.t.Fatalf("import the first codes: %+v, %v", rep, err)
		}
		h.codes[p.ID()] = codes
	}
	h.drawable = productsN + 1
	h.setupCoupons(ctx)
}

func (h *history) newCodes(productIdx, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("H%s-%d-%07d", h.nonce, productIdx, h.codeSeq.Add(1))
	}
	return out
}

// run drives the workers epoch by epoch, with a checkpoint after each, then settles.
func (h *history) run(replay string) {
	h.start = time.Now()
	deadline := h.start.Add(h.s.duration)
	workers := make([]*worker, h.s.workers)
	for i := range workers {
		workers[i] = &worker{h: h, id: i, rng: rand.New(rand.NewPCG(h.s.seed, uint64(i)))}
	}
	for epoch := 1; ; epoch++ {
		until := time.Now().Add(h.s.checkEvery)
		if until.After(deadline) {
			until = deadline
		}
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Go(func() { w.run(until) })
		}
		wg.Wait()
		final := !time.Now().Before(deadline)
		h.checkpoint(replay, fmt.Sprintf("checkpoint %d", epoch), false)
		if final {
			break
		}
	}
	h.settle(replay)
	h.summary()
}

// checkpoint waits for quiescence and checks every invariant (every order when all is set, else
// those that may have changed); on a violation it reports and stops the test.
func (h *history) checkpoint(replay, what string, all bool) {
	ctx := context.Background()
	h.pause.hold()
	defer h.pause.release()
	h.shop.WaitBackground()
	var v []string
	if err := h.drain(ctx); err != nil {
		v = append(v, err.Error())
	}
	v = append(v, h.takeViolations()...)
	v = append(v, h.reconcileAll(ctx)...)
	v = append(v, h.checkOrders(ctx, all)...)
	v = append(v, h.checkCouponLimits(ctx)...)
	h.t.Logf("%s at t+%.1fs: %d orders, %d violations", what, time.Since(h.start).Seconds(), h.orderCount(), len(v))
	if len(v) > 0 {
		h.report(replay, what, v)
	}
}

// settle ends every order that can still change and checks that none is stuck: products are
// unfrozen, every PENDING order expires and is swept, every UNFULFILLED one is fulfilled (with
// fresh codes imported when the pool is short) and must end PAID, or, refused by the sale
// rules, refunded.
func (h *history) settle(replay string) {
	ctx := context.Background()
	for _, p := range h.products {
		if err := h.shop.Catalogue.UnfreezeProduct(ctx, p.id); err != nil {
			h.violate("settle: unfreeze %d: %v", p.id, err)
		}
	}
	var last time.Time
	for _, r := range h.snapshot() {
		if r.expires.After(last) {
			last = r.expires
		}
	}
	// A provider that could not close a payment holds the close back for the grace.
	time.Sleep(time.Until(last.Add(h.cfg.PaymentCloseGrace + 100*time.Millisecond)))
	h.pause.hold()
	if _, err := h.shop.Sales.Sweep(ctx); err != nil {
		h.violate("settle: sweep: %v", err)
	}
	h.finishRefunds(ctx)
	for _, r := range h.snapshot() {
		o, err := h.ports.Ledger.Orders().Order(ctx, r.no)
		if err != nil {
			h.violate("settle: load %s: %v", r.no, err)
			continue
		}
		switch o.Status() {
		case domain.StatusPending:
			h.violate("settle: order %s is still PENDING after its expiry and a sweep", r.no)
		case domain.StatusUnfulfilled:
			h.fulfilAtLast(ctx, r)
		default: // settled: nothing to do
		}
	}
	h.pause.release()
	h.checkpoint(replay, "after settling", true)
}

// fulfilAtLast fulfils an UNFULFILLED order, importing the codes it needs if the pool is short.
// One the sale rules keep from its codes (a late payment past the buyer's limit or the sale's
// end) is refunded instead, and must end REFUNDED.
func (h *history) fulfilAtLast(ctx context.Context, r *orderRec) {
	o, err := h.shop.Sales.FulfilOrder(ctx, r.no)
	if isErr(err, domain.ErrBuyerHoldingLimit) || isErr(err, domain.ErrSaleEnded) || isErr(err, domain.ErrCouponUsedUp) {
		d := h.decide(r, nil)
		res, rerr := h.shop.Payments.RefundOrder(ctx, application.Refund{OrderNo: r.no, Void: d.void, Recycle: d.recycle, Reason: d.reason})
		if rerr == nil && res.Money.Status == domain.PaymentRefunding {
			h.finishRefunds(ctx)
			res.Order, rerr = h.ports.Ledger.Orders().Order(ctx, r.no)
		}
		if rerr != nil || res.Order.Status() != domain.StatusRefunded {
			h.violate("settle: UNFULFILLED order %s kept from its codes (%v) could not be refunded: %s, %v", r.no, err, res.Order.Status(), rerr)
		}
		return
	}
	// The import fills the product's waiting orders oldest first: this one, or older ones that
	// take the codes first (then import again; each round fills at least one order).
	for round := 0; err != nil && isErr(err, domain.ErrSoldOut) && round < 100; round++ {
		idx := h.productIndex(r.product)
		codes := h.newCodes(idx, r.qty)
		if _, err := h.shop.Catalogue.ImportCodes(ctx, r.product, strings.NewReader(strings.Join(codes, "\n"))); err != nil {
			h.violate("settle: import codes for %s: %v", r.no, err)
			return
		}
		if o, err = h.ports.Ledger.Orders().Order(ctx, r.no); err == nil && o.Status() == domain.StatusPaid {
			break
		}
		o, err = h.shop.Sales.FulfilOrder(ctx, r.no)
	}
	if err != nil || o.Status() != domain.StatusPaid {
		h.violate("settle: UNFULFILLED order %s (qty %d) could not be fulfilled with stock there: %s, %v", r.no, r.qty, o.Status(), err)
	}
}

// drain relays the outbox until no gate change or delivery event is left unsent.
func (h *history) drain(ctx context.Context) error {
	deadline := time.Now().Add(drainTimeout)
	for {
		_, relayErr := h.shop.Relay.RelayOutbox(ctx)
		n, err := h.ports.Ledger.Outbox().Backlog(ctx, domain.TopicGateChange, domain.TopicDelivered)
		if err == nil && n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("outbox not drained after %v: %d messages left (%v, relay: %v)", drainTimeout, n, err, relayErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// report fails the test with the seed, the violations and the tail of the history.
func (h *history) report(replay, what string, v []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "concurrent history on %s failed at %s (t+%.1fs)\n", h.backend.Name, what, time.Since(h.start).Seconds())
	fmt.Fprintf(&b, "replay (same operation streams, not the same interleaving):\n  %s go test -race -run '^%s$' %s\n",
		replay, h.t.Name(), h.backend.Package)
	fmt.Fprintf(&b, "violations (%d):%s\n", len(v), byCheck(v))
	for i, line := range v {
		if i == maxViolations {
			fmt.Fprintf(&b, "  … and %d more\n", len(v)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", line)
	}
	fmt.Fprintf(&b, "last %d operations (t+seconds, worker):\n", tailLines)
	for _, line := range h.ops.tail(tailLines) {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	h.summary()
	h.t.Fatal(b.String())
}

// paymentChecks are the tags the checks of payments, refunds and sale rules open their
// violations with; the report counts each.
var paymentChecks = []string{"payout twice", "payout beyond receipts", "refund without payout", "refund decision",
	"revealed recycled", "refund reason", "fulfil during refund", "sale window", "buyer limit"}

// byCheck counts the violations of each payment check, for the report's first line.
func byCheck(v []string) string {
	var b strings.Builder
	for _, tag := range paymentChecks {
		n := 0
		for _, line := range v {
			if strings.HasPrefix(line, tag+": ") {
				n++
			}
		}
		if n > 0 {
			fmt.Fprintf(&b, " %s×%d", tag, n)
		}
	}
	return b.String()
}

// summary logs what the run did.
func (h *history) summary() {
	h.mu.Lock()
	lines := make([]string, 0, len(h.counts))
	for k, n := range h.counts {
		lines = append(lines, fmt.Sprintf("%s: %d", k, n))
	}
	h.mu.Unlock()
	sort.Strings(lines)
	accepted := 0
	for _, r := range h.snapshot() {
		if r.accepted.Load() {
			accepted++
		}
	}
	var peaks []string
	for _, c := range h.coupons {
		limit := "no limit"
		if c.UsesPerProduct > 0 {
			limit = fmt.Sprintf("limit %d", c.UsesPerProduct)
		}
		h.mu.Lock()
		peaks = append(peaks, fmt.Sprintf("%s %d (%s)", c.Code, h.couponPeak[c.Code], limit))
		h.mu.Unlock()
	}
	h.t.Logf("history on %s: %d orders, %d with an accepted payment, alerts %v; most uses of a coupon on one product at a checkpoint: %s\n  %s",
		h.backend.Name, h.orderCount(), accepted, h.alerts.kinds(), strings.Join(peaks, ", "), strings.Join(lines, "\n  "))
}

func (h *history) productIndex(id domain.ProductID) int {
	for i, p := range h.products {
		if p.id == id {
			return i
		}
	}
	return 0
}

func (h *history) snapshot() []*orderRec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*orderRec(nil), h.orders...)
}

func (h *history) orderCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.orders)
}

// violate records a violation seen by an operation; the next checkpoint reports it.
func (h *history) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.ops.add(fmt.Sprintf("%7.3fs VIOLATION %s", time.Since(h.start).Seconds(), msg))
	h.mu.Lock()
	h.violations = append(h.violations, msg)
	h.mu.Unlock()
}

func (h *history) takeViolations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := h.violations
	h.violations = nil
	return v
}

func (h *history) count(what string) {
	h.mu.Lock()
	h.counts[what]++
	h.mu.Unlock()
}

// record registers an order a placement answered, and checks that its key has no other order.
func (h *history) record(o domain.Order, key string) *orderRec { return h.recordAs(o, key, false) }

// recordAs is record; a private order is left alone by the operations (pick) until a scenario
// releases it.
func (h *history) recordAs(o domain.Order, key string, private bool) *orderRec {
	h.mu.Lock()
	defer h.mu.Unlock()
	bk := buyerKey{o.Buyer(), key}
	if r, ok := h.byKey[bk]; ok {
		if r.no != o.No() {
			h.violations = append(h.violations, fmt.Sprintf("buyer %s key %s answered two orders: %s and %s", o.Buyer(), key, r.no, o.No()))
		}
		return r
	}
	r := &orderRec{no: o.No(), product: o.Product(), buyer: o.Buyer(), key: key, qty: o.Qty(), amount: o.Amount(),
		coupon: o.Coupon(), expires: o.ExpiresAt()}
	r.private.Store(private)
	r.see(o)
	r.dirty.Store(true)
	h.byKey[bk] = r
	h.byNo[r.no] = r
	h.orders = append(h.orders, r)
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// pauser holds the delay queue's timeout handler back during checkpoints: a timeout handled
// while the invariants are read would change the numbers half-way.
type pauser struct {
	mu      sync.Mutex
	idle    *sync.Cond
	held    bool
	stopped bool
	active  int
}

func newPauser() *pauser {
	p := &pauser{}
	p.idle = sync.NewCond(&p.mu)
	return p
}

// enter reports whether a handler may run now; a true answer must be followed by leave.
func (p *pauser) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held || p.stopped {
		return false
	}
	p.active++
	return true
}

func (p *pauser) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active--; p.active == 0 {
		p.idle.Broadcast()
	}
}

// hold stops new handlers and waits for the running ones.
func (p *pauser) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = true
	for p.active > 0 {
		p.idle.Wait()
	}
}

func (p *pauser) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = false
}

// stop refuses every handler from now on and waits for the running ones.
func (p *pauser) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	for p.active > 0 {
		p.idle.Wait()
	}
}

// alertLog records the shop's alerts.
type alertLog struct {
	mu      sync.Mutex
	byOrder map[domain.OrderNo][]string
	byKind  map[string]int
}

func newAlertLog() *alertLog {
	return &alertLog{byOrder: map[domain.OrderNo][]string{}, byKind: map[string]int{}}
}

func (a *alertLog) Alert(_ context.Context, al domain.Alert) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.byKind[al.Kind]++
	if al.OrderNo != "" {
		a.byOrder[al.OrderNo] = append(a.byOrder[al.OrderNo], al.Kind)
	}
}

func (a *alertLog) has(no domain.OrderNo, kind string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range a.byOrder[no] {
		if k == kind {
			return true
		}
	}
	return false
}

func (a *alertLog) kinds() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.byKind))
	for k, n := range a.byKind {
		out[k] = n
	}
	return out
}

// publishLog passes events on to the backend's publisher and counts the delivery events it
// accepted, by order.
type publishLog struct {
	inner     domain.EventPublisher
	mu        sync.Mutex
	delivered map[domain.OrderNo]int
}

func (p *publishLog) Publish(ctx context.Context, m domain.OutboxMessage) error {
	if err := p.inner.Publish(ctx, m); err != nil {
		return err
	}
	if m.Topic == domain.TopicDelivered {
		p.mu.Lock()
		p.delivered[domain.OrderNo(m.Key)]++
		p.mu.Unlock()
	}
	return nil
}

func (p *publishLog) count(no domain.OrderNo) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delivered[no]
}

// opLog keeps the last operations of the history for the failure report.
type opLog struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newOpLog(n int) *opLog { return &opLog{lines: make([]string, n)} }

func (l *opLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines[l.next] = line
	l.next = (l.next + 1) % len(l.lines)
	if l.next == 0 {
		l.full = true
	}
}

func (l *opLog) tail(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var all []string
	if l.full {
		all = append(all, l.lines[l.next:]...)
	}
	all = append(all, l.lines[:l.next]...)
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}
