package application_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// parseCodes turns the fixture's codes into card codes.
func parseCodes(t tester, codes ...string) []domain.CardCode {
	t.Helper()
	out := make([]domain.CardCode, len(codes))
	for i, c := range codes {
		cc, err := domain.ParseCardCode(c)
		if err != nil {
			t.Fatalf("code %q: %v", c, err)
		}
		out[i] = cc
	}
	return out
}

func (f *fixture) freeze(t tester, pid domain.ProductID) {
	t.Helper()
	if err := f.shop.Catalogue.FreezeProduct(f.ctx, pid, "leaked batch"); err != nil {
		t.Fatalf("freeze: %v", err)
	}
}

// reconciled fails unless Reconcile finds no difference for the product.
func (f *fixture) reconciled(t tester, pid domain.ProductID) {
	t.Helper()
	rep, err := f.shop.Catalogue.Reconcile(f.ctx, pid, false)
	if err != nil || rep.Differences != 0 {
		t.Fatalf("reconcile: %v, %d differences: %+v", err, rep.Differences, rep.Checks)
	}
}

func TestVoidCodesRefusesBadInputAndAProductOnSale(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 0)
	codes := parseCodes(t, f.addCodes(t, p.ID(), 3)...)
	tooMany := make([]domain.CardCode, application.MaxVoidCodes+1)
	for i := range tooMany {
		tooMany[i] = codes[0]
	}
	for _, tc := range []struct {
		name   string
		codes  []domain.CardCode
		reason string
	}{
		{"no codes", nil, "leak"},
		{"too many codes", tooMany, "leak"},
		{"an empty code", []domain.CardCode{codes[0], {}}, "leak"},
		{"no reason", codes, "  "},
		{"a reason too long", codes, strings.Repeat("é", application.MaxVoidReason+1)},
	} {
		_, err := f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), tc.codes, tc.reason)
		is(t, tc.name, err, domain.ErrInvalidInput)
	}
	_, err := f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), codes, "leak")
	is(t, "a product on sale", err, domain.ErrProductNotFrozen)
	_, err = f.shop.Catalogue.VoidCodes(f.ctx, p.ID()+1000, codes, "leak")
	is(t, "an unknown product", err, domain.ErrProductNotFound)
	// Frozen in the ledger but not at the gate (a freeze whose gate write failed): refused.
	if err := f.ledger.Products().SetFrozen(f.ctx, p.ID(), true, "half"); err != nil {
		t.Fatal(err)
	}
	_, err = f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), codes, "leak")
	is(t, "a product the gate still sells", err, domain.ErrProductNotFrozen)
	if c := f.counts(t, p.ID()); c[domain.CardUnsold] != 3 || f.levels(t, p.ID()).Stock != 3 {
		t.Fatalf("a refused void changed the pool %v or the gate %+v", c, f.levels(t, p.ID()))
	}
	// Frozen on both sides, but the gate lost its keys: refused until it is rebuilt.
	f.freeze(t, p.ID())
	f.gate.Flush()
	_, err = f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), codes, "leak")
	is(t, "a gate without the product", err, domain.ErrGateNotReady)
	if c := f.counts(t, p.ID()); c[domain.CardUnsold] != 3 {
		t.Fatalf("a refused void changed the pool %v", c)
	}
}

func TestVoidCodesTakesTheProductsSellableCodesOut(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 0)
	other := f.createProduct(t, 3, 0)
	mine := f.addCodes(t, p.ID(), 8)
	theirs := f.addCodes(t, other.ID(), 1)
	paid := f.mustPay(t, f.mustPlace(t, "buyer-1", p.ID(), 1).No())
	sold := f.soldCards(t, paid.No())[0].Code.Reveal()
	var unsold []string
	for _, c := range mine {
		if c != sold {
			unsold = append(unsold, c)
		}
	}
	f.freeze(t, p.ID())
	before := f.levels(t, p.ID())
	res, err := f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), parseCodes(t, unsold[0], unsold[1], unsold[2], sold, theirs[0], "NEVER-IMPORTED", unsold[0]), "leak")
	if err != nil || res.Voided != 3 || res.NotFound != 1 || res.NotVoidable != 3 || !strings.HasPrefix(res.Ref, "void:") {
		t.Fatalf("VoidCodes = %+v, %v; want 3 voided, 1 not found, 3 not voidable", res, err)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != before.Stock-3 || lv.Sold != before.Sold || !lv.Frozen {
		t.Fatalf("gate after the void %+v, before %+v: want 3 units less stock", lv, before)
	}
	if c := f.counts(t, p.ID()); c[domain.CardVoid] != 3 || c[domain.CardUnsold] != 4 || c[domain.CardSold] != 1 {
		t.Fatalf("pool after the void: %v", c)
	}
	es, err := f.ledger.Flows().Entries(f.ctx, res.Ref)
	if err != nil || len(es) != 1 || es[0].Type != domain.FlowVoid || es[0].Qty != 3 || es[0].ProductID != p.ID() {
		t.Fatalf("flow of the void: %+v, %v", es, err)
	}
	f.assertInvariants(t, p.ID())
	f.reconciled(t, p.ID())
	// A void of nothing voidable writes nothing.
	res, err = f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), parseCodes(t, unsold[0], sold), "again")
	if err != nil || res.Voided != 0 || res.NotVoidable != 2 || res.Ref != "" {
		t.Fatalf("second VoidCodes = %+v, %v", res, err)
	}
	// Unfrozen, the product sells exactly the 4 codes left, never a voided one.
	if err := f.shop.Catalogue.UnfreezeProduct(f.ctx, p.ID()); err != nil {
		t.Fatal(err)
	}
	o := f.mustPay(t, f.mustPlace(t, "buyer-2", p.ID(), 3).No())
	o2 := f.mustPay(t, f.mustPlace(t, "buyer-3", p.ID(), 1).No())
	for _, c := range append(f.soldCards(t, o.No()), f.soldCards(t, o2.No())...) {
		for _, v := range unsold[:3] {
			if c.Code.Reveal() == v {
				t.Fatal("a voided code was sold")
			}
		}
	}
	_, err = f.place("buyer-4", p.ID(), 1, f.newKey())
	is(t, "an order after the pool is empty", err, domain.ErrSoldOut)
	f.assertInvariants(t, p.ID())
	f.reconciled(t, p.ID())
}

