package application

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cardshop/domain"
)

// refundMoney returns an order's money through the provider that took it, before its codes are
// released. The order's payment at that provider moves PAID (or REFUND_FAILED) → REFUNDING,
// with a refund number: every attempt at that refund — a retry after a timeout, a second
// operator — sends the same number, which the provider uses as its idempotency reference, so
// the money is returned once (a new refund after a refusal gets the next number). Then:
//
//   - succeeded: REFUNDED, and the codes may go;
//   - pending (the provider finishes later): the payment stays REFUNDING and the answer says so
//     (Status REFUNDING); the provider's refund notification, or the operator's next refund,
//     finishes it;
//   - refused: REFUND_FAILED with the provider's reason, a refund_failed alert and
//     ErrRefundRefused; the order stays as it was;
//   - the provider cannot be reached: the payment stays REFUNDING, a refund_pending alert, and
//     ErrUnavailable: the operator runs the refund again;
//   - the provider offers no refund (an epay gateway without its refund API): the codes are
//     refunded and an operator returns the money by hand (refund_by_hand alert).
//
// An order paid through the signed callback has no payment here: its storefront returns the
// money, and only the codes are refunded.
func (s *Shop) refundMoney(ctx context.Context, o domain.Order, reason string) (MoneyRefund, error) {
	p, ok, err := s.paidPayment(ctx, o)
	if err != nil || !ok {
		return MoneyRefund{}, err
	}
	out := MoneyRefund{Provider: p.Provider, Status: p.Status, RefundNo: p.RefundNo, Ref: p.RefundRef, Reason: p.RefundReason}
	if p.Status == domain.PaymentRefunded {
		return out, nil
	}
	gw, enabled := s.gateways[p.Provider]
	if !enabled {
		s.alerts.Alert(ctx, domain.Alert{Kind: "refund_by_hand", Product: o.Product(), OrderNo: o.No(),
			Message: fmt.Sprintf("the order was paid through %s, which is no longer enabled: return %s %s there by hand",
				p.Provider, p.Currency.Format(p.Amount), p.Currency)})
		out.ByHand = true
		return out, nil
	}
	if p.Status != domain.PaymentRefunding {
		next := p
		next.Status, next.RefundReason, next.UpdatedAt = domain.PaymentRefunding, "", s.clock.Now()
		if p.Status == domain.PaymentRefundFailed || p.RefundNo == "" {
			// A refused refund's number is spent (the provider replays its refusal under it).
			next.RefundNo = domain.NextRefundNo(o.No(), p.RefundNo)
		}
		won, err := s.ledger.Payments().Transition(ctx, next, p.Status)
		if err != nil {
			return out, fmt.Errorf("record the refund: %w", err)
		}
		if !won { // another refund (or a notification) moved it first: read it again
			return s.refundMoney(ctx, o, reason)
		}
		p = next
	}
	out.Status, out.RefundNo = p.Status, p.RefundNo
	if reason == "" {
		reason = "refunded by operator"
	}
	st, err := gw.Refund(ctx, p, domain.RefundRequest{RefundNo: p.RefundNo, Amount: p.Amount, Currency: p.Currency, Reason: reason})
	switch {
	case errors.Is(err, domain.ErrUnsupported):
		s.setPayment(ctx, p, domain.PaymentPaid, "", "")
		out.Status, out.ByHand = domain.PaymentPaid, true
		s.alerts.Alert(ctx, domain.Alert{Kind: "refund_by_hand", Product: o.Product(), OrderNo: o.No(),
			Message: fmt.Sprintf("%s offers no refund through cardshop: return %s %s there by hand", p.Provider,
				p.Currency.Format(p.Amount), p.Currency)})
		return out, nil
	case err != nil:
		s.alerts.Alert(ctx, domain.Alert{Kind: "refund_pending", Product: o.Product(), OrderNo: o.No(),
			Message: fmt.Sprintf("the refund of %s %s at %s could not be sent (%v); run the refund again: it is sent with the same refund number %s",
				p.Currency.Format(p.Amount), p.Currency, p.Provider, err, p.RefundNo)})
		if !errors.Is(err, domain.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
		}
		return out, fmt.Errorf("refund at %s: %w", p.Provider, err)
	}
	out.Ref = st.ProviderRef
	switch st.Outcome {
	case domain.RefundSucceeded:
		s.setPayment(ctx, p, domain.PaymentRefunded, st.ProviderRef, "")
		out.Status = domain.PaymentRefunded
		return out, nil
	case domain.RefundRefused:
		s.setPayment(ctx, p, domain.PaymentRefundFailed, st.ProviderRef, st.Reason)
		out.Status, out.Reason = domain.PaymentRefundFailed, st.Reason
		s.alerts.Alert(ctx, domain.Alert{Kind: "refund_failed", Product: o.Product(), OrderNo: o.No(),
			Message: fmt.Sprintf("%s refused the refund: %s; the order stays %s", p.Provider, st.Reason, o.Status())})
		return out, fmt.Errorf("%w: %s", domain.ErrRefundRefused, st.Reason)
	default: // pending: the provider finishes it later
		s.setPayment(ctx, p, domain.PaymentRefunding, st.ProviderRef, "")
		return out, nil
	}
}

