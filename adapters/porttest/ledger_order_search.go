package porttest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/domain"
)

// runOrderSearch checks OrderRepo.Search: filters by buyer, product, statuses and a creation
// window combine with AND; results come newest first and stop at the limit; paging by the
// last order's cursor lists every order exactly once, in order, while others are inserted; a
// bad filter is a ValidationError.
//
// Every case places its orders in a creation window of its own, decades back, so the orders of
// other cases and runs on a shared database never fall into a window it searches.
func runOrderSearch(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("filters combine with AND, newest first", func(t *testing.T) {
		l := newLedger(t)
		base := searchWindow()
		p1, p2 := createProduct(t, l), createProduct(t, l)
		b1, b2 := newBuyer(), newBuyer()
		// e[i] is created at base+i minutes.
		e := []domain.Order{
			searchOrder(t, l, b1, p1, base, domain.StatusPending),
			searchOrder(t, l, b1, p2, base.Add(1*time.Minute), domain.StatusPaid),
			searchOrder(t, l, b2, p1, base.Add(2*time.Minute), domain.StatusPaid),
			searchOrder(t, l, b2, p2, base.Add(3*time.Minute), domain.StatusFailed),
			searchOrder(t, l, b1, p1, base.Add(4*time.Minute), domain.StatusPaid),
			searchOrder(t, l, b2, p1, base.Add(5*time.Minute), domain.StatusRefunded),
		}
		end := base.Add(time.Hour)
		all := domain.OrderFilter{From: base, To: end, Limit: domain.MaxOrderPage}
		with := func(change func(f *domain.OrderFilter)) domain.OrderFilter {
			f := all
			change(&f)
			return f
		}
		paid := []domain.OrderStatus{domain.StatusPaid}
		for _, c := range []struct {
			name string
			f    domain.OrderFilter
			want []domain.Order
		}{
			{"the window", all, []domain.Order{e[5], e[4], e[3], e[2], e[1], e[0]}},
			{"buyer", with(func(f *domain.OrderFilter) { f.Buyer = b1 }), []domain.Order{e[4], e[1], e[0]}},
			{"buyer without a window", domain.OrderFilter{Buyer: b2, Limit: 10}, []domain.Order{e[5], e[3], e[2]}},
			{"product", with(func(f *domain.OrderFilter) { f.Product = p1.ID() }), []domain.Order{e[5], e[4], e[2], e[0]}},
			{"one status", with(func(f *domain.OrderFilter) { f.Statuses = paid }), []domain.Order{e[4], e[2], e[1]}},
			{"several statuses", with(func(f *domain.OrderFilter) {
				f.Statuses = []domain.OrderStatus{domain.StatusFailed, domain.StatusPending}
			}), []domain.Order{e[3], e[0]}},
			{"from, inclusive", with(func(f *domain.OrderFilter) { f.From = base.Add(4 * time.Minute) }), []domain.Order{e[5], e[4]}},
			{"to, exclusive", with(func(f *domain.OrderFilter) { f.To = base.Add(2 * time.Minute) }), []domain.Order{e[1], e[0]}},
			{"an empty window", with(func(f *domain.OrderFilter) { f.To = base }), nil},
			{"product and status", with(func(f *domain.OrderFilter) { f.Product, f.Statuses = p1.ID(), paid }), []domain.Order{e[4], e[2]}},
			{"product, status and time", with(func(f *domain.OrderFilter) {
				f.Product, f.Statuses, f.To = p1.ID(), paid, base.Add(4*time.Minute)
			}), []domain.Order{e[2]}},
			{"buyer and product", with(func(f *domain.OrderFilter) { f.Buyer, f.Product = b2, p2.ID() }), []domain.Order{e[3]}},
			{"buyer, product and status", domain.OrderFilter{Buyer: b1, Product: p1.ID(), Statuses: paid, Limit: 10}, []domain.Order{e[4]}},
			{"no status is every status", with(func(f *domain.OrderFilter) { f.Buyer, f.Product, f.Statuses = b1, p2.ID(), nil }),
				[]domain.Order{e[1]}},
			{"a buyer with no orders", with(func(f *domain.OrderFilter) { f.Buyer = newBuyer() }), nil},
			{"the limit", with(func(f *domain.OrderFilter) { f.Limit = 2 }), []domain.Order{e[5], e[4]}},
			{"after a cursor", with(func(f *domain.OrderFilter) { f.After = domain.CursorOf(e[4]) }),
				[]domain.Order{e[3], e[2], e[1], e[0]}},
			{"after a cursor, with a filter", with(func(f *domain.OrderFilter) { f.After, f.Buyer = domain.CursorOf(e[4]), b1 }),
				[]domain.Order{e[1], e[0]}},
			{"the time in another zone", with(func(f *domain.OrderFilter) {
				f.From = base.Add(3 * time.Minute).In(time.FixedZone("pt-0800", -8*3600))
			}), []domain.Order{e[5], e[4], e[3]}},
		} {
			wantSearch(t, l, c.name, c.f, c.want...)
		}
	})

	t.Run("paging lists every order once, in order, while orders are inserted", func(t *testing.T) {
		l := newLedger(t)
		base := searchWindow()
		p := createProduct(t, l)
		// 23 orders, three to a second: ties in the creation time are broken by the number.
		want := map[domain.OrderNo]bool{}
		for i := range 23 {
			o := searchOrder(t, l, newBuyer(), p, base.Add(time.Duration(i/3)*time.Second), domain.StatusPending)
			want[o.No()] = true
		}
		// Meanwhile more orders of the product arrive: new ones (newer than every page), and
		// late ones that share the pages' times. They may be listed or not, but never twice,
		// and never at the cost of an order that was there.
		var stop atomic.Bool
		var wg sync.WaitGroup
		var inserted atomic.Int64
		wg.Go(func() {
			for i := 0; !stop.Load() && i < 200; i++ {
				at := base.Add(time.Hour)
				if i%2 == 1 {
					at = base.Add(time.Duration(rand.IntN(8)) * time.Second)
				}
				o, err := domain.NewOrder(newOrderNo(), newBuyer(), p, 1, newKey(), at, 15*time.Minute)
				if err == nil {
					err = l.Orders().Insert(t.Context(), o)
				}
				if err != nil {
					t.Errorf("concurrent insert: %v", err)
					return
				}
				inserted.Add(1)
			}
		})
		seen := map[domain.OrderNo]bool{}
		var last domain.OrderCursor
		f := domain.OrderFilter{Product: p.ID(), From: base, To: base.Add(time.Minute), Limit: 4}
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("paging does not end")
			}
			got, err := l.Orders().Search(t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range got {
				if seen[o.No()] {
					t.Fatalf("order %s listed twice", o.No())
				}
				if !last.IsZero() && !last.Before(o.CreatedAt(), o.No()) {
					t.Fatalf("order %s (%v) listed after %s (%v): not newest first", o.No(), o.CreatedAt(), last.No, last.CreatedAt)
				}
				seen[o.No()], last = true, domain.CursorOf(o)
			}
			if len(got) < f.Limit {
				break
			}
			f.After = last
		}
		stop.Store(true)
		wg.Wait()
		for no := range want {
			if !seen[no] {
				t.Errorf("order %s was never listed (%d pages' worth seen, %d inserted meanwhile)", no, len(seen), inserted.Load())
			}
		}
	})

	t.Run("a bad filter is invalid input and reads nothing", func(t *testing.T) {
		l := newLedger(t)
		base := searchWindow()
		ok := domain.OrderFilter{Limit: 10}
		for name, f := range map[string]domain.OrderFilter{
			"no limit":             {},
			"a limit above 100":    {Limit: domain.MaxOrderPage + 1},
			"a negative limit":     {Limit: -1},
			"an unknown status":    {Statuses: []domain.OrderStatus{domain.OrderStatus(99)}, Limit: 10},
			"a repeated status":    {Statuses: []domain.OrderStatus{domain.StatusPaid, domain.StatusPaid}, Limit: 10},
			"from after to":        {From: base.Add(time.Second), To: base, Limit: 10},
			"a malformed buyer":    {Buyer: "two words", Limit: 10},
			"a negative product":   {Product: -1, Limit: 10},
			"a cursor without no":  {After: domain.OrderCursor{CreatedAt: base}, Limit: 10},
			"a cursor without at":  {After: domain.OrderCursor{No: newOrderNo()}, Limit: 10},
			"a limit of 0, cursor": {After: domain.OrderCursor{CreatedAt: base, No: newOrderNo()}},
		} {
			got, err := l.Orders().Search(t.Context(), f)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, domain.ErrInvalidInput) || got != nil {
				t.Errorf("%s: Search = %d orders, %v; want a ValidationError", name, len(got), err)
			}
		}
		if _, err := l.Orders().Search(t.Context(), ok); err != nil {
			t.Fatalf("a good filter: %v", err)
		}
	})
}

