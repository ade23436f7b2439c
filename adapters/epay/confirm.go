package epay

import (
	"context"
	"errors"
	"fmt"

	"cardshop/domain"
)

var _ domain.NoticeConfirmer = (*Gateway)(nil)

// ConfirmPaid matches a verified TRADE_SUCCESS with the payment and with the gateway's own
// record of the order (api.php?act=order), and answers that record as Query does. An epay
// signature is MD5 over the merchant KEY and proves little on its own, so no success pays an
// order before this:
//   - the notice must be a success for the payment's order, in CNY, for exactly its amount;
//   - its trade_no must be the payment's when the payment has one (an api-mode payment always
//     does; a redirect one once a notice or a query gave it);
//   - its type must be the one the payment was created with: the type signed into the
//     payment's redirect URL, or for an api-mode payment the type the gateway recorded (the
//     configured type when the record names none);
//   - the gateway's record must carry the same trade_no, the payment's money, the same type and
//     (when it names one) this merchant's pid; its status is the answer's Outcome (1 paid, 0
//     pending, 2 refunded, 3 frozen), for the caller to judge.
//
// Errors: domain.ErrUnavailable when the gateway cannot be asked (the notice is refused and the
// gateway resends; the order's close asks again); any other error when the notice does not
// match the payment or the record.
func (g *Gateway) ConfirmPaid(ctx context.Context, p domain.Payment, n domain.ProviderNotice) (domain.PaymentState, error) {
	switch {
	case n.Outcome != domain.OutcomePaid || n.OrderNo != p.OrderNo:
		return domain.PaymentState{}, errors.New("epay confirm: not a success for the payment's order")
	case n.Currency != cny || p.Currency.Code != cny.Code || n.Amount != p.Amount:
		return domain.PaymentState{}, fmt.Errorf("epay confirm: the notice's money is not the payment's: %w", domain.ErrAmountMismatch)
	case !validRef(n.ProviderRef) || (p.ProviderRef != "" && n.ProviderRef != p.ProviderRef):
		return domain.PaymentState{}, errors.New("epay confirm: the notice's trade_no is not the payment's")
	}
	want := g.createdType(p)
	if want != "" && n.Method != want {
		return domain.PaymentState{}, errors.New("epay confirm: the notice's type is not the one the payment was created with")
	}
	a, err := g.order(ctx, p.OrderNo, "confirm")
	if err != nil {
		return domain.PaymentState{}, err
	}
	if want == "" {
		want = string(a.Type)
		if want == "" {
			want = g.typ
		}
	}
	switch {
	case string(a.TradeNo) != n.ProviderRef:
		return domain.PaymentState{}, errors.New("epay confirm: the gateway's trade_no for the order is not the notice's")
	case n.Method != want || (a.Type != "" && string(a.Type) != want):
		return domain.PaymentState{}, errors.New("epay confirm: the gateway's type for the order is not the notice's or the payment's")
	case a.Money == "":
		return domain.PaymentState{}, errors.New("epay confirm: the gateway's record has no money")
	}
	st, err := g.state(a, "confirm")
	if err != nil {
		return domain.PaymentState{}, err
	}
	if st.Amount != p.Amount {
		return domain.PaymentState{}, fmt.Errorf("epay confirm: the gateway has the order at %s, the payment is %s: %w",
			cny.Format(st.Amount), cny.Format(p.Amount), domain.ErrAmountMismatch)
	}
	return st, nil
}
