package wechatpay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wechatpay-apiv3/wechatpay-go/core/auth"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/credentials"

	"cardshop/domain"
)

// maxReply bounds the bytes read from one API reply.
const maxReply = 1 << 20

// maxDescription is WeChat Pay's limit on description, in bytes.
const maxDescription = 127

// cny is the one currency WeChat Pay's domestic API charges in: amounts in fen.
var cny = domain.Currency{Code: "CNY", Exponent: 2}

// outTradeNo is what WeChat Pay takes as out_trade_no.
var outTradeNo = regexp.MustCompile(`^[0-9A-Za-z_\-|*]{6,32}$`)

// china is the zone time_expire is written in, as WeChat Pay's examples write it.
var china = time.FixedZone("CST", 8*3600)

// Gateway is WeChat Pay API v3 (Native payments) as a domain.PaymentGateway.
type Gateway struct {
	base         *url.URL
	mchid        string
	appid        string
	v3key        domain.Secret
	creds        *credentials.WechatPayCredentials
	keys         map[string]auth.Verifier // by Wechatpay-Serial: certificate serials and the public key id
	acceptSerial string                   // the Wechatpay-Serial of every request: the key answers are verified with
	refundNotify string
	client       *http.Client
	clock        domain.Clock
}

var _ domain.PaymentGateway = (*Gateway)(nil)

// Format prints the gateway without its secrets, for every verb.
func (g Gateway) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "wechatpay.Gateway{%s mchid=%s}", g.base.Redacted(), g.mchid)
}

// LogValue logs the gateway without its secrets.
func (g Gateway) LogValue() slog.Value {
	return slog.StringValue("wechatpay " + g.base.Redacted() + " mchid=" + g.mchid)
}

// Provider is "wechatpay".
func (g *Gateway) Provider() domain.Provider { return Name }

// Supports reports whether c is CNY in fen: WeChat Pay's domestic API charges in nothing else.
func (g *Gateway) Supports(c domain.Currency) bool { return c == cny }

// Amount is WeChat Pay's amount object.
type Amount struct {
	Total       *int64 `json:"total,omitempty"`
	PayerTotal  *int64 `json:"payer_total,omitempty"`
	Refund      *int64 `json:"refund,omitempty"`
	PayerRefund *int64 `json:"payer_refund,omitempty"`
	Currency    string `json:"currency,omitempty"`
}

func ptr(v int64) *int64 { return &v }

// prepay is the body of POST /v3/pay/transactions/native.
type prepay struct {
	AppID       string `json:"appid"`
	MchID       string `json:"mchid"`
	Description string `json:"description"`
	OutTradeNo  string `json:"out_trade_no"`
	TimeExpire  string `json:"time_expire"`
	NotifyURL   string `json:"notify_url"`
	Amount      Amount `json:"amount"`
}

// TimeExpire is the time_expire Create sends for an order expiring at t: RFC 3339 in China's
// zone, whole seconds.
func TimeExpire(t time.Time) string { return t.In(china).Truncate(time.Second).Format(time.RFC3339) }

// description is the order's subject cut to WeChat Pay's 127 bytes on a character boundary.
func description(r domain.PaymentRequest) string {
	d := strings.TrimSpace(r.Subject)
	if d == "" {
		d = "Order " + string(r.OrderNo)
	}
	return clip(d, maxDescription)
}

