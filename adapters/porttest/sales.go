package porttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// SalesLedger is a ledger that is also the read model of its money.
type SalesLedger interface {
	domain.Ledger
	domain.SalesReport
}

// RunSalesReport checks a domain.SalesReport against its contract: the same sums for the same
// orders in every store, to the minor unit, with buckets placed at a zone's local midnights
// (a day of 23 hours included), refunds in the bucket of their refund, every provider's
// payments told apart, and sums read while payments are accepted. Each case uses products of
// its own, so other data in a shared database is ignored.
func RunSalesReport(t *testing.T, newLedger func(t *testing.T) SalesLedger) {
	t.Run("revenue by bucket product and provider", func(t *testing.T) { runRevenueSums(t, newLedger(t)) })
	t.Run("revenue refuses bad edges", func(t *testing.T) { runRevenueEdges(t, newLedger(t)) })
	t.Run("revenue while paying", func(t *testing.T) { runRevenueConcurrent(t, newLedger(t)) })
	t.Run("export pages", func(t *testing.T) { runExportPages(t, newLedger(t)) })
}

// salesOrder stores an order as it would stand after its life so far: placed at created, paid
// at paid (zero: never), refunded at refunded (zero: never), with a payment at each provider
// given (the first confirmed when paid, the others left OPEN).
func salesOrder(t *testing.T, l SalesLedger, p domain.ProductID, amount domain.Money, status domain.OrderStatus,
	created, paid, refunded time.Time, providers ...domain.Provider) domain.Order {
	t.Helper()
	rec := domain.OrderRecord{No: newOrderNo(), Buyer: newBuyer(), Product: p, Qty: 1, UnitPrice: amount,
		Amount: amount, IdemKey: newKey(), Status: status, CreatedAt: created, ExpiresAt: created.Add(15 * time.Minute),
		PaidAt: paid, EndedAt: refunded, UpdatedAt: created}
	if !paid.IsZero() {
		rec.PaymentRef = "ref-" + string(rec.No)
	}
	o := domain.RehydrateOrder(rec)
	if err := l.Orders().Insert(t.Context(), o); err != nil {
		t.Fatalf("insert order: %v", err)
	}
	for i, prov := range providers {
		st := domain.PaymentOpen
		if i == 0 && !paid.IsZero() {
			st = domain.PaymentPaid
			if status == domain.StatusRefunded {
				st = domain.PaymentRefunded
			}
		}
		if err := l.Payments().Create(t.Context(), domain.Payment{OrderNo: o.No(), Provider: prov,
			ProviderRef: string(prov) + "-" + string(o.No()), Amount: amount, Currency: domain.Currency{Code: "CNY", Exponent: 2},
			Status: st, CreatedAt: created}); err != nil {
			t.Fatalf("create payment: %v", err)
		}
	}
	return o
}

// ofProducts keeps the lines of the given products, sorted by bucket, product and provider.
func ofProducts(lines []domain.RevenueLine, ps ...domain.ProductID) []domain.RevenueLine {
	var out []domain.RevenueLine
	for _, l := range lines {
		if slices.Contains(ps, l.Product) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b domain.RevenueLine) int {
		if a.Bucket != b.Bucket {
			return a.Bucket - b.Bucket
		}
		if a.Product != b.Product {
			return cmpInt(a.Product, b.Product)
		}
		if a.Provider < b.Provider {
			return -1
		}
		if a.Provider > b.Provider {
			return 1
		}
		return 0
	})
	return out
}

// localMidnights are the n+1 local midnights from the day of d in loc.
func localMidnights(d time.Time, loc *time.Location, n int) []time.Time {
	y, m, day := d.In(loc).Date()
	out := make([]time.Time, n+1)
	for i := range out {
		out[i] = time.Date(y, m, day+i, 0, 0, 0, 0, loc)
	}
	return out
}

