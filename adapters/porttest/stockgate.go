package porttest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// RunStockGate checks a domain.StockGate against the port's contract. newGate returns the gate
// under test; it is called once per case and may return the same shared gate every time. The
// cases about windows and claims that expire let time pass as WithElapse says (by default they
// sleep, about 2.5 s in all).
func RunStockGate(t *testing.T, newGate func(t *testing.T) domain.StockGate, opts ...StockGateOption) {

	t.Run("LevelsMany reads the known products as Levels does", func(t *testing.T) {
		g := newGate(t)
		// Enough products to land on every node of a cluster.
		var ids []domain.ProductID
		want := map[domain.ProductID]domain.GateLevels{}
		for i := range 12 {
			p := NewProductID()
			ids = append(ids, p)
			l := domain.GateLevels{Stock: int64(i * 3), Sold: int64(i), Frozen: i%4 == 1}
			rebuild(t, g, p, l)
			want[p] = l
		}
		r := newReservation(ids[2], 2)
		if res := reserve(t, g, r); res.Outcome != domain.Reserved {
			t.Fatalf("Reserve = %s", describe(res))
		}
		want[ids[2]] = domain.GateLevels{Stock: want[ids[2]].Stock - 2, Sold: want[ids[2]].Sold + 2}
		unknown, frozenOnly := NewProductID(), NewProductID()
		if err := g.SetFrozen(t.Context(), frozenOnly, true); err != nil {
			t.Fatal(err)
		}
		got, err := g.LevelsMany(t.Context(), append(append([]domain.ProductID{unknown}, ids...), frozenOnly, ids[0]))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("LevelsMany returned %d products, want the %d known ones (not %d, %d)", len(got), len(want), unknown, frozenOnly)
		}
		for p, l := range want {
			if got[p] != l {
				t.Errorf("LevelsMany[%d] = %+v, want %+v", p, got[p], l)
			}
			if one, ok, err := g.Levels(t.Context(), p); err != nil || !ok || one != got[p] {
				t.Errorf("Levels(%d) = %+v (ok %v, err %v), LevelsMany %+v", p, one, ok, err, got[p])
			}
		}
		if none, err := g.LevelsMany(t.Context(), nil); err != nil || len(none) != 0 {
			t.Fatalf("LevelsMany(nil) = %v, %v; want an empty map", none, err)
		}
	})

	t.Run("missing product is GateMissing and never reserves", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		r := newReservation(p, 1)
		for range 2 {
			if res := reserve(t, g, r); res.Outcome != domain.GateMissing {
				t.Fatalf("Reserve on a product the gate does not know = %s, want GateMissing", describe(res))
			}
		}
		if _, ok, err := g.Levels(t.Context(), p); err != nil || ok {
			t.Fatalf("Levels = ok %v, err %v; want ok false: a missing key is 0, never unlimited", ok, err)
		}
		if cancelled, err := g.Cancel(t.Context(), r); err != nil || cancelled {
			t.Fatalf("Cancel of a reservation never taken = %v, %v; want false, nil", cancelled, err)
		}
	})

	t.Run("frozen flag alone does not make a product known", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		if err := g.SetFrozen(t.Context(), p, true); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := g.Levels(t.Context(), p); err != nil || ok {
			t.Fatalf("Levels after SetFrozen only = ok %v, err %v; want ok false", ok, err)
		}
		if res := reserve(t, g, newReservation(p, 1)); res.Outcome != domain.GateMissing {
			t.Fatalf("Reserve = %s, want GateMissing", describe(res))
		}
		rebuild(t, g, p, domain.GateLevels{Stock: 4})
		wantLevels(t, g, p, domain.GateLevels{Stock: 4})
	})

	t.Run("reserve takes qty from stock and adds it to sold", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10, Sold: 2})
		res := reserve(t, g, newReservation(p, 3))
		if res.Outcome != domain.Reserved || res.Left != 7 {
			t.Fatalf("Reserve = %s, want Reserved with 7 left", describe(res))
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 7, Sold: 5})
	})

	t.Run("sold out exactly at the boundary changes nothing", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 5})
		r := newReservation(p, 6)
		if res := reserve(t, g, r); res.Outcome != domain.SoldOut || res.Left != 5 {
			t.Fatalf("Reserve 6 of 5 = %s, want SoldOut with 5 left", describe(res))
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 5})
		// The refused request did not claim its key: the same key may take the last 5.
		r.Qty, r.Fingerprint = 5, domain.RequestFingerprint(p, 5)
		if res := reserve(t, g, r); res.Outcome != domain.Reserved || res.Left != 0 {
			t.Fatalf("Reserve 5 of 5 = %s, want Reserved with 0 left", describe(res))
		}
		if res := reserve(t, g, newReservation(p, 1)); res.Outcome != domain.SoldOut || res.Left != 0 {
			t.Fatalf("Reserve 1 of 0 = %s, want SoldOut with 0 left", describe(res))
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 0, Sold: 5})
	})

	t.Run("frozen product refuses and changes nothing", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		if err := g.SetFrozen(t.Context(), p, true); err != nil {
			t.Fatal(err)
		}
		r := newReservation(p, 1)
		if res := reserve(t, g, r); res.Outcome != domain.Frozen {
			t.Fatalf("Reserve on a frozen product = %s, want Frozen", describe(res))
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10, Frozen: true})
		if err := g.SetFrozen(t.Context(), p, false); err != nil {
			t.Fatal(err)
		}
		if res := reserve(t, g, r); res.Outcome != domain.Reserved {
			t.Fatalf("Reserve after unfreezing = %s, want Reserved", describe(res))
		}
		rebuild(t, g, p, domain.GateLevels{Stock: 3, Sold: 1, Frozen: true})
		if res := reserve(t, g, newReservation(p, 1)); res.Outcome != domain.Frozen {
			t.Fatalf("Reserve after a frozen rebuild = %s, want Frozen", describe(res))
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 3, Sold: 1, Frozen: true})
	})

	t.Run("same key replays the original order and changes nothing", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 2)
		reserveOK(t, g, r)
		retry := r
		retry.OrderNo, retry.Qty, retry.Fingerprint = newOrderNo(), 3, domain.RequestFingerprint(p, 3)
		for range 2 {
			res := reserve(t, g, retry)
			if res.Outcome != domain.Replayed || res.ExistingOrder != r.OrderNo ||
				res.ExistingFingerprint != r.Fingerprint {
				t.Fatalf("Reserve with a claimed key = %s, want Replayed of %s (%s)", describe(res), r.OrderNo, r.Fingerprint)
			}
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 8, Sold: 2})
	})

	t.Run("same key from another buyer is a separate claim", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 2)
		reserveOK(t, g, r)
		other := r
		other.Buyer, other.OrderNo = newBuyer(), newOrderNo()
		reserveOK(t, g, other)
		wantLevels(t, g, p, domain.GateLevels{Stock: 6, Sold: 4})
	})

	t.Run("keyless reservation replays by ref", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 2)
		r.Key, r.Ref = "", string(r.OrderNo)+":"+domain.FlowLateReserve.String()
		reserveOK(t, g, r)
		if res := reserve(t, g, r); res.Outcome != domain.Replayed || res.ExistingOrder != r.OrderNo {
			t.Fatalf("retried keyless Reserve = %s, want Replayed of %s", describe(res), r.OrderNo)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 8, Sold: 2})
	})

	t.Run("cancel returns the units once and frees the key", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 3)
		reserveOK(t, g, r)
		wantLevels(t, g, p, domain.GateLevels{Stock: 7, Sold: 3})
		for i, want := range []bool{true, false} {
			cancelled, err := g.Cancel(t.Context(), r)
			if err != nil || cancelled != want {
				t.Fatalf("Cancel #%d = %v, %v; want %v, nil", i+1, cancelled, err, want)
			}
			wantLevels(t, g, p, domain.GateLevels{Stock: 10})
		}
		again := r
		again.OrderNo = newOrderNo()
		reserveOK(t, g, again)
		wantLevels(t, g, p, domain.GateLevels{Stock: 7, Sold: 3})
	})

	t.Run("keyless reservation can be cancelled and taken again", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 4)
		r.Key, r.Ref = "", string(r.OrderNo)+":"+domain.FlowLateReserve.String()
		for range 2 {
			reserveOK(t, g, r)
			wantLevels(t, g, p, domain.GateLevels{Stock: 6, Sold: 4})
			if cancelled, err := g.Cancel(t.Context(), r); err != nil || !cancelled {
				t.Fatalf("Cancel = %v, %v; want true, nil", cancelled, err)
			}
			wantLevels(t, g, p, domain.GateLevels{Stock: 10})
		}
	})

	t.Run("cancel leaves a key that points at another order", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 2)
		reserveOK(t, g, r)
		stranger := r
		stranger.OrderNo = newOrderNo()
		if cancelled, err := g.Cancel(t.Context(), stranger); err != nil || cancelled {
			t.Fatalf("Cancel for another order = %v, %v; want false, nil", cancelled, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 8, Sold: 2})
		retry := r
		retry.OrderNo = newOrderNo()
		if res := reserve(t, g, retry); res.Outcome != domain.Replayed || res.ExistingOrder != r.OrderNo {
			t.Fatalf("Reserve after a stranger's Cancel = %s, want Replayed of %s", describe(res), r.OrderNo)
		}
	})

	t.Run("apply is idempotent per ref and records changes to unknown products", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10, Sold: 4})
		c := domain.GateChange{Product: p, Ref: string(newOrderNo()) + ":restore", Stock: 2, Sold: -2}
		for i, want := range []bool{true, false} {
			if applied, err := g.Apply(t.Context(), c); err != nil || applied != want {
				t.Fatalf("Apply #%d = %v, %v; want %v, nil", i+1, applied, err, want)
			}
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 12, Sold: 2})
		other := domain.GateChange{Product: p, Ref: "batch-" + string(newOrderNo()), Stock: 5}
		if applied, err := g.Apply(t.Context(), other); err != nil || !applied {
			t.Fatalf("Apply of another ref = %v, %v; want true, nil", applied, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 17, Sold: 2})

		unknown := domain.GateChange{Product: NewProductID(), Ref: "batch-" + string(newOrderNo()), Stock: 5}
		if applied, err := g.Apply(t.Context(), unknown); err != nil || applied {
			t.Fatalf("Apply to an unknown product = %v, %v; want false, nil", applied, err)
		}
		if _, ok, _ := g.Levels(t.Context(), unknown.Product); ok {
			t.Fatal("Apply to an unknown product created its counters")
		}
		// The change was recorded all the same: the rebuild copies the ledger, which counts it
		// already, so applying it again afterwards (a relay's second delivery) changes nothing.
		rebuild(t, g, unknown.Product, domain.GateLevels{Stock: 5})
		if applied, err := g.Apply(t.Context(), unknown); err != nil || applied {
			t.Fatalf("Apply after rebuild = %v, %v; want false, nil: it was recorded before", applied, err)
		}
		wantLevels(t, g, unknown.Product, domain.GateLevels{Stock: 5})
		// Another change of the rebuilt product applies as usual.
		later := domain.GateChange{Product: unknown.Product, Ref: "batch-" + string(newOrderNo()), Stock: 1}
		if applied, err := g.Apply(t.Context(), later); err != nil || !applied {
			t.Fatalf("Apply of a new change after rebuild = %v, %v; want true, nil", applied, err)
		}
		wantLevels(t, g, unknown.Product, domain.GateLevels{Stock: 6})
	})

	t.Run("invalid qty is refused and changes nothing", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 1)
		for _, qty := range []int{0, -1} {
			bad := r
			bad.Qty = qty
			if _, err := g.Reserve(t.Context(), bad); !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("Reserve qty %d: err = %v, want ErrInvalidInput", qty, err)
			}
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10})
		reserveOK(t, g, r) // the key was not claimed
	})

	t.Run("race: 50 buyers for 10 units, exactly 10 win", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		var mu sync.Mutex
		outcomes := map[domain.ReserveOutcome]int{}
		parallel(50, func(int) {
			res, err := g.Reserve(t.Context(), newReservation(p, 1))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			outcomes[res.Outcome]++
			mu.Unlock()
		})
		if outcomes[domain.Reserved] != 10 || outcomes[domain.SoldOut] != 40 {
			t.Fatalf("outcomes = %v, want 10 Reserved and 40 SoldOut", outcomes)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 0, Sold: 10})
	})

	t.Run("race: 20 submissions of one key, exactly one reserves", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 100})
		base := newReservation(p, 2)
		results := make([]domain.ReserveResult, 20)
		orders := make([]domain.OrderNo, 20)
		parallel(20, func(i int) {
			r := base
			r.OrderNo = newOrderNo()
			orders[i] = r.OrderNo
			res, err := g.Reserve(t.Context(), r)
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
		var winner domain.OrderNo
		for i, res := range results {
			if res.Outcome == domain.Reserved {
				if winner != "" {
					t.Fatalf("two submissions of one key reserved: %s and %s", winner, orders[i])
				}
				winner = orders[i]
			}
		}
		if winner == "" {
			t.Fatalf("no submission reserved: %+v", results)
		}
		for i, res := range results {
			if orders[i] != winner && (res.Outcome != domain.Replayed || res.ExistingOrder != winner) {
				t.Errorf("submission %d = %s, want Replayed of %s", i, describe(res), winner)
			}
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 98, Sold: 2})
	})

	t.Run("race: 20 applies of one ref, exactly one applies", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		c := domain.GateChange{Product: p, Ref: "batch-" + string(newOrderNo()), Stock: 7}
		var mu sync.Mutex
		applied := 0
		parallel(20, func(int) {
			ok, err := g.Apply(t.Context(), c)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				applied++
				mu.Unlock()
			}
		})
		if applied != 1 {
			t.Fatalf("%d applies won, want exactly 1", applied)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 17})
	})

	o := stockGateOpts(opts)
	t.Run("holds", func(t *testing.T) { runHolds(t, newGate, o) })
	t.Run("budget", func(t *testing.T) { runBudget(t, newGate, o) })
	t.Run("rebuild fence", func(t *testing.T) { runRebuildFence(t, newGate, o) })
	t.Run("sale rules", func(t *testing.T) { runSaleRules(t, newGate, o) })
	t.Run("coupons", func(t *testing.T) { runGateCoupons(t, newGate) })
}

