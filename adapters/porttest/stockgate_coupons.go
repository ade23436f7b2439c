package porttest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// runGateCoupons checks the coupon uses the gate counts per product: claimed by Reserve in the same
// step as the stock, under the coupon's limits, given back with the hold (Cancel,
// ReleaseOrphan), left to the order once the hold is forgotten (Apply gives it back), and
// written by a rebuild.
func runGateCoupons(t *testing.T, newGate func(t *testing.T) domain.StockGate) {
	const code, other domain.CouponCode = "SPRING-10", "AUTUMN_5"
	// withCoupon is r using code under the limits uses (per product) and perBuyer.
	withCoupon := func(r domain.Reservation, c domain.CouponCode, uses, perBuyer int64) domain.Reservation {
		r.Coupon, r.CouponUses, r.CouponPerBuyer = c, uses, perBuyer
		return r
	}
	// by is another new order of r's buyer with a fresh key, the same coupon and limits.
	by := func(r domain.Reservation) domain.Reservation {
		n := newReservation(r.Product, r.Qty)
		n.Buyer, n.Coupon, n.CouponUses, n.CouponPerBuyer = r.Buyer, r.Coupon, r.CouponUses, r.CouponPerBuyer
		return n
	}
	want := func(t *testing.T, g domain.StockGate, r domain.Reservation, outcome domain.ReserveOutcome, left int64) {
		t.Helper()
		if res := reserve(t, g, r); res.Outcome != outcome || res.Left != left {
			t.Fatalf("Reserve %d by %s with %q = %s, want %s with %d left", r.Qty, r.Buyer, r.Coupon, describe(res),
				describe(domain.ReserveResult{Outcome: outcome}), left)
		}
	}
	wantCounts := func(t *testing.T, g domain.StockGate, p domain.ProductID, want domain.CouponCounts) {
		t.Helper()
		got, err := g.CouponCounts(t.Context(), p)
		if err != nil {
			t.Fatalf("CouponCounts: %v", err)
		}
		if !got.Equal(want) {
			t.Fatalf("CouponCounts = %+v, want %+v", got, want)
		}
		for c, cc := range got { // a count at 0 is deleted, never kept
			if cc.Uses < 0 {
				t.Fatalf("CouponCounts[%s] = %+v: a negative count", c, cc)
			}
			for b, n := range cc.Buyers {
				if n <= 0 {
					t.Fatalf("CouponCounts[%s] holds %d for %s: a count at 0 or less is kept", c, n, b)
				}
			}
		}
	}
	uses := func(n int64, buyers ...any) domain.CouponCount {
		cc := domain.CouponCount{Uses: n, Buyers: map[domain.BuyerID]int64{}}
		for i := 0; i < len(buyers); i += 2 {
			cc.Buyers[buyers[i].(domain.BuyerID)] = int64(buyers[i+1].(int))
		}
		return cc
	}

	t.Run("a coupon is claimed under its limits, and a refusal changes nothing", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 100})
		wantCounts(t, g, p, domain.CouponCounts{})
		a := withCoupon(newReservation(p, 2), code, 3, 2)
		want(t, g, a, domain.Reserved, 98)
		want(t, g, by(a), domain.Reserved, 96)
		third := by(a)
		want(t, g, third, domain.CouponBuyerLimit, 96) // the buyer's 2 are used
		b := withCoupon(newReservation(p, 1), code, 3, 2)
		want(t, g, b, domain.Reserved, 95)
		wantCounts(t, g, p, domain.CouponCounts{code: uses(3, a.Buyer, 2, b.Buyer, 1)})
		c := withCoupon(newReservation(p, 1), code, 3, 2)
		want(t, g, c, domain.CouponUsedUp, 95) // the product's 3 are used
		wantLevels(t, g, p, domain.GateLevels{Stock: 95, Sold: 5})
		wantCounts(t, g, p, domain.CouponCounts{code: uses(3, a.Buyer, 2, b.Buyer, 1)})
		// Each coupon counts on its own, and an order without one is not held back.
		want(t, g, withCoupon(by(c), other, 1, 1), domain.Reserved, 94)
		want(t, g, withCoupon(by(c), "", 0, 0), domain.Reserved, 93)
		// A refused request claimed nothing: its key takes stock without the coupon.
		third.Coupon = ""
		want(t, g, third, domain.Reserved, 91)
		// No limit is no limit; a keyless buyer counts only in the total.
		unlimited := withCoupon(newReservation(p, 1), other, 0, 0)
		for i := range 3 {
			want(t, g, by(unlimited), domain.Reserved, 90-int64(i))
		}
		nobody := withCoupon(newReservation(p, 1), other, 0, 1)
		nobody.Buyer = ""
		want(t, g, nobody, domain.Reserved, 87)
		wantCounts(t, g, p, domain.CouponCounts{code: uses(3, a.Buyer, 2, b.Buyer, 1),
			other: uses(5, c.Buyer, 1, unlimited.Buyer, 3)})
		wantLevels(t, g, p, domain.GateLevels{Stock: 87, Sold: 13})
	})

	t.Run("the coupon's limits are checked after the budget and before the stock", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 3})
		first := withCoupon(newReservation(p, 1), code, 1, 0)
		want(t, g, first, domain.Reserved, 2)
		// More than the stock, and the coupon used up: the coupon answers.
		want(t, g, withCoupon(newReservation(p, 5), code, 1, 0), domain.CouponUsedUp, 2)
		mine := by(first)
		mine.CouponUses = 0
		mine.CouponPerBuyer = 1
		want(t, g, mine, domain.CouponBuyerLimit, 2)
		// Over the budget and the coupon's limit: the budget answers.
		mine.BuyerCap, mine.BuyerWindow = 1, time.Minute
		mine.Qty, mine.Fingerprint = 2, domain.RequestFingerprint(p, 2)
		want(t, g, mine, domain.BuyerLimit, 2)
		wantCounts(t, g, p, domain.CouponCounts{code: uses(1, first.Buyer, 1)})
		wantLevels(t, g, p, domain.GateLevels{Stock: 2, Sold: 1})
	})

	t.Run("a replay claims nothing", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := withCoupon(newReservation(p, 1), code, 5, 1)
		want(t, g, r, domain.Reserved, 9)
		for range 3 {
			retry := r
			retry.OrderNo = newOrderNo()
			if res := reserve(t, g, retry); res.Outcome != domain.Replayed || res.ExistingOrder != r.OrderNo {
				t.Fatalf("replay = %s, want Replayed of %s", describe(res), r.OrderNo)
			}
		}
		wantCounts(t, g, p, domain.CouponCounts{code: uses(1, r.Buyer, 1)})
	})

	t.Run("race: 300 buyers for a coupon of 25 uses, exactly 25 win", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 1000})
		var mu sync.Mutex
		outcomes := map[domain.ReserveOutcome]int{}
		parallel(300, func(int) {
			res, err := g.Reserve(t.Context(), withCoupon(newReservation(p, 1), code, 25, 1))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			outcomes[res.Outcome]++
			mu.Unlock()
		})
		if outcomes[domain.Reserved] != 25 || outcomes[domain.CouponUsedUp] != 275 {
			t.Fatalf("outcomes = %v, want 25 Reserved and 275 CouponUsedUp", outcomes)
		}
		got, err := g.CouponCounts(t.Context(), p)
		if err != nil || got[code].Uses != 25 || len(got[code].Buyers) != 25 {
			t.Fatalf("CouponCounts = %+v, %v; want 25 uses by 25 buyers", got, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 975, Sold: 25})
	})

	t.Run("cancel and release orphan give the use back once", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := withCoupon(newReservation(p, 2), code, 1, 1)
		want(t, g, r, domain.Reserved, 8)
		for i, w := range []bool{true, false} {
			if cancelled, err := g.Cancel(t.Context(), r); err != nil || cancelled != w {
				t.Fatalf("Cancel #%d = %v, %v; want %v, nil", i+1, cancelled, err, w)
			}
			wantCounts(t, g, p, domain.CouponCounts{})
		}
		orphan := by(r)
		want(t, g, orphan, domain.Reserved, 8) // the use came back: the buyer may use it again
		want(t, g, by(r), domain.CouponUsedUp, 8)
		for i, w := range []bool{true, false} {
			if released, err := g.ReleaseOrphan(t.Context(), holdOf(orphan)); err != nil || released != w {
				t.Fatalf("ReleaseOrphan #%d = %v, %v; want %v, nil", i+1, released, err, w)
			}
			wantCounts(t, g, p, domain.CouponCounts{})
		}
		if cancelled, err := g.Cancel(t.Context(), orphan); err != nil || cancelled {
			t.Fatalf("Cancel after the release = %v, %v; want false, nil", cancelled, err)
		}
		wantCounts(t, g, p, domain.CouponCounts{})
		wantLevels(t, g, p, domain.GateLevels{Stock: 10})
		want(t, g, by(r), domain.Reserved, 8)
	})

	t.Run("a forgotten hold's use follows the order: its close gives it back once", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := withCoupon(newReservation(p, 2), code, 1, 1)
		want(t, g, r, domain.Reserved, 8)
		holds := wantHolds(t, g, p, 0, 10, r)
		if holds[0].Buyer != r.Buyer || holds[0].Coupon != code {
			t.Fatalf("Holds = %+v, want buyer %s and coupon %s", holds, r.Buyer, code)
		}
		if err := g.Forget(t.Context(), p, []domain.OrderNo{r.OrderNo}); err != nil {
			t.Fatal(err)
		}
		if cancelled, err := g.Cancel(t.Context(), r); err != nil || cancelled {
			t.Fatalf("Cancel of a forgotten hold = %v, %v; want false, nil", cancelled, err)
		}
		if released, err := g.ReleaseOrphan(t.Context(), holdOf(r)); err != nil || released {
			t.Fatalf("ReleaseOrphan of a forgotten hold = %v, %v; want false, nil", released, err)
		}
		wantCounts(t, g, p, domain.CouponCounts{code: uses(1, r.Buyer, 1)})
		closed := domain.GateChange{Product: p, Ref: string(r.OrderNo) + ":release", Stock: 2, Sold: -2,
			Buyer: r.Buyer, Coupon: code, CouponUses: -1}
		for i, w := range []bool{true, false} {
			if applied, err := g.Apply(t.Context(), closed); err != nil || applied != w {
				t.Fatalf("Apply #%d = %v, %v; want %v, nil", i+1, applied, err, w)
			}
			wantCounts(t, g, p, domain.CouponCounts{})
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10})
		// A change may add uses as well, and one without a buyer moves the total only.
		if applied, err := g.Apply(t.Context(), domain.GateChange{Product: p, Ref: "add-1", Coupon: code, CouponUses: 2}); err != nil || !applied {
			t.Fatalf("Apply of +2 uses = %v, %v; want true, nil", applied, err)
		}
		wantCounts(t, g, p, domain.CouponCounts{code: uses(2)})
		// A product the gate does not know is left alone, its coupon counts too.
		unknown := NewProductID()
		if applied, err := g.Apply(t.Context(), domain.GateChange{Product: unknown, Ref: "add-1", Buyer: r.Buyer,
			Coupon: code, CouponUses: 1}); err != nil || applied {
			t.Fatalf("Apply to an unknown product = %v, %v; want false, nil", applied, err)
		}
		wantCounts(t, g, unknown, domain.CouponCounts{})
	})

	t.Run("a late re-reservation claims the coupon again under the same limits", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := withCoupon(newReservation(p, 1), code, 1, 1)
		want(t, g, r, domain.Reserved, 9)
		if err := g.Forget(t.Context(), p, []domain.OrderNo{r.OrderNo}); err != nil {
			t.Fatal(err)
		}
		// The order closes: its units and its use go back.
		if applied, err := g.Apply(t.Context(), domain.GateChange{Product: p, Ref: string(r.OrderNo) + ":release",
			Stock: 1, Sold: -1, Buyer: r.Buyer, Coupon: code, CouponUses: -1}); err != nil || !applied {
			t.Fatalf("Apply of the close = %v, %v; want true, nil", applied, err)
		}
		late := lateReservation(r, "attempt-1")
		want(t, g, late, domain.Reserved, 9)
		wantCounts(t, g, p, domain.CouponCounts{code: uses(1, r.Buyer, 1)})
		holds := wantHolds(t, g, p, 0, 10, late)
		if !holds[0].Late || holds[0].Buyer != r.Buyer || holds[0].Coupon != code {
			t.Fatalf("Holds = %+v, want the late hold of %s with coupon %s", holds, r.Buyer, code)
		}
		want(t, g, withCoupon(newReservation(p, 1), code, 1, 1), domain.CouponUsedUp, 9)
		if cancelled, err := g.Cancel(t.Context(), late); err != nil || !cancelled {
			t.Fatalf("Cancel of the late hold = %v, %v; want true, nil", cancelled, err)
		}
		wantCounts(t, g, p, domain.CouponCounts{})
		// Someone else takes the one use: a late payment is held to the limit like a new order.
		want(t, g, withCoupon(newReservation(p, 1), code, 1, 0), domain.Reserved, 9)
		late.Fingerprint = "attempt-2"
		want(t, g, late, domain.CouponUsedUp, 9)
		late.CouponUses = 2
		want(t, g, late, domain.Reserved, 8)
		late2 := lateReservation(by(r), "attempt-3")
		late2.CouponUses, late2.CouponPerBuyer = 0, 1
		want(t, g, late2, domain.CouponBuyerLimit, 8)
	})

	t.Run("a rebuild lists each hold's buyer and coupon and writes plan.Coupons", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		kept := withCoupon(newReservation(p, 1), code, 0, 0)
		dropped := withCoupon(newReservation(p, 1), code, 0, 0)
		plain := newReservation(p, 1)
		for _, r := range []domain.Reservation{kept, dropped, plain} {
			reserveOK(t, g, r)
		}
		holds, err := g.BeginRebuild(t.Context(), p, "coupons", time.Minute)
		if err != nil {
			t.Fatalf("BeginRebuild: %v", err)
		}
		if len(holds) != 3 {
			t.Fatalf("BeginRebuild holds = %+v, want 3", holds)
		}
		for _, h := range holds {
			w := map[domain.OrderNo]domain.Reservation{kept.OrderNo: kept, dropped.OrderNo: dropped, plain.OrderNo: plain}[h.OrderNo]
			if h.Buyer != w.Buyer || h.Coupon != w.Coupon {
				t.Fatalf("BeginRebuild hold %+v, want buyer %s and coupon %q", h, w.Buyer, w.Coupon)
			}
		}
		// The ledger's orders (dropped's among them) plus the hold still tracked (kept).
		ledgerBuyer := newBuyer()
		plan := domain.RebuildPlan{Token: "coupons", Levels: domain.GateLevels{Stock: 17, Sold: 3},
			Drop: []domain.OrderNo{dropped.OrderNo},
			Coupons: domain.CouponCounts{code: uses(5, kept.Buyer, 1, dropped.Buyer, 1, ledgerBuyer, 3),
				other: uses(2, ledgerBuyer, 2), "NONE-LEFT": uses(0)}}
		if err := g.FinishRebuild(t.Context(), p, plan); err != nil {
			t.Fatalf("FinishRebuild: %v", err)
		}
		wantCounts(t, g, p, plan.Coupons)
		// The kept hold still gives its use back; the dropped one's follows its order.
		if cancelled, err := g.Cancel(t.Context(), dropped); err != nil || cancelled {
			t.Fatalf("Cancel of a dropped hold = %v, %v; want false, nil", cancelled, err)
		}
		if cancelled, err := g.Cancel(t.Context(), kept); err != nil || !cancelled {
			t.Fatalf("Cancel of the kept hold = %v, %v; want true, nil", cancelled, err)
		}
		wantCounts(t, g, p, domain.CouponCounts{code: uses(4, dropped.Buyer, 1, ledgerBuyer, 3), other: uses(2, ledgerBuyer, 2)})
		// A later rebuild replaces them all.
		if _, err := g.BeginRebuild(t.Context(), p, "again", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := g.FinishRebuild(t.Context(), p, domain.RebuildPlan{Token: "again", Levels: domain.GateLevels{Stock: 17, Sold: 3},
			Coupons: domain.CouponCounts{other: uses(1, ledgerBuyer, 1)}}); err != nil {
			t.Fatalf("FinishRebuild: %v", err)
		}
		wantCounts(t, g, p, domain.CouponCounts{other: uses(1, ledgerBuyer, 1)})
		// The unfenced rebuild (a new product) drops them with the holds.
		held := withCoupon(newReservation(p, 1), code, 0, 0)
		reserveOK(t, g, held)
		rebuild(t, g, p, domain.GateLevels{Stock: 5})
		wantCounts(t, g, p, domain.CouponCounts{})
		if cancelled, err := g.Cancel(t.Context(), held); err != nil || cancelled {
			t.Fatalf("Cancel after Rebuild = %v, %v; want false, nil", cancelled, err)
		}
		wantCounts(t, g, p, domain.CouponCounts{})
	})

	t.Run("a fenced product's changes move no coupon count", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := withCoupon(newReservation(p, 1), code, 0, 0)
		reserveOK(t, g, r)
		if err := g.Forget(t.Context(), p, []domain.OrderNo{r.OrderNo}); err != nil {
			t.Fatal(err)
		}
		other := withCoupon(newReservation(p, 1), code, 0, 0)
		reserveOK(t, g, other)
		if _, err := g.BeginRebuild(t.Context(), p, "fence", time.Minute); err != nil {
			t.Fatal(err)
		}
		closed := domain.GateChange{Product: p, Ref: string(r.OrderNo) + ":release", Stock: 1, Sold: -1,
			Buyer: r.Buyer, Coupon: code, CouponUses: -1}
		if _, err := g.Apply(t.Context(), closed); !errors.Is(err, domain.ErrGateRebuilding) {
			t.Fatalf("Apply on a fenced product: err = %v, want ErrGateRebuilding", err)
		}
		if _, err := g.Cancel(t.Context(), other); !errors.Is(err, domain.ErrGateRebuilding) {
			t.Fatalf("Cancel on a fenced product: err = %v, want ErrGateRebuilding", err)
		}
		if _, err := g.ReleaseOrphan(t.Context(), holdOf(other)); !errors.Is(err, domain.ErrGateRebuilding) {
			t.Fatalf("ReleaseOrphan on a fenced product: err = %v, want ErrGateRebuilding", err)
		}
		if res := reserve(t, g, withCoupon(newReservation(p, 1), code, 0, 0)); res.Outcome != domain.Rebuilding {
			t.Fatalf("Reserve on a fenced product = %s, want Rebuilding", describe(res))
		}
		wantCounts(t, g, p, domain.CouponCounts{code: uses(2, r.Buyer, 1, other.Buyer, 1)})
		if err := g.AbortRebuild(t.Context(), p, "fence"); err != nil {
			t.Fatal(err)
		}
		if applied, err := g.Apply(t.Context(), closed); err != nil || !applied {
			t.Fatalf("Apply after the fence = %v, %v; want true, nil", applied, err)
		}
		wantCounts(t, g, p, domain.CouponCounts{code: uses(1, other.Buyer, 1)})
	})

	t.Run("malformed coupons are refused and change nothing", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		r := newReservation(p, 1)
		for _, bad := range []domain.Reservation{withCoupon(r, "spring-10", 0, 0), withCoupon(r, "AB", 0, 0),
			withCoupon(r, "SPR|NG", 0, 0), withCoupon(r, code, -1, 0), withCoupon(r, code, 0, -1)} {
			if _, err := g.Reserve(t.Context(), bad); !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("Reserve with coupon %q (%d, %d): err = %v, want ErrInvalidInput", bad.Coupon,
					bad.CouponUses, bad.CouponPerBuyer, err)
			}
		}
		change := domain.GateChange{Product: p, Ref: "bad-coupon", Stock: 1, Coupon: "bad coupon", CouponUses: 1}
		if _, err := g.Apply(t.Context(), change); !errors.Is(err, domain.ErrInvalidInput) {
			t.Fatalf("Apply with a malformed coupon: err = %v, want ErrInvalidInput", err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 10})
		wantCounts(t, g, p, domain.CouponCounts{})
		reserveOK(t, g, withCoupon(r, code, 1, 1)) // the key was not claimed
		change.Coupon = code
		if applied, err := g.Apply(t.Context(), change); err != nil || !applied {
			t.Fatalf("Apply after the refusal = %v, %v; want true, nil (the ref was not recorded)", applied, err)
		}
		wantCounts(t, g, p, domain.CouponCounts{code: uses(2, r.Buyer, 1)})
	})
}
