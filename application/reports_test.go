package application_test

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

func (f *fixture) reports(t *testing.T) *application.Reports {
	t.Helper()
	r, err := application.NewReports(f.ledger, f.ledger, f.now, f.cfg.Currency)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The dashboard's money in Shanghai: today is from local midnight (16:00 UTC the day before),
// by hour; an order paid at 15:59:59 UTC is yesterday's, one at 16:00 today's; a refund today of
// an order paid yesterday is today's refund and yesterday's revenue; 7 days hold both.
func TestMoneyInTheOperatorsZone(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Skip(err)
	}
	f := newFixture(t)
	p := f.createProduct(t, 10, 10)
	// t0 is 12:00 UTC, 20:00 in Shanghai. Go back to 15:59:59 UTC the day before: 23:59:59.
	f.clock.Set(time.Date(2025, 2, 28, 15, 59, 59, 0, time.UTC))
	late := f.mustPay(t, f.mustPlace(t, "b1", p.ID(), 2).No())
	f.clock.Set(time.Date(2025, 2, 28, 16, 0, 0, 0, time.UTC))
	first := f.mustPay(t, f.mustPlace(t, "b2", p.ID(), 1).No())
	f.clock.Set(time.Date(2025, 3, 1, 3, 30, 0, 0, time.UTC)) // 11:30 in Shanghai
	if _, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: late.No(), Reason: "asked"}); err != nil {
		t.Fatalf("refund: %v", err)
	}
	f.mustPlace(t, "b3", p.ID(), 1) // placed, never paid
	r := f.reports(t)
	today, err := r.Money(f.ctx, application.PeriodToday, shanghai)
	if err != nil {
		t.Fatal(err)
	}
	price := late.Amount() / 2
	want := application.MoneySums{Paid: 1, Revenue: price, Refunds: 1, Refunded: 2 * price, Net: -price}
	if today.Total != want || !today.Hourly || len(today.Buckets) != 24 {
		t.Fatalf("today %+v in %d buckets, want %+v by 24 hours", today.Total, len(today.Buckets), want)
	}
	if !today.From.Equal(time.Date(2025, 3, 1, 0, 0, 0, 0, shanghai)) {
		t.Fatalf("today starts %v, want local midnight", today.From)
	}
	if b := today.Buckets[0]; b.Paid != 1 || b.Revenue != first.Amount() {
		t.Fatalf("the first hour %+v, want the order paid at local midnight", b)
	}
	if b := today.Buckets[11]; b.Refunds != 1 || b.Refunded != late.Amount() {
		t.Fatalf("11:00 to 12:00 %+v, want the refund", b)
	}
	if len(today.Products) != 1 || today.Products[0].Name != p.Name() || today.Products[0].MoneySums != want {
		t.Fatalf("today's products %+v", today.Products)
	}
	if len(today.Providers) != 1 || today.Providers[0].Provider != "" {
		t.Fatalf("today's providers %+v, want the signed callback's alone", today.Providers)
	}
	week, err := r.Money(f.ctx, application.Period7Days, shanghai)
	if err != nil {
		t.Fatal(err)
	}
	want = application.MoneySums{Paid: 2, Revenue: 3 * price, Refunds: 1, Refunded: 2 * price, Net: price}
	if week.Total != want || week.Hourly || len(week.Buckets) != 7 {
		t.Fatalf("7 days %+v in %d buckets, want %+v by 7 days", week.Total, len(week.Buckets), want)
	}
	if b := week.Buckets[5]; b.Paid != 1 || b.Revenue != late.Amount() || b.Refunds != 0 {
		t.Fatalf("yesterday %+v, want the late order's revenue and no refund", b)
	}
}

