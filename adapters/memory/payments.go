package memory

import (
	"context"
	"fmt"
	"sort"

	"cardshop/domain"
)

// paymentKey names a payment: one per order and provider.
type paymentKey struct {
	no       domain.OrderNo
	provider domain.Provider
}

type paymentRepo struct{ s *store }

func (r paymentRepo) Create(_ context.Context, p domain.Payment) error {
	if p.OrderNo == "" || p.Provider == "" {
		return domain.Invalid("payment", "order and provider required")
	}
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	k := paymentKey{p.OrderNo, p.Provider}
	if _, taken := r.s.data.payments[k]; taken {
		return fmt.Errorf("payment of %s at %s: %w", p.OrderNo, p.Provider, domain.ErrPaymentExists)
	}
	put(r.s, r.s.data.payments, k, p)
	return nil
}

func (r paymentRepo) Payment(_ context.Context, no domain.OrderNo, provider domain.Provider) (domain.Payment, error) {
	release, err := r.s.acquire()
	if err != nil {
		return domain.Payment{}, err
	}
	defer release()
	p, ok := r.s.data.payments[paymentKey{no, provider}]
	if !ok {
		return domain.Payment{}, fmt.Errorf("payment of %s at %s: %w", no, provider, domain.ErrPaymentNotFound)
	}
	return p, nil
}

func (r paymentRepo) OfOrder(_ context.Context, no domain.OrderNo) ([]domain.Payment, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	var out []domain.Payment
	for k, p := range r.s.data.payments {
		if k.no == no {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].Provider < out[j].Provider
	})
	return out, nil
}

func (r paymentRepo) Transition(_ context.Context, p domain.Payment, from domain.PaymentStatus) (bool, error) {
	release, err := r.s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	k := paymentKey{p.OrderNo, p.Provider}
	cur, ok := r.s.data.payments[k]
	if !ok {
		return false, fmt.Errorf("payment of %s at %s: %w", p.OrderNo, p.Provider, domain.ErrPaymentNotFound)
	}
	if cur.Status != from {
		return false, nil
	}
	put(r.s, r.s.data.payments, k, p)
	return true, nil
}

type notificationLog struct{ s *store }

func (l notificationLog) Record(_ context.Context, rec domain.NotificationRecord) error {
	release, err := l.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	d := l.s.data
	rec.ID = int64(len(d.notices)) + 1
	d.notices = append(d.notices, rec)
	l.s.onUndo(func() { d.notices = d.notices[:len(d.notices)-1] })
	return nil
}

func (l notificationLog) Recent(_ context.Context, no domain.OrderNo, limit int) ([]domain.NotificationRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	release, err := l.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	var out []domain.NotificationRecord
	for i := len(l.s.data.notices) - 1; i >= 0 && len(out) < limit; i-- {
		if rec := l.s.data.notices[i]; no == "" || rec.OrderNo == no {
			out = append(out, rec)
		}
	}
	return out, nil
}
