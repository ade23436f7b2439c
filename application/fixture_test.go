package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/application"
	"cardshop/domain"
)

// t0 is where every fake clock starts.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testSecret              = "test-callback-secret-0123456789"
	testPrice  domain.Money = 1999
)

var quiet = slog.New(slog.DiscardHandler)

// tester is what both *testing.T and *rapid.T offer and the fixture needs.
type tester interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

type options struct {
	cfg    application.Config
	clock  domain.Clock // the shop's and the gate's clock; nil: the fixture's FakeClock
	queue  func(domain.Clock) domain.DelayQueue
	ledger func(*memory.Ledger) domain.Ledger
	gate   func(*memory.Gate) domain.StockGate
	hook   domain.Notifier // the storefront's webhook; nil: none
	mailer domain.Mailer   // the buyers' e-mail; nil: none
	pub    func(*memory.Publisher) domain.EventPublisher
	pay    []domain.PaymentGateway
	kit    application.ChannelKit
}

type option func(*options)

func withConfig(fn func(*application.Config)) option { return func(o *options) { fn(&o.cfg) } }

func withClock(c domain.Clock) option { return func(o *options) { o.clock = c } }

func withQueue(fn func(domain.Clock) domain.DelayQueue) option {
	return func(o *options) { o.queue = fn }
}

func withLedger(fn func(*memory.Ledger) domain.Ledger) option {
	return func(o *options) { o.ledger = fn }
}

func withGate(fn func(*memory.Gate) domain.StockGate) option {
	return func(o *options) { o.gate = fn }
}

func withNotifier(n domain.Notifier) option { return func(o *options) { o.hook = n } }

func withMailer(m domain.Mailer) option { return func(o *options) { o.mailer = m } }

// withPublisher puts fn's publisher in front of the fixture's (which f.deliveries reads).
func withPublisher(fn func(*memory.Publisher) domain.EventPublisher) option {
	return func(o *options) { o.pub = fn }
}

func withChannelKit(k application.ChannelKit) option { return func(o *options) { o.kit = k } }

func withGateways(g ...domain.PaymentGateway) option {
	return func(o *options) { o.pay = append(o.pay, g...) }
}

// fixture is a Shop over the memory adapters, plus what the tests need to look behind it.
type fixture struct {
	ctx    context.Context
	cfg    application.Config
	clock  *memory.FakeClock // the shop's clock unless withClock replaced it
	now    domain.Clock      // the shop's clock
	ledger *memory.Ledger
	gate   *memory.Gate
	queue  domain.DelayQueue
	pub    *memory.Publisher
	alerts *memory.Alerts
	signer *paysig.Signer
	shop   *application.App

	keySeq  atomic.Int64
	codeSeq atomic.Int64

	mu       sync.Mutex
	orders   map[domain.OrderNo]domain.ProductID // every order placed through the fixture
	imported map[domain.ProductID]int64          // codes added, by the fixture's count
}

func newFixture(t tester, opts ...option) *fixture {
	t.Helper()
	o := options{cfg: application.DefaultConfig()}
	for _, fn := range opts {
		fn(&o)
	}
	fake := memory.NewFakeClock(t0)
	clock := o.clock
	if clock == nil {
		clock = fake
	}
	ledger := memory.NewLedger()
	var l domain.Ledger = ledger
	if o.ledger != nil {
		l = o.ledger(ledger)
	}
	var queue domain.DelayQueue
	if o.queue != nil {
		queue = o.queue(clock)
	} else {
		queue = memory.NewDelayQueue(clock)
	}
	if q, ok := queue.(*memory.DelayQueue); ok {
		t.Cleanup(q.Close)
	}
	signer, err := paysig.New(testSecret, paysig.DefaultTolerance)
	if err != nil {
		t.Fatalf("signer: %v", err)
	}
	f := &fixture{ctx: context.Background(), cfg: o.cfg, clock: fake, now: clock, ledger: ledger,
		gate: memory.NewGate(clock), queue: queue, pub: memory.NewPublisher(),
		alerts: memory.NewAlerts(quiet), signer: signer,
		orders: make(map[domain.OrderNo]domain.ProductID), imported: make(map[domain.ProductID]int64)}
	var gate domain.StockGate = f.gate
	var pub domain.EventPublisher = f.pub
	if o.pub != nil {
		pub = o.pub(f.pub)
	}
	if o.gate != nil {
		gate = o.gate(f.gate)
	}
	f.shop, err = application.New(o.cfg, application.Deps{Ledger: l, Gate: gate, Queue: queue,
		Publisher: pub, Notifier: o.hook, Mailer: o.mailer, Verifier: signer, Gateways: o.pay, Channels: o.kit, Alerter: f.alerts, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatalf("new shop: %v", err)
	}
	return f
}

// createProduct creates a product with the per-order limit and codes fresh codes.
func (f *fixture) createProduct(t tester, limit, codes int) domain.Product {
	t.Helper()
	p, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "gift card", Price: testPrice, MaxPerOrder: limit})
	if err != nil {
		t.Fatalf("create product: %v", err)
	}
	if codes > 0 {
		f.addCodes(t, p.ID(), codes)
	}
	return p
}