func runRevenueSums(t *testing.T, l SalesLedger) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	// The three days before New York's clocks go forward (the second Sunday of March), and that
	// day of 23 hours. A random year keeps runs on a shared database apart in time as well as
	// by product.
	year := 2030 + int(NewProductID()%40)
	march := time.Date(year, 3, 1, 12, 0, 0, 0, ny)
	change := 1 + (7-int(march.Weekday()))%7 + 7
	edges := localMidnights(time.Date(year, 3, change-3, 12, 0, 0, 0, ny), ny, 4)
	a, b := NewProductID(), NewProductID()
	mid := func(day int) time.Time { return edges[day].Add(5 * time.Hour) }
	us := time.Microsecond
	// Day 0: a paid through stripe at its very first microsecond, a refunded later (day 2).
	salesOrder(t, l, a, 1999, domain.StatusPaid, edges[0].Add(-time.Hour), edges[0], time.Time{}, "stripe")
	salesOrder(t, l, a, 501, domain.StatusRefunded, mid(0), mid(0).Add(time.Minute), mid(2), "stripe")
	// Day 0 ends a microsecond before day 1 starts: its last order is day 0's.
	salesOrder(t, l, b, 1000, domain.StatusPaid, mid(0), edges[1].Add(-us), time.Time{}, "epay", "stripe")
	// Day 1: b through epay (a stripe payment left OPEN), b without a payment record (the
	// signed callback), a UNFULFILLED through alipay: money accepted.
	salesOrder(t, l, b, 1, domain.StatusPaid, edges[1], edges[1], time.Time{}, "epay", "stripe")
	salesOrder(t, l, b, 250, domain.StatusPaid, mid(1), mid(1), time.Time{})
	salesOrder(t, l, a, 777, domain.StatusUnfulfilled, mid(1), mid(1), time.Time{}, "alipay")
	// Never paid: counts nowhere.
	salesOrder(t, l, a, 9999, domain.StatusPending, mid(1), time.Time{}, time.Time{}, "stripe")
	salesOrder(t, l, a, 9999, domain.StatusClosed, mid(1), time.Time{}, mid(1).Add(time.Hour), "stripe")
	// Day 3 is 23 hours long: an order 22h59m after its midnight is still day 3's, and one at
	// the last edge is outside the range.
	salesOrder(t, l, a, 300, domain.StatusPaid, mid(3), edges[3].Add(22*time.Hour+59*time.Minute), time.Time{}, "stripe")
	salesOrder(t, l, a, 8888, domain.StatusPaid, mid(3), edges[4], time.Time{}, "stripe")
	// Paid before the range, refunded in it (day 3): a refund only.
	salesOrder(t, l, b, 4200, domain.StatusRefunded, edges[0].Add(-48*time.Hour), edges[0].Add(-47*time.Hour), mid(3), "epay")

	if got := edges[4].Sub(edges[3]); got != 23*time.Hour {
		t.Fatalf("the test's day 3 lasts %v, want the 23 hours of the spring change", got)
	}
	lines, err := l.Revenue(t.Context(), domain.RevenueQuery{Edges: edges})
	if err != nil {
		t.Fatalf("Revenue: %v", err)
	}
	want := ofProducts([]domain.RevenueLine{
		{Bucket: 0, Product: a, Provider: "stripe", Paid: 2, Revenue: 2500},
		{Bucket: 0, Product: b, Provider: "epay", Paid: 1, Revenue: 1000},
		{Bucket: 1, Product: b, Provider: "epay", Paid: 1, Revenue: 1},
		{Bucket: 1, Product: b, Provider: "", Paid: 1, Revenue: 250},
		{Bucket: 1, Product: a, Provider: "alipay", Paid: 1, Revenue: 777},
		{Bucket: 2, Product: a, Provider: "stripe", Refunds: 1, Refunded: 501},
		{Bucket: 3, Product: a, Provider: "stripe", Paid: 1, Revenue: 300},
		{Bucket: 3, Product: b, Provider: "epay", Refunds: 1, Refunded: 4200},
	}, a, b)
	if got := ofProducts(lines, a, b); !slices.Equal(got, want) {
		t.Fatalf("Revenue lines\n got %+v\nwant %+v", got, want)
	}
	// One bucket of the whole range sums the same money.
	whole, err := l.Revenue(t.Context(), domain.RevenueQuery{Edges: []time.Time{edges[0], edges[4]}})
	if err != nil {
		t.Fatalf("Revenue of one bucket: %v", err)
	}
	var revenue, refunded domain.Money
	for _, line := range ofProducts(whole, a, b) {
		revenue += line.Revenue
		refunded += line.Refunded
	}
	if revenue != 2500+1000+1+250+777+300 || refunded != 501+4200 {
		t.Fatalf("one bucket sums revenue %d, refunds %d; want 4828 and 4701", revenue, refunded)
	}
}

