package application

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"cardshop/domain"
)

// ActionOrdersExport is the audit log's action of an export of orders.
const ActionOrdersExport = "orders.export"

// Reports reads the shop's money (the dashboard's revenue, refunds and net) and exports
// orders, from the ledger's read model (domain.SalesReport): sums grouped by the store, orders
// read page by page.
type Reports struct {
	report   domain.SalesReport
	ledger   domain.Ledger
	clock    domain.Clock
	currency domain.Currency
}

// NewReports returns the reports over report, with product names from ledger and amounts in
// currency (the shop's, Config.Currency; zero: DefaultConfig's).
func NewReports(report domain.SalesReport, ledger domain.Ledger, clock domain.Clock, currency domain.Currency) (*Reports, error) {
	if report == nil || ledger == nil || clock == nil {
		return nil, errors.New("application: reports need the sales report, the ledger and the clock")
	}
	if currency.IsZero() {
		currency = DefaultConfig().Currency
	}
	return &Reports{report: report, ledger: ledger, clock: clock, currency: currency}, nil
}

// Currency is the shop's currency, the one every amount of a report is in.
func (s *Reports) Currency() domain.Currency { return s.currency }

// MoneyPeriod is a span the dashboard sums money over, ending with today in the operator's
// zone.
type MoneyPeriod string

// The periods: today by hour, and the last 7 and 30 days (today included) by day.
const (
	PeriodToday MoneyPeriod = "today"
	Period7Days MoneyPeriod = "7d"
	Period30    MoneyPeriod = "30d"
)

// MoneyPeriods lists the periods in the order the dashboard offers them.
var MoneyPeriods = []MoneyPeriod{PeriodToday, Period7Days, Period30}

// ParseMoneyPeriod reads a period; "" is PeriodToday.
func ParseMoneyPeriod(s string) (MoneyPeriod, error) {
	switch p := MoneyPeriod(s); p {
	case "":
		return PeriodToday, nil
	case PeriodToday, Period7Days, Period30:
		return p, nil
	}
	return "", domain.Invalid("period", `must be "today", "7d" or "30d"`)
}

// MoneySums are the sums of one bucket, product, provider or period: orders paid and their
// revenue, orders refunded and their amount, and the net (revenue less refunds).
type MoneySums struct {
	Paid     int64
	Revenue  domain.Money
	Refunds  int64
	Refunded domain.Money
	Net      domain.Money
}

func (m *MoneySums) add(l domain.RevenueLine) {
	m.Paid += l.Paid
	m.Revenue += l.Revenue
	m.Refunds += l.Refunds
	m.Refunded += l.Refunded
	m.Net = m.Revenue - m.Refunded
}

// MoneyBucket is one bar of the chart: an hour of today or a day, from Start to End.
type MoneyBucket struct {
	Start, End time.Time
	MoneySums
}

// ProductMoney is one product's sums; Name is empty for a product no longer in the catalogue.
type ProductMoney struct {
	Product domain.ProductID
	Name    string
	MoneySums
}

// ProviderMoney is one provider's sums; Provider "" is the orders paid without a payment
// record (the storefront's signed callback).
type ProviderMoney struct {
	Provider domain.Provider
	MoneySums
}

// MoneyReport is the money of one period in one zone: the whole, each bucket (hours of today,
// or days), each product and each provider (both by revenue, highest first).
type MoneyReport struct {
	Period    MoneyPeriod
	Zone      *time.Location
	From, To  time.Time // the period: From inclusive, To exclusive
	Hourly    bool      // buckets are hours (today), else days
	Total     MoneySums
	Buckets   []MoneyBucket
	Products  []ProductMoney
	Providers []ProviderMoney
	Currency  domain.Currency
}

// MoneyEdges are the bucket bounds of period in loc at now: today's hours from local midnight
// to the next (23 or 25 of them on a day the clocks change), or local midnights for days. Hours
// are steps of one hour from midnight, so a day of 23 hours has 23 buckets, none empty by
// construction.
func MoneyEdges(period MoneyPeriod, loc *time.Location, now time.Time) ([]time.Time, bool) {
	y, m, d := now.In(loc).Date()
	midnight := func(day int) time.Time { return time.Date(y, m, day, 0, 0, 0, 0, loc) }
	if period == PeriodToday {
		end := midnight(d + 1)
		var edges []time.Time
		for t := midnight(d); t.Before(end); t = t.Add(time.Hour) {
			edges = append(edges, t)
		}
		return append(edges, end), true
	}
	days := 7
	if period == Period30 {
		days = 30
	}
	edges := make([]time.Time, days+1)
	for i := range edges {
		edges[i] = midnight(d - days + 1 + i)
	}
	return edges, false
}

