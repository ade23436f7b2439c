package application

import (
	"context"
	"errors"
	"fmt"

	"cardshop/domain"
)

// ManualPaymentRequest is an operator's manual confirmation of an order's payment (补单): the
// provider that took the money, the provider's transaction reference, a note, and, from an admin
// only, the reason to pay the order although the provider does not confirm it.
type ManualPaymentRequest struct {
	By        Identity
	OrderNo   domain.OrderNo
	Provider  string
	Reference string
	Note      string
	Override  string
}

// ManualPaymentResult is a manual confirmation's outcome: the order as it ended (PAID, or
// UNFULFILLED when its stock is gone) and the confirmation as recorded.
type ManualPaymentResult struct {
	Order  domain.Order
	Record domain.ManualPayment
}

// ConfirmPaymentManually marks a PENDING, CLOSED or FAILED order paid on an operator's word.
//
// The provider is asked first (its query of the payment: the order's stored payment there, or
// one under the given reference when the order has none). Only its answer "paid", for the
// order's amount and currency, lets an operator through; a provider without a query API lets
// the operator through on the note. Any other answer (unpaid, another amount, the provider
// not reachable, not configured here) is ErrProviderUnpaid unless an admin overrides it with a
// reason; an override from another role is ErrForbidden.
//
// The reference is then claimed for the order at the store (one reference pays one order, of
// concurrent claims exactly one wins: ErrReferenceUsed for the others), and the order takes the
// same paid path as a provider's notification (ApplyPayment): PENDING → PAID with its codes;
// CLOSED or FAILED through the late-payment path, UNFULFILLED when the stock is gone, never
// oversold. Every confirmation raises the manual_payment alert. A retry of the same order and
// reference (after ErrUnavailable) claims nothing twice.
//
// Errors: ErrInvalidInput, ErrForbidden, ErrOrderNotFound, ErrInvalidTransition (the order is
// not PENDING, CLOSED or FAILED), ErrProviderUnpaid, ErrReferenceUsed, ErrAmountMismatch,
// ErrGateNotReady, ErrUnavailable.
func (s *Payments) ConfirmPaymentManually(ctx context.Context, r ManualPaymentRequest) (ManualPaymentResult, error) {
	provider, err := domain.ParseProvider(r.Provider)
	if err != nil {
		return ManualPaymentResult{}, err
	}
	ref, err := domain.ParseManualReference(r.Reference)
	if err != nil {
		return ManualPaymentResult{}, err
	}
	if err := domain.CheckManualNote("note", r.Note); err != nil {
		return ManualPaymentResult{}, err
	}
	if err := domain.CheckManualNote("override", r.Override); err != nil {
		return ManualPaymentResult{}, err
	}
	if r.Override != "" && !r.By.Role.Allows(domain.RoleAdmin) {
		return ManualPaymentResult{}, fmt.Errorf("override the provider's answer: %w", domain.ErrForbidden)
	}
	o, err := s.ledger.Orders().Order(ctx, r.OrderNo)
	if err != nil {
		return ManualPaymentResult{}, fmt.Errorf("load order: %w", err)
	}
	if err := manuallyPayable(o); err != nil {
		return ManualPaymentResult{}, err
	}
	stored, queried, confirmed, err := s.askProvider(ctx, o, provider, ref)
	if err != nil {
		return ManualPaymentResult{}, err
	}
	m := domain.ManualPayment{OrderNo: o.No(), Provider: provider, Reference: ref, Operator: r.By.Name,
		Note: r.Note, Queried: queried, At: s.clock.Now()}
	if !confirmed {
		if r.Override == "" {
			return ManualPaymentResult{}, fmt.Errorf("%w: %s", domain.ErrProviderUnpaid, queried)
		}
		m.Override = r.Override
	}
	if _, err := s.ledger.Payments().ClaimManual(ctx, m); err != nil {
		return ManualPaymentResult{}, fmt.Errorf("claim the reference: %w", err)
	}
	payRef := string(provider) + ":" + ref
	a, err := s.applyPayment(ctx, domain.PaymentNotice{OrderNo: o.No(), Paid: true, Amount: o.Amount(), PaymentRef: payRef})
	if err != nil {
		return ManualPaymentResult{}, err
	}
	if a.order.PaymentRef() != payRef {
		// Paid meanwhile by another payment (a notification, another confirmation): this one is
		// not needed; second_payment was raised for the money to be returned by hand.
		return ManualPaymentResult{}, fmt.Errorf("%w: order is %s by another payment", domain.ErrInvalidTransition, a.order.Status())
	}
	if stored.Provider != "" && (stored.ProviderRef == "" || stored.ProviderRef == ref) {
		// The stored payment is the one confirmed: it records the reference, so that the
		// order's payment (paymentRef) is found again, by a refund first.
		stored.ProviderRef = ref
		s.movePayment(ctx, stored, domain.PaymentPaid, domain.PaymentOpen, domain.PaymentExpired, domain.PaymentFailed)
	}
	if a.changed {
		s.closeOtherPayments(ctx, o.No(), provider)
		msg := fmt.Sprintf("%s marked the order paid by hand: %s reference %s (provider: %s); order is %s",
			r.By.Name, provider, ref, queried, a.order.Status())
		if m.Override != "" {
			msg += "; the provider's answer overridden: " + m.Override
		}
		s.alerts.Alert(ctx, domain.Alert{Kind: domain.AlertManualPayment, Product: o.Product(), OrderNo: o.No(), Message: msg})
	}
	return ManualPaymentResult{Order: a.order, Record: m}, nil
}

