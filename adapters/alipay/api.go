package alipay

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"cardshop/domain"
)

// The API methods.
const (
	apiPrecreate   = "alipay.trade.precreate"
	apiPagePay     = "alipay.trade.page.pay"
	apiWapPay      = "alipay.trade.wap.pay"
	apiQuery       = "alipay.trade.query"
	apiClose       = "alipay.trade.close"
	apiRefund      = "alipay.trade.refund"
	apiRefundQuery = "alipay.trade.fastpay.refund.query"
)

// TimeLayout is Alipay's time format (timestamp, time_expire, notify_time), in China
// Standard Time.
const TimeLayout = "2006-01-02 15:04:05"

// ChinaTime is Asia/Shanghai: UTC+8 all year (China has kept no daylight saving time since
// 1991), fixed here so that the binary needs no time zone database.
var ChinaTime = time.FixedZone("CST", 8*3600)

// CodeSuccess is the code of an answer that did what was asked.
const CodeSuccess = "10000"

// maxAmount is the largest total_amount Alipay accepts: 100000000.00 yuan.
const maxAmount domain.Money = 100_000_000_00

// maxAnswer bounds what is read of an answer.
const maxAnswer = 1 << 20

// flexString is a JSON string or number as text: amounts are strings in Alipay's answers, but
// a number would be read exactly too. null is "".
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
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

// Answer is the common part of every answer object.
type Answer struct {
	Code    string `json:"code"`
	Msg     string `json:"msg"`
	SubCode string `json:"sub_code"`
	SubMsg  string `json:"sub_msg"`
}

// transient reports whether the answer says "try again": the service unavailable (20000), a
// call limit (40005), a system error (ACQ.SYSTEM_ERROR, isp.*).
func (a Answer) transient() bool {
	return a.Code == "20000" || a.Code == "40005" || strings.HasSuffix(a.SubCode, "SYSTEM_ERROR") || strings.HasPrefix(a.SubCode, "isp.")
}

func (a Answer) describe() string {
	return fmt.Sprintf("code %s %s, %s %s", remote(a.Code), remote(a.Msg), remote(a.SubCode), remote(a.SubMsg))
}

type precreateAnswer struct {
	Answer
	OutTradeNo string `json:"out_trade_no"`
	QRCode     string `json:"qr_code"`
}

type queryAnswer struct {
	Answer
	TradeNo     string     `json:"trade_no"`
	OutTradeNo  string     `json:"out_trade_no"`
	TradeStatus string     `json:"trade_status"`
	TotalAmount flexString `json:"total_amount"`
}

type refundAnswer struct {
	Answer
	TradeNo    string     `json:"trade_no"`
	OutTradeNo string     `json:"out_trade_no"`
	FundChange string     `json:"fund_change"`
	RefundFee  flexString `json:"refund_fee"`
}

type refundQueryAnswer struct {
	Answer
	TradeNo      string     `json:"trade_no"`
	OutTradeNo   string     `json:"out_trade_no"`
	OutRequestNo string     `json:"out_request_no"`
	RefundAmount flexString `json:"refund_amount"`
	RefundStatus string     `json:"refund_status"`
}

// Provider is the provider's name.
func (g *Gateway) Provider() domain.Provider { return g.name }

// Supports reports whether c is CNY, the only currency Alipay's domestic APIs charge in.
func (g *Gateway) Supports(c domain.Currency) bool { return c.Code == cny.Code }

