package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// cardIDs lists the cards' ids.
func cardIDs(cards []domain.Card) []int64 {
	out := make([]int64, len(cards))
	for i, c := range cards {
		out[i] = c.ID
	}
	return out
}

// A buyer who read the codes and is refunded keeps no working code that is sold again: the
// default refund voids revealed codes (flow refund-void, gate stock not increased), and the
// next buyer gets only codes nobody has seen.
func TestRefundVoidsCodesTheBuyerHasSeen(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 2, 0)
	f.addCodes(t, p.ID(), 3)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.mustPay(t, o.No())
	f.clock.Advance(time.Minute)
	readAt := f.clock.Now()
	v, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No())
	if err != nil || len(v.Cards) != 2 {
		t.Fatalf("buyer's read: %d codes, %v; want 2", len(v.Cards), err)
	}
	seen := cardIDs(v.Cards)
	if !v.Order.RevealedAt().Equal(readAt) || !f.order(t, o.No()).RevealedAt().Equal(readAt) {
		t.Fatalf("revealed at %v (answered) / %v (stored), want %v", v.Order.RevealedAt(), f.order(t, o.No()).RevealedAt(), readAt)
	}
	f.clock.Advance(time.Minute)
	again, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No())
	if err != nil || !slices.Equal(cardIDs(again.Cards), seen) || !f.order(t, o.No()).RevealedAt().Equal(readAt) {
		t.Fatalf("second read: %v, codes %v, revealed at %v; want the same codes and the first time",
			err, cardIDs(again.Cards), f.order(t, o.No()).RevealedAt())
	}

	lv := f.levels(t, p.ID())
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Reason: "buyer asked"})
	is(t, "refund", err, nil)
	if res.Order.Status() != domain.StatusRefunded || res.Voided != 2 || res.Recycled != 0 || !res.Order.RevealedAt().Equal(readAt) {
		t.Fatalf("refund answered %s, recycled %d, voided %d, revealed at %v; want 2 voided",
			res.Order.Status(), res.Recycled, res.Voided, res.Order.RevealedAt())
	}
	if c := f.counts(t, p.ID()); c[domain.CardVoid] != 2 || c[domain.CardSold] != 0 || c[domain.CardRecycled] != 0 || c[domain.CardUnsold] != 1 {
		t.Fatalf("pool %v, want 2 VOID and 1 UNSOLD", c)
	}
	if got := f.levels(t, p.ID()); got.Stock != lv.Stock || got.Sold != lv.Sold-2 {
		t.Fatalf("gate %+v after the refund, want stock %d (not increased), sold %d", got, lv.Stock, lv.Sold-2)
	}
	if ft := f.flowTypes(t, o.No()); ft[domain.FlowRefundVoid] != 1 || ft[domain.FlowRefundRestore] != 0 {
		t.Fatalf("flow rows %v, want one refund-void and no refund-restore", ft)
	}
	if v, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No()); err != nil || len(v.Cards) != 0 {
		t.Fatalf("read after the refund: %d codes, %v; want none", len(v.Cards), err)
	}

	_, err = f.place("bob", p.ID(), 2, f.newKey())
	is(t, "order of more codes than were never seen", err, domain.ErrSoldOut)
	b := f.mustPlace(t, "bob", p.ID(), 1)
	f.mustPay(t, b.No())
	if got := cardIDs(f.soldCards(t, b.No())); len(got) != 1 || slices.Contains(seen, got[0]) {
		t.Fatalf("bob got code %v, which alice saw (%v)", got, seen)
	}
	f.assertInvariants(t, p.ID())
}

// An operator's read with codes is a reveal like the buyer's; without codes it records nothing.
func TestAdminReadWithCodesIsAReveal(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 2, 4)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.mustPay(t, o.No())
	v, err := f.shop.Sales.AdminOrder(f.ctx, o.No())
	if err != nil || len(v.Cards) != 0 || v.Order.Revealed() || f.order(t, o.No()).Revealed() {
		t.Fatalf("admin read without codes: %d codes, %v, revealed %v", len(v.Cards), err, f.order(t, o.No()).Revealed())
	}
	v, err = f.shop.Sales.AdminOrderCodes(f.ctx, o.No(), opReader)
	if err != nil || len(v.Cards) != 2 || !v.Order.Revealed() || !f.order(t, o.No()).Revealed() {
		t.Fatalf("admin read with codes: %d codes, %v, revealed %v", len(v.Cards), err, f.order(t, o.No()).Revealed())
	}
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if err != nil || res.Voided != 2 {
		t.Fatalf("refund after the admin's read: %v, voided %d; want 2", err, res.Voided)
	}
	f.assertInvariants(t, p.ID())
}