// newCodes returns n codes never used before in this fixture.
func (f *fixture) newCodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("CODE-%08d", f.codeSeq.Add(1))
	}
	return out
}

// importLines imports the text and counts what it added.
func (f *fixture) importLines(t tester, pid domain.ProductID, text string) application.ImportReport {
	t.Helper()
	rep, err := f.shop.Catalogue.ImportCodes(f.ctx, pid, strings.NewReader(text))
	if err != nil {
		t.Fatalf("import codes: %v", err)
	}
	f.mu.Lock()
	f.imported[pid] += int64(rep.Uses) // uses: rep.Added for a product of single-use codes
	f.mu.Unlock()
	return rep
}

// addCodes imports n fresh codes and returns them.
func (f *fixture) addCodes(t tester, pid domain.ProductID, n int) []string {
	t.Helper()
	codes := f.newCodes(n)
	rep := f.importLines(t, pid, strings.Join(codes, "\n"))
	if rep.Added != n || rep.Duplicates != 0 || rep.Invalid != 0 {
		t.Fatalf("import of %d fresh codes: %+v", n, rep)
	}
	return codes
}

// addCodesHeld imports n fresh codes while the product is frozen, where the import's fill of
// waiting orders stops, and unfreezes it: the waiting orders stay UNFULFILLED for a test of
// the operator's fulfil.
func (f *fixture) addCodesHeld(t tester, pid domain.ProductID, n int) []string {
	t.Helper()
	if err := f.shop.Catalogue.FreezeProduct(f.ctx, pid, "hold the restock"); err != nil {
		t.Fatalf("freeze: %v", err)
	}
	codes := f.addCodes(t, pid, n)
	if err := f.shop.Catalogue.UnfreezeProduct(f.ctx, pid); err != nil {
		t.Fatalf("unfreeze: %v", err)
	}
	return codes
}

func (f *fixture) newKey() string { return fmt.Sprintf("key-%08d", f.keySeq.Add(1)) }

func (f *fixture) track(o domain.Order) {
	f.mu.Lock()
	f.orders[o.No()] = o.Product()
	f.mu.Unlock()
}

// place places an order with the given key and records it for assertInvariants.
func (f *fixture) place(buyer domain.BuyerID, pid domain.ProductID, qty int, key string) (application.PlacedOrder, error) {
	res, err := f.shop.Sales.PlaceOrder(f.ctx, application.PlaceOrder{Buyer: buyer, Product: pid, Qty: qty, IdempotencyKey: key})
	if err == nil {
		f.track(res.Order)
	}
	return res, err
}

// mustPlace places an order with a fresh key and fails the test unless it is a new order.
func (f *fixture) mustPlace(t tester, buyer domain.BuyerID, pid domain.ProductID, qty int) domain.Order {
	t.Helper()
	res, err := f.place(buyer, pid, qty, f.newKey())
	if err != nil {
		t.Fatalf("place order of %d: %v", qty, err)
	}
	if res.Replayed || res.Order.Status() != domain.StatusPending || res.Order.Qty() != qty {
		t.Fatalf("placed %+v, want a new PENDING order of %d", res.Order.Record(), qty)
	}
	return res.Order
}

func (f *fixture) order(t tester, no domain.OrderNo) domain.Order {
	t.Helper()
	o, err := f.ledger.Orders().Order(f.ctx, no)
	if err != nil {
		t.Fatalf("load order %s: %v", no, err)
	}
	return o
}