// paidPayment is the order's payment at the provider that paid it: the one its payment
// reference names, whatever status the payment records. The order is paid first and the
// payment marked PAID after it (a notification, a close that found the payment paid), so a
// payment named by a paid order may still read OPEN, EXPIRED or FAILED: its money is there.
func (s *Shop) paidPayment(ctx context.Context, o domain.Order) (domain.Payment, bool, error) {
	if o.PaymentRef() == "" {
		return domain.Payment{}, false, nil
	}
	ps, err := s.ledger.Payments().OfOrder(ctx, o.No())
	if err != nil {
		return domain.Payment{}, false, fmt.Errorf("load payments: %w", err)
	}
	for _, p := range ps {
		if paymentRef(p) == o.PaymentRef() {
			return p, true, nil
		}
	}
	return domain.Payment{}, false, nil
}

// setPayment records a payment's refund status (from the status p holds), best effort: the
// provider's state is the truth and the next refund or notification reads it again.
func (s *Shop) setPayment(ctx context.Context, p domain.Payment, to domain.PaymentStatus, ref, reason string) {
	next := p
	next.Status, next.UpdatedAt = to, s.clock.Now()
	if ref != "" {
		next.RefundRef = ref
	}
	next.RefundReason = reason
	if _, err := s.ledger.Payments().Transition(ctx, next, p.Status); err != nil {
		s.log.WarnContext(ctx, "refund status not recorded", "order_no", p.OrderNo, "provider", p.Provider, "err", err)
	}
}

// applyRefundNotice applies a provider's notification about a refund: succeeded → the payment
// is REFUNDED and the order's codes are refunded (revealed ones voided, as by default);
// refused → REFUND_FAILED with an alert; pending → nothing.
func (s *Shop) applyRefundNotice(ctx context.Context, gw domain.PaymentGateway, n domain.ProviderNotice) (string, error) {
	p, err := s.ledger.Payments().Payment(ctx, n.OrderNo, gw.Provider())
	if err != nil {
		return "", fmt.Errorf("%w: %w", errRefused, err)
	}
	if p.RefundNo != n.RefundNo {
		if strings.HasPrefix(n.RefundNo, string(n.OrderNo)+"R") {
			// An earlier attempt of this order's refund (refused, then retried under the next
			// number): its news changes nothing, and refusing it would only make it resend.
			return "ignored: an earlier refund attempt (" + n.RefundNo + ")", nil
		}
		return "", fmt.Errorf("%w: refund %q is not the payment's refund", errRefused, n.RefundNo)
	}
	switch n.RefundOutcome {
	case domain.RefundSucceeded:
		if p.Status == domain.PaymentRefunding || p.Status == domain.PaymentRefundFailed {
			s.setPayment(ctx, p, domain.PaymentRefunded, n.ProviderRef, "")
		}
		res, err := s.RefundOrder(ctx, Refund{OrderNo: n.OrderNo, Reason: "refunded at " + string(gw.Provider())})
		if err != nil && !errors.Is(err, domain.ErrInvalidTransition) {
			return "", err
		}
		return "refund succeeded: order " + res.Order.Status().String(), nil
	case domain.RefundRefused:
		if p.Status == domain.PaymentRefunding {
			s.setPayment(ctx, p, domain.PaymentRefundFailed, n.ProviderRef, n.Reason)
			s.alerts.Alert(ctx, domain.Alert{Kind: "refund_failed", OrderNo: n.OrderNo,
				Message: fmt.Sprintf("%s reports the refund failed: %s", gw.Provider(), n.Reason)})
		}
		return "refund failed", nil
	default:
		return "refund pending", nil
	}
}
