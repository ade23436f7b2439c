package application

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"cardshop/domain"
)

// refundMoney returns an order's money through the provider that took it, before its codes are
// released. The payment moves PAID (or REFUND_FAILED) → REFUNDING with a refund number and the
// operator's decision about the codes; every attempt at that refund sends the same number, so
// the money is returned once. Then: succeeded → REFUNDED; pending → stays REFUNDING (Status
// REFUNDING); refused → REFUND_FAILED, a refund_failed alert and ErrRefundRefused; unreachable
// → a refund_pending alert and ErrUnavailable; no refund API → a refund_by_hand alert. Where a
// provider's Refund is not idempotent by number (epay), only the attempt that won the move to
// REFUNDING calls it. docs/DESIGN.md, "Payments" (refunds), has the reasons.
//
// The decision it returns is the one to apply to the codes: the one stored with the payment's
// refund, else cmd's. An order paid through the signed callback has no payment here: only its
// codes are refunded.
func (s *core) refundMoney(ctx context.Context, o domain.Order, cmd Refund) (MoneyRefund, Refund, error) {
	p, ok, err := s.paidPayment(ctx, o)
	if err != nil || !ok {
		return MoneyRefund{}, cmd, err
	}
	out := MoneyRefund{Provider: p.Provider, Status: p.Status, RefundNo: p.RefundNo, Ref: p.RefundRef, Reason: p.RefundReason}
	switch p.Status {
	case domain.PaymentRefunded:
		return out, decisionOf(p, cmd), nil
	case domain.PaymentRefunding:
	default:
		// No refund holds the payment: this one decides (and stores it, below).
		p.RefundVoid, p.RefundRecycle, p.RefundNote = cmd.Void, cmd.Recycle, cmd.Reason
	}
	gw, enabled := s.gateway(p.Provider)
	if !enabled {
		s.alerts.Alert(ctx, domain.Alert{Kind: "refund_by_hand", Product: o.Product(), OrderNo: o.No(),
			Message: fmt.Sprintf("the order was paid through %s, which is no longer enabled: return %s %s there by hand",
				p.Provider, p.Currency.Format(p.Amount), p.Currency)})
		out.ByHand = true
		return out, decisionOf(p, cmd), nil
	}
	prev, won := p, false
	if p.Status != domain.PaymentRefunding {
		next := p
		next.Status, next.RefundReason, next.UpdatedAt = domain.PaymentRefunding, "", s.clock.Now()
		if p.Status == domain.PaymentRefundFailed || p.RefundNo == "" {
			// A refused refund's number is spent (the provider replays its refusal under it).
			next.RefundNo = domain.NextRefundNo(o.No(), p.RefundNo)
		}
		if won, err = s.ledger.Payments().Transition(ctx, next, p.Status); err != nil {
			return out, cmd, fmt.Errorf("record the refund: %w", err)
		}
		if !won { // another refund (or a notification) moved it first: read it again
			return s.refundMoney(ctx, o, cmd)
		}
		p = next
	}
	decision := decisionOf(p, cmd)
	out.Status, out.RefundNo = p.Status, p.RefundNo
	if !won && !gw.RefundIdempotent() {
		// Another attempt holds this refund and may be at the provider right now, which cannot
		// tell two calls apart: it alone calls, and finishes or gives the refund back.
		return out, decision, nil
	}
	reason := decision.Reason
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
		return out, decision, nil
	case err != nil:
		again := "it is sent with the same refund number " + p.RefundNo
		if !gw.RefundIdempotent() {
			s.giveBack(ctx, p, prev)
			out.Status = prev.Status
			again = "the provider's order is read first, so a refund that went through is not paid again"
		}
		s.alerts.Alert(ctx, domain.Alert{Kind: "refund_pending", Product: o.Product(), OrderNo: o.No(),
			Message: fmt.Sprintf("the refund of %s %s at %s could not be sent (%v); run the refund again: %s",
				p.Currency.Format(p.Amount), p.Currency, p.Provider, err, again)})
		if !errors.Is(err, domain.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
		}
		return out, decision, fmt.Errorf("refund at %s: %w", p.Provider, err)
	}
	out.Ref = st.ProviderRef
	switch st.Outcome {
	case domain.RefundSucceeded:
		s.setPayment(ctx, p, domain.PaymentRefunded, st.ProviderRef, "")
		out.Status = domain.PaymentRefunded
		return out, decision, nil
	case domain.RefundRefused:
		s.setPayment(ctx, p, domain.PaymentRefundFailed, st.ProviderRef, st.Reason)
		out.Status, out.Reason = domain.PaymentRefundFailed, st.Reason
		s.alerts.Alert(ctx, domain.Alert{Kind: "refund_failed", Product: o.Product(), OrderNo: o.No(),
			Message: fmt.Sprintf("%s refused the refund: %s; the order stays %s", p.Provider, st.Reason, o.Status())})
		return out, decision, fmt.Errorf("%w: %s", domain.ErrRefundRefused, st.Reason)
	default: // pending: the provider finishes it later
		s.setPayment(ctx, p, domain.PaymentRefunding, st.ProviderRef, "")
		return out, decision, nil
	}
}

// decisionOf is the decision about the codes stored with p's refund; the note falls back to
// cmd's reason when the operator gave none.
func decisionOf(p domain.Payment, cmd Refund) Refund {
	return Refund{OrderNo: cmd.OrderNo, Void: p.RefundVoid, Recycle: p.RefundRecycle, Reason: cmp.Or(p.RefundNote, cmd.Reason)}
}

// giveBack returns a REFUNDING payment to prev (its record before this attempt took it), so a
// later attempt may take the refund again. Only the attempt that took it calls this, once its
// call to the provider has ended; the move is made even when the caller's context is done.
func (s *core) giveBack(ctx context.Context, p, prev domain.Payment) {
	ctx, cancel := detached(ctx)
	defer cancel()
	prev.UpdatedAt = s.clock.Now()
	if _, err := s.ledger.Payments().Transition(ctx, prev, p.Status); err != nil {
		s.log.WarnContext(ctx, "refund not given back; the payment stays REFUNDING", "order_no", p.OrderNo,
			"provider", p.Provider, "err", err)
	}
}

// paidPayment is the order's payment at the provider that paid it: the one its payment
// reference names, whatever status the payment records. The order is paid first and the
// payment marked PAID after it (a notification, a close that found the payment paid), so a
// payment named by a paid order may still read OPEN, EXPIRED or FAILED: its money is there.
func (s *core) paidPayment(ctx context.Context, o domain.Order) (domain.Payment, bool, error) {
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
func (s *core) setPayment(ctx context.Context, p domain.Payment, to domain.PaymentStatus, ref, reason string) {
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
// is REFUNDED and the order's codes are refunded as the operator decided when asking for the
// refund (stored with the payment); refused → REFUND_FAILED with an alert; pending → nothing.
func (s *core) applyRefundNotice(ctx context.Context, gw domain.PaymentGateway, n domain.ProviderNotice) (string, error) {
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
		res, err := s.refundOrder(ctx, Refund{OrderNo: n.OrderNo, Reason: "refunded at " + string(gw.Provider())})
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