// Create creates the payment. The expiry is time_expire, the order's expiry in China time
// (truncated to the second, never later), so that the same request always gives the same
// business parameters and a retry is the same trade at Alipay. page and wap send nothing:
// PayURL is the signed gateway URL. precreate POSTs and answers qr_code.
func (g *Gateway) Create(ctx context.Context, r domain.PaymentRequest) (domain.PaymentCreated, error) {
	biz, err := g.createBiz(r)
	if err != nil {
		return domain.PaymentCreated{}, err
	}
	switch g.method {
	case MethodPage, MethodWap:
		api, product := apiPagePay, "FAST_INSTANT_TRADE_PAY"
		if g.method == MethodWap {
			api, product = apiWapPay, "QUICK_WAP_WAY"
		}
		biz["product_code"] = product
		v, err := g.request(api, biz, r.NotifyURL, r.ReturnURL)
		if err != nil {
			return domain.PaymentCreated{}, err
		}
		return domain.PaymentCreated{PayURL: g.endpoint + "?" + v.Encode()}, nil
	default: // MethodPrecreate: below
	}
	var a precreateAnswer
	if err := g.call(ctx, apiPrecreate, biz, r.NotifyURL, &a); err != nil {
		return domain.PaymentCreated{}, fmt.Errorf("alipay create: %w", err)
	}
	if a.Code != CodeSuccess {
		if a.transient() {
			return domain.PaymentCreated{}, fmt.Errorf("alipay create: %w: %s", domain.ErrUnavailable, a.describe())
		}
		return domain.PaymentCreated{}, fmt.Errorf("alipay create: refused: %s", a.describe())
	}
	if a.OutTradeNo != string(r.OrderNo) {
		return domain.PaymentCreated{}, errors.New("alipay create: the answer is about another order")
	}
	if a.QRCode == "" || len(a.QRCode) > 1024 {
		return domain.PaymentCreated{}, errors.New("alipay create: the answer has no qr_code")
	}
	return domain.PaymentCreated{QRCode: a.QRCode}, nil
}

// createBiz checks r and builds the business parameters.
func (g *Gateway) createBiz(r domain.PaymentRequest) (map[string]string, error) {
	if err := checkOrderNo(r.OrderNo); err != nil {
		return nil, err
	}
	if r.Currency.Code != cny.Code {
		return nil, domain.Invalid("currency", "alipay charges in CNY only")
	}
	if r.Amount <= 0 || r.Amount > maxAmount {
		return nil, domain.Invalid("amount", "must be 0.01 to 100000000.00 yuan")
	}
	if err := checkCallbackURL(r.NotifyURL); err != nil {
		return nil, domain.Invalid("notify_url", err.Error())
	}
	if r.ReturnURL != "" {
		if err := checkCallbackURL(r.ReturnURL); err != nil {
			return nil, domain.Invalid("return_url", err.Error())
		}
	}
	if r.ExpiresAt.IsZero() {
		return nil, domain.Invalid("expires_at", "a payment must expire with its order")
	}
	if !r.ExpiresAt.After(g.clock.Now()) {
		return nil, domain.Invalid("expires_at", "already passed")
	}
	return map[string]string{
		"out_trade_no": string(r.OrderNo),
		"total_amount": cny.Format(r.Amount),
		"subject":      subject(r.Subject, r.OrderNo),
		"time_expire":  r.ExpiresAt.In(ChinaTime).Format(TimeLayout),
	}, nil
}

// subject is the trade's title: Alipay refuses / = & in it and takes at most 256 characters.
func subject(s string, no domain.OrderNo) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '/' || r == '=' || r == '&' || r < 0x20 || r == 0x7f:
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return string(no)
	}
	if utf8.RuneCountInString(s) > 256 {
		s = string([]rune(s)[:256])
	}
	return s
}

// checkOrderNo accepts an order number Alipay takes as out_trade_no: letters, digits and
// underscores, at most 64.
func checkOrderNo(no domain.OrderNo) error {
	if _, err := domain.ParseOrderNo(string(no)); err != nil || strings.Contains(string(no), "-") {
		return domain.Invalid("order_no", "not an order number Alipay accepts")
	}
	return nil
}

func checkCallbackURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" || len(s) > 256 {
		return errors.New("must be an absolute http(s) URL of at most 256 characters")
	}
	return nil
}

