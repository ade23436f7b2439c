package alipay

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"cardshop/domain"
)

// The trade statuses (trade_status) of notifications and queries.
const (
	WaitBuyerPay  = "WAIT_BUYER_PAY" // created, waiting for the buyer
	TradeClosed   = "TRADE_CLOSED"   // closed unpaid (expired, closed by the merchant) or fully refunded
	TradeSuccess  = "TRADE_SUCCESS"  // paid, refundable
	TradeFinished = "TRADE_FINISHED" // paid, no longer refundable
)

// cny is the only currency Alipay's domestic APIs charge in: amounts are yuan with 2 decimals.
var cny = domain.Currency{Code: "CNY", Exponent: 2}

// outcomeOf maps a trade_status; ok is false for an unknown one.
func outcomeOf(status string) (domain.PaymentOutcome, bool) {
	switch status {
	case TradeSuccess, TradeFinished:
		return domain.OutcomePaid, true
	case TradeClosed:
		return domain.OutcomeExpired, true
	case WaitBuyerPay:
		return domain.OutcomePending, true
	}
	return 0, false
}

// Reply is the plain text Alipay looks for: "success" stops its resends (8 over about 25
// hours), anything else ("failure") makes it resend. Both are 200: Alipay reads the body.
func (g *Gateway) Reply(accepted bool) (status int, contentType string, body []byte) {
	text := "failure"
	if accepted {
		text = "success"
	}
	return http.StatusOK, "text/plain; charset=utf-8", []byte(text)
}

// Verify checks a notification (notify_type trade_status_sync) and parses it. The parameters
// come from the form body of a POST (what Alipay sends) or from the query of a GET. Errors:
//   - domain.ErrBadSignature: not a GET or POST, a parameter sent twice, a body that is not a
//     form, no sign, a sign_type other than RSA2, a signature that Alipay's public key does not
//     verify over the sorted "k=v&…" of the decoded parameters but sign, sign_type and empty
//     ones, an app_id other than the configured one, or a seller_id other than the configured
//     one (when one is configured): a notification for another application or merchant is
//     not ours to judge, however well signed;
//   - a domain.ValidationError: well signed, but out_trade_no, trade_no, notify_id,
//     trade_status, total_amount (or a refund's out_biz_no and refund_fee) missing or
//     malformed.
//
// A refund notification (see the package documentation) has RefundNo set.
func (g *Gateway) Verify(_ context.Context, in domain.InboundRequest) (domain.ProviderNotice, error) {
	p, err := noticeParams(in)
	if err != nil {
		return domain.ProviderNotice{}, fmt.Errorf("alipay notification: %w: %s", domain.ErrBadSignature, err)
	}
	sig := p["sign"]
	if sig == "" {
		return domain.ProviderNotice{}, fmt.Errorf("alipay notification: %w: unsigned", domain.ErrBadSignature)
	}
	if p["sign_type"] != "RSA2" {
		return domain.ProviderNotice{}, fmt.Errorf("alipay notification: %w: sign_type is not RSA2", domain.ErrBadSignature)
	}
	if !VerifyBytes(g.alipay, []byte(SigningString(p, "sign", "sign_type")), sig) {
		return domain.ProviderNotice{}, fmt.Errorf("alipay notification: %w", domain.ErrBadSignature)
	}
	if p["app_id"] != g.appID {
		return domain.ProviderNotice{}, fmt.Errorf("alipay notification: %w: for another application", domain.ErrBadSignature)
	}
	if g.sellerID != "" && p["seller_id"] != g.sellerID {
		return domain.ProviderNotice{}, fmt.Errorf("alipay notification: %w: for another seller", domain.ErrBadSignature)
	}
	return parseNotice(p)
}

