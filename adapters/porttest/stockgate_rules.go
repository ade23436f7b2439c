package porttest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// runSaleRules checks the sale rules the gate enforces inside Reserve: the window, judged by
// the gate's own clock, and the per-buyer holding limit with every road that gives units back.
func runSaleRules(t *testing.T, newGate func(t *testing.T) domain.StockGate, o stockGateOptions) {
	setRules := func(t *testing.T, g domain.StockGate, p domain.ProductID, r domain.SaleRules) {
		t.Helper()
		if err := g.SetRules(t.Context(), p, r); err != nil {
			t.Fatalf("SetRules(%+v): %v", r, err)
		}
	}
	want := func(t *testing.T, g domain.StockGate, r domain.Reservation, outcome domain.ReserveOutcome) domain.ReserveResult {
		t.Helper()
		res := reserve(t, g, r)
		if res.Outcome != outcome {
			t.Fatalf("Reserve(%s by %s, qty %d) = %s, want %s", r.OrderNo, r.Buyer, r.Qty, describe(res),
				describe(domain.ReserveResult{Outcome: outcome}))
		}
		return res
	}
	wantHeld := func(t *testing.T, g domain.StockGate, p domain.ProductID, want map[domain.BuyerID]int64) {
		t.Helper()
		got, err := g.HeldCounts(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("HeldCounts = %v, want %v", got, want)
		}
		for b, n := range want {
			if got[b] != n {
				t.Fatalf("HeldCounts = %v, want %v", got, want)
			}
		}
	}
	// another is a new order of r's buyer with a fresh key.
	another := func(r domain.Reservation, qty int) domain.Reservation {
		n := newReservation(r.Product, qty)
		n.Buyer = r.Buyer
		return n
	}

	t.Run("window: refused before the start with the wait, open inside, refused from the end", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		starts := o.now().Add(800 * time.Millisecond)
		setRules(t, g, p, domain.SaleRules{StartsAt: starts, EndsAt: starts.Add(800 * time.Millisecond)})
		early := newReservation(p, 2)
		res := want(t, g, early, domain.NotStarted)
		if res.StartsIn <= 0 || res.StartsIn > 800*time.Millisecond || res.Left != 10 {
			t.Fatalf("NotStarted StartsIn = %s, left %d; want within (0, 800ms], 10 left", res.StartsIn, res.Left)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10})
		o.elapse(t, 1000*time.Millisecond) // 200 ms into the window
		want(t, g, early, domain.Reserved) // the refused request claimed nothing: its key works now
		o.elapse(t, 800*time.Millisecond)  // 200 ms after the end
		want(t, g, newReservation(p, 1), domain.Ended)
		wantLevels(t, g, p, domain.GateLevels{Stock: 8, Sold: 2})
		// A replay of an order placed in the window still answers with its order.
		if res := reserve(t, g, early); res.Outcome != domain.Replayed || res.ExistingOrder != early.OrderNo {
			t.Fatalf("a replay after the end = %s, want Replayed of %s", describe(res), early.OrderNo)
		}
	})

	t.Run("window: a late re-reservation is judged at the end only, at its PaidAt when set", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 5})
		// The order was placed inside the window: a start moved later is not judged again.
		setRules(t, g, p, domain.SaleRules{StartsAt: o.now().Add(time.Hour), EndsAt: o.now().Add(2 * time.Hour)})
		want(t, g, newReservation(p, 1), domain.NotStarted)
		want(t, g, lateReservation(newReservation(p, 2), "attempt-1"), domain.Reserved)

		ends := o.now().Add(-time.Minute).Truncate(time.Millisecond)
		setRules(t, g, p, domain.SaleRules{EndsAt: ends})
		late := lateReservation(newReservation(p, 1), "attempt-2")
		res := want(t, g, late, domain.Ended) // paid now: after the end
		if res.Left != 3 {
			t.Fatalf("Ended left %d, want 3", res.Left)
		}
		late.PaidAt = ends // paid at the very end
		want(t, g, late, domain.Ended)
		wantLevels(t, g, p, domain.GateLevels{Stock: 3, Sold: 2})
		// Paid a millisecond before the end (an operator's fulfil of an order whose payment came
		// in time): reserved, under the same Ref the refusals left unclaimed.
		late.PaidAt = ends.Add(-time.Millisecond)
		want(t, g, late, domain.Reserved)
		wantLevels(t, g, p, domain.GateLevels{Stock: 2, Sold: 3})
		// The end is checked after frozen and before sold out.
		big := lateReservation(newReservation(p, 4), "attempt-3")
		want(t, g, big, domain.Ended)
		if err := g.SetFrozen(t.Context(), p, true); err != nil {
			t.Fatal(err)
		}
		want(t, g, big, domain.Frozen)
	})

	t.Run("window: checked after frozen, before sold out; rules without bounds change nothing", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 0, Frozen: true})
		setRules(t, g, p, domain.SaleRules{StartsAt: o.now().Add(time.Hour)})
		want(t, g, newReservation(p, 1), domain.Frozen)
		if err := g.SetFrozen(t.Context(), p, false); err != nil {
			t.Fatal(err)
		}
		want(t, g, newReservation(p, 1), domain.NotStarted) // not SoldOut: the sale has not begun
		setRules(t, g, p, domain.SaleRules{})
		want(t, g, newReservation(p, 1), domain.SoldOut)
	})

	t.Run("window: a change takes effect at the next reservation", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 5})
		setRules(t, g, p, domain.SaleRules{StartsAt: o.now().Add(time.Hour)})
		want(t, g, newReservation(p, 1), domain.NotStarted)
		setRules(t, g, p, domain.SaleRules{StartsAt: o.now().Add(-time.Second)}) // moved earlier: on sale now
		want(t, g, newReservation(p, 1), domain.Reserved)
		setRules(t, g, p, domain.SaleRules{EndsAt: o.now().Add(-time.Millisecond)}) // closed early
		want(t, g, newReservation(p, 1), domain.Ended)
	})

	t.Run("limit: a buyer holds at most the limit, another buyer is unaffected", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		setRules(t, g, p, domain.SaleRules{BuyerLimit: 3})
		first := newReservation(p, 2)
		want(t, g, first, domain.Reserved)
		over := another(first, 2)
		res := want(t, g, over, domain.HoldingLimit)
		if res.Left != 18 {
			t.Fatalf("HoldingLimit left %d, want 18", res.Left)
		}
		want(t, g, another(first, 1), domain.Reserved)
		want(t, g, another(first, 1), domain.HoldingLimit)
		wantLevels(t, g, p, domain.GateLevels{Stock: 17, Sold: 3})
		want(t, g, newReservation(p, 3), domain.Reserved) // another buyer
		// A replay is not a new holding.
		if res := reserve(t, g, first); res.Outcome != domain.Replayed {
			t.Fatalf("a replay at the limit = %s, want Replayed", describe(res))
		}
		// Checked before sold out: over the limit and over the stock is the limit.
		big := newReservation(p, 20)
		setRules(t, g, p, domain.SaleRules{BuyerLimit: 19})
		want(t, g, big, domain.HoldingLimit)
	})

	t.Run("limit: cancel, release and a closing order's change give units back", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		setRules(t, g, p, domain.SaleRules{BuyerLimit: 2})
		r := newReservation(p, 2)
		want(t, g, r, domain.Reserved)
		want(t, g, another(r, 1), domain.HoldingLimit)
		if ok, err := g.Cancel(t.Context(), r); err != nil || !ok {
			t.Fatalf("Cancel = %v, %v", ok, err)
		}
		orphan := another(r, 2)
		want(t, g, orphan, domain.Reserved) // the cancel gave both back
		if ok, err := g.ReleaseOrphan(t.Context(), holdOf(orphan)); err != nil || !ok {
			t.Fatalf("ReleaseOrphan = %v, %v", ok, err)
		}
		placed := another(r, 2)
		want(t, g, placed, domain.Reserved) // the release gave both back
		// The order is written: its units follow it, and still count against the buyer.
		if err := g.Forget(t.Context(), p, []domain.OrderNo{placed.OrderNo}); err != nil {
			t.Fatal(err)
		}
		want(t, g, another(r, 1), domain.HoldingLimit)
		// It closes unpaid: the change that returns its units returns them to the buyer too.
		closed := domain.GateChange{Product: p, Ref: string(placed.OrderNo) + ":close", Stock: 2, Sold: -2, Buyer: r.Buyer, Held: -2}
		for range 2 { // once per ref
			if _, err := g.Apply(t.Context(), closed); err != nil {
				t.Fatal(err)
			}
		}
		want(t, g, another(r, 2), domain.Reserved)
		want(t, g, another(r, 1), domain.HoldingLimit)
		wantLevels(t, g, p, domain.GateLevels{Stock: 18, Sold: 2})
		wantHeld(t, g, p, map[domain.BuyerID]int64{r.Buyer: 2})
		setRules(t, g, p, domain.SaleRules{}) // no limit: no counts
		wantHeld(t, g, p, nil)
	})

	t.Run("limit: a late re-reservation is checked against what the buyer holds now, and counts", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		setRules(t, g, p, domain.SaleRules{BuyerLimit: 2})
		r := newReservation(p, 2)
		want(t, g, r, domain.Reserved)
		// The buyer paid an order that had closed while holding 2 in another: over the limit.
		late := lateReservation(another(r, 2), "attempt-1")
		res := want(t, g, late, domain.HoldingLimit)
		if res.Left != 18 {
			t.Fatalf("HoldingLimit left %d, want 18", res.Left)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 18, Sold: 2})
		wantHeld(t, g, p, map[domain.BuyerID]int64{r.Buyer: 2})
		if ok, err := g.Cancel(t.Context(), r); err != nil || !ok {
			t.Fatalf("Cancel = %v, %v", ok, err)
		}
		// Once the other order gives its units back, the same attempt is reserved (the refusal
		// claimed nothing), and its units count.
		want(t, g, late, domain.Reserved)
		wantHeld(t, g, p, map[domain.BuyerID]int64{r.Buyer: 2})
		want(t, g, another(r, 1), domain.HoldingLimit)
		want(t, g, lateReservation(another(r, 1), "attempt-2"), domain.HoldingLimit)
		// Checked before sold out, as for a new order.
		setRules(t, g, p, domain.SaleRules{BuyerLimit: 20})
		want(t, g, lateReservation(another(r, 19), "attempt-3"), domain.HoldingLimit)
		wantLevels(t, g, p, domain.GateLevels{Stock: 18, Sold: 2})
	})

	t.Run("limit: removing it drops the counts; a rebuild writes them back", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		setRules(t, g, p, domain.SaleRules{BuyerLimit: 2})
		written := newReservation(p, 2)
		want(t, g, written, domain.Reserved)
		inFlight := newReservation(p, 1)
		want(t, g, inFlight, domain.Reserved)
		setRules(t, g, p, domain.SaleRules{})
		setRules(t, g, p, domain.SaleRules{BuyerLimit: 2}) // without a rebuild: the counts start empty
		want(t, g, another(written, 2), domain.Reserved)   // what the port warns about
		// A rebuild sets them from the ledger plus the holds it does not count.
		holds, err := g.BeginRebuild(t.Context(), p, "rebuild-limit", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var drop []domain.OrderNo
		for _, h := range holds {
			if h.OrderNo != inFlight.OrderNo {
				drop = append(drop, h.OrderNo)
			}
		}
		plan := domain.RebuildPlan{Token: "rebuild-limit", Levels: domain.GateLevels{Stock: 15, Sold: 5}, Drop: drop,
			Rules: domain.SaleRules{BuyerLimit: 2}, Held: map[domain.BuyerID]int64{written.Buyer: 4}}
		if err := g.FinishRebuild(t.Context(), p, plan); err != nil {
			t.Fatalf("FinishRebuild: %v", err)
		}
		wantHeld(t, g, p, map[domain.BuyerID]int64{written.Buyer: 4, inFlight.Buyer: 1})
		want(t, g, another(written, 1), domain.HoldingLimit)
		want(t, g, another(inFlight, 1), domain.Reserved) // 1 in flight + 1 = the limit
		want(t, g, another(inFlight, 1), domain.HoldingLimit)
		if ok, err := g.Cancel(t.Context(), inFlight); err != nil || !ok {
			t.Fatalf("Cancel of the kept hold = %v, %v", ok, err)
		}
		want(t, g, another(inFlight, 1), domain.Reserved)
		// Raising a limit keeps the counts: this buyer holds 2.
		setRules(t, g, p, domain.SaleRules{BuyerLimit: 3})
		want(t, g, another(inFlight, 1), domain.Reserved)
		want(t, g, another(inFlight, 1), domain.HoldingLimit)
	})

	t.Run("race: 30 orders of one buyer with a limit of 3, exactly 3 reserve", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 100})
		setRules(t, g, p, domain.SaleRules{BuyerLimit: 3})
		buyer := newReservation(p, 1)
		var wg sync.WaitGroup
		var mu sync.Mutex
		count := map[domain.ReserveOutcome]int{}
		for range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := g.Reserve(t.Context(), another(buyer, 1))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				count[res.Outcome]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		if count[domain.Reserved] != 3 || count[domain.HoldingLimit] != 27 {
			t.Fatalf("outcomes %v, want 3 Reserved and 27 HoldingLimit", count)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 97, Sold: 3})
	})

	t.Run("rules wait for a rebuild's fence, whose finish writes its own", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 5})
		if _, err := g.BeginRebuild(t.Context(), p, "rebuild-rules", time.Minute); err != nil {
			t.Fatal(err)
		}
		ended := domain.SaleRules{EndsAt: o.now().Add(-time.Second)}
		if err := g.SetRules(t.Context(), p, ended); !errors.Is(err, domain.ErrGateRebuilding) {
			t.Fatalf("SetRules on a fenced product: %v, want ErrGateRebuilding", err)
		}
		plan := domain.RebuildPlan{Token: "rebuild-rules", Levels: domain.GateLevels{Stock: 5}}
		if err := g.FinishRebuild(t.Context(), p, plan); err != nil {
			t.Fatal(err)
		}
		want(t, g, newReservation(p, 1), domain.Reserved) // the plan's rules: none
		setRules(t, g, p, ended)
		want(t, g, newReservation(p, 1), domain.Ended)
	})

	t.Run("invalid rules are refused", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		at := o.now()
		for _, r := range []domain.SaleRules{{StartsAt: at, EndsAt: at}, {BuyerLimit: -1}} {
			if err := g.SetRules(t.Context(), p, r); err == nil {
				t.Errorf("SetRules(%+v) accepted", r)
			}
		}
	})
}
