package porttest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/domain"
)

// StockGateOption adjusts RunStockGate.
type StockGateOption func(*stockGateOptions)

type stockGateOptions struct {
	elapse func(t *testing.T, d time.Duration)
	now    func() time.Time
}

// WithElapse tells the suite how to let d pass for the gate: a gate on a fake clock advances
// it. Without it the suite sleeps, which a gate on the wall clock (Redis) needs.
func WithElapse(elapse func(t *testing.T, d time.Duration)) StockGateOption {
	return func(o *stockGateOptions) { o.elapse = elapse }
}

// WithNow tells the suite the gate's clock, for the sale windows it sets: a gate on a fake
// clock passes the clock's Now. Without it the suite uses the wall clock (Redis on this machine).
func WithNow(now func() time.Time) StockGateOption {
	return func(o *stockGateOptions) { o.now = now }
}

func stockGateOpts(opts []StockGateOption) stockGateOptions {
	o := stockGateOptions{elapse: func(_ *testing.T, d time.Duration) { time.Sleep(d) }, now: time.Now}
	for _, fn := range opts {
		fn(&o)
	}
	return o
}

// runHolds checks the tracking of reservations until their units follow an order (Holds,
// Forget, ReleaseOrphan, and Cancel and Rebuild dropping holds).
func runHolds(t *testing.T, newGate func(t *testing.T) domain.StockGate, o stockGateOptions) {
	t.Run("reservations are held, oldest first, until forgotten", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		older, newer, same := newReservation(p, 2), newReservation(p, 3), newReservation(p, 1)
		reserveOK(t, g, older)
		o.elapse(t, 1100*time.Millisecond)
		late := lateReservation(newReservation(p, 4), "attempt-1")
		reserveOK(t, g, late) // a late re-reservation is tracked too, and marked Late
		o.elapse(t, 20*time.Millisecond)
		for _, r := range []domain.Reservation{newer, same} {
			reserveOK(t, g, r)
		}
		wantHoldSet(t, g, p, older, late, newer, same)
		got, err := g.Holds(t.Context(), p, 0, 100)
		if err != nil || len(got) != 4 || got[0].OrderNo != older.OrderNo || got[1].OrderNo != late.OrderNo {
			t.Fatalf("Holds = %+v, %v; want %s, then %s, then the two youngest", got, err, older.OrderNo, late.OrderNo)
		}
		for i, h := range got {
			if h.Late != (h.OrderNo == late.OrderNo) {
				t.Fatalf("hold %d %s: Late = %v", i, h.OrderNo, h.Late)
			}
			if i > 0 && (h.At.Before(got[i-1].At) || (h.At.Equal(got[i-1].At) && h.OrderNo < got[i-1].OrderNo)) {
				t.Fatalf("holds %+v are not oldest first, ties by order number", got)
			}
			if h.At.UnixMilli()*int64(time.Millisecond) != h.At.UnixNano() {
				t.Fatalf("hold %s At %v: want whole milliseconds", h.OrderNo, h.At)
			}
		}
		if d := got[1].At.Sub(got[0].At); d < time.Second {
			t.Fatalf("holds taken 1.1 s apart by the gate's clock are %v apart", d)
		}
		// Ages are the gate's: the first is over a second old, the others much younger.
		wantHolds(t, g, p, time.Second, 100, older)
		wantHolds(t, g, p, time.Hour, 100)
		wantHolds(t, g, p, 0, 2, older, late)
		wantHolds(t, g, p, 0, 0)
		tied := []domain.Reservation{newer, same}
		if got[2].OrderNo == same.OrderNo {
			tied = []domain.Reservation{same, newer}
		}

		for range 2 { // idempotent, and unknown numbers are ignored
			if err := g.Forget(t.Context(), p, []domain.OrderNo{older.OrderNo, late.OrderNo, newOrderNo()}); err != nil {
				t.Fatalf("Forget: %v", err)
			}
			wantHolds(t, g, p, 0, 100, tied...)
		}
		if err := g.Forget(t.Context(), p, nil); err != nil {
			t.Fatalf("Forget of nothing: %v", err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10, Sold: 10}) // forgetting moves no units
		// A forgotten hold is no orphan: releasing it changes nothing.
		if released, err := g.ReleaseOrphan(t.Context(), holdOf(older)); err != nil || released {
			t.Fatalf("ReleaseOrphan of a forgotten hold = %v, %v; want false, nil", released, err)
		}
		// Nor is it cancelled: its units follow its order.
		for _, r := range []domain.Reservation{older, late} {
			if cancelled, err := g.Cancel(t.Context(), r); err != nil || cancelled {
				t.Fatalf("Cancel of a forgotten hold = %v, %v; want false, nil", cancelled, err)
			}
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10, Sold: 10})
	})

	t.Run("release orphan returns the units once and frees the key", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10, Sold: 1})
		r := newReservation(p, 3)
		reserveOK(t, g, r)
		other := newReservation(p, 2)
		reserveOK(t, g, other)
		wantLevels(t, g, p, domain.GateLevels{Stock: 5, Sold: 6})
		for i, want := range []bool{true, false} {
			released, err := g.ReleaseOrphan(t.Context(), holdOf(r))
			if err != nil || released != want {
				t.Fatalf("ReleaseOrphan #%d = %v, %v; want %v, nil", i+1, released, err, want)
			}
			wantLevels(t, g, p, domain.GateLevels{Stock: 8, Sold: 3})
		}
		wantHolds(t, g, p, 0, 100, other)
		if cancelled, err := g.Cancel(t.Context(), r); err != nil || cancelled {
			t.Fatalf("Cancel after the release = %v, %v; want false, nil", cancelled, err)
		}
		again := r
		again.OrderNo = newOrderNo()
		reserveOK(t, g, again) // the claim went with the orphan: the key takes stock again
		wantLevels(t, g, p, domain.GateLevels{Stock: 5, Sold: 6})
		wantHoldSet(t, g, p, other, again)
	})

	t.Run("release orphan leaves a claim that points at another order", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 2)
		r.KeyTTL = time.Second
		reserveOK(t, g, r)
		o.elapse(t, 1100*time.Millisecond) // the claim expires; the hold does not
		next := r
		next.OrderNo, next.KeyTTL = newOrderNo(), 10*time.Minute
		reserveOK(t, g, next)
		wantHolds(t, g, p, 0, 100, r, next)
		if released, err := g.ReleaseOrphan(t.Context(), holdOf(r)); err != nil || !released {
			t.Fatalf("ReleaseOrphan = %v, %v; want true, nil", released, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 8, Sold: 2})
		retry := r
		retry.OrderNo = newOrderNo()
		if res := reserve(t, g, retry); res.Outcome != domain.Replayed || res.ExistingOrder != next.OrderNo {
			t.Fatalf("Reserve after releasing the old order = %s, want Replayed of %s", describe(res), next.OrderNo)
		}
		wantHolds(t, g, p, 0, 100, next)
	})

	t.Run("cancel drops the hold", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 3)
		reserveOK(t, g, r)
		if cancelled, err := g.Cancel(t.Context(), r); err != nil || !cancelled {
			t.Fatalf("Cancel = %v, %v; want true, nil", cancelled, err)
		}
		wantHolds(t, g, p, 0, 100)
		if released, err := g.ReleaseOrphan(t.Context(), holdOf(r)); err != nil || released {
			t.Fatalf("ReleaseOrphan after Cancel = %v, %v; want false, nil", released, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10})
	})

	t.Run("a late reservation is given back only by the attempt that took it", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		keyed := newReservation(p, 3)
		reserveOK(t, g, keyed)
		if err := g.Forget(t.Context(), p, []domain.OrderNo{keyed.OrderNo}); err != nil { // the order is written
			t.Fatal(err)
		}
		mine := lateReservation(keyed, "attempt-mine")
		reserveOK(t, g, mine)
		wantLevels(t, g, p, domain.GateLevels{Stock: 4, Sold: 6})
		theirs := lateReservation(keyed, "attempt-theirs")
		if res := reserve(t, g, theirs); res.Outcome != domain.Replayed || res.ExistingOrder != keyed.OrderNo ||
			res.ExistingFingerprint != mine.Fingerprint {
			t.Fatalf("a second attempt's Reserve = %s, want Replayed of %s by %q", describe(res), keyed.OrderNo, mine.Fingerprint)
		}
		if cancelled, err := g.Cancel(t.Context(), theirs); err != nil || cancelled {
			t.Fatalf("Cancel by another attempt = %v, %v; want false, nil", cancelled, err)
		}
		if cancelled, err := g.Cancel(t.Context(), keyed); err != nil || cancelled {
			t.Fatalf("Cancel of the forgotten keyed reservation = %v, %v; want false, nil", cancelled, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 4, Sold: 6})
		for i, want := range []bool{true, false} {
			if cancelled, err := g.Cancel(t.Context(), mine); err != nil || cancelled != want {
				t.Fatalf("Cancel #%d by the attempt that reserved = %v, %v; want %v, nil", i+1, cancelled, err, want)
			}
			wantLevels(t, g, p, domain.GateLevels{Stock: 7, Sold: 3})
		}
		wantHolds(t, g, p, 0, 100)
		reserveOK(t, g, theirs) // the claim went with the cancel: the next attempt may reserve
	})

	t.Run("rebuild drops the holds", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 3)
		reserveOK(t, g, r)
		// The ledger knows no order for r: the rebuilt counters do not count its units, so
		// releasing its hold afterwards would return them twice.
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		wantHolds(t, g, p, 0, 100)
		if released, err := g.ReleaseOrphan(t.Context(), holdOf(r)); err != nil || released {
			t.Fatalf("ReleaseOrphan after Rebuild = %v, %v; want false, nil", released, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10})
	})

	t.Run("holds of an unknown product are empty", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		wantHolds(t, g, p, 0, 100)
		if released, err := g.ReleaseOrphan(t.Context(), domain.Hold{Product: p, OrderNo: newOrderNo(), Qty: 1}); err != nil || released {
			t.Fatalf("ReleaseOrphan of an unknown hold = %v, %v; want false, nil", released, err)
		}
		if err := g.Forget(t.Context(), p, []domain.OrderNo{newOrderNo()}); err != nil {
			t.Fatalf("Forget on an unknown product: %v", err)
		}
	})

	t.Run("race: release orphan against a late cancel returns the units once", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 100})
		for range 10 {
			r := newReservation(p, 4)
			reserveOK(t, g, r)
			var wins atomic.Int32
			parallel(2, func(i int) {
				var ok bool
				var err error
				if i == 0 {
					ok, err = g.Cancel(t.Context(), r)
				} else {
					ok, err = g.ReleaseOrphan(t.Context(), holdOf(r))
				}
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
			if wins.Load() != 1 {
				t.Fatalf("%d of Cancel and ReleaseOrphan gave the units back, want exactly 1", wins.Load())
			}
			wantLevels(t, g, p, domain.GateLevels{Stock: 100})
		}
	})

	t.Run("race: 10 sweepers release one orphan once", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 5)
		reserveOK(t, g, r)
		var wins atomic.Int32
		parallel(10, func(int) {
			ok, err := g.ReleaseOrphan(t.Context(), holdOf(r))
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
		if wins.Load() != 1 {
			t.Fatalf("%d releases won, want exactly 1", wins.Load())
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10})
	})
}