// Money sums period's money in loc (nil: UTC): one aggregate query of the sales report and one
// read of the catalogue for the products' names.
func (s *Reports) Money(ctx context.Context, period MoneyPeriod, loc *time.Location) (MoneyReport, error) {
	if loc == nil {
		loc = time.UTC
	}
	edges, hourly := MoneyEdges(period, loc, s.clock.Now())
	lines, err := s.report.Revenue(ctx, domain.RevenueQuery{Edges: edges})
	if err != nil {
		return MoneyReport{}, fmt.Errorf("money of %s: %w", period, err)
	}
	ps, err := s.ledger.Products().Products(ctx)
	if err != nil {
		return MoneyReport{}, fmt.Errorf("money of %s: products: %w", period, err)
	}
	names := map[domain.ProductID]string{}
	for _, p := range ps {
		names[p.ID()] = p.Name()
	}
	out := MoneyReport{Period: period, Zone: loc, From: edges[0], To: edges[len(edges)-1], Hourly: hourly, Currency: s.currency}
	out.Buckets = make([]MoneyBucket, len(edges)-1)
	for i := range out.Buckets {
		out.Buckets[i].Start, out.Buckets[i].End = edges[i], edges[i+1]
	}
	byProduct := map[domain.ProductID]*ProductMoney{}
	byProvider := map[domain.Provider]*ProviderMoney{}
	for _, l := range lines {
		if l.Bucket < 0 || l.Bucket >= len(out.Buckets) {
			return MoneyReport{}, fmt.Errorf("money of %s: the store answered bucket %d of %d", period, l.Bucket, len(out.Buckets))
		}
		out.Total.add(l)
		out.Buckets[l.Bucket].add(l)
		if byProduct[l.Product] == nil {
			byProduct[l.Product] = &ProductMoney{Product: l.Product, Name: names[l.Product]}
		}
		byProduct[l.Product].add(l)
		if byProvider[l.Provider] == nil {
			byProvider[l.Provider] = &ProviderMoney{Provider: l.Provider}
		}
		byProvider[l.Provider].add(l)
	}
	for _, p := range byProduct {
		out.Products = append(out.Products, *p)
	}
	sort.Slice(out.Products, func(i, j int) bool {
		a, b := out.Products[i], out.Products[j]
		return a.Revenue > b.Revenue || a.Revenue == b.Revenue && a.Product < b.Product
	})
	for _, p := range byProvider {
		out.Providers = append(out.Providers, *p)
	}
	sort.Slice(out.Providers, func(i, j int) bool {
		a, b := out.Providers[i], out.Providers[j]
		return a.Revenue > b.Revenue || a.Revenue == b.Revenue && a.Provider < b.Provider
	})
	return out, nil
}

// ExportPageSize is how many orders an export reads at a time: its memory does not grow with
// the number of orders exported.
const ExportPageSize = 1000

// ExportColumns are the columns of an export of orders, in order (docs/OPERATIONS.md says what
// each holds). No column holds a code: an export never reads the card pool.
var ExportColumns = []string{"order_no", "created_at", "paid_at", "ended_at", "status", "product_id", "product",
	"qty", "unit_price", "amount", "currency", "provider", "provider_ref", "buyer_id", "buyer_email", "reason"}

// csvBOM opens the file: a spreadsheet that guesses the encoding (Excel in a Chinese locale)
// reads the file as UTF-8 because of it.
const csvBOM = "\ufeff"

// ExportOrders writes the orders f selects (its Limit and After are the export's own) to w as
// CSV: a UTF-8 byte-order mark, the header ExportColumns, one row per order oldest first, times
// in RFC 3339 in loc (nil: UTC) and amounts in the shop's currency as decimals. It reads
// ExportPageSize orders at a time and writes each page before reading the next, so memory stays
// flat however many orders match. Every cell that a spreadsheet would take for a formula
// (starting with = + - @, a tab or a carriage return) is prefixed with an apostrophe. It
// returns how many orders it wrote; a filter that fails Check writes nothing.
func (s *Reports) ExportOrders(ctx context.Context, f domain.ExportFilter, loc *time.Location, w io.Writer) (int, error) {
	if loc == nil {
		loc = time.UTC
	}
	f.Limit, f.After = ExportPageSize, domain.OrderCursor{}
	if err := f.Check(); err != nil {
		return 0, err
	}
	ps, err := s.ledger.Products().Products(ctx)
	if err != nil {
		return 0, fmt.Errorf("export: products: %w", err)
	}
	names := map[domain.ProductID]string{}
	for _, p := range ps {
		names[p.ID()] = p.Name()
	}
	if _, err := io.WriteString(w, csvBOM); err != nil {
		return 0, err
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(ExportColumns); err != nil {
		return 0, err
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.In(loc).Format(time.RFC3339)
	}
	written := 0
	record := make([]string, len(ExportColumns))
	for {
		page, err := s.report.ExportPage(ctx, f)
		if err != nil {
			return written, fmt.Errorf("export: %w", err)
		}
		for _, r := range page {
			o := r.Order
			name, ok := names[o.Product()]
			if !ok {
				// A product created after the names were read: read it now, once (a product
				// that is gone stays nameless).
				if p, err := s.ledger.Products().Product(ctx, o.Product()); err == nil {
					name = p.Name()
				}
				names[o.Product()] = name
			}
			record = append(record[:0], string(o.No()), when(o.CreatedAt()), when(o.PaidAt()), when(o.EndedAt()),
				o.Status().String(), strconv.FormatInt(int64(o.Product()), 10), name, strconv.Itoa(o.Qty()),
				s.currency.Format(o.UnitPrice()), s.currency.Format(o.Amount()), s.currency.Code,
				string(r.Provider), r.ProviderRef, string(o.Buyer()), string(o.Email()), o.Reason())
			for i := range record {
				record[i] = SafeCell(record[i])
			}
			if err := cw.Write(record); err != nil {
				return written, err
			}
			written++
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return written, err
		}
		if len(page) < f.Limit {
			return written, nil
		}
		f.After = domain.CursorOf(page[len(page)-1].Order)
	}
}

// SafeCell defuses a cell a spreadsheet would run as a formula: one starting with = + - @, a
// tab or a carriage return gets an apostrophe in front (OWASP's advice on CSV injection).
func SafeCell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}
