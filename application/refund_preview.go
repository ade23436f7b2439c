package application

import (
	"context"
	"fmt"

	"cardshop/domain"
)

// RefundPreview is what a refund of an order would do, for the confirmation an operator reads
// before asking for it: where its codes would go under each choice (the refund rules of
// RefundOrder: revealed codes are voided and unrevealed ones recycled unless the operator
// says otherwise) and which provider would be asked to return how much.
type RefundPreview struct {
	Order domain.Order
	// Codes is how many codes the order holds (0 for an UNFULFILLED order, which has none).
	Codes int
	// Revealed: the codes left the service in plain text, so the default voids them.
	Revealed bool
	// DefaultVoided and DefaultRecycled are the counts without Void or Recycle.
	DefaultVoided, DefaultRecycled int
	// Provider and Amount are the payment a provider would be asked to return (Provider empty:
	// none; the order was paid through the storefront's signed callback or its payment is not
	// one cardshop holds, so the money is returned outside cardshop). ByHand: the provider is
	// not enabled here any more, the money is returned at the provider by hand.
	Provider domain.Provider
	Amount   domain.Money
	Currency domain.Currency
	ByHand   bool
	// Refundable is false when the order's state takes no refund (Why says so).
	Refundable bool
	Why        string
}

// RefundApplies says whether RefundOrder would take the order's money back now: a PAID or an
// UNFULFILLED order (the console links a refund from those only).
func RefundApplies(o domain.Order) bool {
	return o.Status() == domain.StatusPaid || o.Status() == domain.StatusUnfulfilled
}

// PreviewRefund says what RefundOrder would do with the order now; it changes nothing.
//
// Errors: ErrOrderNotFound, ErrUnavailable.
func (s *Payments) PreviewRefund(ctx context.Context, no domain.OrderNo) (RefundPreview, error) {
	o, err := s.ledger.Orders().Order(ctx, no)
	if err != nil {
		return RefundPreview{}, fmt.Errorf("load order: %w", err)
	}
	pv := RefundPreview{Order: o, Revealed: o.Revealed()}
	switch o.Status() {
	case domain.StatusPaid:
		pv.Refundable, pv.Codes = true, o.Qty()
		if pv.Revealed {
			pv.DefaultVoided = pv.Codes
		} else {
			pv.DefaultRecycled = pv.Codes
		}
	case domain.StatusUnfulfilled:
		pv.Refundable = true
	default:
		pv.Why = "the order is " + o.Status().String()
		return pv, nil
	}
	p, ok, err := s.paidPayment(ctx, o)
	if err != nil {
		return RefundPreview{}, err
	}
	if ok {
		pv.Provider, pv.Amount, pv.Currency = p.Provider, p.Amount, p.Currency
		_, enabled := s.gateway(p.Provider)
		pv.ByHand = !enabled
	}
	return pv, nil
}