// opReader reads codes in the use-case tests: an operator named "olga".
var opReader = application.Reader{Identity: application.Identity{Name: "olga", Role: domain.RoleOperator},
	ClientAddr: "192.0.2.7"}

// Every read of an order's codes by an operator is in the audit log: who, from where, which
// order, how many codes and their card ids, never a code; a read without codes, or of an order
// with none to show, writes nothing.
func TestAnOperatorsReadOfCodesIsAudited(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 4)
	o := f.mustPlace(t, "alice", p.ID(), 3)
	if _, err := f.shop.Sales.AdminOrderCodes(f.ctx, o.No(), opReader); err != nil { // PENDING: no code to show
		t.Fatal(err)
	}
	if _, err := f.shop.Sales.AdminOrder(f.ctx, o.No()); err != nil {
		t.Fatal(err)
	}
	if got := codeReads(t, f); len(got) != 0 {
		t.Fatalf("reads that showed no code were audited: %+v", got)
	}
	f.mustPay(t, o.No())
	for range 2 { // the second read is no new reveal, but a read all the same
		v, err := f.shop.Sales.AdminOrderCodes(f.ctx, o.No(), opReader)
		if err != nil || len(v.Cards) != 3 {
			t.Fatalf("read with codes: %d codes, %v", len(v.Cards), err)
		}
	}
	got := codeReads(t, f)
	if len(got) != 2 {
		t.Fatalf("audit entries %s: %+v, want 2", application.ActionCodesRead, got)
	}
	ids := cardIDs(f.soldCards(t, o.No()))
	slices.Sort(ids)
	for _, e := range got {
		if e.Operator != "olga" || e.Role != domain.RoleOperator || e.Target != "order "+string(o.No()) ||
			e.ClientAddr != "192.0.2.7" || e.Result != "200" {
			t.Fatalf("entry %+v: want olga (operator) from 192.0.2.7 on order %s, 200", e, o.No())
		}
		var params struct {
			Cards int    `json:"cards"`
			IDs   string `json:"ids"`
		}
		if err := json.Unmarshal([]byte(e.Params), &params); err != nil || params.Cards != 3 ||
			params.IDs != fmt.Sprintf("%d-%d", ids[0], ids[2]) {
			t.Fatalf("entry params %s (%v): want 3 cards, ids %v", e.Params, err, ids)
		}
		for _, c := range f.soldCards(t, o.No()) {
			if strings.Contains(e.Params, c.Code.Reveal()) {
				t.Fatalf("entry params %s hold a code", e.Params)
			}
		}
	}
}

// A viewer, or a reader without a name, reads no code and reveals nothing.
func TestReadingCodesNeedsANamedOperator(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 2, 2)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	f.mustPay(t, o.No())
	for _, by := range []application.Reader{
		{Identity: application.Identity{Name: "vera", Role: domain.RoleViewer}},
		{Identity: application.Identity{Role: domain.RoleAdmin}},
	} {
		v, err := f.shop.Sales.AdminOrderCodes(f.ctx, o.No(), by)
		if !errors.Is(err, domain.ErrForbidden) || len(v.Cards) != 0 {
			t.Fatalf("read by %+v: %d codes, err %v; want ErrForbidden", by, len(v.Cards), err)
		}
	}
	if f.order(t, o.No()).Revealed() || len(codeReads(t, f)) != 0 {
		t.Fatal("a refused read revealed the order or wrote an entry")
	}
}

// A read whose audit entry cannot be stored shows no code.
func TestAReadOfCodesThatCannotBeAuditedShowsNone(t *testing.T) {
	f := newFixture(t, withLedger(func(l *memory.Ledger) domain.Ledger { return brokenAuditLog{l} }))
	p := f.createProduct(t, 2, 2)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	f.mustPay(t, o.No())
	v, err := f.shop.Sales.AdminOrderCodes(f.ctx, o.No(), opReader)
	if !errors.Is(err, domain.ErrUnavailable) || len(v.Cards) != 0 {
		t.Fatalf("read with the audit log down: %d codes, err %v; want ErrUnavailable and none", len(v.Cards), err)
	}
}

// brokenAuditLog is a ledger whose audit log cannot be written.
type brokenAuditLog struct{ *memory.Ledger }

func (l brokenAuditLog) Audit() domain.AuditLog { return failingAudit{l.Ledger.Audit()} }

type failingAudit struct{ domain.AuditLog }

func (failingAudit) Append(context.Context, domain.AuditEntry) (int64, error) {
	return 0, fmt.Errorf("audit: %w", domain.ErrUnavailable)
}

