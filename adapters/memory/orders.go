package memory

import (
	"context"
	"fmt"
	"sort"
	"time"

	"cardshop/domain"
)

type orderRepo struct{ s *store }

func (r orderRepo) Insert(_ context.Context, o domain.Order) error {
	if o.No() == "" {
		return domain.Invalid("order_no", "required")
	}
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	d := r.s.data
	if _, taken := d.orders[o.No()]; taken {
		return fmt.Errorf("insert order %s: %w", o.No(), domain.ErrDuplicateOrder)
	}
	bk := buyerKey{buyer: o.Buyer(), key: o.IdempotencyKey()}
	if bk.key != "" {
		if _, taken := d.orderKeys[bk]; taken {
			return fmt.Errorf("insert order %s: %w", o.No(), domain.ErrDuplicateIdempotencyKey)
		}
		put(r.s, d.orderKeys, bk, o.No())
	}
	put(r.s, d.orders, o.No(), o)
	if o.Status() == domain.StatusPending {
		put(r.s, d.pending, o.No(), o.ExpiresAt())
	}
	r.count(o, 1)
	return nil
}

// count adds sign times o to its product's totals for o's status.
func (r orderRepo) count(o domain.Order, sign int64) {
	t := r.s.data.orderTotals[o.Product()][o.Status()]
	t.Orders += sign
	t.Qty += sign * int64(o.Qty())
	putIn(r.s, r.s.data.orderTotals, o.Product(), o.Status(), t)
}

func (r orderRepo) Order(_ context.Context, no domain.OrderNo) (domain.Order, error) {
	release, err := r.s.acquire()
	if err != nil {
		return domain.Order{}, err
	}
	defer release()
	o, ok := r.s.data.orders[no]
	if !ok {
		return domain.Order{}, fmt.Errorf("order %s: %w", no, domain.ErrOrderNotFound)
	}
	return o, nil
}

func (r orderRepo) OrderByKey(_ context.Context, buyer domain.BuyerID, key domain.IdempotencyKey) (domain.Order, error) {
	release, err := r.s.acquire()
	if err != nil {
		return domain.Order{}, err
	}
	defer release()
	no, ok := r.s.data.orderKeys[buyerKey{buyer: buyer, key: key}]
	if !ok || key == "" {
		return domain.Order{}, fmt.Errorf("order of buyer %s by key: %w", buyer, domain.ErrOrderNotFound)
	}
	return r.s.data.orders[no], nil
}

// Transition stores o only if the stored order is still in from and revealed exactly when o
// is. The order's identity (buyer, product, qty, idempotency key) cannot change: only its
// state and the fields that go with it; the stored RevealedAt is kept (MarkRevealed's alone).
func (r orderRepo) Transition(_ context.Context, o domain.Order, from domain.OrderStatus) (bool, error) {
	release, err := r.s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	d := r.s.data
	stored, ok := d.orders[o.No()]
	if !ok {
		return false, fmt.Errorf("transition order %s: %w", o.No(), domain.ErrOrderNotFound)
	}
	if stored.Status() != from || stored.Revealed() != o.Revealed() {
		return false, nil
	}
	if o.Buyer() != stored.Buyer() || o.Product() != stored.Product() || o.Qty() != stored.Qty() ||
		o.IdempotencyKey() != stored.IdempotencyKey() {
		return false, domain.Invalid("order", "a transition cannot change buyer, product, qty or key")
	}
	rec := o.Record()
	rec.RevealedAt = stored.RevealedAt()
	o = domain.RehydrateOrder(rec)
	r.count(stored, -1)
	put(r.s, d.orders, o.No(), o)
	r.count(o, 1)
	if o.Status() == domain.StatusPending {
		put(r.s, d.pending, o.No(), o.ExpiresAt())
	} else {
		del(r.s, d.pending, o.No())
	}
	return true, nil
}

// MarkRevealed sets RevealedAt of a PAID order that has none.
func (r orderRepo) MarkRevealed(_ context.Context, no domain.OrderNo, at time.Time) (bool, error) {
	release, err := r.s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	stored, ok := r.s.data.orders[no]
	if !ok {
		return false, fmt.Errorf("mark order %s revealed: %w", no, domain.ErrOrderNotFound)
	}
	if stored.Status() != domain.StatusPaid || stored.Revealed() {
		return false, nil
	}
	if err := stored.MarkRevealed(at); err != nil {
		return false, err
	}
	put(r.s, r.s.data.orders, no, stored)
	return true, nil
}

