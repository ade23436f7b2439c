package porttest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"cardshop/domain"
)

// runFlows checks the stock flow: Append refuses a second entry of one (ref, type), Entries
// lists a ref's entries oldest first, Totals sums a product's flow by type and PerInterval
// counts its rows of a type per interval.
func runFlows(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("append refuses a duplicate (ref, type) and lists entries oldest first", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l).ID()
		ref := string(newOrderNo())
		reserveRow := domain.FlowEntry{ProductID: p, Ref: ref, Type: domain.FlowReserve, Qty: 2, At: now()}
		payRow := domain.FlowEntry{ProductID: p, Ref: ref, Type: domain.FlowPay, Qty: 2, At: now().Add(time.Second)}
		appendFlow(t, l, reserveRow)
		appendFlow(t, l, payRow)
		dup := reserveRow
		dup.Qty = 5
		if err := l.Flows().Append(t.Context(), dup); !errors.Is(err, domain.ErrDuplicateFlow) {
			t.Fatalf("Append of a taken (ref, type): err = %v, want ErrDuplicateFlow", err)
		}
		got, err := l.Flows().Entries(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		want := []domain.FlowEntry{reserveRow, payRow}
		if len(got) != len(want) {
			t.Fatalf("Entries = %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i].ID <= 0 || (i > 0 && got[i].ID <= got[i-1].ID) {
				t.Fatalf("Entries ids %d, %d: want positive and increasing", got[0].ID, got[len(got)-1].ID)
			}
			g, w := got[i], want[i]
			g.ID, g.At, w.At = 0, g.At.UTC(), w.At.UTC()
			if g != w {
				t.Fatalf("Entries[%d] = %+v, want %+v", i, g, w)
			}
		}
		if got, err := l.Flows().Entries(t.Context(), string(newOrderNo())); err != nil || len(got) != 0 {
			t.Fatalf("Entries(unknown ref) = %+v, %v; want none", got, err)
		}
	})

	t.Run("totals sum the product's flow by type", func(t *testing.T) {
		l := newLedger(t)
		p, other := createProduct(t, l).ID(), createProduct(t, l).ID()
		batch := "batch-" + string(newOrderNo())
		appendFlow(t, l, domain.FlowEntry{ProductID: p, Ref: batch, Type: domain.FlowStockIn, Qty: 10, At: now()})
		for _, qty := range []int64{1, 2} {
			appendFlow(t, l, domain.FlowEntry{ProductID: p, Ref: string(newOrderNo()), Type: domain.FlowReserve, Qty: qty, At: now()})
		}
		appendFlow(t, l, domain.FlowEntry{ProductID: other, Ref: string(newOrderNo()), Type: domain.FlowReserve, Qty: 7, At: now()})
		got, err := l.Flows().Totals(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		want := domain.FlowTotals{domain.FlowStockIn: 10, domain.FlowReserve: 3}
		for typ := domain.FlowType(1); typ.Valid(); typ++ {
			if got[typ] != want[typ] {
				t.Errorf("Totals[%s] = %d, want %d", typ, got[typ], want[typ])
			}
		}
	})

	t.Run("per interval counts one product's rows of one type in each interval", func(t *testing.T) {
		l := newLedger(t)
		p, other := createProduct(t, l).ID(), createProduct(t, l).ID()
		from := now().Add(-time.Hour)
		step := 5 * time.Second
		at := func(d time.Duration) domain.FlowEntry {
			return domain.FlowEntry{ProductID: p, Ref: string(newOrderNo()), Type: domain.FlowReserve, Qty: 3, At: from.Add(d)}
		}
		for _, e := range []domain.FlowEntry{
			at(-time.Microsecond),              // before the window
			at(0), at(4999 * time.Millisecond), // interval 0, its start held
			at(5 * time.Second),  // interval 1 (an interval's end is the next's start)
			at(14 * time.Second), // interval 2
			at(15 * time.Second), // after the window
		} {
			appendFlow(t, l, e)
		}
		appendFlow(t, l, domain.FlowEntry{ProductID: other, Ref: string(newOrderNo()), Type: domain.FlowReserve, Qty: 1, At: from})
		appendFlow(t, l, domain.FlowEntry{ProductID: p, Ref: string(newOrderNo()), Type: domain.FlowPay, Qty: 1, At: from})
		got, err := l.Flows().PerInterval(t.Context(), p, domain.FlowReserve, from, step, 3)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{2, 1, 1}; !slices.Equal(got, want) {
			t.Fatalf("PerInterval = %v, want %v (rows, not qty)", got, want)
		}
		if got, err := l.Flows().PerInterval(t.Context(), other, domain.FlowPay, from, step, 2); err != nil || !slices.Equal(got, []int64{0, 0}) {
			t.Fatalf("PerInterval of no rows = %v, %v; want zeros", got, err)
		}
		for _, bad := range []struct {
			step time.Duration
			n    int
		}{{0, 3}, {step, 0}, {step, domain.MaxFlowIntervals + 1}} {
			if _, err := l.Flows().PerInterval(t.Context(), p, domain.FlowReserve, from, bad.step, bad.n); !errors.Is(err, domain.ErrInvalidInput) {
				t.Errorf("PerInterval(step %v, n %d): err = %v, want ErrInvalidInput", bad.step, bad.n, err)
			}
		}
	})
}

func appendFlow(t *testing.T, l domain.Store, e domain.FlowEntry) {
	t.Helper()
	if err := l.Flows().Append(t.Context(), e); err != nil {
		t.Fatalf("Append %s flow: %v", e.Type, err)
	}
}