// parseNotice reads a verified notification's fields.
func parseNotice(p map[string]string) (domain.ProviderNotice, error) {
	no, err := domain.ParseOrderNo(p["out_trade_no"])
	if err != nil {
		return domain.ProviderNotice{}, domain.Invalid("out_trade_no", "not an order number")
	}
	ref := p["trade_no"]
	if !validRef(ref) {
		return domain.ProviderNotice{}, domain.Invalid("trade_no", "missing or malformed")
	}
	eventID := p["notify_id"]
	if !validText(eventID, 128) {
		return domain.ProviderNotice{}, domain.Invalid("notify_id", "missing or malformed")
	}
	outcome, ok := outcomeOf(p["trade_status"])
	if !ok {
		return domain.ProviderNotice{}, domain.Invalid("trade_status", "missing or unknown")
	}
	amount, err := ParseAmount(p["total_amount"])
	if err != nil || amount <= 0 {
		return domain.ProviderNotice{}, domain.Invalid("total_amount", "not a positive amount of yuan")
	}
	n := domain.ProviderNotice{OrderNo: no, ProviderRef: ref, EventID: eventID, Outcome: outcome, Amount: amount, Currency: cny}
	if !isRefund(p) {
		return n, nil
	}
	// A refund notification: the trade's status changed because money went back. Its
	// trade_status (TRADE_CLOSED after a full refund) says nothing about the payment.
	refundNo := p["out_biz_no"]
	if !validRef(refundNo) {
		return domain.ProviderNotice{}, domain.Invalid("out_biz_no", "a refund notification without the refund number")
	}
	fee, err := ParseAmount(p["refund_fee"])
	if err != nil || fee <= 0 {
		return domain.ProviderNotice{}, domain.Invalid("refund_fee", "not a positive amount of yuan")
	}
	n.Outcome = domain.OutcomePending
	n.RefundNo = refundNo
	n.RefundOutcome = domain.RefundPending
	if fee >= amount {
		n.RefundOutcome = domain.RefundSucceeded
	}
	return n, nil
}

// isRefund reports whether a notification is about a refund: it carries the refund's number
// (out_biz_no), its time (gmt_refund) or a refunded total above zero (payment notifications
// may carry refund_fee=0.00).
func isRefund(p map[string]string) bool {
	if p["out_biz_no"] != "" || p["gmt_refund"] != "" {
		return true
	}
	fee, err := ParseAmount(p["refund_fee"])
	return err == nil && fee > 0
}

// noticeParams reads a notification's parameters: a POST's form body (its query when the body
// is empty), or a GET's query.
func noticeParams(in domain.InboundRequest) (map[string]string, error) {
	var v url.Values
	switch in.Method {
	case http.MethodGet:
		v = in.Query
	case http.MethodPost:
		if len(in.Body) == 0 {
			v = in.Query
			break
		}
		if ct := in.Header.Get("Content-Type"); ct != "" {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || mt != "application/x-www-form-urlencoded" {
				return nil, errors.New("the body is not a form")
			}
		}
		parsed, err := url.ParseQuery(string(in.Body))
		if err != nil {
			return nil, errors.New("the body is not a form")
		}
		v = parsed
	default:
		return nil, errors.New("method " + in.Method)
	}
	p := make(map[string]string, len(v))
	for k, vs := range v {
		if len(vs) != 1 {
			return nil, errors.New("parameter sent twice")
		}
		p[k] = vs[0]
	}
	return p, nil
}

// ParseAmount reads an Alipay amount (yuan, at most 2 decimals: "88.88", "0.01", "2") exactly
// into fen. It refuses signs, exponents, spaces, more than 2 decimals and empty parts: a
// provider's amount is compared with the order's, never rounded.
func ParseAmount(s string) (domain.Money, error) {
	m, err := cny.ParseAmount(s)
	if err != nil || m < 0 {
		return 0, domain.Invalid("amount", "not an amount of yuan with at most 2 decimals")
	}
	return m, nil
}

// validRef reports whether s can be an Alipay trade_no or a merchant's number: 1 to 64 of
// A-Z a-z 0-9 _ -.
func validRef(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validText reports whether s is 1 to max printable ASCII characters.
func validText(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