func TestVoidCodesNeverTakesCodesPromisedToPendingOrders(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 5, 0)
	codes := f.addCodes(t, p.ID(), 5)
	pending := f.mustPlace(t, "buyer-1", p.ID(), 3)
	f.freeze(t, p.ID())
	_, err := f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), parseCodes(t, codes...), "leak")
	var exceeds *domain.VoidExceedsError
	if !errors.As(err, &exceeds) || !errors.Is(err, domain.ErrVoidExceedsFreeStock) || exceeds.Voidable != 5 || exceeds.Free != 2 {
		t.Fatalf("void of every code while 3 are promised: %v; want a VoidExceedsError of 5 and 2", err)
	}
	if c := f.counts(t, p.ID()); c[domain.CardUnsold] != 5 || f.levels(t, p.ID()).Stock != 2 {
		t.Fatalf("a refused void changed the pool %v or the gate %+v", c, f.levels(t, p.ID()))
	}
	res, err := f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), parseCodes(t, codes[:2]...), "leak")
	if err != nil || res.Voided != 2 {
		t.Fatalf("void of the 2 free codes: %+v, %v", res, err)
	}
	// The order placed before the freeze is paid with the 3 codes left.
	if o := f.mustPay(t, pending.No()); o.Status() != domain.StatusPaid || len(f.soldCards(t, o.No())) != 3 {
		t.Fatalf("the pending order after the void: %s", o.Status())
	}
	f.assertInvariants(t, p.ID())
	f.reconciled(t, p.ID())
}

// applyDownGate is the memory gate whose Apply fails while down is set.
type applyDownGate struct {
	*memory.Gate
	down *atomic.Bool
}

func (g applyDownGate) Apply(ctx context.Context, c domain.GateChange) (bool, error) {
	if g.down.Load() {
		return false, fmt.Errorf("gate apply: %w", domain.ErrUnavailable)
	}
	return g.Gate.Apply(ctx, c)
}