func codeReads(t *testing.T, f *fixture) []domain.AuditEntry {
	t.Helper()
	got, err := f.shop.Admin.AuditLog(f.ctx, domain.AuditFilter{Action: application.ActionCodesRead, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// An operator may recycle revealed codes on purpose; void and recycle together are refused.
func TestRefundRecyclesRevealedCodesOnlyWhenAsked(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 2, 2)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.mustPay(t, o.No())
	v, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No())
	if err != nil || len(v.Cards) != 2 {
		t.Fatalf("buyer's read: %d codes, %v", len(v.Cards), err)
	}
	lv, counts := f.levels(t, p.ID()), f.counts(t, p.ID())
	_, err = f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Void: true, Recycle: true})
	is(t, "refund with void and recycle", err, domain.ErrInvalidInput)
	if st := f.order(t, o.No()).Status(); st != domain.StatusPaid || f.levels(t, p.ID()) != lv ||
		fmt.Sprint(f.counts(t, p.ID())) != fmt.Sprint(counts) {
		t.Fatalf("a refused refund changed something: order %s, gate %+v, pool %v", st, f.levels(t, p.ID()), f.counts(t, p.ID()))
	}

	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Recycle: true})
	if err != nil || res.Recycled != 2 || res.Voided != 0 {
		t.Fatalf("refund with recycle: %v, recycled %d, voided %d; want 2 recycled", err, res.Recycled, res.Voided)
	}
	if got := f.levels(t, p.ID()); got.Stock != lv.Stock+2 || got.Sold != lv.Sold-2 {
		t.Fatalf("gate %+v, want the 2 units back in stock", got)
	}
	if ft := f.flowTypes(t, o.No()); ft[domain.FlowRefundRestore] != 1 || ft[domain.FlowRefundVoid] != 0 {
		t.Fatalf("flow rows %v, want one refund-restore", ft)
	}
	b := f.mustPlace(t, "bob", p.ID(), 2)
	f.mustPay(t, b.No())
	if got := cardIDs(f.soldCards(t, b.No())); !slices.Equal(got, cardIDs(v.Cards)) {
		t.Fatalf("bob got %v, want the recycled %v", got, cardIDs(v.Cards))
	}
	f.assertInvariants(t, p.ID())
}

// revealHookLedger is a memory ledger whose order repository can fail MarkRevealed, and which
// runs beforeReveal / beforeTx once, just before the next MarkRevealed / Atomically: a way to
// put another request exactly between a use case's read and its conditional write.
type revealHookLedger struct {
	*memory.Ledger
	revealErr    error
	beforeReveal atomic.Pointer[func()]
	beforeTx     atomic.Pointer[func()]
}

func (l *revealHookLedger) Orders() domain.OrderRepo { return revealHookOrders{l.Ledger.Orders(), l} }

func (l *revealHookLedger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	if hook := l.beforeTx.Swap(nil); hook != nil {
		(*hook)()
	}
	return l.Ledger.Atomically(ctx, fn)
}

type revealHookOrders struct {
	domain.OrderRepo
	l *revealHookLedger
}

func (o revealHookOrders) MarkRevealed(ctx context.Context, no domain.OrderNo, at time.Time) (bool, error) {
	if hook := o.l.beforeReveal.Swap(nil); hook != nil {
		(*hook)()
	}
	if o.l.revealErr != nil {
		return false, o.l.revealErr
	}
	return o.OrderRepo.MarkRevealed(ctx, no, at)
}

// When the reveal cannot be recorded the codes are not shown (503 at the API), and the order
// stays unrevealed, so a refund still recycles them.
func TestCodesStayHiddenWhenTheRevealCannotBeRecorded(t *testing.T) {
	for _, cause := range []error{fmt.Errorf("update: %w", domain.ErrUnavailable), errors.New("disk on fire")} {
		t.Run(cause.Error(), func(t *testing.T) {
			var l *revealHookLedger
			f := newFixture(t, withLedger(func(m *memory.Ledger) domain.Ledger {
				l = &revealHookLedger{Ledger: m, revealErr: cause}
				return l
			}))
			p := f.createProduct(t, 2, 2)
			o := f.mustPlace(t, "alice", p.ID(), 2)
			f.mustPay(t, o.No())
			v, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No())
			is(t, "buyer's read while the reveal fails", err, domain.ErrUnavailable)
			if len(v.Cards) != 0 || f.order(t, o.No()).Revealed() {
				t.Fatalf("failed reveal: %d codes shown, revealed %v", len(v.Cards), f.order(t, o.No()).Revealed())
			}
			v, err = f.shop.Sales.AdminOrderCodes(f.ctx, o.No(), opReader)
			is(t, "admin's read while the reveal fails", err, domain.ErrUnavailable)
			if len(v.Cards) != 0 {
				t.Fatalf("failed reveal: %d codes shown to the operator", len(v.Cards))
			}
			res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
			if err != nil || res.Recycled != 2 {
				t.Fatalf("refund of never-shown codes: %v, recycled %d", err, res.Recycled)
			}
			f.assertInvariants(t, p.ID())
		})
	}
}

