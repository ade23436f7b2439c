package application_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/adapters/porttest"
	"cardshop/adapters/redisgate"
	"cardshop/application"
	"cardshop/domain"
)

// restockRig is a shop over the ledger and gate a test is given (memory, or MariaDB and
// Redis), with what the restock tests need: waiting orders made the way they happen (a
// payment arriving after the order closed and its stock was sold), imports, and the checks.
type restockRig struct {
	ctx    context.Context
	clock  *memory.FakeClock
	ledger domain.Ledger
	gate   domain.StockGate
	gw     *scriptedGateway
	shop   *application.App
	run    string // makes codes, buyers and keys unique in a database kept between runs
	seq    atomic.Int64
}

func newRestockRig(t *testing.T, ledger domain.Ledger, gate func(domain.Clock) domain.StockGate) *restockRig {
	t.Helper()
	r := &restockRig{ctx: context.Background(), clock: memory.NewFakeClock(t0), ledger: ledger, gw: newScripted("acme"),
		run: fmt.Sprintf("%08x", rand.Uint32())}
	r.gate = gate(r.clock)
	q := memory.NewDelayQueue(r.clock)
	t.Cleanup(q.Close)
	signer, err := paysig.New(testSecret, paysig.DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	r.shop, err = application.New(application.DefaultConfig(), application.Deps{Ledger: ledger, Gate: r.gate, Queue: q,
		Publisher: memory.NewPublisher(), Verifier: signer, Gateways: []domain.PaymentGateway{r.gw},
		Alerter: memory.NewAlerts(quiet), Clock: r.clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *restockRig) product(t *testing.T) domain.ProductID {
	t.Helper()
	p, err := r.shop.Catalogue.CreateProduct(r.ctx, application.NewProduct{ID: porttest.NewProductID(), Name: "restock " + r.run,
		Price: testPrice, MaxPerOrder: 100})
	if err != nil {
		t.Fatalf("create product: %v", err)
	}
	return p.ID()
}

func (r *restockRig) importCodes(t *testing.T, pid domain.ProductID, n int) application.ImportReport {
	t.Helper()
	rep, err := r.importCodesErr(pid, n)
	if err != nil || rep.Added != n {
		t.Fatalf("import of %d codes: %+v, %v", n, rep, err)
	}
	return rep
}

func (r *restockRig) importCodesErr(pid domain.ProductID, n int) (application.ImportReport, error) {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("RS-%s-%06d", r.run, r.seq.Add(1))
	}
	return r.shop.Catalogue.ImportCodes(r.ctx, pid, strings.NewReader(strings.Join(lines, "\n")))
}

func (r *restockRig) buyer(name string) domain.BuyerID { return domain.BuyerID(name + "-" + r.run) }

func (r *restockRig) place(t *testing.T, buyer string, pid domain.ProductID, qty int) domain.Order {
	t.Helper()
	res, err := r.shop.Sales.PlaceOrder(r.ctx, application.PlaceOrder{Buyer: r.buyer(buyer), Product: pid, Qty: qty,
		IdempotencyKey: fmt.Sprintf("key-%08d", r.seq.Add(1))})
	if err != nil || res.Order.Status() != domain.StatusPending {
		t.Fatalf("place %d: %v", qty, err)
	}
	return res.Order
}

func (r *restockRig) order(t *testing.T, no domain.OrderNo) domain.Order {
	t.Helper()
	o, err := r.ledger.Orders().Order(r.ctx, no)
	if err != nil {
		t.Fatalf("load order %s: %v", no, err)
	}
	return o
}

// closed places orders of the qtys on a product with no stock, and lets them expire: CLOSED
// orders a payment can still arrive for. The product is sold out after.
func (r *restockRig) closed(t *testing.T, pid domain.ProductID, withPayment bool, qtys ...int) []domain.Order {
	t.Helper()
	total := 0
	for _, q := range qtys {
		total += q
	}
	r.importCodes(t, pid, total)
	var os []domain.Order
	for i, q := range qtys {
		o := r.place(t, fmt.Sprintf("buyer%d", i), pid, q)
		if withPayment {
			if _, _, err := r.shop.Payments.CreatePayment(r.ctx, application.NewPayment{Buyer: o.Buyer(), OrderNo: o.No(), Provider: "acme"}); err != nil {
				t.Fatalf("create payment: %v", err)
			}
		}
		os = append(os, o)
	}
	r.gw.set(func(g *scriptedGateway) { g.noClose = true }) // the orders close with their payments open there
	r.clock.Advance(application.DefaultConfig().OrderTimeout + time.Second)
	for _, o := range os {
		if err := r.shop.Sales.CloseExpired(r.ctx, o.No()); err != nil {
			t.Fatalf("close %s: %v", o.No(), err)
		}
	}
	rival := r.place(t, "rival", pid, total)
	if got, err := r.shop.Payments.ApplyPayment(r.ctx, paidNotice(rival)); err != nil || got.Status() != domain.StatusPaid {
		t.Fatalf("rival's payment: %v", err)
	}
	return os
}

// payLate pays a CLOSED order, a second after the previous payment: it becomes UNFULFILLED
// when the stock is gone.
func (r *restockRig) payLate(t *testing.T, o domain.Order, viaProvider bool) domain.Order {
	t.Helper()
	r.clock.Advance(time.Second)
	if viaProvider {
		r.gw.set(func(g *scriptedGateway) { g.state[o.No()] = domain.OutcomePaid })
		if err := r.shop.Payments.HandleNotification(r.ctx, "acme", notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
			t.Fatalf("pay %s: %v", o.No(), err)
		}
		return r.order(t, o.No())
	}
	got, err := r.shop.Payments.ApplyPayment(r.ctx, paidNotice(o))
	if err != nil {
		t.Fatalf("late payment of %s: %v", o.No(), err)
	}
	return got
}

// waiting makes UNFULFILLED orders of the qtys, paid in that order.
func (r *restockRig) waiting(t *testing.T, pid domain.ProductID, qtys ...int) []domain.Order {
	t.Helper()
	var out []domain.Order
	for _, o := range r.closed(t, pid, false, qtys...) {
		if got := r.payLate(t, o, false); got.Status() != domain.StatusUnfulfilled {
			t.Fatalf("late payment without stock: %s", got.Status())
		}
		out = append(out, o)
	}
	return out
}

func (r *restockRig) wantStatus(t *testing.T, what string, want domain.OrderStatus, os ...domain.Order) {
	t.Helper()
	for _, o := range os {
		if got := r.order(t, o.No()).Status(); got != want {
			t.Fatalf("%s: order %s (qty %d) is %s, want %s", what, o.No(), o.Qty(), got, want)
		}
	}
}

// check asserts the product's invariants: every PAID order holds exactly its qty of codes and
// no code is held twice; SOLD codes = Σ qty of PAID orders (nothing sold twice, none lost); the
// gate offers exactly the ledger's available codes; reconcile finds no difference; and no
// filled order keeps an open paid_unfulfilled alert.
func (r *restockRig) check(t *testing.T, pid domain.ProductID, orders []domain.Order) {
	t.Helper()
	seen := map[domain.CardCode]domain.OrderNo{}
	for _, o := range orders {
		o = r.order(t, o.No())
		cards, err := r.ledger.Cards().Cards(r.ctx, o.No())
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if o.Status() == domain.StatusPaid {
			want = o.Qty()
		}
		if len(cards) != want {
			t.Fatalf("order %s (%s, qty %d) holds %d codes, want %d", o.No(), o.Status(), o.Qty(), len(cards), want)
		}
		for _, c := range cards {
			if other, dup := seen[c.Code]; dup {
				t.Fatalf("code held by %s and %s", other, o.No())
			}
			seen[c.Code] = o.No()
		}
	}
	totals, err := r.ledger.Orders().Totals(r.ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := r.ledger.Cards().Counts(r.ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	if counts[domain.CardSold] != totals[domain.StatusPaid].Qty {
		t.Fatalf("%d codes SOLD, PAID orders hold %d", counts[domain.CardSold], totals[domain.StatusPaid].Qty)
	}
	lv, _, err := r.gate.Levels(r.ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	if sellable := counts[domain.CardUnsold] + counts[domain.CardRecycled]; lv.Stock != sellable {
		t.Fatalf("gate offers %d, the ledger has %d sellable (%v)", lv.Stock, sellable, counts)
	}
	rec, err := r.shop.Catalogue.Reconcile(r.ctx, pid, false)
	if err != nil || !rec.OK() {
		t.Fatalf("reconcile: %v %+v", err, rec.Checks)
	}
	open, err := r.ledger.Alerts().List(r.ctx, domain.AlertFilter{Status: domain.AlertsOpen, Kind: "paid_unfulfilled", Product: pid, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range open {
		if r.order(t, a.OrderNo).Status() == domain.StatusPaid {
			t.Fatalf("filled order %s keeps an open paid_unfulfilled alert", a.OrderNo)
		}
	}
}

// wantResolved asserts that each order's paid_unfulfilled alert was acknowledged by the
// system, as filled on restock.
func (r *restockRig) wantResolved(t *testing.T, pid domain.ProductID, os ...domain.Order) {
	t.Helper()
	all, err := r.ledger.Alerts().List(r.ctx, domain.AlertFilter{Status: domain.AlertsAll, Kind: "paid_unfulfilled", Product: pid, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range os {
		found := false
		for _, a := range all {
			if a.OrderNo != o.No() {
				continue
			}
			found = true
			if a.Open() || a.AckedBy != application.SystemActor || a.AckNote != application.RestockNote {
				t.Fatalf("alert of filled order %s: %+v, want acknowledged by %s", o.No(), a, application.SystemActor)
			}
		}
		if !found {
			t.Fatalf("order %s has no paid_unfulfilled alert", o.No())
		}
	}
}

func runRestock(t *testing.T, newRig func(*testing.T) *restockRig) {
	// An import fills the waiting orders oldest first, each once, with distinct codes.
	t.Run("fills waiting orders oldest first", func(t *testing.T) {
		r := newRig(t)
		pid := r.product(t)
		w := r.waiting(t, pid, 1, 2, 1)
		rep := r.importCodes(t, pid, 5)
		if rep.Filled != 3 {
			t.Fatalf("import reported %d orders filled, want 3", rep.Filled)
		}
		r.wantStatus(t, "after the restock", domain.StatusPaid, w...)
		r.wantResolved(t, pid, w...)
		r.check(t, pid, w)
		if lv, _, _ := r.gate.Levels(r.ctx, pid); lv.Stock != 1 {
			t.Fatalf("gate offers %d after the fill, want the 1 code left", lv.Stock)
		}
		// Filled once: another import and an operator's fulfil find nothing to do.
		if rep := r.importCodes(t, pid, 1); rep.Filled != 0 {
			t.Fatalf("second import filled %d", rep.Filled)
		}
		for _, o := range w {
			if _, err := r.shop.Sales.FulfilOrder(r.ctx, o.No()); !errors.Is(err, domain.ErrInvalidTransition) {
				t.Fatalf("fulfil of a filled order: %v", err)
			}
		}
		r.check(t, pid, w)
	})

	// Too few codes: strict first come, first served; a younger, smaller order does not go
	// before an older one that does not fit.
	t.Run("partial restock", func(t *testing.T) {
		r := newRig(t)
		pid := r.product(t)
		w := r.waiting(t, pid, 1, 3, 1)
		if rep := r.importCodes(t, pid, 3); rep.Filled != 1 {
			t.Fatalf("import of 3 filled %d, want 1 (the oldest)", rep.Filled)
		}
		r.wantStatus(t, "3 codes", domain.StatusPaid, w[0])
		r.wantStatus(t, "3 codes", domain.StatusUnfulfilled, w[1], w[2])
		r.check(t, pid, w)
		if lv, _, _ := r.gate.Levels(r.ctx, pid); lv.Stock != 2 {
			t.Fatalf("gate offers %d, want 2 (held for no one: the next order needs 3)", lv.Stock)
		}
		if rep := r.importCodes(t, pid, 1); rep.Filled != 1 {
			t.Fatalf("import of 1 more filled %d, want 1", rep.Filled)
		}
		r.wantStatus(t, "4 codes", domain.StatusPaid, w[1])
		r.wantStatus(t, "4 codes", domain.StatusUnfulfilled, w[2])
		if rep := r.importCodes(t, pid, 1); rep.Filled != 1 {
			t.Fatalf("import of the last code filled %d, want 1", rep.Filled)
		}
		r.wantResolved(t, pid, w...)
		r.check(t, pid, w)
	})

	// An order whose refund is pending is passed over (and stays UNFULFILLED); the younger
	// ones are filled.
	t.Run("refund pending", func(t *testing.T) {
		r := newRig(t)
		pid := r.product(t)
		os := r.closed(t, pid, true, 1, 1)
		for _, o := range os {
			if got := r.payLate(t, o, true); got.Status() != domain.StatusUnfulfilled {
				t.Fatalf("late payment: %s", got.Status())
			}
		}
		r.gw.set(func(g *scriptedGateway) { g.refund = "pending" })
		if res, err := r.shop.Payments.RefundOrder(r.ctx, application.Refund{OrderNo: os[0].No()}); err != nil || res.Money.Status != domain.PaymentRefunding {
			t.Fatalf("pending refund: %+v, %v", res, err)
		}
		if rep := r.importCodes(t, pid, 2); rep.Filled != 1 {
			t.Fatalf("import filled %d, want 1", rep.Filled)
		}
		r.wantStatus(t, "refund pending", domain.StatusUnfulfilled, os[0])
		r.wantStatus(t, "younger order", domain.StatusPaid, os[1])
		r.wantResolved(t, pid, os[1])
		r.check(t, pid, os)
	})

	// A frozen product's waiting orders are not filled by an import; an operator's fulfil after
	// the unfreeze fills one and acknowledges its alert too.
	t.Run("frozen product", func(t *testing.T) {
		r := newRig(t)
		pid := r.product(t)
		w := r.waiting(t, pid, 1)
		if err := r.shop.Catalogue.FreezeProduct(r.ctx, pid, "audit"); err != nil {
			t.Fatal(err)
		}
		if rep := r.importCodes(t, pid, 1); rep.Filled != 0 {
			t.Fatalf("import into a frozen product filled %d", rep.Filled)
		}
		r.wantStatus(t, "frozen", domain.StatusUnfulfilled, w...)
		if err := r.shop.Catalogue.UnfreezeProduct(r.ctx, pid); err != nil {
			t.Fatal(err)
		}
		if o, err := r.shop.Sales.FulfilOrder(r.ctx, w[0].No()); err != nil || o.Status() != domain.StatusPaid {
			t.Fatalf("fulfil: %v", err)
		}
		as, err := r.ledger.Alerts().List(r.ctx, domain.AlertFilter{Status: domain.AlertsAll, Kind: "paid_unfulfilled", Product: pid, Limit: 10})
		if err != nil || len(as) != 1 || as[0].Open() || as[0].AckedBy != application.SystemActor || as[0].AckNote != application.FulfilNote {
			t.Fatalf("alert after the operator's fulfil: %+v, %v", as, err)
		}
		r.check(t, pid, w)
	})

	// Imports from many goroutines, late payments that make more waiting orders, and
	// operators' fulfils, all at once: every order is filled at most once, none is left waiting
	// while stock could fill it, and the ledger and gate agree.
	t.Run("concurrent imports, late payments and fulfils", func(t *testing.T) {
		r := newRig(t)
		pid := r.product(t)
		qtys := []int{2, 1, 3, 1, 1, 2, 1, 3, 1, 2, 1, 1} // 19 units
		all := r.closed(t, pid, false, qtys...)
		w, late := all[:6], all[6:]
		for _, o := range w {
			r.payLate(t, o, false)
		}
		const importers, batch = 6, 3 // 18 codes for 23 units waiting at the end
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range importers {
			wg.Go(func() {
				<-start
				if _, err := r.importCodesErr(pid, batch); err != nil {
					t.Errorf("import: %v", err)
				}
			})
		}
		for _, o := range late {
			wg.Go(func() {
				<-start
				if _, err := r.shop.Payments.ApplyPayment(r.ctx, paidNotice(o)); err != nil && !errors.Is(err, domain.ErrUnavailable) {
					t.Errorf("late payment: %v", err)
				}
			})
		}
		for i := range 8 {
			o := all[i%len(all)]
			wg.Go(func() {
				<-start
				_, err := r.shop.Sales.FulfilOrder(r.ctx, o.No())
				switch {
				case err == nil, errors.Is(err, domain.ErrInvalidTransition), errors.Is(err, domain.ErrSoldOut),
					errors.Is(err, domain.ErrUnavailable):
				default:
					t.Errorf("fulfil: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		// A late payment answered ErrUnavailable (it kept losing races) is sent again, as a
		// provider does.
		for _, o := range late {
			if r.order(t, o.No()).Status() == domain.StatusClosed {
				if _, err := r.shop.Payments.ApplyPayment(r.ctx, paidNotice(o)); err != nil {
					t.Fatalf("late payment again: %v", err)
				}
			}
		}
		r.check(t, pid, all)
		// None skipped: the oldest order still waiting does not fit in the stock left.
		var waiting []domain.Order
		for _, o := range all {
			if o = r.order(t, o.No()); o.Status() == domain.StatusUnfulfilled {
				waiting = append(waiting, o)
			} else if o.Status() != domain.StatusPaid {
				t.Fatalf("order %s ended %s", o.No(), o.Status())
			}
		}
		slices.SortFunc(waiting, func(a, b domain.Order) int {
			if c := a.PaidAt().Compare(b.PaidAt()); c != 0 {
				return c
			}
			return strings.Compare(string(a.No()), string(b.No()))
		})
		lv, _, _ := r.gate.Levels(r.ctx, pid)
		if len(waiting) > 0 && lv.Stock >= int64(waiting[0].Qty()) {
			t.Fatalf("order %s (qty %d) left waiting with %d codes in stock", waiting[0].No(), waiting[0].Qty(), lv.Stock)
		}
		if len(waiting) == 0 {
			t.Fatal("18 codes for 19 units, and no order waits")
		}
		// Enough codes for the rest: every order ends PAID, each once.
		r.importCodes(t, pid, 23)
		r.wantStatus(t, "after the last import", domain.StatusPaid, all...)
		r.check(t, pid, all)
	})
}

func TestRestockFillsWaitingOrdersMemory(t *testing.T) {
	runRestock(t, func(t *testing.T) *restockRig {
		return newRestockRig(t, memory.NewLedger(), func(c domain.Clock) domain.StockGate { return memory.NewGate(c) })
	})
}

func TestRestockFillsWaitingOrdersMariaDB(t *testing.T) {
	real := newRealLedger(t, "cardshop_test_restock", true)
	runRestock(t, func(t *testing.T) *restockRig {
		l, rc := real.get(t)
		return newRestockRig(t, l, func(domain.Clock) domain.StockGate { return redisgate.New(rc) })
	})
}

// The sweep fills waiting orders where stock is there without an import (a crash between an
// import and its fill, stock given back by an expired order).
func TestSweepFillsWaitingOrders(t *testing.T) {
	r := newRestockRig(t, memory.NewLedger(), func(c domain.Clock) domain.StockGate { return memory.NewGate(c) })
	pid := r.product(t)
	r.importCodes(t, pid, 1)
	holder := r.place(t, "holder", pid, 1) // holds the unit until it expires
	w := r.waiting(t, pid, 1)
	r.wantStatus(t, "while the unit is held", domain.StatusUnfulfilled, w...)
	n, err := r.shop.Sales.Sweep(r.ctx) // the holder expired while the waiting order was made
	if err != nil {
		t.Fatal(err)
	}
	r.wantStatus(t, "after the sweep", domain.StatusClosed, holder)
	r.wantStatus(t, "after the sweep", domain.StatusPaid, w...)
	if n != 2 {
		t.Fatalf("sweep counted %d, want 1 closed + 1 filled", n)
	}
	r.wantResolved(t, pid, w...)
	r.check(t, pid, append(w, holder))
}
