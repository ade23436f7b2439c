package application

import (
	"context"
	"fmt"
	"time"

	"cardshop/domain"
)

// SaleDashboard is the live dashboard's reading of the sales: the products on sale or about to
// be, and the backlogs of the ledger.
type SaleDashboard struct {
	At       time.Time
	Products []ProductDashboard
	// Outbox counts the outbox messages not yet relayed (every topic); Webhook those of them
	// for the storefront's webhook, Mail the buyers' e-mails not yet sent (nor given up).
	Outbox, Webhook, Mail int64
	// Overdue counts PENDING orders past their expiry, up to OverdueCap: the sweeper's backlog
	// (orders whose close the delay queue has not delivered yet). OverdueMore is true when there
	// are more than OverdueCap.
	Overdue     int
	OverdueMore bool
	// OpenAlerts counts the open alerts by kind (the alert log's, shared by every instance).
	OpenAlerts map[string]int64
}

// OverdueCap bounds SaleDashboard.Overdue: the dashboard reads at most this many overdue orders.
const OverdueCap = 100

// ProductDashboard is one product's numbers on the dashboard.
type ProductDashboard struct {
	Product domain.Product
	// Upcoming is true for a product whose sale starts after At.
	Upcoming bool
	// Gate is the gate's reading (reservable stock, units held by PENDING and PAID orders);
	// GateOK is false when the gate holds no entry for the product.
	Gate   domain.GateLevels
	GateOK bool
	// Pending and Paid are the units of the product's PENDING and PAID orders in the ledger.
	Pending, Paid int64
	// PaidOrders counts orders ever paid (PAID, REFUNDED, UNFULFILLED); Unpaid those closed
	// or failed without payment. Their ratio is the payment success rate; PENDING orders are
	// not decided yet and count in neither.
	PaidOrders, Unpaid int64
	// Orders counts the orders placed per interval, from the ledger's reserve flow rows: every
	// instance's orders. SoldOut counts this instance's sold-out answers (SoldOutAnswers).
	Orders, SoldOut RateSeries
}

// PaymentSuccess returns PaidOrders / (PaidOrders + Unpaid), and false when no order's payment
// has been decided yet.
func (p ProductDashboard) PaymentSuccess() (float64, bool) {
	decided := p.PaidOrders + p.Unpaid
	if decided == 0 {
		return 0, false
	}
	return float64(p.PaidOrders) / float64(decided), true
}

// Dashboard reads the dashboard's numbers: for each product neither frozen nor past its sale's
// end, its gate levels (one round trip for all), its order totals and orders per interval from
// the ledger (two queries each), and this instance's sold-out answers; then the outbox and
// webhook backlogs, the overdue orders and the open alerts. It is meant to be called by one sampler every few
// seconds, whatever the number of dashboards open.
func (s *Catalogue) Dashboard(ctx context.Context) (SaleDashboard, error) {
	now := s.clock.Now()
	out := SaleDashboard{At: now}
	ps, err := s.ledger.Products().Products(ctx)
	if err != nil {
		return SaleDashboard{}, fmt.Errorf("dashboard products: %w", err)
	}
	var ids []domain.ProductID
	for _, p := range ps {
		sale := p.Sale()
		if p.Frozen() || (!sale.EndsAt.IsZero() && !now.Before(sale.EndsAt)) {
			continue
		}
		out.Products = append(out.Products, ProductDashboard{Product: p, Upcoming: now.Before(sale.StartsAt)})
		ids = append(ids, p.ID())
	}
	levels, err := s.StockLevels(ctx, ids...)
	if err != nil {
		return SaleDashboard{}, fmt.Errorf("dashboard gate levels: %w", err)
	}
	from, _ := rateWindow(now)
	for i := range out.Products {
		d := &out.Products[i]
		id := d.Product.ID()
		d.Gate, d.GateOK = levels[id]
		totals, err := s.ledger.Orders().Totals(ctx, id)
		if err != nil {
			return SaleDashboard{}, fmt.Errorf("dashboard totals of product %d: %w", id, err)
		}
		d.Pending, d.Paid = totals[domain.StatusPending].Qty, totals[domain.StatusPaid].Qty
		d.PaidOrders = totals[domain.StatusPaid].Orders + totals[domain.StatusRefunded].Orders + totals[domain.StatusUnfulfilled].Orders
		d.Unpaid = totals[domain.StatusClosed].Orders + totals[domain.StatusFailed].Orders
		placed, err := s.ledger.Flows().PerInterval(ctx, id, domain.FlowReserve, from, RateStep, RateIntervals)
		if err != nil {
			return SaleDashboard{}, fmt.Errorf("dashboard orders of product %d: %w", id, err)
		}
		d.Orders = RateSeries{From: from, Counts: placed}
		d.SoldOut = s.soldOutAnswers(id, now)
	}
	if out.Outbox, err = s.ledger.Outbox().Backlog(ctx); err != nil {
		return SaleDashboard{}, fmt.Errorf("dashboard outbox backlog: %w", err)
	}
	if out.Webhook, err = s.ledger.Outbox().Backlog(ctx, webhookTopics...); err != nil {
		return SaleDashboard{}, fmt.Errorf("dashboard webhook backlog: %w", err)
	}
	if out.Mail, err = s.ledger.Outbox().Backlog(ctx, mailTopics...); err != nil {
		return SaleDashboard{}, fmt.Errorf("dashboard mail backlog: %w", err)
	}
	overdue, err := s.ledger.Orders().Expired(ctx, now, OverdueCap+1)
	if err != nil {
		return SaleDashboard{}, fmt.Errorf("dashboard overdue orders: %w", err)
	}
	out.Overdue, out.OverdueMore = min(len(overdue), OverdueCap), len(overdue) > OverdueCap
	if out.OpenAlerts, err = s.ledger.Alerts().OpenCounts(ctx); err != nil {
		return SaleDashboard{}, fmt.Errorf("dashboard open alerts: %w", err)
	}
	return out, nil
}
