package application

import (
	"context"
	"errors"
	"fmt"

	"cardshop/domain"
)

// SignedCallback is a payment provider's callback as received: its signature headers and the
// raw body they sign.
type SignedCallback struct {
	Timestamp string
	Signature string
	Body      []byte
}

// HandlePaymentCallback verifies a callback and applies it. Only verification and the short
// ledger transaction happen here; delivery goes through the outbox.
//
// Errors: ErrBadSignature (forged, unsigned or stale: nothing changed), ErrInvalidInput,
// ErrOrderNotFound, ErrAmountMismatch, ErrUnavailable (the provider must retry).
func (s *Payments) HandlePaymentCallback(ctx context.Context, cb SignedCallback) (domain.Order, error) {
	n, err := s.verifier.Verify(cb.Timestamp, cb.Signature, cb.Body, s.clock.Now())
	if err != nil {
		if errors.Is(err, domain.ErrBadSignature) {
			s.log.WarnContext(ctx, "payment callback refused", "reason", err.Error())
		}
		return domain.Order{}, err
	}
	return s.ApplyPayment(ctx, n)
}

// ApplyPayment applies a verified payment notice. It is idempotent: a notice for an order
// already handled answers the order as it is, so providers may retry freely.
//
//   - paid, PENDING: PAID with its codes, in one transaction (status, allocation, flow,
//     delivery outbox row);
//   - paid, CLOSED or FAILED (a late payment): the stock is reserved again and the order
//     fulfilled; if none is left it becomes UNFULFILLED and an alert is raised. Of concurrent
//     late payments of one order, one holds the order's late reservation and the others wait
//     for it to finish, then answer the order as it ends;
//   - paid, but the card pool is short of what the gate promised: the product is frozen, an
//     alert raised and the order left UNFULFILLED for an operator;
//   - failed, PENDING: FAILED and the reservation returned.
//
// Errors: ErrOrderNotFound, ErrAmountMismatch, ErrGateNotReady, ErrUnavailable.
func (s *Payments) ApplyPayment(ctx context.Context, n domain.PaymentNotice) (domain.Order, error) {
	a, err := s.applyPayment(ctx, n)
	return a.order, err
}

// applied is an order after a payment notice, and whether this call changed it (false: the
// notice was handled before, or is stale).
type applied struct {
	order   domain.Order
	changed bool
}

func (s *core) applyPayment(ctx context.Context, n domain.PaymentNotice) (applied, error) {
	return settle(ctx, s.cfg.ReplayWait, "apply payment", func() (applied, error) {
		o, err := s.ledger.Orders().Order(ctx, n.OrderNo)
		if err != nil {
			return applied{}, fmt.Errorf("load order: %w", err)
		}
		var out domain.Order
		if !n.Paid {
			out, err = s.paymentFailed(ctx, o, n)
		} else {
			out, err = s.paymentSucceeded(ctx, o, n)
		}
		return applied{order: out, changed: err == nil && out.Status() != o.Status()}, err
	})
}

func (s *core) paymentSucceeded(ctx context.Context, o domain.Order, n domain.PaymentNotice) (domain.Order, error) {
	if err := o.CheckPayment(n.Amount); err != nil {
		s.alerts.Alert(ctx, domain.Alert{Kind: "amount_mismatch", Product: o.Product(), OrderNo: o.No(),
			Message: fmt.Sprintf("paid %s, due %s; order left %s", n.Amount, o.Amount(), o.Status())})
		return o, err
	}
	switch o.Status() {
	case domain.StatusPending:
		return s.fulfil(ctx, o, n, false)
	case domain.StatusClosed, domain.StatusFailed:
		return s.fulfil(ctx, o, n, true)
	default: // PAID, REFUNDED, UNFULFILLED: this payment was handled before.
		if n.PaymentRef != "" && n.PaymentRef != o.PaymentRef() {
			// A different reference, or one where the handled payment had none: money arrived
			// twice (or from two channels) and only one payment is needed.
			s.alerts.Alert(ctx, domain.Alert{Kind: "second_payment", Product: o.Product(), OrderNo: o.No(),
				Message: "a second, different payment was received for an order already handled; refund it by hand"})
		}
		return o, nil
	}
}

// paymentFailed moves a PENDING order to FAILED and returns its reservation. For any other
// state the notice is stale and changes nothing.
func (s *core) paymentFailed(ctx context.Context, o domain.Order, n domain.PaymentNotice) (domain.Order, error) {
	if o.Status() != domain.StatusPending {
		return o, nil
	}
	now := s.clock.Now()
	failed := o
	reason := n.Reason
	if reason == "" {
		reason = "payment failed"
	}
	if err := failed.Fail(now, reason); err != nil {
		return o, err
	}
	if err := s.endReservation(ctx, o, failed, domain.FlowFailedRestore, now); err != nil {
		return o, err
	}
	return failed, nil
}
