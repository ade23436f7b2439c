package porttest

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/domain"
)

// runRebuildFence checks the fenced rebuild (BeginRebuild, FinishRebuild, AbortRebuild): what
// the fence holds back, what it lets through, and that a rebuild writes only under its fence.
func runRebuildFence(t *testing.T, newGate func(t *testing.T) domain.StockGate, o stockGateOptions) {
	fenced := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, domain.ErrGateRebuilding) || !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("%s on a fenced product: err = %v, want ErrGateRebuilding (an ErrUnavailable)", what, err)
		}
	}

	t.Run("the fence lists every hold and holds back every unit movement", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 20})
		keyed := newReservation(p, 2)
		reserveOK(t, g, keyed)
		late := lateReservation(newReservation(p, 3), "attempt-1")
		reserveOK(t, g, late)
		before := domain.GateLevels{Stock: 15, Sold: 5}

		holds, err := g.BeginRebuild(t.Context(), p, "rebuild-1", time.Minute)
		if err != nil {
			t.Fatalf("BeginRebuild: %v", err)
		}
		if len(holds) != 2 || holds[0].Late == holds[1].Late {
			t.Fatalf("BeginRebuild holds = %+v, want the keyed and the late hold", holds)
		}
		for _, h := range holds {
			want := holdOf(keyed)
			if h.Late {
				want = holdOf(late)
			}
			if h.OrderNo != want.OrderNo || h.Qty != want.Qty || h.At.IsZero() {
				t.Fatalf("BeginRebuild hold %+v, want %+v", h, want)
			}
		}
		if res := reserve(t, g, newReservation(p, 1)); res.Outcome != domain.Rebuilding {
			t.Fatalf("Reserve on a fenced product = %s, want Rebuilding", describe(res))
		}
		if res := reserve(t, g, keyed); res.Outcome != domain.Replayed || res.ExistingOrder != keyed.OrderNo {
			t.Fatalf("a replay on a fenced product = %s, want Replayed of %s (claims come first)", describe(res), keyed.OrderNo)
		}
		_, err = g.Apply(t.Context(), domain.GateChange{Product: p, Ref: "during-fence", Stock: 5})
		fenced(t, "Apply", err)
		_, err = g.Cancel(t.Context(), keyed)
		fenced(t, "Cancel", err)
		_, err = g.ReleaseOrphan(t.Context(), holdOf(late))
		fenced(t, "ReleaseOrphan", err)
		_, err = g.BeginRebuild(t.Context(), p, "rebuild-2", time.Minute)
		fenced(t, "a second rebuild's BeginRebuild", err)
		wantLevels(t, g, p, before)
		if err := g.SetFrozen(t.Context(), p, true); err != nil { // an operator's freeze goes through
			t.Fatalf("SetFrozen on a fenced product: %v", err)
		}
		if err := g.Forget(t.Context(), p, []domain.OrderNo{keyed.OrderNo}); err != nil {
			t.Fatalf("Forget on a fenced product: %v", err)
		}

		plan := domain.RebuildPlan{Token: "rebuild-2", Levels: domain.GateLevels{Stock: 7, Sold: 3},
			Counted: []string{"counted-1", "counted-2"}}
		fenced(t, "FinishRebuild under another token", g.FinishRebuild(t.Context(), p, plan))
		wantLevels(t, g, p, domain.GateLevels{Stock: 15, Sold: 5, Frozen: true})
		plan.Token = "rebuild-1"
		if err := g.FinishRebuild(t.Context(), p, plan); err != nil {
			t.Fatalf("FinishRebuild: %v", err)
		}
		// The freeze that landed during the rebuild stands, although the plan says not frozen.
		wantLevels(t, g, p, domain.GateLevels{Stock: 7, Sold: 3, Frozen: true})
		for _, ref := range plan.Counted {
			if applied, err := g.Apply(t.Context(), domain.GateChange{Product: p, Ref: ref, Stock: 1, Sold: -1}); err != nil || applied {
				t.Fatalf("Apply of a change the rebuild counted = %v, %v; want false, nil", applied, err)
			}
		}
		if applied, err := g.Apply(t.Context(), domain.GateChange{Product: p, Ref: "during-fence", Stock: 5}); err != nil || !applied {
			t.Fatalf("Apply after the fence = %v, %v; want true, nil", applied, err)
		}
		if err := g.SetFrozen(t.Context(), p, false); err != nil {
			t.Fatal(err)
		}
		reserveOK(t, g, newReservation(p, 1))
		wantLevels(t, g, p, domain.GateLevels{Stock: 11, Sold: 4})
		// The late hold was not dropped: its attempt can still give its units back.
		if cancelled, err := g.Cancel(t.Context(), late); err != nil || !cancelled {
			t.Fatalf("Cancel of a hold kept by the rebuild = %v, %v; want true, nil", cancelled, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 14, Sold: 1})
	})

	t.Run("the finish drops the holds in the plan's Drop and keeps the others", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 2000})
		kept := newReservation(p, 2)
		reserveOK(t, g, kept)
		// More than one chunk of a script's arguments (1,000).
		dropped := make([]domain.Reservation, 1001)
		var drop []domain.OrderNo
		for i := range dropped {
			dropped[i] = newReservation(p, 1)
			reserveOK(t, g, dropped[i])
			drop = append(drop, dropped[i].OrderNo)
		}
		if _, err := g.BeginRebuild(t.Context(), p, "drop", time.Minute); err != nil {
			t.Fatalf("BeginRebuild: %v", err)
		}
		if err := g.FinishRebuild(t.Context(), p, domain.RebuildPlan{Token: "drop",
			Levels: domain.GateLevels{Stock: 10, Sold: 1003}, Drop: drop}); err != nil {
			t.Fatalf("FinishRebuild: %v", err)
		}
		holds, err := g.Holds(t.Context(), p, 0, 2000)
		if err != nil || len(holds) != 1 || holds[0].OrderNo != kept.OrderNo {
			t.Fatalf("holds after the finish = %+v, %v; want only the kept one %s", holds, err, kept.OrderNo)
		}
		for _, r := range []domain.Reservation{dropped[0], dropped[len(dropped)-1]} {
			if cancelled, err := g.Cancel(t.Context(), r); err != nil || cancelled {
				t.Fatalf("Cancel of a dropped hold = %v, %v; want false, nil (its units follow its order)", cancelled, err)
			}
		}
		if cancelled, err := g.Cancel(t.Context(), kept); err != nil || !cancelled {
			t.Fatalf("Cancel of the kept hold = %v, %v; want true, nil", cancelled, err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 12, Sold: 1001})
	})

	t.Run("a rebuild on an unknown product initialises it", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		holds, err := g.BeginRebuild(t.Context(), p, "init", time.Minute)
		if err != nil || len(holds) != 0 {
			t.Fatalf("BeginRebuild of an unknown product = %v, %v; want no holds", holds, err)
		}
		if err := g.FinishRebuild(t.Context(), p, domain.RebuildPlan{Token: "init", Levels: domain.GateLevels{Stock: 4, Frozen: true}}); err != nil {
			t.Fatalf("FinishRebuild: %v", err)
		}
		wantLevels(t, g, p, domain.GateLevels{Stock: 4, Frozen: true})
	})

	t.Run("abort lifts the fence; an expired fence refuses the finish", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		if _, err := g.BeginRebuild(t.Context(), p, "a", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := g.AbortRebuild(t.Context(), p, "not-a"); err != nil {
			t.Fatalf("AbortRebuild under another token: %v", err)
		}
		if res := reserve(t, g, newReservation(p, 1)); res.Outcome != domain.Rebuilding {
			t.Fatalf("Reserve after another token's abort = %s, want Rebuilding", describe(res))
		}
		if err := g.AbortRebuild(t.Context(), p, "a"); err != nil {
			t.Fatalf("AbortRebuild: %v", err)
		}
		reserveOK(t, g, newReservation(p, 1))
		fenced(t, "FinishRebuild after an abort", g.FinishRebuild(t.Context(), p,
			domain.RebuildPlan{Token: "a", Levels: domain.GateLevels{Stock: 100}}))

		if _, err := g.BeginRebuild(t.Context(), p, "b", time.Second); err != nil {
			t.Fatal(err)
		}
		o.elapse(t, 1100*time.Millisecond)
		reserveOK(t, g, newReservation(p, 1)) // the fence expired: sales resumed
		fenced(t, "FinishRebuild after the fence expired", g.FinishRebuild(t.Context(), p,
			domain.RebuildPlan{Token: "b", Levels: domain.GateLevels{Stock: 100}}))
		wantLevels(t, g, p, domain.GateLevels{Stock: 8, Sold: 2})
	})

	t.Run("race: 10 rebuilds at once, one holds the fence", func(t *testing.T) {
		g, p := newGate(t), NewProductID()
		rebuild(t, g, p, domain.GateLevels{Stock: 10})
		var wins atomic.Int32
		parallel(10, func(i int) {
			_, err := g.BeginRebuild(t.Context(), p, "racer-"+string(rune('a'+i)), time.Minute)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, domain.ErrGateRebuilding):
				t.Error(err)
			}
		})
		if wins.Load() != 1 {
			t.Fatalf("%d rebuilds hold the fence, want exactly 1", wins.Load())
		}
	})
}
