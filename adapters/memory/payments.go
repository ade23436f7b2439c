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

type manualKey struct {
	provider  domain.Provider
	reference string
}

// ClaimManual looks the reference up among the manual confirmations and the payments at the
// provider under the ledger's mutex, so of concurrent claims one wins.
func (r paymentRepo) ClaimManual(_ context.Context, m domain.ManualPayment) (bool, error) {
	if m.OrderNo == "" || m.Provider == "" || m.Reference == "" || m.At.IsZero() {
		return false, domain.Invalid("manual_payment", "order, provider, reference and time required")
	}
	release, err := r.s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	k := manualKey{m.Provider, m.Reference}
	if cur, ok := r.s.data.manual[k]; ok {
		if cur.OrderNo != m.OrderNo {
			return false, fmt.Errorf("reference %s at %s: %w", m.Reference, m.Provider, domain.ErrReferenceUsed)
		}
		return false, nil
	}
	for no, ps := range r.s.data.payments {
		if p, ok := ps[m.Provider]; ok && no != m.OrderNo && p.ProviderRef == m.Reference {
			return false, fmt.Errorf("reference %s at %s: %w", m.Reference, m.Provider, domain.ErrReferenceUsed)
		}
	}
	m.At = m.At.UTC()
	put(r.s, r.s.data.manual, k, m)
	return true, nil
}

// ManualOf sorts by time; the reference breaks ties.
func (r paymentRepo) ManualOf(_ context.Context, no domain.OrderNo) ([]domain.ManualPayment, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	var out []domain.ManualPayment
	for _, m := range r.s.data.manual {
		if m.OrderNo == no {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].Reference < out[j].Reference
	})
	return out, nil
}