// A refund that decided "never revealed, recycle" does not complete once a reveal is recorded
// between its read and its write: it decides again and voids the codes the buyer now has.
func TestRevealBetweenRefundReadAndWriteVoids(t *testing.T) {
	var l *revealHookLedger
	f := newFixture(t, withLedger(func(m *memory.Ledger) domain.Ledger { l = &revealHookLedger{Ledger: m}; return l }))
	p := f.createProduct(t, 2, 2)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.mustPay(t, o.No())
	var shown []domain.Card
	hook := func() {
		v, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No())
		if err != nil {
			t.Errorf("buyer's read inside the refund: %v", err)
		}
		shown = v.Cards
	}
	l.beforeTx.Store(&hook)
	res, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
	if len(shown) != 2 {
		t.Fatalf("the buyer's read between the refund's read and write showed %d codes, want 2", len(shown))
	}
	if err != nil || res.Voided != 2 || res.Recycled != 0 {
		t.Fatalf("refund: %v, recycled %d, voided %d; want the 2 shown codes voided", err, res.Recycled, res.Voided)
	}
	if c := f.counts(t, p.ID()); c[domain.CardVoid] != 2 || c[domain.CardRecycled] != 0 {
		t.Fatalf("pool %v, want 2 VOID", c)
	}
	f.assertInvariants(t, p.ID())
}

// A read that found the order PAID records no reveal and shows no code once a refund got in
// between: the codes were recycled unseen.
func TestRefundBetweenReadAndRevealShowsNothing(t *testing.T) {
	var l *revealHookLedger
	f := newFixture(t, withLedger(func(m *memory.Ledger) domain.Ledger { l = &revealHookLedger{Ledger: m}; return l }))
	p := f.createProduct(t, 2, 2)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.mustPay(t, o.No())
	var res application.RefundResult
	hook := func() {
		var err error
		if res, err = f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()}); err != nil {
			t.Errorf("refund inside the read: %v", err)
		}
	}
	l.beforeReveal.Store(&hook)
	v, err := f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No())
	is(t, "buyer's read", err, nil)
	if len(v.Cards) != 0 || v.Order.Status() != domain.StatusRefunded {
		t.Fatalf("read raced by a refund: %d codes, order %s; want none, REFUNDED", len(v.Cards), v.Order.Status())
	}
	if res.Recycled != 2 || f.order(t, o.No()).Revealed() {
		t.Fatalf("refund recycled %d, order revealed %v; want 2 recycled, never revealed", res.Recycled, f.order(t, o.No()).Revealed())
	}
	f.assertInvariants(t, p.ID())
}

// Buyers' reads and default refunds of one order at once, many rounds: either the codes were
// recycled and nobody saw them, or they were voided (whoever saw them); and the stored reveal
// says which.
func TestRevealRacesRefund(t *testing.T) {
	f := newFixture(t)
	outcomes := map[string]int{}
	for round := range 40 {
		p := f.createProduct(t, 2, 2)
		o := f.mustPlace(t, "alice", p.ID(), 2)
		f.mustPay(t, o.No())
		const n = 8
		views := make([]application.OrderView, n)
		refunds := make([]application.RefundResult, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				if i%2 == 0 {
					views[i], errs[i] = f.shop.Sales.BuyerOrder(f.ctx, "alice", o.No())
				} else {
					refunds[i], errs[i] = f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No()})
				}
			})
		}
		close(start)
		wg.Wait()
		shown, recycled, voided := false, 0, 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d, call %d: %v", round, i, errs[i])
			}
			shown = shown || len(views[i].Cards) > 0
			if i%2 == 1 {
				recycled, voided = max(recycled, refunds[i].Recycled), max(voided, refunds[i].Voided)
			}
		}
		stored := f.order(t, o.No())
		c := f.counts(t, p.ID())
		switch {
		case recycled == 2 && voided == 0 && !shown && !stored.Revealed():
			outcomes["recycled unseen"]++
		case voided == 2 && recycled == 0 && stored.Revealed():
			outcomes[fmt.Sprintf("voided, shown %v", shown)]++
		default:
			t.Fatalf("round %d: shown %v, recycled %d, voided %d, stored revealed %v, pool %v",
				round, shown, recycled, voided, stored.Revealed(), c)
		}
		if c[domain.CardSold] != 0 || c[domain.CardVoid] != int64(voided) || c[domain.CardRecycled] != int64(recycled) {
			t.Fatalf("round %d: pool %v, want %d VOID and %d RECYCLED", round, c, voided, recycled)
		}
		f.assertInvariants(t, p.ID())
	}
	t.Logf("outcomes: %v", outcomes)
}
