package memory

import (
	"context"
	"fmt"
	"sort"

	"cardshop/domain"
)

type paymentRepo struct{ s *store }

// Create stores a zero UpdatedAt as the creation time.
func (r paymentRepo) Create(_ context.Context, p domain.Payment) error {
	if err := p.Check(); err != nil {
		return err
	}
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	if _, taken := r.s.data.payments[p.OrderNo][p.Provider]; taken {
		return fmt.Errorf("payment of %s at %s: %w", p.OrderNo, p.Provider, domain.ErrPaymentExists)
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = p.CreatedAt
	}
	putIn(r.s, r.s.data.payments, p.OrderNo, p.Provider, p)
	return nil
}

func (r paymentRepo) Payment(_ context.Context, no domain.OrderNo, provider domain.Provider) (domain.Payment, error) {
	release, err := r.s.acquire()
	if err != nil {
		return domain.Payment{}, err
	}
	defer release()
	p, ok := r.s.data.payments[no][provider]
	if !ok {
		return domain.Payment{}, fmt.Errorf("payment of %s at %s: %w", no, provider, domain.ErrPaymentNotFound)
	}
	return p, nil
}

// OfOrder sorts by creation time; the provider breaks ties.
func (r paymentRepo) OfOrder(_ context.Context, no domain.OrderNo) ([]domain.Payment, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]domain.Payment, 0, len(r.s.data.payments[no]))
	for _, p := range r.s.data.payments[no] {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].Provider < out[j].Provider
	})
	return out, nil
}

// Transition writes the status, the provider's reference, PayURL, QRCode, the refund's fields
// and UpdatedAt (a zero one is p's CreatedAt); it refuses to change the amount or the currency, and keeps the
// stored creation time.
func (r paymentRepo) Transition(_ context.Context, p domain.Payment, from domain.PaymentStatus) (bool, error) {
	if err := p.Check(); err != nil {
		return false, err
	}
	release, err := r.s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	cur, ok := r.s.data.payments[p.OrderNo][p.Provider]
	if !ok {
		return false, fmt.Errorf("payment of %s at %s: %w", p.OrderNo, p.Provider, domain.ErrPaymentNotFound)
	}
	if cur.Status != from {
		return false, nil
	}
	if cur.Amount != p.Amount || cur.Currency != p.Currency {
		return false, domain.Invalid("payment", "a transition cannot change the amount or the currency")
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = p.CreatedAt
	}
	p.CreatedAt = cur.CreatedAt
	putIn(r.s, r.s.data.payments, p.OrderNo, p.Provider, p)
	return true, nil
}