// Expired looks only at PENDING orders (an index kept by Insert and Transition).
func (r orderRepo) Expired(_ context.Context, t time.Time, limit int) ([]domain.Order, error) {
	if limit <= 0 {
		return nil, nil
	}
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	type due struct {
		no  domain.OrderNo
		exp time.Time
	}
	var dues []due
	for no, exp := range r.s.data.pending {
		if !exp.After(t) {
			dues = append(dues, due{no, exp})
		}
	}
	sort.Slice(dues, func(i, j int) bool {
		if !dues[i].exp.Equal(dues[j].exp) {
			return dues[i].exp.Before(dues[j].exp)
		}
		return dues[i].no < dues[j].no
	})
	if len(dues) > limit {
		dues = dues[:limit]
	}
	out := make([]domain.Order, len(dues))
	for i, du := range dues {
		out[i] = r.s.data.orders[du.no]
	}
	return out, nil
}

func (r orderRepo) Totals(_ context.Context, p domain.ProductID) (map[domain.OrderStatus]domain.StatusTotal, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make(map[domain.OrderStatus]domain.StatusTotal)
	for st, t := range r.s.data.orderTotals[p] {
		if t.Orders != 0 {
			out[st] = t
		}
	}
	return out, nil
}

// HeldByBuyer scans the orders: the memory ledger is for tests and small shops.
func (r orderRepo) HeldByBuyer(_ context.Context, p domain.ProductID, withRefunded bool) (map[domain.BuyerID]int64, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make(map[domain.BuyerID]int64)
	for _, o := range r.s.data.orders {
		st := o.Status()
		if o.Product() == p && (st == domain.StatusPending || st == domain.StatusPaid ||
			withRefunded && st == domain.StatusRefunded && r.refundReturnedCodes(o.No())) {
			out[o.Buyer()] += int64(o.Qty())
		}
	}
	return out, nil
}

// CouponUses scans the orders, as HeldByBuyer does.
func (r orderRepo) CouponUses(_ context.Context, p domain.ProductID) (domain.CouponCounts, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := domain.CouponCounts{}
	for _, o := range r.s.data.orders {
		st := o.Status()
		if o.Product() != p || o.Coupon() == "" || !(st == domain.StatusPending || st == domain.StatusPaid ||
			st == domain.StatusRefunded && r.refundReturnedCodes(o.No())) {
			continue
		}
		c := out[o.Coupon()]
		if c.Buyers == nil {
			c.Buyers = map[domain.BuyerID]int64{}
		}
		c.Uses++
		c.Buyers[o.Buyer()]++
		out[o.Coupon()] = c
	}
	return out, nil
}

// refundReturnedCodes reports whether the order has a refund-restore or refund-void flow row:
// a refund of an order that held codes (one refunded while UNFULFILLED held none).
func (r orderRepo) refundReturnedCodes(no domain.OrderNo) bool {
	for _, e := range r.s.data.flows[string(no)] {
		if e.Type == domain.FlowRefundRestore || e.Type == domain.FlowRefundVoid {
			return true
		}
	}
	return false
}

// Existing looks each number up.
func (r orderRepo) Existing(_ context.Context, nos []domain.OrderNo) (map[domain.OrderNo]bool, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make(map[domain.OrderNo]bool, len(nos))
	for _, no := range nos {
		_, out[no] = r.s.data.orders[no]
	}
	return out, nil
}

// Search scans every order, as HeldByBuyer does: the memory ledger is for tests and small
// shops.
func (r orderRepo) Search(_ context.Context, f domain.OrderFilter) ([]domain.Order, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	var refs map[domain.OrderNo]bool // the orders paid under f.ProviderRef
	if f.ProviderRef != "" {
		refs = map[domain.OrderNo]bool{}
		for no, ps := range r.s.data.payments {
			for _, p := range ps {
				if p.ProviderRef == f.ProviderRef {
					refs[no] = true
				}
			}
		}
		for k, m := range r.s.data.manual {
			if k.reference == f.ProviderRef {
				refs[m.OrderNo] = true
			}
		}
	}
	var out []domain.Order
	for _, o := range r.s.data.orders {
		if f.Selects(o) && (refs == nil || refs[o.No()]) && (f.After.IsZero() || f.After.Before(o.CreatedAt(), o.No())) {
			out = append(out, o)
		}
	}
	// Newest first: i goes before j when j comes after i's cursor.
	sort.Slice(out, func(i, j int) bool { return domain.CursorOf(out[i]).Before(out[j].CreatedAt(), out[j].No()) })
	if len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}