// Query asks alipay.trade.query where the order's trade stands. TRADE_SUCCESS and
// TRADE_FINISHED are paid, TRADE_CLOSED expired, WAIT_BUYER_PAY pending. ACQ.TRADE_NOT_EXIST is
// pending too: Alipay creates the trade only when the buyer scans the code or logs in at the
// cashier, so an unopened payment has no trade yet (and time_expire keeps it from being paid
// after the order's expiry).
func (g *Gateway) Query(ctx context.Context, p domain.Payment) (domain.PaymentState, error) {
	if err := checkOrderNo(p.OrderNo); err != nil {
		return domain.PaymentState{}, err
	}
	var a queryAnswer
	if err := g.call(ctx, apiQuery, map[string]string{"out_trade_no": string(p.OrderNo)}, "", &a); err != nil {
		return domain.PaymentState{}, fmt.Errorf("alipay query: %w", err)
	}
	return queryState(a, p.OrderNo)
}

func queryState(a queryAnswer, no domain.OrderNo) (domain.PaymentState, error) {
	switch {
	case a.Code == CodeSuccess:
	case a.SubCode == "ACQ.TRADE_NOT_EXIST":
		return domain.PaymentState{Outcome: domain.OutcomePending}, nil
	case a.transient():
		return domain.PaymentState{}, fmt.Errorf("alipay query: %w: %s", domain.ErrUnavailable, a.describe())
	default:
		return domain.PaymentState{}, fmt.Errorf("alipay query: refused: %s", a.describe())
	}
	if a.OutTradeNo != string(no) {
		return domain.PaymentState{}, errors.New("alipay query: the answer is about another order")
	}
	if !validRef(a.TradeNo) {
		return domain.PaymentState{}, errors.New("alipay query: the answer's trade_no is missing or malformed")
	}
	outcome, ok := outcomeOf(a.TradeStatus)
	if !ok {
		return domain.PaymentState{}, fmt.Errorf("alipay query: unknown trade_status %s", remote(a.TradeStatus))
	}
	st := domain.PaymentState{Outcome: outcome, ProviderRef: a.TradeNo}
	if a.TotalAmount != "" {
		m, err := ParseAmount(string(a.TotalAmount))
		if err != nil || m <= 0 {
			return domain.PaymentState{}, errors.New("alipay query: total_amount is not a positive amount of yuan")
		}
		st.Amount, st.Currency = m, cny
	}
	return st, nil
}

// Close closes the trade with alipay.trade.close. ACQ.TRADE_NOT_EXIST is success: there is no
// trade to close (the buyer never opened the payment) and time_expire keeps the code or page
// from being paid after the order's expiry. A refusal because of the trade's state
// (ACQ.TRADE_STATUS_ERROR, ACQ.TRADE_HAS_SUCCESS, ACQ.TRADE_HAS_FINISHED, ACQ.TRADE_HAS_CLOSE)
// is read back with a query, because Alipay gives the same refusal for a trade already closed
// as for one paid: closed is success, paid is domain.ErrAlreadyPaid.
func (g *Gateway) Close(ctx context.Context, p domain.Payment) error {
	if err := checkOrderNo(p.OrderNo); err != nil {
		return err
	}
	var a Answer
	if err := g.call(ctx, apiClose, map[string]string{"out_trade_no": string(p.OrderNo)}, "", &a); err != nil {
		return fmt.Errorf("alipay close: %w", err)
	}
	switch {
	case a.Code == CodeSuccess, a.SubCode == "ACQ.TRADE_NOT_EXIST":
		return nil
	case a.transient():
		return fmt.Errorf("alipay close: %w: %s", domain.ErrUnavailable, a.describe())
	case a.SubCode == "ACQ.TRADE_STATUS_ERROR", a.SubCode == "ACQ.TRADE_HAS_SUCCESS",
		a.SubCode == "ACQ.TRADE_HAS_FINISHED", a.SubCode == "ACQ.TRADE_HAS_CLOSE":
	default:
		return fmt.Errorf("alipay close: refused: %s", a.describe())
	}
	st, err := g.Query(ctx, p)
	if err != nil {
		return fmt.Errorf("alipay close: refused (%s), and the trade could not be read: %w", remote(a.SubCode), err)
	}
	switch st.Outcome {
	case domain.OutcomePaid:
		return fmt.Errorf("alipay close: %w", domain.ErrAlreadyPaid)
	case domain.OutcomeExpired:
		return nil
	default: // pending and the rest: the refusal below
	}
	return fmt.Errorf("alipay close: refused (%s) while the trade is %s", remote(a.SubCode), st.Outcome)
}

