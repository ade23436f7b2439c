package epay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"cardshop/domain"
)

// refundAnswer is api.php?act=refund's answer.
type refundAnswer struct {
	Code flexString `json:"code"`
	Msg  flexString `json:"msg"`
}

// done reports whether the answer says the money went back: code 1, as the gateways built on
// 彩虹易支付 document, or code 0 with the upstream source's "退款成功" message. (Some gateways
// answer code 0 for a failure: code 0 alone proves nothing.)
func (a refundAnswer) done() bool {
	return a.Code == "1" || (a.Code == "0" && strings.HasPrefix(string(a.Msg), "退款成功"))
}

// Refund returns the whole amount through api.php?act=refund (see the package doc): the order
// is read first, and a refunded one answers succeeded without a second call.
func (g *Gateway) Refund(ctx context.Context, p domain.Payment, r domain.RefundRequest) (domain.RefundState, error) {
	if !g.refunds {
		return domain.RefundState{}, fmt.Errorf("epay refund: %w: refunds are off for this gateway", domain.ErrUnsupported)
	}
	if r.Amount <= 0 || r.Amount != p.Amount || r.Currency.Code != cny.Code || p.Currency.Code != cny.Code {
		return domain.RefundState{}, domain.Invalid("refund", "the whole amount of the payment, in CNY, is refunded")
	}
	a, err := g.order(ctx, p.OrderNo, "refund")
	if err != nil {
		return domain.RefundState{}, err
	}
	if err := g.sameMoney(a, r.Amount); err != nil {
		return domain.RefundState{}, err
	}
	switch a.Status {
	case statusRefunded:
		return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: string(a.TradeNo)}, nil
	case statusUnpaid:
		return domain.RefundState{Outcome: domain.RefundRefused, ProviderRef: string(a.TradeNo),
			Reason: "the gateway has the order as unpaid: nothing to refund"}, nil
	case statusPaid, statusFrozen:
	default:
		return domain.RefundState{}, fmt.Errorf("epay refund: unknown order status %s", g.remote(string(a.Status)))
	}
	form := url.Values{"pid": {g.pid}, "key": {g.key.Reveal()}, "money": {cny.Format(r.Amount)}}
	if a.TradeNo != "" {
		form.Set("trade_no", string(a.TradeNo))
	} else {
		form.Set("out_trade_no", string(p.OrderNo))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/api.php?act=refund", strings.NewReader(form.Encode()))
	if err != nil {
		return domain.RefundState{}, errors.New("epay refund: cannot build the request")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var ans refundAnswer
	if err := g.call(req, "refund", &ans); err != nil {
		if errors.Is(err, domain.ErrUnavailable) {
			return domain.RefundState{}, err
		}
		// An answer that is no answer (not JSON, an odd status): the order tells.
		if g.refundedNow(ctx, p.OrderNo) {
			return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: string(a.TradeNo)}, nil
		}
		return domain.RefundState{}, err
	}
	if ans.done() {
		return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: string(a.TradeNo)}, nil
	}
	// A refusal, or a refund that raced another attempt and found the order refunded: the order
	// tells which.
	if g.refundedNow(ctx, p.OrderNo) {
		return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: string(a.TradeNo)}, nil
	}
	return domain.RefundState{Outcome: domain.RefundRefused, ProviderRef: string(a.TradeNo),
		Reason: fmt.Sprintf("code %s: %s", g.remote(string(ans.Code)), g.remote(string(ans.Msg)))}, nil
}

// RefundIdempotent is false: epay has no refund number. Refund reads the order and then asks
// for the refund, two calls a concurrent attempt can pass between, and a gateway whose own
// check and payout are not atomic pays twice; the caller lets one attempt at a time call.
func (g *Gateway) RefundIdempotent() bool { return false }

// sameMoney refuses an order record whose money is not the payment's.
func (g *Gateway) sameMoney(a orderAnswer, amount domain.Money) error {
	if a.Money == "" {
		return nil
	}
	m, err := ParseMoney(string(a.Money))
	if err != nil {
		return fmt.Errorf("epay refund: money: %w", err)
	}
	if m != amount {
		return fmt.Errorf("epay refund: the gateway has the order at %s, the payment is %s", cny.Format(m), cny.Format(amount))
	}
	return nil
}

// refundedNow reads the order again and reports whether the gateway has it refunded; a read
// that fails says no.
func (g *Gateway) refundedNow(ctx context.Context, no domain.OrderNo) bool {
	a, err := g.order(ctx, no, "refund")
	return err == nil && a.Status == statusRefunded
}
