package epay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"cardshop/domain"
)

// maxAnswer bounds what is read of a gateway's answer.
const maxAnswer = 64 << 10

// flexString is a JSON string or number as text: epay gateways are PHP, and whether a field
// comes out as 1 or "1" depends on the gateway's database driver. null is "".
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*f = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
	default:
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return errors.New("want a string or a number")
		}
		*f = flexString(n.String())
	}
	return nil
}

// createAnswer is mapi.php's answer.
type createAnswer struct {
	Code      flexString `json:"code"`
	Msg       flexString `json:"msg"`
	TradeNo   flexString `json:"trade_no"`
	PayURL    string     `json:"payurl"`
	QRCode    string     `json:"qrcode"`
	URLScheme string     `json:"urlscheme"`
}

// orderAnswer is api.php?act=order's answer.
type orderAnswer struct {
	Code       flexString `json:"code"`
	Msg        flexString `json:"msg"`
	PID        flexString `json:"pid"`
	TradeNo    flexString `json:"trade_no"`
	OutTradeNo flexString `json:"out_trade_no"`
	Type       flexString `json:"type"`
	Money      flexString `json:"money"`
	Status     flexString `json:"status"`
}

// apiCreate POSTs the signed form to mapi.php.
func (g *Gateway) apiCreate(ctx context.Context, p Params) (domain.PaymentCreated, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/mapi.php", strings.NewReader(encode(p)))
	if err != nil {
		return domain.PaymentCreated{}, fmt.Errorf("epay create: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var a createAnswer
	if err := g.call(req, "create", &a); err != nil {
		return domain.PaymentCreated{}, err
	}
	if a.Code != "1" {
		return domain.PaymentCreated{}, fmt.Errorf("epay create: refused (code %s): %s", g.remote(string(a.Code)), g.remote(string(a.Msg)))
	}
	if !validRef(string(a.TradeNo)) {
		return domain.PaymentCreated{}, errors.New("epay create: the answer has no valid trade_no")
	}
	out := domain.PaymentCreated{ProviderRef: string(a.TradeNo), PayURL: a.PayURL, QRCode: a.QRCode}
	if out.PayURL == "" {
		out.PayURL = a.URLScheme
	}
	if out.PayURL == "" && out.QRCode == "" {
		return domain.PaymentCreated{}, errors.New("epay create: the answer has neither payurl, qrcode nor urlscheme")
	}
	return out, nil
}

// Query asks api.php?act=order where the order's payment stands: status 1 is paid, 0 is
// pending, 2 refunded (OutcomeRefunded) and 3 frozen by the gateway (OutcomeFrozen); neither
// of those two is ever paid, whatever happened before. A record whose trade_no is not the
// payment's (when the payment has one), or whose type is not the one signed into the payment's
// redirect URL, is an error. The answer is not signed: it is trusted as far as the TLS
// connection to the gateway is. A gateway that never saw the order (the buyer never opened the
// redirect) answers code != 1 like any other refusal; epay has no distinct "not found", so that
// is an error, never "unpaid".
func (g *Gateway) Query(ctx context.Context, p domain.Payment) (domain.PaymentState, error) {
	a, err := g.order(ctx, p.OrderNo, "query")
	if err != nil {
		return domain.PaymentState{}, err
	}
	if p.ProviderRef != "" && a.TradeNo != "" && string(a.TradeNo) != p.ProviderRef {
		return domain.PaymentState{}, errors.New("epay query: the gateway's trade_no for the order is not the payment's")
	}
	if want := g.createdType(p); want != "" && a.Type != "" && string(a.Type) != want {
		return domain.PaymentState{}, errors.New("epay query: the gateway has the order with another payment type than it was created with")
	}
	return g.state(a, "query")
}

// state is the PaymentState of an order record.
func (g *Gateway) state(a orderAnswer, op string) (domain.PaymentState, error) {
	st := domain.PaymentState{ProviderRef: string(a.TradeNo)}
	switch a.Status {
	case statusPaid:
		st.Outcome = domain.OutcomePaid
	case statusUnpaid:
		st.Outcome = domain.OutcomePending
	case statusRefunded:
		st.Outcome = domain.OutcomeRefunded
	case statusFrozen:
		st.Outcome = domain.OutcomeFrozen
	default:
		return domain.PaymentState{}, fmt.Errorf("epay %s: unknown status %s", op, g.remote(string(a.Status)))
	}
	if a.Money != "" {
		m, err := ParseMoney(string(a.Money))
		if err != nil {
			return domain.PaymentState{}, fmt.Errorf("epay %s: money: %w", op, err)
		}
		st.Amount, st.Currency = m, cny
	}
	return st, nil
}

// createdType is the type signed into the payment's redirect URL (submit.php), or "" for a
// payment created through mapi.php, whose type only the gateway's record holds.
func (g *Gateway) createdType(p domain.Payment) string {
	prefix := g.base + "/submit.php?"
	if !strings.HasPrefix(p.PayURL, prefix) {
		return ""
	}
	q, err := url.ParseQuery(p.PayURL[len(prefix):])
	if err != nil {
		return ""
	}
	return q.Get("type")
}

// The statuses of an order in api.php?act=order.
const (
	statusUnpaid   = "0"
	statusPaid     = "1"
	statusRefunded = "2"
	statusFrozen   = "3"
)

// order reads the order's record at the gateway (api.php?act=order) and checks that it is this
// merchant's record of this order.
func (g *Gateway) order(ctx context.Context, no domain.OrderNo, op string) (orderAnswer, error) {
	if _, err := domain.ParseOrderNo(string(no)); err != nil {
		return orderAnswer{}, domain.Invalid("order_no", "not an order number")
	}
	q := url.Values{"act": {"order"}, "pid": {g.pid}, "key": {g.key.Reveal()}, "out_trade_no": {string(no)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+"/api.php?"+q.Encode(), nil)
	if err != nil {
		return orderAnswer{}, fmt.Errorf("epay %s: cannot build the request", op)
	}
	var a orderAnswer
	if err := g.call(req, op, &a); err != nil {
		return orderAnswer{}, err
	}
	if a.Code == "-1" {
		// api.php answers -1 only once it has checked pid and KEY: the merchant is authenticated
		// and has no such order (the buyer never opened the redirect). Still an error, never
		// "unpaid".
		return orderAnswer{}, fmt.Errorf("epay %s: %w (code -1): %s", op, domain.ErrPaymentNotFound, g.remote(string(a.Msg)))
	}
	if a.Code != "1" {
		return orderAnswer{}, fmt.Errorf("epay %s: refused (code %s): %s", op, g.remote(string(a.Code)), g.remote(string(a.Msg)))
	}
	if a.OutTradeNo != "" && string(a.OutTradeNo) != string(no) {
		return orderAnswer{}, fmt.Errorf("epay %s: the answer is about another order", op)
	}
	if a.PID != "" && string(a.PID) != g.pid {
		return orderAnswer{}, fmt.Errorf("epay %s: the answer is about another merchant", op)
	}
	if a.TradeNo != "" && !validRef(string(a.TradeNo)) {
		return orderAnswer{}, fmt.Errorf("epay %s: the answer's trade_no is malformed", op)
	}
	return a, nil
}

// call sends req and decodes a 200 JSON answer into out. Transport failures, 5xx and 429 are
// domain.ErrUnavailable. Errors never carry the request URL (the query's holds the KEY).
func (g *Gateway) call(req *http.Request, op string, out any) error {
	req.Header.Set("Accept", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error prints the URL
		}
		return fmt.Errorf("epay %s: %w: %s", op, domain.ErrUnavailable, g.remote(err.Error()))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("epay %s: %w: reading the answer", op, domain.ErrUnavailable)
	}
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("epay %s: %w: HTTP %d", op, domain.ErrUnavailable, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("epay %s: unexpected HTTP %d", op, resp.StatusCode)
	}
	// Some gateways prefix a UTF-8 byte order mark.
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("epay %s: the answer is not the expected JSON", op)
	}
	return nil
}

// remote makes outside text fit for an error: the KEY masked (a gateway might echo the
// request), invalid UTF-8 replaced, at most 200 bytes.
func (g *Gateway) remote(s string) string {
	s = strings.ReplaceAll(s, g.key.Reveal(), domain.Redacted)
	s = strings.ReplaceAll(s, url.QueryEscape(g.key.Reveal()), domain.Redacted)
	s = strings.ToValidUTF8(s, "?")
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
