package porttest

import (
	"errors"
	"testing"
	"time"

	"cardshop/domain"
)

// runFlows checks the stock flow: Append refuses a second entry of one (ref, type), Entries
// lists a ref's entries oldest first and Totals sums a product's flow by type.
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
}

func appendFlow(t *testing.T, l domain.Store, e domain.FlowEntry) {
	t.Helper()
	if err := l.Flows().Append(t.Context(), e); err != nil {
		t.Fatalf("Append %s flow: %v", e.Type, err)
	}
}
