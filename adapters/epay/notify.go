package epay

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"cardshop/domain"
)

// TradeSuccess is the only trade_status that means paid. epay sends no failure notification:
// every other status is pending.
const TradeSuccess = "TRADE_SUCCESS"

// Verify checks a notification and parses it. The parameters come from the query of a GET
// (what gateways send) or from the form body of a POST. Errors:
//   - domain.ErrBadSignature: not a GET or POST, a parameter sent twice, a body that is not a
//     form, a parameter whose name is not 1 to 64 of A-Z a-z 0-9 _ or whose value holds '&',
//     '=', a control character or invalid UTF-8 (its signature could be another parameter
//     set's: see signable), no sign, a sign_type other than MD5, a wrong signature, or a pid
//     other than the configured one (a notification for another merchant is not ours to judge,
//     however signed);
//   - a domain.ValidationError: well signed, but out_trade_no, trade_no, trade_status, type or
//     money is missing or malformed (money must be an exact positive "d.dd" amount).
//
// A verified notice proves little on its own (MD5 with the merchant KEY, no timestamp: see the
// package documentation): a success pays only once ConfirmPaid has matched it with the payment
// and the gateway's own record.
func (g *Gateway) Verify(_ context.Context, in domain.InboundRequest) (domain.ProviderNotice, error) {
	p, err := noticeParams(in)
	if err != nil {
		return domain.ProviderNotice{}, fmt.Errorf("epay notification: %w: %s", domain.ErrBadSignature, err)
	}
	if k := signable(p); k != "" {
		return domain.ProviderNotice{}, fmt.Errorf("epay notification: %w: parameter %.64q is not signable (a separator, a control character or an odd name)",
			domain.ErrBadSignature, k)
	}
	sig := p["sign"]
	if sig == "" {
		return domain.ProviderNotice{}, fmt.Errorf("epay notification: %w: unsigned", domain.ErrBadSignature)
	}
	if st := p["sign_type"]; st != "" && st != "MD5" {
		return domain.ProviderNotice{}, fmt.Errorf("epay notification: %w: sign_type is not MD5", domain.ErrBadSignature)
	}
	if !validSign(p, sig, g.key, g.variant) {
		return domain.ProviderNotice{}, fmt.Errorf("epay notification: %w", domain.ErrBadSignature)
	}
	if p["pid"] != g.pid {
		return domain.ProviderNotice{}, fmt.Errorf("epay notification: %w: for another merchant", domain.ErrBadSignature)
	}
	no, err := domain.ParseOrderNo(p["out_trade_no"])
	if err != nil {
		return domain.ProviderNotice{}, domain.Invalid("out_trade_no", "not an order number")
	}
	ref := p["trade_no"]
	if !validRef(ref) {
		return domain.ProviderNotice{}, domain.Invalid("trade_no", "missing or malformed")
	}
	status := p["trade_status"]
	if status == "" || len(status) > 32 {
		return domain.ProviderNotice{}, domain.Invalid("trade_status", "missing or malformed")
	}
	typ := p["type"]
	if !typePattern.MatchString(typ) {
		return domain.ProviderNotice{}, domain.Invalid("type", "missing or malformed")
	}
	amount, err := ParseMoney(p["money"])
	if err != nil {
		return domain.ProviderNotice{}, err
	}
	outcome := domain.OutcomePending
	if status == TradeSuccess {
		outcome = domain.OutcomePaid
	}
	return domain.ProviderNotice{
		OrderNo:     no,
		ProviderRef: ref,
		EventID:     ref + ":" + status,
		Outcome:     outcome,
		Amount:      amount,
		Currency:    cny,
		Method:      typ,
	}, nil
}

// noticeParams reads a notification's parameters: a GET's query, or a POST's form body (its
// query when the body is empty).
func noticeParams(in domain.InboundRequest) (Params, error) {
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
	p := make(Params, len(v))
	for k, vs := range v {
		if len(vs) != 1 {
			return nil, errors.New("parameter sent twice")
		}
		p[k] = vs[0]
	}
	return p, nil
}

// ParseMoney reads an epay amount exactly: yuan with exactly 2 decimals, positive, in the one
// form CNY's Format writes ("19.99", "0.50"; not "1", "1.0", "01.00", "1.001", "-1.00",
// " 1.00"). A provider's amount is compared with the order's, never guessed at.
func ParseMoney(s string) (domain.Money, error) {
	m, err := cny.ParseAmount(s)
	if err != nil || m <= 0 || cny.Format(m) != s {
		return 0, domain.Invalid("money", "not a positive amount of yuan with 2 decimals")
	}
	return m, nil
}

// validRef reports whether s can be a gateway's trade_no: 1 to 64 of A-Z a-z 0-9 _ -.
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