// searchWindow is the start of an hour, decades back, that no other case's orders share.
func searchWindow() time.Time {
	return time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rand.IntN(30*365*24)) * time.Hour)
}

// searchOrder stores an order of p by buyer created at at, moved to st (PENDING, PAID,
// FAILED or REFUNDED) through Transition.
func searchOrder(t *testing.T, l domain.Store, buyer domain.BuyerID, p domain.Product, at time.Time, st domain.OrderStatus) domain.Order {
	t.Helper()
	o, err := domain.NewOrder(newOrderNo(), buyer, p, 1, newKey(), at, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	insertOrder(t, l, o)
	move := func(change func() error) {
		t.Helper()
		from := o.Status()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		if won, err := l.Orders().Transition(t.Context(), o, from); err != nil || !won {
			t.Fatalf("Transition %s -> %s = %v, %v", from, o.Status(), won, err)
		}
	}
	switch st {
	case domain.StatusPaid, domain.StatusRefunded:
		move(func() error { return o.MarkPaid(at, o.Amount(), "ref-"+string(o.No())) })
	case domain.StatusFailed:
		move(func() error { return o.Fail(at, "declined") })
	default: // the rest stay as placed
	}
	if st == domain.StatusRefunded {
		move(func() error { return o.Refund(at, "asked") })
	}
	return o
}

// wantSearch checks that Search(f) lists exactly want, in that order.
func wantSearch(t *testing.T, l domain.Store, name string, f domain.OrderFilter, want ...domain.Order) {
	t.Helper()
	got, err := l.Orders().Search(t.Context(), f)
	if err != nil {
		t.Fatalf("%s: Search: %v", name, err)
	}
	nos := func(os []domain.Order) []domain.OrderNo {
		out := make([]domain.OrderNo, len(os))
		for i, o := range os {
			out[i] = o.No()
		}
		return out
	}
	if !slices.Equal(nos(got), nos(want)) {
		t.Errorf("%s: Search = %v, want %v", name, nos(got), nos(want))
		return
	}
	for i := range got {
		sameOrder(t, got[i], want[i])
	}
}