// A void whose gate change could not be applied (the gate went down after the commit) is
// applied by the next void before it reads the stock: otherwise the second void would see the
// units of the first as free and take codes promised to a pending order.
func TestVoidCodesAppliesAnEarlierVoidsUnsentGateChangeFirst(t *testing.T) {
	down := new(atomic.Bool)
	f := newFixture(t, withGate(func(g *memory.Gate) domain.StockGate { return applyDownGate{g, down} }))
	p := f.createProduct(t, 5, 0)
	codes := f.addCodes(t, p.ID(), 10)
	pending := f.mustPlace(t, "buyer-1", p.ID(), 4) // 6 free
	f.freeze(t, p.ID())
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil { // the import's and the order's changes are sent
		t.Fatal(err)
	}
	down.Store(true)
	if res, err := f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), parseCodes(t, codes[:4]...), "leak"); err != nil || res.Voided != 4 {
		t.Fatalf("first void: %+v, %v", res, err)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 6 {
		t.Fatalf("gate with the first void unapplied: %+v", lv)
	}
	// While the gate cannot apply it, a second void is refused and changes nothing.
	_, err := f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), parseCodes(t, codes[4:8]...), "leak")
	is(t, "a void while an earlier one's gate change fails", err, domain.ErrUnavailable)
	down.Store(false)
	_, err = f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), parseCodes(t, codes[4:8]...), "leak")
	var exceeds *domain.VoidExceedsError
	if !errors.As(err, &exceeds) || exceeds.Free != 2 {
		t.Fatalf("second void of 4 with 2 free: %v", err)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 2 {
		t.Fatalf("gate after the first void was applied: %+v", lv)
	}
	// The relay's later send changes nothing.
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil {
		t.Fatal(err)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 2 {
		t.Fatalf("gate after the relay: %+v", lv)
	}
	if o := f.mustPay(t, pending.No()); o.Status() != domain.StatusPaid {
		t.Fatalf("pending order: %s", o.Status())
	}
	f.assertInvariants(t, p.ID())
	f.reconciled(t, p.ID())
}

// A void whose gate change has not reached the gate when the product is unfrozen: the unfreeze
// applies it before the gate sells again, and while it cannot, the gate stays frozen.
func TestUnfreezeAppliesAVoidsUnsentGateChangeFirst(t *testing.T) {
	down := new(atomic.Bool)
	f := newFixture(t, withGate(func(g *memory.Gate) domain.StockGate { return applyDownGate{g, down} }))
	p := f.createProduct(t, 5, 0)
	codes := f.addCodes(t, p.ID(), 6)
	f.freeze(t, p.ID())
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	if res, err := f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), parseCodes(t, codes[:4]...), "leak"); err != nil || res.Voided != 4 {
		t.Fatalf("void: %+v, %v", res, err)
	}
	err := f.shop.Catalogue.UnfreezeProduct(f.ctx, p.ID())
	is(t, "an unfreeze while the void's gate change cannot be applied", err, domain.ErrUnavailable)
	if lv := f.levels(t, p.ID()); !lv.Frozen || lv.Stock != 6 {
		t.Fatalf("gate after the refused unfreeze: %+v, want still frozen", lv)
	}
	down.Store(false)
	if err := f.shop.Catalogue.UnfreezeProduct(f.ctx, p.ID()); err != nil {
		t.Fatal(err)
	}
	if lv := f.levels(t, p.ID()); lv.Frozen || lv.Stock != 2 {
		t.Fatalf("gate after the unfreeze: %+v, want open with the 2 codes not voided", lv)
	}
	// Only the two codes left can be sold.
	f.mustPlace(t, "buyer-1", p.ID(), 2)
	if _, err := f.place("buyer-2", p.ID(), 1, f.newKey()); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("a third unit: %v, want sold out", err)
	}
	f.assertInvariants(t, p.ID())
	f.reconciled(t, p.ID())
}

// A frozen product with orders placed before the freeze: while they are paid, fail and
// expire, several operators void overlapping lists of codes at once. No order goes
// UNFULFILLED, each code is voided once, never more than the free stock, and the ledger, the
// flow and the gate still agree.
func TestVoidCodesRacesPaymentsFailuresAndExpiries(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			f := newFixture(t)
			p := f.createProduct(t, 3, 0)
			codes := f.addCodes(t, p.ID(), 60)
			var orders []domain.Order
			for i := range 24 {
				orders = append(orders, f.mustPlace(t, domain.BuyerID(fmt.Sprintf("buyer-%02d", i)), p.ID(), 1+i%3))
			}
			f.freeze(t, p.ID())
			free := f.levels(t, p.ID()).Stock
			var returned int64 // units the failures and expiries may give back
			for i, o := range orders {
				if i%3 != 0 {
					returned += int64(o.Qty())
				}
			}
			f.clock.Advance(f.cfg.OrderTimeout + time.Minute)

			var wg sync.WaitGroup
			var voided atomic.Int64
			start := make(chan struct{})
			for i, o := range orders {
				wg.Go(func() {
					<-start
					var err error
					switch i % 3 {
					case 0:
						_, err = f.pay(t, o.No())
					case 1:
						_, err = f.shop.Payments.ApplyPayment(f.ctx, domain.PaymentNotice{OrderNo: o.No(), Paid: false, Reason: "declined"})
					default:
						err = f.shop.Sales.CloseExpired(f.ctx, o.No())
					}
					if err != nil {
						t.Errorf("order %s (%d): %v", o.No(), i%3, err)
					}
				})
			}
			for v := range 6 {
				wg.Go(func() {
					<-start
					// Overlapping lists of 5 codes: 30-34, 33-37, 36-40, …
					res, err := f.shop.Catalogue.VoidCodes(f.ctx, p.ID(), parseCodes(t, codes[30+3*v:35+3*v]...), fmt.Sprintf("leak %d", v))
					if err != nil && !errors.Is(err, domain.ErrVoidExceedsFreeStock) {
						t.Errorf("void %d: %v", v, err)
					}
					voided.Add(int64(res.Voided))
				})
			}
			close(start)
			wg.Wait()

			if c := f.counts(t, p.ID()); c[domain.CardVoid] != voided.Load() {
				t.Fatalf("%d codes VOID, the voids report %d", c[domain.CardVoid], voided.Load())
			}
			if voided.Load() > free+returned {
				t.Fatalf("voided %d codes, more than the %d free at the freeze and the %d given back since", voided.Load(), free, returned)
			}
			if voided.Load() == 0 {
				t.Fatal("no void went through")
			}
			for i, o := range orders {
				got := f.order(t, o.No())
				if i%3 == 0 && (got.Status() != domain.StatusPaid || len(f.soldCards(t, o.No())) != o.Qty()) {
					t.Fatalf("order %s paid during the voids is %s", o.No(), got.Status())
				}
			}
			f.assertInvariants(t, p.ID())
			f.reconciled(t, p.ID())
		})
	}
}