func runRevenueEdges(t *testing.T, l SalesLedger) {
	t0 := now()
	for name, edges := range map[string][]time.Time{
		"none":       nil,
		"one":        {t0},
		"equal":      {t0, t0},
		"descending": {t0, t0.Add(-time.Hour)},
		"too many":   make([]time.Time, domain.MaxRevenueBuckets+2),
	} {
		if name == "too many" {
			for i := range edges {
				edges[i] = t0.Add(time.Duration(i) * time.Hour)
			}
		}
		if _, err := l.Revenue(t.Context(), domain.RevenueQuery{Edges: edges}); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("Revenue with %s edges: %v, want a ValidationError", name, err)
		}
	}
}

// runRevenueConcurrent accepts payments from many goroutines while others read the sums: every
// reading is a sum of whole orders, never more than were paid, and the last one sums them all.
func runRevenueConcurrent(t *testing.T, l SalesLedger) {
	p := NewProductID()
	t0 := now().AddDate(-200, 0, 0).Add(time.Duration(NewProductID()%1000) * time.Hour)
	edges := []time.Time{t0, t0.Add(time.Hour)}
	const n = 24
	orders := make([]domain.Order, n)
	for i := range orders {
		orders[i] = salesOrder(t, l, p, domain.Money(100+i), domain.StatusPending, t0, time.Time{}, time.Time{})
	}
	var (
		wg      sync.WaitGroup
		readErr = make(chan error, 1)
		stop    = make(chan struct{})
	)
	report := func(err error) {
		select {
		case readErr <- err:
		default:
		}
	}
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				lines, err := l.Revenue(context.WithoutCancel(t.Context()), domain.RevenueQuery{Edges: edges})
				if err != nil {
					report(err)
					return
				}
				for _, line := range ofProducts(lines, p) {
					if line.Paid > n || line.Revenue < domain.Money(100*line.Paid) {
						report(fmt.Errorf("a reading of %d orders sums %d", line.Paid, line.Revenue))
					}
				}
			}
		})
	}
	parallel(n, func(i int) {
		o := orders[i]
		if err := o.MarkPaid(t0.Add(time.Duration(i)*time.Minute), o.Amount(), "ref"); err != nil {
			report(err)
			return
		}
		if won, err := l.Orders().Transition(t.Context(), o, domain.StatusPending); err != nil || !won {
			report(fmt.Errorf("pay order %d: won %v, %v", i, won, err))
		}
	})
	close(stop)
	wg.Wait()
	select {
	case err := <-readErr:
		t.Fatal(err)
	default:
	}
	lines, err := l.Revenue(t.Context(), domain.RevenueQuery{Edges: edges})
	if err != nil {
		t.Fatal(err)
	}
	var want domain.Money
	for i := range n {
		want += domain.Money(100 + i)
	}
	got := ofProducts(lines, p)
	if len(got) != 1 || got[0].Paid != n || got[0].Revenue != want {
		t.Fatalf("after %d payments Revenue says %+v, want %d orders summing %d", n, got, n, want)
	}
}