// clip cuts s to at most n bytes on a character boundary.
func clip(s string, n int) string {
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// Create places the Native order and returns its code_url as the QR code. Every field is a
// function of the request, so a retry after a lost reply is the same order at WeChat Pay,
// which answers it with the same code_url. ProviderRef stays empty: WeChat Pay's
// transaction_id exists once the buyer paid (notifications and queries bring it).
func (g *Gateway) Create(ctx context.Context, r domain.PaymentRequest) (domain.PaymentCreated, error) {
	if !outTradeNo.MatchString(string(r.OrderNo)) || r.Amount <= 0 {
		return domain.PaymentCreated{}, domain.Invalid("payment", "an order number WeChat Pay takes (6 to 32 letters, digits, _-|*) and a positive amount are required")
	}
	if !g.Supports(r.Currency) {
		return domain.PaymentCreated{}, domain.Invalid("currency", "WeChat Pay charges in CNY only")
	}
	if err := checkNotifyURL(r.NotifyURL); err != nil {
		return domain.PaymentCreated{}, domain.Invalid("notify_url", err.Error())
	}
	if !r.ExpiresAt.After(g.clock.Now()) {
		return domain.PaymentCreated{}, fmt.Errorf("wechatpay: order %s expired at %s: %w", r.OrderNo, r.ExpiresAt.UTC().Format(time.RFC3339), domain.ErrOrderNotPayable)
	}
	body := prepay{AppID: g.appid, MchID: g.mchid, Description: description(r), OutTradeNo: string(r.OrderNo),
		TimeExpire: TimeExpire(r.ExpiresAt), NotifyURL: r.NotifyURL, Amount: Amount{Total: ptr(int64(r.Amount)), Currency: "CNY"}}
	var out struct {
		CodeURL string `json:"code_url"`
	}
	if err := g.call(ctx, http.MethodPost, "/v3/pay/transactions/native", nil, body, &out); err != nil {
		return domain.PaymentCreated{}, fmt.Errorf("wechatpay: create the Native order %s: %w", r.OrderNo, err)
	}
	if !strings.HasPrefix(out.CodeURL, "weixin://") || len(out.CodeURL) > 512 {
		return domain.PaymentCreated{}, fmt.Errorf("wechatpay: the Native order %s came back without a weixin:// code_url", r.OrderNo)
	}
	return domain.PaymentCreated{QRCode: out.CodeURL}, nil
}

// Transaction is WeChat Pay's transaction object (a query's answer, a payment notification's
// resource), the fields the gateway reads.
type Transaction struct {
	MchID         string `json:"mchid"`
	AppID         string `json:"appid"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	TradeState    string `json:"trade_state"`
	TradeStateMsg string `json:"trade_state_desc"`
	Amount        Amount `json:"amount"`
}

// The trade states.
const (
	TradeSuccess    = "SUCCESS"    // paid
	TradeRefund     = "REFUND"     // paid, then a refund was made
	TradeNotPay     = "NOTPAY"     // not paid yet
	TradeClosed     = "CLOSED"     // closed (by the merchant or at time_expire)
	TradeRevoked    = "REVOKED"    // revoked (payment-code payments)
	TradeUserPaying = "USERPAYING" // the buyer is entering a password
	TradePayError   = "PAYERROR"   // the payment failed
)

// outcome maps a trade state: SUCCESS paid; CLOSED and REVOKED expired; PAYERROR failed; every
// other state pending. REFUND is pending too: the payment's refund is followed on its own, and
// a query must never turn a refunded payment back into a paid one.
func outcome(state string) domain.PaymentOutcome {
	switch state {
	case TradeSuccess:
		return domain.OutcomePaid
	case TradeClosed, TradeRevoked:
		return domain.OutcomeExpired
	case TradePayError:
		return domain.OutcomeFailed
	}
	return domain.OutcomePending
}

// checkTransaction refuses a transaction of another merchant or app, or of another order
// than want (when want is set), and reads its amount in fen.
func (g *Gateway) checkTransaction(t Transaction, want domain.OrderNo) (domain.Money, domain.Currency, error) {
	if t.MchID != g.mchid || t.AppID != g.appid {
		return 0, domain.Currency{}, fmt.Errorf("%w: a transaction of mchid %q appid %q", domain.ErrBadSignature, t.MchID, t.AppID)
	}
	if want != "" && t.OutTradeNo != string(want) {
		return 0, domain.Currency{}, fmt.Errorf("wechatpay: the transaction is of order %q, not %s", t.OutTradeNo, want)
	}
	if t.TradeState == "" || len(t.TradeState) > 32 {
		return 0, domain.Currency{}, domain.Invalid("trade_state", "missing or malformed")
	}
	if len(t.TransactionID) > 64 {
		return 0, domain.Currency{}, domain.Invalid("transaction_id", "too long")
	}
	if t.Amount.Total == nil && t.Amount.Currency == "" {
		if t.TradeState == TradeSuccess {
			return 0, domain.Currency{}, domain.Invalid("amount", "a paid transaction without an amount")
		}
		return 0, domain.Currency{}, nil
	}
	if t.Amount.Total == nil || *t.Amount.Total < 0 || t.Amount.Currency != "CNY" {
		return 0, domain.Currency{}, domain.Invalid("amount", "total missing or negative, or currency not CNY")
	}
	return domain.Money(*t.Amount.Total), cny, nil
}

// Query reads the order's transaction by out_trade_no.
func (g *Gateway) Query(ctx context.Context, p domain.Payment) (domain.PaymentState, error) {
	var t Transaction
	q := url.Values{"mchid": {g.mchid}}
	if err := g.call(ctx, http.MethodGet, "/v3/pay/transactions/out-trade-no/"+url.PathEscape(string(p.OrderNo)), q, nil, &t); err != nil {
		return domain.PaymentState{}, fmt.Errorf("wechatpay: query order %s: %w", p.OrderNo, err)
	}
	amount, cur, err := g.checkTransaction(t, p.OrderNo)
	if err != nil {
		return domain.PaymentState{}, err
	}
	return domain.PaymentState{Outcome: outcome(t.TradeState), ProviderRef: t.TransactionID, Amount: amount, Currency: cur}, nil
}

// Close closes the order at WeChat Pay (204). ORDERPAID is domain.ErrAlreadyPaid; an order
// WeChat Pay does not know (ORDER_NOT_EXIST) cannot be paid, so it counts as closed.
func (g *Gateway) Close(ctx context.Context, p domain.Payment) error {
	body := struct {
		MchID string `json:"mchid"`
	}{g.mchid}
	err := g.call(ctx, http.MethodPost, "/v3/pay/transactions/out-trade-no/"+url.PathEscape(string(p.OrderNo))+"/close", nil, body, nil)
	var e *APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e) && e.Verified && e.Code == "ORDERPAID":
		return fmt.Errorf("wechatpay: close order %s: %w", p.OrderNo, domain.ErrAlreadyPaid)
	case errors.As(err, &e) && e.Verified && e.Code == "ORDER_NOT_EXIST":
		return nil
	}
	return fmt.Errorf("wechatpay: close order %s: %w", p.OrderNo, err)
}

// refundBody is the body of POST /v3/refund/domestic/refunds.
type refundBody struct {
	OutTradeNo  string `json:"out_trade_no"`
	OutRefundNo string `json:"out_refund_no"`
	Reason      string `json:"reason,omitempty"`
	NotifyURL   string `json:"notify_url,omitempty"`
	Amount      Amount `json:"amount"`
}

// Refund is WeChat Pay's refund object (the refund API's answer), the fields the gateway reads.
type Refund struct {
	RefundID    string `json:"refund_id"`
	OutRefundNo string `json:"out_refund_no"`
	OutTradeNo  string `json:"out_trade_no"`
	Status      string `json:"status"`
	Amount      Amount `json:"amount"`
}

// The refund statuses.
const (
	RefundSuccess    = "SUCCESS"
	RefundProcessing = "PROCESSING"
	RefundClosed     = "CLOSED"
	RefundAbnormal   = "ABNORMAL"
)

// refundOutcome maps a refund status; ok is false for an unknown one.
func refundOutcome(status string) (domain.RefundOutcome, bool) {
	switch status {
	case RefundSuccess:
		return domain.RefundSucceeded, true
	case RefundProcessing:
		return domain.RefundPending, true
	case RefundClosed, RefundAbnormal:
		return domain.RefundRefused, true
	}
	return 0, false
}

// maxReason is WeChat Pay's limit on a refund's reason, in bytes.
const maxReason = 80

// Refund asks WeChat Pay to return the whole payment, idempotently by out_refund_no =
// r.RefundNo: WeChat Pay answers a repeated number with the refund it already has. SUCCESS is
// succeeded, PROCESSING pending (a REFUND.* notification or a new call with the same number
// tells the end), ABNORMAL and CLOSED refused; a business error WeChat Pay signed (4xx) is a
// refusal with its code and message. 5xx, SYSTEM_ERROR, FREQUENCY_LIMITED and transport
// failures are domain.ErrUnavailable: the caller asks again with the same number.
func (g *Gateway) Refund(ctx context.Context, p domain.Payment, r domain.RefundRequest) (domain.RefundState, error) {
	if r.RefundNo == "" || len(r.RefundNo) > 64 || r.Amount <= 0 || r.Amount > p.Amount {
		return domain.RefundState{}, domain.Invalid("refund", "a refund number of at most 64 characters and an amount within the payment's are required")
	}
	if r.Currency != cny || p.Currency != cny {
		return domain.RefundState{}, domain.Invalid("currency", "WeChat Pay refunds in CNY only")
	}
	reason := clip(strings.TrimSpace(r.Reason), maxReason)
	body := refundBody{OutTradeNo: string(p.OrderNo), OutRefundNo: r.RefundNo, Reason: reason, NotifyURL: g.refundNotify,
		Amount: Amount{Refund: ptr(int64(r.Amount)), Total: ptr(int64(p.Amount)), Currency: "CNY"}}
	var out Refund
	err := g.call(ctx, http.MethodPost, "/v3/refund/domestic/refunds", nil, body, &out)
	var e *APIError
	if errors.As(err, &e) && e.Verified && !errors.Is(err, domain.ErrUnavailable) {
		return domain.RefundState{Outcome: domain.RefundRefused, Reason: e.Code + ": " + e.Message}, nil
	}
	if err != nil {
		return domain.RefundState{}, fmt.Errorf("wechatpay: refund %s of order %s: %w", r.RefundNo, p.OrderNo, err)
	}
	if out.OutRefundNo != r.RefundNo || (out.OutTradeNo != "" && out.OutTradeNo != string(p.OrderNo)) {
		return domain.RefundState{}, fmt.Errorf("wechatpay: the refund answer is of refund %q order %q, not %s of %s", out.OutRefundNo, out.OutTradeNo, r.RefundNo, p.OrderNo)
	}
	if out.Amount.Refund == nil || *out.Amount.Refund != int64(r.Amount) {
		return domain.RefundState{}, fmt.Errorf("wechatpay: refund %s came back with another amount", r.RefundNo)
	}
	oc, ok := refundOutcome(out.Status)
	if !ok {
		return domain.RefundState{}, fmt.Errorf("wechatpay: refund %s has the unknown status %q", r.RefundNo, out.Status)
	}
	st := domain.RefundState{Outcome: oc, ProviderRef: out.RefundID}
	if oc == domain.RefundRefused {
		st.Reason = "refund " + out.Status
	}
	return st, nil
}

// RefundIdempotent is true: WeChat Pay keeps a refund by its out_refund_no.
func (g *Gateway) RefundIdempotent() bool { return true }

// APIError is an answer other than 2xx: WeChat Pay's {"code","message"}. Verified says
// whether WeChat Pay's signature on it checked out: only a verified refusal is taken as
// WeChat Pay's word.
type APIError struct {
	Status   int
	Code     string
	Message  string
	Verified bool
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("WeChat Pay answered %d %s: %s", e.Status, e.Code, e.Message)
	if !e.Verified {
		s += " (unsigned or not verified)"
	}
	return s
}

// call sends one signed request and decodes the verified JSON answer into out (nil: the
// answer's body is ignored, as for a 204). Errors: domain.ErrUnavailable for transport
// failures, 5xx, 429 and the codes SYSTEM_ERROR and FREQUENCY_LIMITED; an *APIError for other
// refusals; a domain.ErrBadSignature for a 2xx answer whose signature does not verify.
func (g *Gateway) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encode the request: %w", err)
		}
	}
	uri := path
	if len(query) > 0 {
		uri += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.base.String()+uri, rd)
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	authz, err := g.creds.GenerateAuthorizationHeader(ctx, method, req.URL.RequestURI(), string(raw))
	if err != nil {
		return errors.New("sign the request: the SDK's signer failed")
	}
	req.Header.Set("Authorization", authz)
	req.Header.Set(HeaderSerial, g.acceptSerial)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "cardshop")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	defer func() { _ = resp.Body.Close() }()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return fmt.Errorf("%w: reading the reply: %w", domain.ErrUnavailable, err)
	}
	if resp.StatusCode >= 500 {
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, apiError(resp.StatusCode, reply, false))
	}
	sigErr := g.checkSignature(ctx, domain.Header(resp.Header), reply, g.clock.Now())
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if sigErr != nil {
			return fmt.Errorf("the %d answer: %w", resp.StatusCode, sigErr)
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(reply, out); err != nil {
			return fmt.Errorf("the %d answer is not the expected JSON object", resp.StatusCode)
		}
		return nil
	}
	e := apiError(resp.StatusCode, reply, sigErr == nil)
	if resp.StatusCode == http.StatusTooManyRequests || e.Code == "SYSTEM_ERROR" || e.Code == "FREQUENCY_LIMITED" {
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, e)
	}
	return e
}

// apiError reads WeChat Pay's error object {"code","message"}.
func apiError(status int, raw []byte, verified bool) *APIError {
	var env struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	e := &APIError{Status: status, Code: "HTTP_" + fmt.Sprint(status), Message: http.StatusText(status), Verified: verified}
	if json.Unmarshal(raw, &env) == nil && env.Code != "" {
		e.Code, e.Message = env.Code, env.Message
	}
	e.Code, e.Message = clip(e.Code, 64), clip(e.Message, 300)
	return e
}