// runBudget checks the per-buyer budget of keyed reservations.
func runBudget(t *testing.T, newGate func(t *testing.T) domain.StockGate, o stockGateOptions) {
	capped := func(r domain.Reservation, cap int64, window time.Duration) domain.Reservation {
		r.BuyerCap, r.BuyerWindow = cap, window
		return r
	}
	// next is another request of r's buyer with a fresh key.
	next := func(r domain.Reservation, qty int) domain.Reservation {
		n := newReservation(r.Product, qty)
		n.Buyer, n.BuyerCap, n.BuyerWindow = r.Buyer, r.BuyerCap, r.BuyerWindow
		return n
	}
	wantOutcome := func(t *testing.T, g domain.StockGate, r domain.Reservation, want domain.ReserveOutcome, left int64) {
		t.Helper()
		if res := reserve(t, g, r); res.Outcome != want || res.Left != left {
			t.Fatalf("Reserve %d by %s = %s, want %s with %d left", r.Qty, r.Buyer, describe(res),
				describe(domain.ReserveResult{Outcome: want}), left)
		}
	}

	t.Run("buyer cap: a buyer hits the cap, another buyer is unaffected", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		first := capped(newReservation(p, 3), 5, time.Minute)
		wantOutcome(t, g, first, domain.Reserved, 17)
		wantOutcome(t, g, next(first, 2), domain.Reserved, 15)
		over := next(first, 1)
		wantOutcome(t, g, over, domain.BuyerLimit, 15)
		wantLevels(t, g, p, domain.GateLevels{Stock: 15, Sold: 5})
		other := capped(newReservation(p, 5), 5, time.Minute)
		wantOutcome(t, g, other, domain.Reserved, 10)
		wantOutcome(t, g, next(other, 1), domain.BuyerLimit, 10)
		// A refused request claimed nothing: its key is free once the buyer may buy again.
		over.BuyerCap = 6
		wantOutcome(t, g, over, domain.Reserved, 9)
		wantLevels(t, g, p, domain.GateLevels{Stock: 9, Sold: 11})
	})

	t.Run("buyer cap: checked after frozen and before sold out", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 2, Frozen: true})
		r := capped(newReservation(p, 3), 2, time.Minute)
		wantOutcome(t, g, r, domain.Frozen, 2)
		if err := g.SetFrozen(t.Context(), p, false); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, g, r, domain.BuyerLimit, 2) // 3 > cap 2, and also more than the stock
		wantOutcome(t, g, next(r, 2), domain.Reserved, 0)
		wantOutcome(t, g, capped(newReservation(p, 1), 2, time.Minute), domain.SoldOut, 0)
		missing := capped(newReservation(NewProductID(), 3), 2, time.Minute)
		wantOutcome(t, g, missing, domain.GateMissing, 0)
	})

	t.Run("buyer cap: replays do not count", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		r := capped(newReservation(p, 2), 3, time.Minute)
		wantOutcome(t, g, r, domain.Reserved, 18)
		for range 3 {
			retry := r
			retry.OrderNo = newOrderNo()
			if res := reserve(t, g, retry); res.Outcome != domain.Replayed || res.ExistingOrder != r.OrderNo {
				t.Fatalf("replay = %s, want Replayed of %s", describe(res), r.OrderNo)
			}
		}
		wantOutcome(t, g, next(r, 1), domain.Reserved, 17) // 2 + 1 = 3: at the cap, not over it
		wantOutcome(t, g, next(r, 1), domain.BuyerLimit, 17)
		// With the budget spent a replay still answers the original order (claims come first).
		if res := reserve(t, g, r); res.Outcome != domain.Replayed || res.ExistingOrder != r.OrderNo {
			t.Fatalf("replay with the budget spent = %s, want Replayed of %s", describe(res), r.OrderNo)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 17, Sold: 3})
	})

	t.Run("buyer cap 0 is no limit, and keyless reservations are not counted", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 100})
		r := capped(newReservation(p, 5), 0, 0)
		for range 10 {
			reserveOK(t, g, next(r, 5))
		}
		keyless := capped(newReservation(p, 5), 1, time.Minute)
		keyless.Key, keyless.Ref = "", string(keyless.OrderNo)+":"+domain.FlowLateReserve.String()
		reserveOK(t, g, keyless)
		keyed := capped(newReservation(p, 1), 1, time.Minute)
		keyed.Buyer = keyless.Buyer
		reserveOK(t, g, keyed)
		wantLevels(t, g, p, domain.GateLevels{Stock: 44, Sold: 56})
	})

	t.Run("buyer cap without a window is refused", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := capped(newReservation(p, 1), 1, 0)
		if _, err := g.Reserve(t.Context(), r); !errors.Is(err, domain.ErrInvalidInput) {
			t.Fatalf("Reserve with a cap and no window: err = %v, want ErrInvalidInput", err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10})
	})

	t.Run("buyer window: the first reservation opens it, its end resets the budget", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		// A 2 s window, read 0.5 s in: on a real Redis the clock is the server's, and a loaded
		// machine must not push the in-window reads past the window's end.
		r := capped(newReservation(p, 1), 2, 2*time.Second)
		wantOutcome(t, g, r, domain.Reserved, 19)
		o.elapse(t, 500*time.Millisecond)
		wantOutcome(t, g, next(r, 1), domain.Reserved, 18) // does not extend the window
		wantOutcome(t, g, next(r, 1), domain.BuyerLimit, 18)
		o.elapse(t, 1700*time.Millisecond) // 2.2 s after the first: the window has ended
		wantOutcome(t, g, next(r, 2), domain.Reserved, 16)
		wantOutcome(t, g, next(r, 1), domain.BuyerLimit, 16)
		wantLevels(t, g, p, domain.GateLevels{Stock: 16, Sold: 4})
	})

	t.Run("race: 20 requests of one buyer under a cap of 5, exactly 5 win", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 100})
		base := capped(newReservation(p, 1), 5, time.Minute)
		var mu sync.Mutex
		outcomes := map[domain.ReserveOutcome]int{}
		parallel(20, func(int) {
			res, err := g.Reserve(t.Context(), next(base, 1))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			outcomes[res.Outcome]++
			mu.Unlock()
		})
		if outcomes[domain.Reserved] != 5 || outcomes[domain.BuyerLimit] != 15 {
			t.Fatalf("outcomes = %v, want 5 Reserved and 15 BuyerLimit", outcomes)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 95, Sold: 5})
	})
}

