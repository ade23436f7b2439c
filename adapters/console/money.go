package console

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// moneyView is the dashboard's money: the three periods side by side, and the chosen one's
// chart (an SVG the server draws, /console/dashboard/revenue.svg), its hours or days, products
// and providers. Amounts are text already: the currency's decimals, from integer minor units.
type moneyView struct {
	Currency string
	Periods  []periodCard
	Selected application.MoneyPeriod
	Hourly   bool
	ChartURL string
	Max      string // the chart's top: the highest bucket's revenue
	Buckets  []moneyRow
	Products []moneyRow
	// Providers' Label is the provider's name, or "" for orders paid without a payment record.
	Providers []moneyRow
	Error     string // a message id: the sums could not be read
}

// periodCard is one period's sums, and the link that selects it.
type periodCard struct {
	Period  application.MoneyPeriod
	Href    string
	Current bool
	moneyRow
}

// moneyRow is one line of sums as text.
type moneyRow struct {
	Label    string
	Href     string // a product's page, or empty
	Paid     int64
	Revenue  string
	Refunds  int64
	Refunded string
	Net      string
}

func sumsRow(c domain.Currency, label string, m application.MoneySums) moneyRow {
	return moneyRow{Label: label, Paid: m.Paid, Revenue: c.Format(m.Revenue), Refunds: m.Refunds,
		Refunded: c.Format(m.Refunded), Net: c.Format(m.Net)}
}

// money reads the three periods' sums in loc and details the selected one. A failure is the
// view's Error: the rest of the dashboard still renders.
func (k *console) money(ctx context.Context, selected application.MoneyPeriod, loc *time.Location) *moneyView {
	if k.reports == nil {
		return nil
	}
	cur := k.reports.Currency()
	v := &moneyView{Currency: cur.Code, Selected: selected,
		ChartURL: "/console/dashboard/revenue.svg?period=" + string(selected)}
	for _, p := range application.MoneyPeriods {
		r, err := k.reports.Money(ctx, p, loc)
		if err != nil {
			k.log.ErrorContext(ctx, "console: money not read", "period", p, "err", err)
			return &moneyView{Currency: cur.Code, Error: "console.money.unavailable"}
		}
		v.Periods = append(v.Periods, periodCard{Period: p, Href: "/console/dashboard?period=" + string(p),
			Current: p == selected, moneyRow: sumsRow(cur, string(p), r.Total)})
		if p != selected {
			continue
		}
		v.Hourly = r.Hourly
		var top domain.Money
		for _, b := range r.Buckets {
			v.Buckets = append(v.Buckets, sumsRow(cur, bucketLabel(b, r.Hourly, loc), b.MoneySums))
			top = max(top, b.Revenue)
		}
		v.Max = cur.Format(top)
		for _, p := range r.Products {
			row := sumsRow(cur, p.Name, p.MoneySums)
			if p.Name == "" {
				row.Label = fmt.Sprintf("#%d", p.Product)
			}
			row.Href = fmt.Sprintf("/console/products/%d", p.Product)
			v.Products = append(v.Products, row)
		}
		for _, p := range r.Providers {
			v.Providers = append(v.Providers, sumsRow(cur, string(p.Provider), p.MoneySums))
		}
	}
	return v
}

// bucketLabel names a bucket by its start in loc: "14:00" for an hour, "12-04" for a day
// (month-day, read the same in both languages).
func bucketLabel(b application.MoneyBucket, hourly bool, loc *time.Location) string {
	if hourly {
		return b.Start.In(loc).Format("15:04")
	}
	return b.Start.In(loc).Format("01-02")
}

// The revenue chart's geometry, in the SVG's units: the plot, and the margins for its labels.
const (
	svgW, svgH       = 640, 240
	plotX, plotY     = 8, 24
	plotW, plotH     = svgW - 16, svgH - 24 - 28
	svgRevenueColour = "#0b5cad"
	svgRefundColour  = "#b42318"
)

// revenueChart draws the period's revenue per bucket (hours of today, or days) as an SVG bar
// chart, refunds as thin bars beside them, in the operator's zone: drawn here, so the page
// needs no script, and it carries no style (presentation attributes only; the console's CSP
// allows no inline style). The bars' heights are geometry; the amounts stay integers.
func (k *console) revenueChart(c *fiber.Ctx) error {
	period, err := application.ParseMoneyPeriod(c.Query("period"))
	if err != nil {
		return k.errorPage(c, fiber.StatusBadRequest, "console.money.bad_period")
	}
	loc := k.zone(c)
	r, err := k.reports.Money(c.UserContext(), period, loc)
	if err != nil {
		return k.fail(c, err)
	}
	c.Set(fiber.HeaderContentType, "image/svg+xml; charset=utf-8")
	return c.SendString(revenueSVG(r, loc))
}

// revenueSVG draws r: one bar per bucket scaled to the highest revenue or refund, the scale's
// top written above the plot, and the first, middle and last buckets' labels under it.
func revenueSVG(r application.MoneyReport, loc *time.Location) string {
	var top domain.Money = 1
	for _, b := range r.Buckets {
		top = max(top, b.Revenue, b.Refunded)
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img">`,
		svgW, svgH, svgW, svgH)
	fmt.Fprintf(&s, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`, svgW, svgH)
	fmt.Fprintf(&s, `<text x="%d" y="16" font-family="sans-serif" font-size="14" fill="#59636e">%s %s</text>`,
		plotX, r.Currency.Format(top), r.Currency.Code)
	n := len(r.Buckets)
	slot := float64(plotW) / float64(max(n, 1))
	height := func(m domain.Money) float64 { return float64(plotH) * float64(m) / float64(top) }
	for i, b := range r.Buckets {
		x := float64(plotX) + slot*float64(i)
		if h := height(b.Revenue); b.Revenue > 0 {
			fmt.Fprintf(&s, `<rect class="revenue" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s</title></rect>`,
				x+slot*0.1, float64(plotY+plotH)-h, slot*0.6, h, svgRevenueColour, bucketLabel(b, r.Hourly, loc), r.Currency.Format(b.Revenue))
		}
		if h := height(b.Refunded); b.Refunded > 0 {
			fmt.Fprintf(&s, `<rect class="refunds" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s −%s</title></rect>`,
				x+slot*0.7, float64(plotY+plotH)-h, slot*0.2, h, svgRefundColour, bucketLabel(b, r.Hourly, loc), r.Currency.Format(b.Refunded))
		}
	}
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#d0d7de" stroke-width="1"/>`, plotX, plotY+plotH, plotX+plotW, plotY+plotH)
	for _, i := range []int{0, n / 2, n - 1} {
		if i < 0 || i >= n {
			continue
		}
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case n - 1:
			anchor = "end"
		}
		x := float64(plotX) + slot*float64(i) + slot*0.4
		if i == n-1 {
			x = float64(plotX + plotW)
		}
		if i == 0 {
			x = plotX
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="%s" font-family="sans-serif" font-size="14" fill="#59636e">%s</text>`,
			x, svgH-8, anchor, bucketLabel(r.Buckets[i], r.Hourly, loc))
	}
	s.WriteString(`</svg>`)
	return s.String()
}