func paidNotice(o domain.Order) domain.PaymentNotice {
	return domain.PaymentNotice{OrderNo: o.No(), Paid: true, Amount: o.Amount(), PaymentRef: "pay-" + string(o.No())}
}

// pay applies a successful payment of the order's amount.
func (f *fixture) pay(t tester, no domain.OrderNo) (domain.Order, error) {
	t.Helper()
	return f.shop.Payments.ApplyPayment(f.ctx, paidNotice(f.order(t, no)))
}

// signed builds a callback signed now by the fixture's clock.
func (f *fixture) signed(t tester, n paysig.Notice) application.SignedCallback {
	t.Helper()
	body, ts, sig, err := f.signer.SignedBody(n, f.shopNow())
	if err != nil {
		t.Fatalf("sign callback: %v", err)
	}
	return application.SignedCallback{Timestamp: ts, Signature: sig, Body: body}
}

// shopNow is the time as the shop sees it (the fake clock unless replaced).
func (f *fixture) shopNow() time.Time { return f.now.Now() }

// callbackFor is a signed provider callback for the order: "paid" or "failed" with amount.
func (f *fixture) callbackFor(t tester, o domain.Order, status string, amount domain.Money) application.SignedCallback {
	t.Helper()
	return f.signed(t, paysig.Notice{OrderNo: string(o.No()), Status: status, Amount: int64(amount), PaymentRef: "pay-" + string(o.No())})
}

// payByCallback pays the order's amount through a signed callback.
func (f *fixture) payByCallback(t tester, no domain.OrderNo) (domain.Order, error) {
	t.Helper()
	o := f.order(t, no)
	return f.shop.Payments.HandlePaymentCallback(f.ctx, f.callbackFor(t, o, "paid", o.Amount()))
}

func (f *fixture) mustPay(t tester, no domain.OrderNo) domain.Order {
	t.Helper()
	o, err := f.pay(t, no)
	if err != nil {
		t.Fatalf("pay %s: %v", no, err)
	}
	return o
}

// soldCards reads the codes SOLD to the order straight from the ledger: unlike the shop's
// views it records no reveal.
func (f *fixture) soldCards(t tester, no domain.OrderNo) []domain.Card {
	t.Helper()
	cards, err := f.ledger.Cards().Cards(f.ctx, no)
	if err != nil {
		t.Fatalf("cards of %s: %v", no, err)
	}
	return cards
}

func (f *fixture) levels(t tester, pid domain.ProductID) domain.GateLevels {
	t.Helper()
	l, ok, err := f.gate.Levels(f.ctx, pid)
	if err != nil || !ok {
		t.Fatalf("gate levels of %d: ok=%v err=%v", pid, ok, err)
	}
	return l
}

func (f *fixture) counts(t tester, pid domain.ProductID) domain.CardCounts {
	t.Helper()
	c, err := f.ledger.Cards().Counts(f.ctx, pid)
	if err != nil {
		t.Fatalf("card counts: %v", err)
	}
	return c
}

func (f *fixture) flowTypes(t tester, no domain.OrderNo) map[domain.FlowType]int {
	t.Helper()
	es, err := f.ledger.Flows().Entries(f.ctx, string(no))
	if err != nil {
		t.Fatalf("flow of %s: %v", no, err)
	}
	out := make(map[domain.FlowType]int)
	for _, e := range es {
		out[e.Type]++
	}
	return out
}

// alertsFor returns the kinds of the alerts raised for the order.
func (f *fixture) alertsFor(no domain.OrderNo) []string {
	var kinds []string
	for _, a := range f.alerts.Alerts() {
		if a.OrderNo == no {
			kinds = append(kinds, a.Kind)
		}
	}
	return kinds
}

func (f *fixture) alertCount(kind string) int {
	n := 0
	for _, a := range f.alerts.Alerts() {
		if a.Kind == kind {
			n++
		}
	}
	return n
}