// manuallyPayable refuses an order a manual confirmation cannot pay: only PENDING, CLOSED and
// FAILED orders are waiting for money.
func manuallyPayable(o domain.Order) error {
	switch o.Status() {
	case domain.StatusPending, domain.StatusClosed, domain.StatusFailed:
		return nil
	case domain.StatusPaid, domain.StatusRefunded, domain.StatusUnfulfilled:
	}
	return fmt.Errorf("%w: order is %s", domain.ErrInvalidTransition, o.Status())
}

// ManualPaymentApplies reports whether a manual confirmation may be offered for o (the console
// shows its form only then).
func ManualPaymentApplies(o domain.Order) bool { return manuallyPayable(o) == nil }

// askProvider asks the provider where the order's payment stands: through the order's stored
// payment there (its reference filled from ref when the provider had given none), or one made
// up of the order and ref. It returns the stored payment (zero when none), the answer in words
// for the record, and whether it confirms the payment. Only a failure to read the ledger is an
// error: a provider that cannot be asked is an answer that does not confirm.
func (s *Payments) askProvider(ctx context.Context, o domain.Order, provider domain.Provider, ref string) (domain.Payment, string, bool, error) {
	stored, err := s.ledger.Payments().Payment(ctx, o.No(), provider)
	if err != nil && !errors.Is(err, domain.ErrPaymentNotFound) {
		return domain.Payment{}, "", false, fmt.Errorf("load payment: %w", err)
	}
	gw, ok := s.gateway(provider)
	if !ok {
		return stored, "not asked: the provider is not configured here", false, nil
	}
	p := stored
	if p.Provider == "" {
		p = domain.Payment{OrderNo: o.No(), Provider: provider, ProviderRef: ref, Amount: o.Amount(),
			Currency: s.cfg.Currency, Status: domain.PaymentOpen, CreatedAt: o.CreatedAt()}
	} else if p.ProviderRef == "" {
		p.ProviderRef = ref
	}
	st, err := gw.Query(ctx, p)
	switch {
	case errors.Is(err, domain.ErrUnsupported):
		return stored, "not asked: the provider has no query", true, nil
	case err != nil:
		s.log.WarnContext(ctx, "manual confirmation: the provider could not be asked", "order_no", o.No(),
			"provider", provider, "err", err)
		return stored, "not reachable", false, nil
	case st.Outcome != domain.OutcomePaid:
		return stored, st.Outcome.String(), false, nil
	case st.Amount != o.Amount() || st.Currency != s.cfg.Currency:
		return stored, fmt.Sprintf("paid, but %s %s", st.Currency.Format(st.Amount), st.Currency.Code), false, nil
	}
	return stored, "paid", true, nil
}

// ManualPayments lists the order's manual payment confirmations, oldest first.
func (s *Payments) ManualPayments(ctx context.Context, no domain.OrderNo) ([]domain.ManualPayment, error) {
	return s.ledger.Payments().ManualOf(ctx, no)
}