// A day the clocks go back has 25 hourly buckets, one going forward 23.
func TestMoneyEdgesFollowTheClockChanges(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		day   time.Time
		hours int
	}{{time.Date(2025, 3, 9, 12, 0, 0, 0, ny), 23}, {time.Date(2025, 11, 2, 12, 0, 0, 0, ny), 25}, {time.Date(2025, 6, 1, 12, 0, 0, 0, ny), 24}} {
		edges, hourly := application.MoneyEdges(application.PeriodToday, ny, c.day)
		if !hourly || len(edges) != c.hours+1 || !edges[len(edges)-1].Equal(time.Date(2025, c.day.Month(), c.day.Day()+1, 0, 0, 0, 0, ny)) {
			t.Errorf("%v: %d edges ending %v, want %d hours to the next midnight", c.day, len(edges), edges[len(edges)-1], c.hours)
		}
	}
	edges, _ := application.MoneyEdges(application.Period30, ny, time.Date(2025, 3, 20, 1, 0, 0, 0, ny))
	if len(edges) != 31 || edges[0].Hour() != 0 || !edges[30].Equal(time.Date(2025, 3, 21, 0, 0, 0, 0, ny)) {
		t.Fatalf("30 days: %d edges from %v to %v", len(edges), edges[0], edges[len(edges)-1])
	}
}

// The export: a BOM, the header, one row per order oldest first across pages, formulas
// defused, no code anywhere.
func TestExportOrdersCSV(t *testing.T) {
	f := newFixture(t)
	p, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "=HYPERLINK(\"x\")", Price: 1999, MaxPerOrder: 5})
	if err != nil {
		t.Fatal(err)
	}
	codes := f.addCodes(t, p.ID(), application.ExportPageSize+5)
	n := application.ExportPageSize + 3
	for i := range n {
		o := f.mustPlace(t, domain.BuyerID("buyer-"+string(rune('a'+i%26))), p.ID(), 1)
		if i%2 == 0 {
			f.mustPay(t, o.No())
		}
		f.clock.Advance(time.Millisecond)
	}
	var b bytes.Buffer
	written, err := f.reports(t).ExportOrders(f.ctx, domain.ExportFilter{Product: p.ID()}, time.UTC, &b)
	if err != nil || written != n {
		t.Fatalf("export wrote %d, %v; want %d", written, err, n)
	}
	out := b.String()
	if !strings.HasPrefix(out, "\ufeff") {
		t.Fatal("the export does not start with a byte-order mark")
	}
	for _, c := range codes {
		if strings.Contains(out, c) {
			t.Fatalf("the export holds the code %q", c)
		}
	}
	rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "\ufeff"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n+1 || strings.Join(rows[0], ",") != strings.Join(application.ExportColumns, ",") {
		t.Fatalf("%d rows, header %v", len(rows), rows[0])
	}
	paid := 0
	for i, row := range rows[1:] {
		if row[6] != "'=HYPERLINK(\"x\")" {
			t.Fatalf("row %d names the product %q, want it defused", i, row[6])
		}
		if i > 0 && row[1] < rows[i][1] {
			t.Fatalf("row %d created %s before row %d's %s", i+1, row[1], i, rows[i][1])
		}
		if row[4] == "PAID" {
			paid++
			if row[9] != "19.99" || row[10] != "CNY" || row[2] == "" {
				t.Fatalf("paid row %v", row)
			}
		}
	}
	if paid != (n+1)/2 {
		t.Fatalf("%d paid rows, want %d", paid, (n+1)/2)
	}
	if _, err := f.reports(t).ExportOrders(f.ctx, domain.ExportFilter{Provider: "Bad Name"}, nil, &b); err == nil {
		t.Fatal("an export with a bad provider name ran")
	}
}

func TestSafeCell(t *testing.T) {
	for in, want := range map[string]string{"=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@SUM(A1)": "'@SUM(A1)",
		"\tx": "'\tx", "\rx": "'\rx", "plain": "plain", "": "", "1-1": "1-1", "礼品卡": "礼品卡"} {
		if got := application.SafeCell(in); got != want {
			t.Errorf("SafeCell(%q) = %q, want %q", in, got, want)
		}
	}
}