func hasKind(kinds []string, kind string) bool {
	for _, k := range kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// deliveries counts the published delivery events by order number (stock events, the only
// other messages published, are checked where they are made).
func (f *fixture) deliveries(t tester) map[domain.OrderNo]int {
	t.Helper()
	out := make(map[domain.OrderNo]int)
	for _, m := range f.pub.Published() {
		if m.Topic == domain.TopicProductStock {
			continue
		}
		if m.Topic != domain.TopicDelivered {
			t.Errorf("published a %q message; only delivery and stock events go to the publisher", m.Topic)
			continue
		}
		var e domain.DeliveryEvent
		if err := json.Unmarshal(m.Payload, &e); err != nil {
			t.Fatalf("delivery payload: %v", err)
		}
		if string(e.OrderNo) != m.Key {
			t.Errorf("delivery event for %s published under key %s", e.OrderNo, m.Key)
		}
		out[e.OrderNo]++
	}
	return out
}

// ordersOf lists the fixture's orders of the product.
func (f *fixture) ordersOf(pid domain.ProductID) []domain.OrderNo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []domain.OrderNo
	for no, p := range f.orders {
		if p == pid {
			out = append(out, no)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

type buyerKey struct {
	buyer domain.BuyerID
	key   domain.IdempotencyKey
}

// assertInvariants drains the outbox and then checks every invariant of docs/PRODUCT.md for
// the product directly against the memory ledger, gate and publisher ("imported" meaning
// imported codes less voided ones), and finally that Reconcile agrees.
func (f *fixture) assertInvariants(t tester, pid domain.ProductID) {
	t.Helper()
	ctx := f.ctx
	if _, err := f.shop.Relay.RelayOutbox(ctx); err != nil {
		t.Fatalf("relay outbox: %v", err)
	}
	// Webhook messages have a relay of their own (RelayWebhooks), tested where it matters.
	if n, err := f.ledger.Outbox().Backlog(ctx, domain.TopicGateChange, domain.TopicDelivered); err != nil || n != 0 {
		t.Fatalf("outbox backlog after relay: %d, %v", n, err)
	}
	p, err := f.ledger.Products().Product(ctx, pid)
	if err != nil {
		t.Fatalf("product: %v", err)
	}
	counts := f.counts(t, pid)
	totals, err := f.ledger.Orders().Totals(ctx, pid)
	if err != nil {
		t.Fatalf("order totals: %v", err)
	}
	flows, err := f.ledger.Flows().Totals(ctx, pid)
	if err != nil {
		t.Fatalf("flow totals: %v", err)
	}
	d := flows.Derive()
	lv := f.levels(t, pid)

	eq := func(name string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("invariant %q: got %d, want %d", name, got, want)
		}
	}
	sold := counts[domain.CardSold]
	sellable := counts[domain.CardUnsold] + counts[domain.CardRecycled]
	voided := counts[domain.CardVoid]
	imported := sold + sellable + voided
	live := imported - voided
	paidQty, pendingQty := totals[domain.StatusPaid].Qty, totals[domain.StatusPending].Qty

	f.mu.Lock()
	eq("code uses in the pool = uses the fixture imported", imported, f.imported[pid])
	f.mu.Unlock()
	// no oversell
	eq("codes SOLD = Σ qty of PAID orders", sold, paidQty)
	eq("SOLD + sellable = imported - voided", sold+sellable, live)
	// gate conservation
	eq("gate stock + gate sold = imported - voided", lv.Stock+lv.Sold, live)
	eq("gate sold = Σ qty of PENDING and PAID orders", lv.Sold, pendingQty+paidQty)
	if lv.Stock < 0 || lv.Sold < 0 {
		t.Errorf("gate went negative: %+v", lv)
	}
	if lv.Frozen != p.Frozen() {
		t.Errorf("gate frozen=%v, catalogue frozen=%v", lv.Frozen, p.Frozen())
	}
	// ledger: the flow reproduces every number
	eq("flow: imported", d.Imported, imported)
	eq("flow: voided", d.Voided, voided)
	eq("flow: sold", d.Sold, sold)
	eq("flow: sellable", d.Sellable, sellable)
	eq("flow: held = gate sold", d.Held, lv.Sold)
	eq("flow: pending", d.Pending, pendingQty)
	eq("flow: gate free = gate stock", d.GateFree, lv.Stock)

	// Per order and per card.
	published := f.deliveries(t)
	cardOwner := make(map[int64]domain.OrderNo)
	codeOwner := make(map[string]domain.OrderNo)
	codeSales := make(map[string]int) // a multi-use code's SOLD uses
	keys := make(map[buyerKey]domain.OrderNo)
	seen := make(map[domain.OrderStatus]domain.StatusTotal)
	var soldCards int64
	for _, no := range f.ordersOf(pid) {
		o := f.order(t, no)
		st := seen[o.Status()]
		st.Orders++
		st.Qty += int64(o.Qty())
		seen[o.Status()] = st

		// idempotency: one (buyer, key) -> one order, and the ledger finds it by the key.
		bk := buyerKey{o.Buyer(), o.IdempotencyKey()}
		if other, dup := keys[bk]; dup {
			t.Errorf("orders %s and %s share buyer %s and key %s", other, no, bk.buyer, bk.key)
		}
		keys[bk] = no
		if byKey, err := f.ledger.Orders().OrderByKey(ctx, bk.buyer, bk.key); err != nil || byKey.No() != no {
			t.Errorf("order by key of %s: %v, %v", no, byKey.No(), err)
		}

		// each code SOLD to at most one order; a PAID order holds exactly qty codes, others none.
		cards, err := f.ledger.Cards().Cards(ctx, no)
		if err != nil {
			t.Fatalf("cards of %s: %v", no, err)
		}
		want := 0
		if o.Status() == domain.StatusPaid {
			want = o.Qty()
		}
		if len(cards) != want {
			t.Errorf("order %s (%s, qty %d) holds %d SOLD codes, want %d", no, o.Status(), o.Qty(), len(cards), want)
		}
		for _, c := range cards {
			if c.Status != domain.CardSold || c.OrderNo != no || c.ProductID != pid {
				t.Errorf("card %d of order %s: status %s, order %s, product %d", c.ID, no, c.Status, c.OrderNo, c.ProductID)
			}
			if other, dup := cardOwner[c.ID]; dup {
				t.Errorf("card %d SOLD to both %s and %s", c.ID, other, no)
			}
			cardOwner[c.ID] = no
			// A single-use code is SOLD to one order; a multi-use code to as many as its
			// uses, never twice to one order.
			if other, dup := codeOwner[c.Code.Reveal()]; dup && (p.CodeUses() == 1 || other == no) {
				t.Errorf("a code is SOLD to both %s and %s", other, no)
			}
			codeOwner[c.Code.Reveal()] = no
			codeSales[c.Code.Reveal()]++
		}
		soldCards += int64(len(cards))

		// The order's own flow rows explain what it holds.
		es, err := f.ledger.Flows().Entries(ctx, string(no))
		if err != nil {
			t.Fatalf("flow of %s: %v", no, err)
		}
		byType := make(map[domain.FlowType]int64)
		for _, e := range es {
			if e.ProductID != pid || e.Qty != int64(o.Qty()) {
				t.Errorf("flow row %s of %s: product %d qty %d, want %d and %d", e.Type, no, e.ProductID, e.Qty, pid, o.Qty())
			}
			byType[e.Type]++
		}
		held := byType[domain.FlowReserve] + byType[domain.FlowLateReserve] - byType[domain.FlowTimeoutRestore] -
			byType[domain.FlowFailedRestore] - byType[domain.FlowUnfulfilled] - byType[domain.FlowRefundRestore] -
			byType[domain.FlowRefundVoid]
		holds := byType[domain.FlowPay] - byType[domain.FlowRefundRestore] - byType[domain.FlowRefundVoid]
		var wantHeld, wantHolds int64
		if o.Status().HoldsStock() {
			wantHeld = 1
		}
		if o.Status() == domain.StatusPaid {
			wantHolds = 1
		}
		if held != wantHeld || holds != wantHolds || byType[domain.FlowReserve] != 1 {
			t.Errorf("order %s is %s but its flow rows %v say it holds %d reservations and %d allocations",
				no, o.Status(), byType, held, holds)
		}

		// no lost order: PAID means delivered (once); UNFULFILLED means an operator was alerted.
		if published[no] != int(byType[domain.FlowPay]) {
			t.Errorf("order %s (%s) has %d pay rows and %d published delivery events", no, o.Status(), byType[domain.FlowPay], published[no])
		}
		if o.Status() == domain.StatusUnfulfilled && !hasKind(f.alertsFor(no), "paid_unfulfilled") {
			t.Errorf("order %s is UNFULFILLED without an alert (alerts %v)", no, f.alertsFor(no))
		}
		if (o.Status() == domain.StatusPaid || o.Status() == domain.StatusUnfulfilled) && o.PaidAt().IsZero() {
			t.Errorf("order %s is %s without a payment time", no, o.Status())
		}
		// codes are shown only from a PAID order, so only PAID and REFUNDED ones are revealed.
		if o.Revealed() && o.Status() != domain.StatusPaid && o.Status() != domain.StatusRefunded {
			t.Errorf("order %s is %s but revealed at %s", no, o.Status(), o.RevealedAt())
		}
	}
	eq("SOLD codes found on orders = codes SOLD", soldCards, sold)
	if p.CodeUses() != domain.UnlimitedUses {
		for _, n := range codeSales {
			if n > p.CodeUses() {
				t.Errorf("a code is SOLD %d times, the product sells each %d times", n, p.CodeUses())
			}
		}
	}
	for _, s := range domain.AllOrderStatuses {
		if seen[s] != totals[s] {
			t.Errorf("orders %s: the fixture's orders sum to %+v, the repository to %+v", s, seen[s], totals[s])
		}
	}

	rep, err := f.shop.Catalogue.Reconcile(ctx, pid, false)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if !rep.OK() {
		t.Errorf("reconcile found %d differences: %+v", rep.Differences, rep.Checks)
	}
}

// assertNoExpiredPending checks that no PENDING order is past its expiry.
func (f *fixture) assertNoExpiredPending(t tester) {
	t.Helper()
	due, err := f.ledger.Orders().Expired(f.ctx, f.shopNow(), 1000)
	if err != nil {
		t.Fatalf("expired orders: %v", err)
	}
	if len(due) > 0 {
		t.Errorf("%d PENDING orders past expiry, first %s", len(due), due[0].No())
	}
}

// is fails the test unless errors.Is(err, want) (want nil: err must be nil).
func is(t tester, what string, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

// dropQueue is a DelayQueue that loses every message (a broker that dropped them).
type dropQueue struct{ scheduled atomic.Int64 }

func (q *dropQueue) ScheduleClose(context.Context, domain.OrderNo, time.Time) error {
	q.scheduled.Add(1)
	return nil
}

// downQueue is a DelayQueue whose broker cannot be reached.
type downQueue struct{}

func (downQueue) ScheduleClose(context.Context, domain.OrderNo, time.Time) error {
	return fmt.Errorf("publish delayed message: %w", domain.ErrUnavailable)
}

// flakyLedger is a memory ledger whose next transactions fail with ErrUnavailable.
type flakyLedger struct {
	*memory.Ledger
	failures atomic.Int32
}

func (l *flakyLedger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	if l.failures.Add(-1) >= 0 {
		return fmt.Errorf("begin transaction: %w", domain.ErrUnavailable)
	}
	return l.Ledger.Atomically(ctx, fn)
}

// ambiguousGate is a memory gate whose next Reserve calls take effect and then report the
// gate unreachable, as a Redis call that timed out after the script ran does.
type ambiguousGate struct {
	*memory.Gate
	failures atomic.Int32
}

func (g *ambiguousGate) Reserve(ctx context.Context, r domain.Reservation) (domain.ReserveResult, error) {
	res, err := g.Gate.Reserve(ctx, r)
	if err == nil && g.failures.Add(-1) >= 0 {
		return domain.ReserveResult{}, fmt.Errorf("reserve: i/o timeout: %w", domain.ErrUnavailable)
	}
	return res, err
}

// retryingGate runs every Reserve twice and answers the second result, as a Redis client
// that re-sends a script after a lost reply does.
type retryingGate struct{ *memory.Gate }

func (g retryingGate) Reserve(ctx context.Context, r domain.Reservation) (domain.ReserveResult, error) {
	if _, err := g.Gate.Reserve(ctx, r); err != nil {
		return domain.ReserveResult{}, err
	}
	return g.Gate.Reserve(ctx, r)
}

// unknownCommitLedger answers the next Atomically calls with a lost COMMIT reply: when commit
// is true the writes are kept (the server committed), otherwise they are rolled back.
type unknownCommitLedger struct {
	*memory.Ledger
	remaining atomic.Int32
	commit    bool
}

func (l *unknownCommitLedger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	if l.remaining.Add(-1) < 0 {
		return l.Ledger.Atomically(ctx, fn)
	}
	lost := fmt.Errorf("commit: %w: %w: connection reset", domain.ErrUnavailable, domain.ErrCommitUnknown)
	if !l.commit {
		_ = l.Ledger.Atomically(ctx, func(tx domain.Store) error { _ = fn(tx); return lost })
		return lost
	}
	if err := l.Ledger.Atomically(ctx, fn); err != nil {
		return err
	}
	return lost
}