func runExportPages(t *testing.T, l SalesLedger) {
	p, other := NewProductID(), NewProductID()
	t0 := now().AddDate(-300, 0, 0).Add(time.Duration(NewProductID()%1000) * time.Hour)
	var stripe, all []domain.OrderNo
	for i := range 7 {
		// Two orders at one instant: the number breaks the tie.
		at := t0.Add(time.Duration(i/2) * time.Second)
		var o domain.Order
		if i%3 == 0 {
			o = salesOrder(t, l, p, 100, domain.StatusPaid, at, at, time.Time{}, "stripe")
			stripe = append(stripe, o.No())
		} else {
			o = salesOrder(t, l, p, 100, domain.StatusPending, at, time.Time{}, time.Time{}, "epay")
		}
		all = append(all, o.No())
	}
	salesOrder(t, l, other, 100, domain.StatusPaid, t0, t0, time.Time{}, "stripe")

	read := func(f domain.ExportFilter) []domain.ExportRow {
		t.Helper()
		var out []domain.ExportRow
		for {
			page, err := l.ExportPage(t.Context(), f)
			if err != nil {
				t.Fatalf("ExportPage(%+v): %v", f, err)
			}
			out = append(out, page...)
			if len(page) < f.Limit {
				return out
			}
			f.After = domain.CursorOf(page[len(page)-1].Order)
		}
	}
	rows := read(domain.ExportFilter{Product: p, Limit: 2})
	if len(rows) != len(all) {
		t.Fatalf("paged export of the product lists %d orders, want %d", len(rows), len(all))
	}
	seen := map[domain.OrderNo]bool{}
	for i, r := range rows {
		if seen[r.Order.No()] {
			t.Fatalf("order %s listed twice", r.Order.No())
		}
		seen[r.Order.No()] = true
		if i > 0 {
			prev := rows[i-1].Order
			if !prev.CreatedAt().Before(r.Order.CreatedAt()) && !(prev.CreatedAt().Equal(r.Order.CreatedAt()) && prev.No() < r.Order.No()) {
				t.Fatalf("row %d (%v %s) does not come after row %d (%v %s)", i, r.Order.CreatedAt(), r.Order.No(), i-1, prev.CreatedAt(), prev.No())
			}
		}
		if r.Order.Status() == domain.StatusPaid && (r.Provider != "stripe" || r.ProviderRef != "stripe-"+string(r.Order.No())) {
			t.Fatalf("paid row %+v names provider %q ref %q, want its stripe payment", r.Order.No(), r.Provider, r.ProviderRef)
		}
		if r.Order.Status() == domain.StatusPending && (r.Provider != "" || r.ProviderRef != "") {
			t.Fatalf("unpaid row %s names provider %q: only a confirmed payment is named", r.Order.No(), r.Provider)
		}
	}
	for _, no := range all {
		if !seen[no] {
			t.Fatalf("order %s missing from the export", no)
		}
	}
	if got := read(domain.ExportFilter{Product: p, Provider: "stripe", Status: domain.StatusPaid, Limit: 5}); len(got) != len(stripe) {
		t.Fatalf("export of the product's paid stripe orders lists %d, want %d", len(got), len(stripe))
	}
	if got := read(domain.ExportFilter{Product: p, Provider: "epay", Limit: 5}); len(got) != len(all)-len(stripe) {
		t.Fatalf("export of the product's epay orders lists %d, want %d", len(got), len(all)-len(stripe))
	}
	// [t0+1s, t0+2s): the orders 2 and 3.
	if got := read(domain.ExportFilter{Product: p, From: t0.Add(time.Second), To: t0.Add(2 * time.Second), Limit: 5}); len(got) != 2 {
		t.Fatalf("export of one second lists %d orders, want 2", len(got))
	}
	for _, f := range []domain.ExportFilter{{Limit: 0}, {Limit: domain.MaxExportPage + 1}, {Limit: 1, Status: 99},
		{Limit: 1, Provider: "No Such"}, {Limit: 1, From: t0, To: t0}, {Limit: 1, After: domain.OrderCursor{No: "x"}}} {
		if _, err := l.ExportPage(t.Context(), f); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("ExportPage(%+v) = %v, want a ValidationError", f, err)
		}
	}
}