// Refund asks alipay.trade.refund for the whole amount with out_request_no = r.RefundNo, which
// Alipay makes idempotent: the same number never refunds twice. fund_change "Y" means this call
// moved the money: succeeded. Any other code 10000 answer ("N": an earlier attempt with the same
// number already refunded, or the money has not moved yet) is read back with
// alipay.trade.fastpay.refund.query: REFUND_SUCCESS is succeeded, anything else pending. A
// business refusal (sub_code ACQ.*, e.g. ACQ.SELLER_BALANCE_NOT_ENOUGH) is RefundRefused with
// Alipay's sub_msg; ACQ.SYSTEM_ERROR, 20000, transport failures and 5xx are
// domain.ErrUnavailable (the caller asks again with the same number).
func (g *Gateway) Refund(ctx context.Context, p domain.Payment, r domain.RefundRequest) (domain.RefundState, error) {
	if err := checkOrderNo(p.OrderNo); err != nil {
		return domain.RefundState{}, err
	}
	if !validRef(r.RefundNo) {
		return domain.RefundState{}, domain.Invalid("refund_no", "1 to 64 of A-Z a-z 0-9 _ -")
	}
	if r.Currency.Code != cny.Code || r.Amount <= 0 || r.Amount > maxAmount || (p.Amount > 0 && r.Amount > p.Amount) {
		return domain.RefundState{}, domain.Invalid("amount", "a refund is a positive amount of CNY, at most the payment's")
	}
	biz := map[string]string{
		"out_trade_no":   string(p.OrderNo),
		"refund_amount":  cny.Format(r.Amount),
		"out_request_no": r.RefundNo,
		"refund_reason":  subjectOrEmpty(r.Reason),
	}
	var a refundAnswer
	if err := g.call(ctx, apiRefund, biz, "", &a); err != nil {
		return domain.RefundState{}, fmt.Errorf("alipay refund: %w", err)
	}
	switch {
	case a.Code == CodeSuccess:
	case a.transient():
		return domain.RefundState{}, fmt.Errorf("alipay refund: %w: %s", domain.ErrUnavailable, a.describe())
	case strings.HasPrefix(a.SubCode, "ACQ."):
		reason := a.SubMsg
		if reason == "" {
			reason = a.SubCode
		}
		return domain.RefundState{Outcome: domain.RefundRefused, Reason: remote(a.SubCode + ": " + reason)}, nil
	default:
		return domain.RefundState{}, fmt.Errorf("alipay refund: refused: %s", a.describe())
	}
	if a.OutTradeNo != "" && a.OutTradeNo != string(p.OrderNo) {
		return domain.RefundState{}, errors.New("alipay refund: the answer is about another order")
	}
	if a.TradeNo != "" && !validRef(a.TradeNo) {
		return domain.RefundState{}, errors.New("alipay refund: the answer's trade_no is malformed")
	}
	ref := a.TradeNo
	if ref == "" {
		ref = p.ProviderRef
	}
	if a.FundChange == "Y" {
		return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: ref}, nil
	}
	return g.refundQuery(ctx, p.OrderNo, r, ref), nil
}

// RefundIdempotent is true: alipay.trade.refund keeps a refund by its out_request_no.
func (g *Gateway) RefundIdempotent() bool { return true }

// refundQuery reads a refund back. Whatever goes wrong, the refund was accepted: pending.
func (g *Gateway) refundQuery(ctx context.Context, no domain.OrderNo, r domain.RefundRequest, ref string) domain.RefundState {
	pending := domain.RefundState{Outcome: domain.RefundPending, ProviderRef: ref}
	var a refundQueryAnswer
	biz := map[string]string{"out_trade_no": string(no), "out_request_no": r.RefundNo}
	if err := g.call(ctx, apiRefundQuery, biz, "", &a); err != nil || a.Code != CodeSuccess {
		return pending
	}
	if a.OutRequestNo != r.RefundNo || (a.OutTradeNo != "" && a.OutTradeNo != string(no)) {
		return pending
	}
	if a.RefundStatus != "REFUND_SUCCESS" {
		return pending
	}
	if m, err := ParseAmount(string(a.RefundAmount)); err != nil || m != r.Amount {
		return pending
	}
	return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: ref}
}

func subjectOrEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return subject(s, "")
}

// request builds the signed parameters of an API call: the common ones, biz_content (JSON of
// the non-empty business parameters) and sign over all of them.
func (g *Gateway) request(method string, biz map[string]string, notifyURL, returnURL string) (url.Values, error) {
	clean := make(map[string]string, len(biz))
	for k, v := range biz {
		if v != "" {
			clean[k] = v
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(clean); err != nil {
		return nil, errors.New("alipay: cannot encode biz_content")
	}
	p := map[string]string{
		"app_id":      g.appID,
		"method":      method,
		"format":      "JSON",
		"charset":     "utf-8",
		"sign_type":   "RSA2",
		"timestamp":   g.clock.Now().In(ChinaTime).Format(TimeLayout),
		"version":     "1.0",
		"notify_url":  notifyURL,
		"return_url":  returnURL,
		"biz_content": strings.TrimSuffix(buf.String(), "\n"),
	}
	sig, err := SignBytes(g.key, []byte(SigningString(p, "sign")))
	if err != nil {
		return nil, err
	}
	p["sign"] = sig
	v := make(url.Values, len(p))
	for k, val := range p {
		if val != "" {
			v.Set(k, val)
		}
	}
	return v, nil
}

// call POSTs a signed request and reads the answer object "<method with _>_response" into out
// (which embeds Answer), after checking Alipay's signature over its exact bytes. Every answer
// the caller acts on is signed: an unsigned one (Alipay leaves some errors unsigned, e.g. a
// request whose own signature failed) is an error here, domain.ErrUnavailable when it says
// "try again". Transport failures, 5xx and 429 are domain.ErrUnavailable.
func (g *Gateway) call(ctx context.Context, method string, biz map[string]string, notifyURL string, out any) error {
	v, err := g.request(method, biz, notifyURL, "")
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint, strings.NewReader(v.Encode()))
	if err != nil {
		return errors.New("cannot build the request")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded;charset=utf-8")
	req.Header.Set("Accept", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%w: %s", domain.ErrUnavailable, remote(err.Error()))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%w: reading the answer", domain.ErrUnavailable)
	}
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("%w: HTTP %d", domain.ErrUnavailable, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("unexpected HTTP %d", resp.StatusCode)
	}
	return DecodeAnswer(g.alipay, method, body, out)
}

// DecodeAnswer reads the answer of method from body into out (a struct embedding Answer). The
// signature ("sign", beside the answer object) must verify under pub over the exact bytes of
// the object as received; an unsigned answer is accepted only to report an error.
func DecodeAnswer(pub *rsa.PublicKey, method string, body []byte, out any) error {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return errors.New("the answer is not a JSON object")
	}
	raw, ok := top[strings.ReplaceAll(method, ".", "_")+"_response"]
	if !ok {
		var a Answer
		if er, ok := top["error_response"]; ok && json.Unmarshal(er, &a) == nil {
			return unsignedError(a)
		}
		return errors.New("the answer has no response object")
	}
	var sig string
	if s, ok := top["sign"]; ok {
		if err := json.Unmarshal(s, &sig); err != nil {
			return errors.New("the answer's sign is not a string")
		}
	}
	var a Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return errors.New("the answer is not the expected JSON")
	}
	if sig == "" {
		return unsignedError(a)
	}
	if !VerifyBytes(pub, raw, sig) {
		return errors.New("the answer's signature does not verify with Alipay's public key")
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return errors.New("the answer is not the expected JSON")
	}
	return nil
}

func unsignedError(a Answer) error {
	if a.transient() {
		return fmt.Errorf("%w: %s", domain.ErrUnavailable, a.describe())
	}
	if a.Code == CodeSuccess {
		return errors.New("the answer is not signed")
	}
	return fmt.Errorf("refused (unsigned answer): %s", a.describe())
}

// remote makes outside text fit for an error: invalid UTF-8 replaced, at most 200 bytes.
func remote(s string) string {
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