// lateReservation is r as a late payment's re-reservation of r's order by the attempt token.
func lateReservation(r domain.Reservation, token string) domain.Reservation {
	r.Key, r.Ref, r.Fingerprint, r.BuyerCap = "", string(r.OrderNo)+":"+domain.FlowLateReserve.String(), token, 0
	return r
}

// holdOf is the hold a reservation makes (without its time, which is the gate's).
func holdOf(r domain.Reservation) domain.Hold {
	return domain.Hold{Product: r.Product, OrderNo: r.OrderNo, Qty: r.Qty}
}

// wantHolds checks that Holds(p, minAge, limit) lists exactly the holds of want, in order.
func wantHolds(t *testing.T, g domain.StockGate, p domain.ProductID, minAge time.Duration, limit int, want ...domain.Reservation) []domain.Hold {
	t.Helper()
	got, err := g.Holds(t.Context(), p, minAge, limit)
	if err != nil {
		t.Fatalf("Holds: %v", err)
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		w := holdOf(want[i])
		ok = got[i].Product == w.Product && got[i].OrderNo == w.OrderNo && got[i].Qty == w.Qty
	}
	if !ok {
		var names []domain.OrderNo
		for _, r := range want {
			names = append(names, r.OrderNo)
		}
		t.Fatalf("Holds(min age %v, limit %d) = %+v, want the holds of %v", minAge, limit, got, names)
	}
	return got
}

// wantHoldSet checks that the product's holds are exactly those of want, in any order (holds
// taken within the same millisecond list by order number).
func wantHoldSet(t *testing.T, g domain.StockGate, p domain.ProductID, want ...domain.Reservation) {
	t.Helper()
	got, err := g.Holds(t.Context(), p, 0, 100)
	if err != nil {
		t.Fatalf("Holds: %v", err)
	}
	left := map[domain.OrderNo]int{}
	for _, r := range want {
		left[r.OrderNo] = r.Qty
	}
	for _, h := range got {
		if q, ok := left[h.OrderNo]; !ok || q != h.Qty {
			t.Fatalf("Holds = %+v, want the holds of %v", got, want)
		}
		delete(left, h.OrderNo)
	}
	if len(left) != 0 {
		t.Fatalf("Holds = %+v, missing %v", got, left)
	}
}
