package memory

import (
	"context"
	"sort"

	"cardshop/domain"
)

var _ domain.SalesReport = (*Ledger)(nil)

// Revenue scans every order under the ledger's lock, as Search does: the memory ledger is for
// tests and small shops.
func (l *Ledger) Revenue(_ context.Context, q domain.RevenueQuery) ([]domain.RevenueLine, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	release, err := l.root.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	type key struct {
		bucket   int
		product  domain.ProductID
		provider domain.Provider
	}
	sums := map[key]*domain.RevenueLine{}
	line := func(b int, o domain.Order) *domain.RevenueLine {
		p, _ := l.confirmedPayment(o.No())
		k := key{b, o.Product(), p.Provider}
		if sums[k] == nil {
			sums[k] = &domain.RevenueLine{Bucket: b, Product: o.Product(), Provider: p.Provider}
		}
		return sums[k]
	}
	for _, o := range l.data.orders {
		if !o.PaidAt().IsZero() {
			if b, ok := q.Bucket(o.PaidAt()); ok {
				s := line(b, o)
				s.Paid++
				s.Revenue += o.Amount()
			}
		}
		if o.Status() == domain.StatusRefunded {
			if b, ok := q.Bucket(o.EndedAt()); ok {
				s := line(b, o)
				s.Refunds++
				s.Refunded += o.Amount()
			}
		}
	}
	out := make([]domain.RevenueLine, 0, len(sums))
	for _, s := range sums {
		out = append(out, *s)
	}
	return out, nil
}

// confirmedPayment is the order's payment its provider confirmed, the first by provider name
// (see domain.RevenueLine); false when it has none. The caller holds the lock.
func (l *Ledger) confirmedPayment(no domain.OrderNo) (domain.Payment, bool) {
	var (
		best  domain.Payment
		found bool
	)
	for _, p := range l.data.payments[no] {
		if p.Status.Confirmed() && (!found || p.Provider < best.Provider) {
			best, found = p, true
		}
	}
	return best, found
}

// ExportPage scans every order for the page, as Search does.
func (l *Ledger) ExportPage(_ context.Context, f domain.ExportFilter) ([]domain.ExportRow, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	release, err := l.root.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	var out []domain.ExportRow
	for _, o := range l.data.orders {
		at := o.CreatedAt()
		switch {
		case !f.From.IsZero() && at.Before(f.From), !f.To.IsZero() && !at.Before(f.To),
			f.Product != 0 && o.Product() != f.Product, f.Status != 0 && o.Status() != f.Status,
			!f.After.IsZero() && !after(f.After, o):
			continue
		}
		if f.Provider != "" {
			if _, has := l.data.payments[o.No()][f.Provider]; !has {
				continue
			}
		}
		p, _ := l.confirmedPayment(o.No())
		out = append(out, domain.ExportRow{Order: o, Provider: p.Provider, ProviderRef: p.ProviderRef})
	}
	sort.Slice(out, func(i, j int) bool { return before(out[i].Order, out[j].Order) })
	if len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// before reports whether a comes before b oldest first: by creation time, then number.
func before(a, b domain.Order) bool {
	if !a.CreatedAt().Equal(b.CreatedAt()) {
		return a.CreatedAt().Before(b.CreatedAt())
	}
	return a.No() < b.No()
}

// after reports whether o comes after the cursor c oldest first.
func after(c domain.OrderCursor, o domain.Order) bool {
	return o.CreatedAt().After(c.CreatedAt) || o.CreatedAt().Equal(c.CreatedAt) && o.No() > c.No
}