// newReservation is a new order's reservation of qty units of p by a fresh buyer and key.
func newReservation(p domain.ProductID, qty int) domain.Reservation {
	return domain.Reservation{Product: p, Buyer: newBuyer(), Key: newKey(), Qty: qty, OrderNo: newOrderNo(),
		Fingerprint: domain.RequestFingerprint(p, qty), KeyTTL: 10 * time.Minute}
}

func reserve(t *testing.T, g domain.StockGate, r domain.Reservation) domain.ReserveResult {
	t.Helper()
	res, err := g.Reserve(t.Context(), r)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return res
}

func reserveOK(t *testing.T, g domain.StockGate, r domain.Reservation) {
	t.Helper()
	if res := reserve(t, g, r); res.Outcome != domain.Reserved {
		t.Fatalf("Reserve(%s, qty %d) = %s, want Reserved", r.OrderNo, r.Qty, describe(res))
	}
}

func describe(res domain.ReserveResult) string {
	names := map[domain.ReserveOutcome]string{domain.Reserved: "Reserved", domain.Replayed: "Replayed",
		domain.SoldOut: "SoldOut", domain.Frozen: "Frozen", domain.GateMissing: "GateMissing",
		domain.BuyerLimit: "BuyerLimit", domain.Rebuilding: "Rebuilding", domain.NotStarted: "NotStarted",
		domain.Ended: "Ended", domain.HoldingLimit: "HoldingLimit", domain.CouponUsedUp: "CouponUsedUp",
		domain.CouponBuyerLimit: "CouponBuyerLimit"}
	return fmt.Sprintf("%s(left %d, existing %q)", names[res.Outcome], res.Left, res.ExistingOrder)
}

func rebuild(t *testing.T, g domain.StockGate, p domain.ProductID, l domain.GateLevels) {
	t.Helper()
	if err := g.Rebuild(t.Context(), p, l); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
}

func wantLevels(t *testing.T, g domain.StockGate, p domain.ProductID, want domain.GateLevels) {
	t.Helper()
	got, ok, err := g.Levels(t.Context(), p)
	if err != nil || !ok || got != want {
		t.Fatalf("Levels = %+v (ok %v, err %v), want %+v", got, ok, err, want)
	}
}
