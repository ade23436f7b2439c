// Package wechatsim is a WeChat Pay API v3 simulator for tests: an httptest server that
// answers the endpoints cardshop calls — Native order (POST /v3/pay/transactions/native),
// query and close by out_trade_no, domestic refund (POST /v3/refund/domestic/refunds) — with
// WeChat Pay's JSON, status codes and {"code","message"} errors. It checks the merchant's
// Authorization (WECHATPAY2-SHA256-RSA2048: mchid, serial_no, a fresh timestamp and the
// SHA256withRSA signature of "METHOD\nURI\nts\nnonce\nbody\n" under the merchant's public key)
// and signs every answer it gives an authenticated caller with its own platform key.
//
// It holds two platform keys, as WeChat Pay does for a merchant migrating from platform
// certificates to the WeChat Pay public key: a self-signed platform certificate (serial number
// in Wechatpay-Serial) and a public key with a PUB_KEY_ID_… id. SignWith chooses which one
// signs answers and notifications; SignMidSwitch is WeChat Pay's rule while the switch is under
// way: an answer is signed with the key the request's Wechatpay-Serial names, and with the
// certificate when the request names none.
//
// Notifications are real HTTPS POSTs to the order's (or the refund's) notify_url, JSON with an
// AEAD_AES_256_GCM resource under the API v3 key, signed over "ts\nnonce\nbody\n". A delivery
// is retried, re-signed, until the receiver answers 2xx, at most MaxAttempts times (without
// WeChat Pay's waits). Switches: Pay, FailPayment, CompleteRefund, RefundAtOnce change state
// and deliver; Resend, Hold/Release (reorder), SetDelay, Drop; Deliver with a Forgery; Outage,
// RefundOutage, RefundRefuse, LoseReplies; SignWith for the key migration. Requests, Orders,
// Refunds and Deliveries show what it received and did.
//
// It is written from WeChat Pay's public documentation with the standard library, independently
// of package wechatpay and of WeChat Pay's SDK: the gateway's tests check one against the other.
// It imports the domain, the simulators' courier and the standard library.
package wechatsim

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cardshop/adapters/lab/paysim/courier"
	"cardshop/domain"
)

// KeyKind is which platform key signs.
type KeyKind int

// The platform keys.
const (
	SignCertificate KeyKind = iota // the platform certificate: Wechatpay-Serial is its serial number
	SignPublicKey                  // the WeChat Pay public key: Wechatpay-Serial is PUB_KEY_ID_…
	// SignMidSwitch is a merchant switching from the certificate to the public key: an answer
	// is signed with the public key when the request's Wechatpay-Serial is its PUB_KEY_ID_…, and
	// with the certificate otherwise (no header, or the certificate's serial); notifications,
	// which answer no request, with the certificate.
	SignMidSwitch
)

// Tolerance is how far the merchant's Authorization timestamp may be from the wall clock.
const Tolerance = 5 * time.Minute

// Options configures a Server.
type Options struct {
	MchID string
	AppID string
	// MerchantSerial and MerchantKey are the merchant API certificate's serial number and
	// public key: they check the Authorization of every request.
	MerchantSerial string
	MerchantKey    *rsa.PublicKey
	// APIv3Key encrypts notification resources (32 bytes).
	APIv3Key string
	// PlatformKey and PublicKeyKey are the private keys of the platform certificate and of the
	// WeChat Pay public key. Nil: generated (RSA 2048, which takes a while: share them).
	PlatformKey  *rsa.PrivateKey
	PublicKeyKey *rsa.PrivateKey
	// SignWith is the key that signs at start.
	SignWith KeyKind
	// RefundNotifyURL receives refund notifications of refunds sent without notify_url (the
	// merchant platform's setting).
	RefundNotifyURL string
	// Clock is the simulator's now: order expiry, transaction times, signature timestamps. Nil:
	// the wall clock. The merchant's Authorization timestamp is checked against the wall clock,
	// the one the merchant signs with.
	Clock domain.Clock
	// HTTPClient delivers notifications (it must trust the receiver's TLS certificate). Nil: a
	// client with a 10 s timeout.
	HTTPClient *http.Client
	// MaxAttempts bounds the POSTs of one delivery until a 2xx. Zero: 3.
	MaxAttempts int
}

// Order is a Native order as the simulator holds it.
type Order struct {
	OutTradeNo    string
	AppID         string
	MchID         string
	Description   string
	NotifyURL     string
	Total         int64
	TimeExpire    time.Time
	CodeURL       string
	TradeState    string
	TransactionID string
	SuccessTime   time.Time
	Created       time.Time
	fingerprint   string
}

// Refund is a refund as the simulator holds it.
type Refund struct {
	RefundID    string
	OutRefundNo string
	OutTradeNo  string
	Refund      int64
	Total       int64
	Reason      string
	NotifyURL   string
	Status      string // PROCESSING, SUCCESS, CLOSED, ABNORMAL
	Created     time.Time
}

// Request is one API request the simulator received.
type Request struct {
	Method string
	URI    string
	Body   []byte
	// Serial is the request's Wechatpay-Serial: the key the merchant will verify the answer
	// with ("" when not sent).
	Serial  string
	AuthOK  bool
	AuthErr string
	Status  int
	Code    string // the error code answered, if any
	Lost    bool   // carried out, reply dropped
}

// Server is the simulator.
//
// Its courier (embedded) carries the notifications: SetDelay, Drop, Hold, Held, Release,
// Resend, Outbox, Flush, Deliveries.
type Server struct {
	*courier.Courier[Note]

	// URL is the API's base URL (Config.BaseURL of the gateway).
	URL string

	srv          *httptest.Server
	opts         Options
	clock        domain.Clock
	platformKey  *rsa.PrivateKey
	certPEM      string
	certSerial   string
	publicKeyKey *rsa.PrivateKey
	publicKeyID  string

	mu           sync.Mutex
	signWith     KeyKind
	orders       map[string]*Order
	orderSeq     []string
	refunds      map[string]*Refund
	refundSeq    []string
	requests     []Request
	outage       bool
	refundOutage bool
	refuseCode   string
	refuseMsg    string
	refundAtOnce bool
	lose         int
	refundNotify string
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

var (
	mchIDShape  = regexp.MustCompile(`^[0-9]{6,32}$`)
	outTradeNo  = regexp.MustCompile(`^[0-9A-Za-z_\-|*]{6,32}$`)
	outRefundNo = regexp.MustCompile(`^[0-9A-Za-z_\-|*@]{1,64}$`)
)

// New starts a simulator; Close stops it.
func New(opts Options) (*Server, error) {
	if !mchIDShape.MatchString(opts.MchID) || opts.AppID == "" {
		return nil, errors.New("wechatsim: MchID (digits) and AppID are required")
	}
	if opts.MerchantSerial == "" || opts.MerchantKey == nil {
		return nil, errors.New("wechatsim: the merchant's serial and public key are required")
	}
	if len(opts.APIv3Key) != 32 {
		return nil, errors.New("wechatsim: the API v3 key must be 32 bytes")
	}
	s := &Server{opts: opts, clock: opts.Clock, signWith: opts.SignWith,
		orders: map[string]*Order{}, refunds: map[string]*Refund{}, refundNotify: opts.RefundNotifyURL}
	if s.clock == nil {
		s.clock = wallClock{}
	}
	if s.opts.MaxAttempts <= 0 {
		s.opts.MaxAttempts = 3
	}
	s.Courier = courier.New(courier.Config[Note]{
		Client:       opts.HTTPClient,
		Seal:         s.seal,
		Acknowledged: func(status int, _ []byte) bool { return status >= 200 && status < 300 },
		Genuine:      func(n Note) bool { return n.Forgery == Genuine },
		MaxAttempts:  s.opts.MaxAttempts,
	})
	var err error
	if s.platformKey = opts.PlatformKey; s.platformKey == nil {
		if s.platformKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			return nil, err
		}
	}
	if s.publicKeyKey = opts.PublicKeyKey; s.publicKeyKey == nil {
		if s.publicKeyKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			return nil, err
		}
	}
	if s.certPEM, s.certSerial, err = selfSigned(s.platformKey, s.clock.Now()); err != nil {
		return nil, err
	}
	s.publicKeyID = "PUB_KEY_ID_0" + digits(26)
	s.srv = httptest.NewServer(http.HandlerFunc(s.api))
	s.URL = s.srv.URL
	return s, nil
}

// selfSigned makes the platform certificate: a random 20-byte serial number, valid five years.
func selfSigned(key *rsa.PrivateKey, now time.Time) (string, string, error) {
	sn := make([]byte, 20)
	_, _ = rand.Read(sn)
	sn[0] = sn[0]&0x7f | 0x10
	serial := new(big.Int).SetBytes(sn)
	tmpl := &x509.Certificate{SerialNumber: serial,
		Subject:   pkix.Name{CommonName: "Tenpay.com Root CA simulated platform certificate", Organization: []string{"wechatsim"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(5, 0, 0), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), strings.ToUpper(serial.Text(16)), nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Client is an HTTP client for the API (with a timeout).
func (s *Server) Client() *http.Client {
	c := *s.srv.Client()
	c.Timeout = 10 * time.Second
	return &c
}

// CertificatePEM is the platform certificate; CertificateSerial its serial number as
// Wechatpay-Serial names it (upper-case hex).
func (s *Server) CertificatePEM() string    { return s.certPEM }
func (s *Server) CertificateSerial() string { return s.certSerial }

// PublicKeyPEM is the WeChat Pay public key (PKIX PEM); PublicKeyID its id.
func (s *Server) PublicKeyPEM() string {
	der, _ := x509.MarshalPKIXPublicKey(&s.publicKeyKey.PublicKey)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}
func (s *Server) PublicKeyID() string { return s.publicKeyID }

// SignWith switches the key that signs answers and notifications (the migration).
func (s *Server) SignWith(k KeyKind) { s.set(func() { s.signWith = k }) }

// Outage makes every API call answer 500 SYSTEM_ERROR (on) or serve again (off).
func (s *Server) Outage(on bool) { s.set(func() { s.outage = on }) }

// RefundOutage makes the refund endpoint answer 500 SYSTEM_ERROR (on) without creating the
// refund, or serve again (off).
func (s *Server) RefundOutage(on bool) { s.set(func() { s.refundOutage = on }) }

// RefundRefuse makes new refunds answer 403 with this business error (code "" serves again),
// e.g. NOT_ENOUGH "基本账户余额不足".
func (s *Server) RefundRefuse(code, message string) {
	s.set(func() { s.refuseCode, s.refuseMsg = code, message })
}

// RefundAtOnce makes new refunds answer SUCCESS at once (on), their REFUND.SUCCESS
// notification waiting in the outbox until Flush; off: PROCESSING until CompleteRefund.
func (s *Server) RefundAtOnce(on bool) { s.set(func() { s.refundAtOnce = on }) }

// LoseReplies makes the next n authenticated API calls take effect and then close the
// connection without an answer.
func (s *Server) LoseReplies(n int) { s.set(func() { s.lose = n }) }

// SetRefundNotifyURL sets where notifications of refunds sent without notify_url go.
func (s *Server) SetRefundNotifyURL(u string) { s.set(func() { s.refundNotify = u }) }

func (s *Server) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// Requests returns the API requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// OrderOf returns the order with that out_trade_no as it stands.
func (s *Server) OrderOf(no string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[no]
	if !ok {
		return Order{}, false
	}
	s.lapse(o)
	return *o, true
}

// Refunds returns the refunds created so far, oldest first.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, 0, len(s.refundSeq))
	for _, no := range s.refundSeq {
		out = append(out, *s.refunds[no])
	}
	return out
}

// PaidOut is the money returned to the buyer of an order: its refunds that succeeded.
func (s *Server) PaidOut(outTradeNo string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum int64
	for _, r := range s.refunds {
		if r.OutTradeNo == outTradeNo && r.Status == "SUCCESS" {
			sum += r.Refund
		}
	}
	return sum
}

// lapse closes a NOTPAY order past its time_expire, as WeChat Pay does.
func (s *Server) lapse(o *Order) {
	if o.TradeState == "NOTPAY" && !s.clock.Now().Before(o.TimeExpire) {
		o.TradeState = "CLOSED"
	}
}

// reply is one API answer.
type reply struct {
	status int
	body   []byte
	code   string
}

func answer(status int, v any) reply {
	b, _ := json.Marshal(v)
	return reply{status: status, body: b}
}

func fail(status int, code, message string) reply {
	b, _ := json.Marshal(map[string]string{"code": code, "message": message})
	return reply{status: status, body: b, code: code}
}

// api serves every request: authentication, switches, then the endpoint; the answer of an
// authenticated request is signed.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := Request{Method: r.Method, URI: r.URL.RequestURI(), Body: body, Serial: r.Header.Get("Wechatpay-Serial")}
	authErr := s.authenticate(r, body)
	rec.AuthOK = authErr == nil
	if authErr != nil {
		rec.AuthErr = authErr.Error()
	}
	s.mu.Lock()
	var rp reply
	switch {
	case !rec.AuthOK:
		rp = fail(http.StatusUnauthorized, "SIGN_ERROR", "签名错误，请检查后再试")
	case s.outage:
		rp = fail(http.StatusInternalServerError, "SYSTEM_ERROR", "系统异常，请稍后重试")
	default:
		rp = s.route(r, body)
	}
	rec.Status, rec.Code = rp.status, rp.code
	lose := rec.AuthOK && !s.outage && s.lose > 0
	if lose {
		s.lose--
		rec.Lost = true
	}
	s.requests = append(s.requests, rec)
	var hdr http.Header
	if rec.AuthOK {
		hdr = s.signedHeaders(rp.body, s.clock.Now(), s.answerKey(rec.Serial))
	}
	s.mu.Unlock()
	if lose {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	for k, vs := range hdr {
		w.Header()[k] = vs
	}
	w.Header().Set("Request-ID", "08"+digits(30))
	if len(rp.body) > 0 {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(rp.status)
	_, _ = w.Write(rp.body)
}

var authParam = regexp.MustCompile(`^([a-z_]+)="([^"]*)"$`)

// authenticate checks the Authorization header as WeChat Pay does.
func (s *Server) authenticate(r *http.Request, body []byte) error {
	h := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(h, "WECHATPAY2-SHA256-RSA2048 ")
	if !ok {
		return errors.New("no WECHATPAY2-SHA256-RSA2048 Authorization")
	}
	p := map[string]string{}
	for item := range strings.SplitSeq(rest, ",") {
		m := authParam.FindStringSubmatch(strings.TrimSpace(item))
		if m == nil {
			return fmt.Errorf("malformed Authorization item %q", item)
		}
		if _, dup := p[m[1]]; dup {
			return fmt.Errorf("the Authorization header has item %s twice", m[1])
		}
		p[m[1]] = m[2]
	}
	for _, k := range []string{"mchid", "nonce_str", "timestamp", "serial_no", "signature"} {
		if p[k] == "" {
			return fmt.Errorf("the Authorization header has no %s", k)
		}
	}
	if p["mchid"] != s.opts.MchID {
		return errors.New("mchid of another merchant")
	}
	if !strings.EqualFold(p["serial_no"], s.opts.MerchantSerial) {
		return errors.New("serial_no is not the merchant certificate's")
	}
	ts, err := strconv.ParseInt(p["timestamp"], 10, 64)
	if err != nil {
		return errors.New("malformed timestamp")
	}
	if d := time.Since(time.Unix(ts, 0)); d >= Tolerance || d <= -Tolerance {
		return errors.New("stale timestamp")
	}
	sig, err := base64.StdEncoding.DecodeString(p["signature"])
	if err != nil {
		return errors.New("signature is not base64")
	}
	msg := r.Method + "\n" + r.URL.RequestURI() + "\n" + p["timestamp"] + "\n" + p["nonce_str"] + "\n" + string(body) + "\n"
	sum := sha256.Sum256([]byte(msg))
	if rsa.VerifyPKCS1v15(s.opts.MerchantKey, crypto.SHA256, sum[:], sig) != nil {
		return errors.New("signature does not verify")
	}
	return nil
}

// answerKey is the key that signs the answer to a request naming serial in Wechatpay-Serial.
func (s *Server) answerKey(serial string) KeyKind {
	if s.signWith != SignMidSwitch {
		return s.signWith
	}
	if serial == s.publicKeyID {
		return SignPublicKey
	}
	return SignCertificate
}

// signedHeaders are the Wechatpay-* headers of body signed at t with key k (the certificate
// unless k is SignPublicKey).
func (s *Server) signedHeaders(body []byte, t time.Time, k KeyKind) http.Header {
	key, serial := s.platformKey, s.certSerial
	if k == SignPublicKey {
		key, serial = s.publicKeyKey, s.publicKeyID
	}
	ts, nonce := strconv.FormatInt(t.Unix(), 10), letters(32)
	h := http.Header{}
	h.Set("Wechatpay-Timestamp", ts)
	h.Set("Wechatpay-Nonce", nonce)
	h.Set("Wechatpay-Serial", serial)
	h.Set("Wechatpay-Signature", Sign(key, ts, nonce, body))
	return h
}

// Sign is WeChat Pay's signature of an answer or a notification: base64 SHA256withRSA over
// "ts\nnonce\nbody\n".
func Sign(key *rsa.PrivateKey, ts, nonce string, body []byte) string {
	sum := sha256.Sum256([]byte(ts + "\n" + nonce + "\n" + string(body) + "\n"))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

func (s *Server) route(r *http.Request, body []byte) reply {
	path := r.URL.Path
	switch {
	case path == "/v3/pay/transactions/native" && r.Method == http.MethodPost:
		return s.native(body)
	case path == "/v3/refund/domestic/refunds" && r.Method == http.MethodPost:
		return s.refund(body)
	}
	if rest, ok := strings.CutPrefix(path, "/v3/pay/transactions/out-trade-no/"); ok {
		if no, ok := strings.CutSuffix(rest, "/close"); ok && r.Method == http.MethodPost && !strings.Contains(no, "/") {
			return s.close(no, body)
		}
		if r.Method == http.MethodGet && !strings.Contains(rest, "/") {
			return s.query(rest, r.URL.Query())
		}
	}
	return fail(http.StatusNotFound, "NOT_FOUND", "请求的资源不存在")
}

type amount struct {
	Total       *int64 `json:"total,omitempty"`
	PayerTotal  *int64 `json:"payer_total,omitempty"`
	Refund      *int64 `json:"refund,omitempty"`
	PayerRefund *int64 `json:"payer_refund,omitempty"`
	Currency    string `json:"currency,omitempty"`
	PayerCur    string `json:"payer_currency,omitempty"`
}

// decode reads a JSON body strictly: unknown fields and trailing data are a PARAM_ERROR.
func decode(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data")
	}
	return nil
}

func paramError(msg string) reply { return fail(http.StatusBadRequest, "PARAM_ERROR", msg) }

// checkNotifyURL is WeChat Pay's rule: https, no query.
func checkNotifyURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.RawQuery == "" && !strings.ContainsAny(s, "?#")
}

// native is POST /v3/pay/transactions/native.
func (s *Server) native(body []byte) reply {
	var req struct {
		AppID       string `json:"appid"`
		MchID       string `json:"mchid"`
		Description string `json:"description"`
		OutTradeNo  string `json:"out_trade_no"`
		TimeExpire  string `json:"time_expire"`
		NotifyURL   string `json:"notify_url"`
		Attach      string `json:"attach"`
		Amount      amount `json:"amount"`
	}
	if err := decode(body, &req); err != nil {
		return paramError("输入源“/body”映射到值字段失败: " + err.Error())
	}
	switch {
	case req.MchID != s.opts.MchID:
		return paramError("mchid与请求头中的商户号不一致")
	case req.AppID != s.opts.AppID:
		return fail(http.StatusBadRequest, "APPID_MCHID_NOT_MATCH", "appid和mch_id不匹配")
	case req.Description == "" || len(req.Description) > 127:
		return paramError("description 长度应在1到127字节之间")
	case !outTradeNo.MatchString(req.OutTradeNo):
		return paramError("out_trade_no 应为6到32位数字、大小写字母、_-|*")
	case !checkNotifyURL(req.NotifyURL):
		return paramError("notify_url 需为https且不能携带参数")
	case req.Amount.Total == nil || *req.Amount.Total < 1:
		return paramError("amount.total 应为正整数（分）")
	case req.Amount.Currency != "" && req.Amount.Currency != "CNY":
		return paramError("amount.currency 只支持CNY")
	}
	expire := s.clock.Now().Add(2 * time.Hour)
	if req.TimeExpire != "" {
		t, err := time.Parse(time.RFC3339, req.TimeExpire)
		if err != nil {
			return paramError("time_expire 格式应为 yyyy-MM-DDTHH:mm:ss+TIMEZONE")
		}
		expire = t
	}
	fp := string(body)
	if o, ok := s.orders[req.OutTradeNo]; ok {
		s.lapse(o)
		switch {
		case o.TradeState == "SUCCESS" || o.TradeState == "REFUND":
			return fail(http.StatusBadRequest, "ORDERPAID", "该订单已支付")
		case o.TradeState == "CLOSED":
			return fail(http.StatusBadRequest, "ORDER_CLOSED", "当前订单已关闭，请重新下单")
		case o.fingerprint != fp:
			return fail(http.StatusBadRequest, "INVALID_REQUEST", "201 商户订单号重复")
		}
		return answer(http.StatusOK, map[string]string{"code_url": o.CodeURL})
	}
	if !expire.After(s.clock.Now()) {
		return paramError("time_expire 已过期")
	}
	o := &Order{OutTradeNo: req.OutTradeNo, AppID: req.AppID, MchID: req.MchID, Description: req.Description,
		NotifyURL: req.NotifyURL, Total: *req.Amount.Total, TimeExpire: expire, TradeState: "NOTPAY",
		CodeURL: "weixin://wxpay/bizpayurl?pr=" + letters(7), Created: s.clock.Now(), fingerprint: fp}
	s.orders[o.OutTradeNo] = o
	s.orderSeq = append(s.orderSeq, o.OutTradeNo)
	return answer(http.StatusOK, map[string]string{"code_url": o.CodeURL})
}

// transaction renders an order as WeChat Pay's transaction object.
func (s *Server) transaction(o *Order) map[string]any {
	t := map[string]any{"appid": o.AppID, "mchid": o.MchID, "out_trade_no": o.OutTradeNo, "trade_type": "NATIVE",
		"trade_state": o.TradeState, "trade_state_desc": stateDesc[o.TradeState], "attach": "",
		"amount": amount{Total: &o.Total, Currency: "CNY", PayerCur: "CNY"}}
	if o.TransactionID != "" {
		t["transaction_id"] = o.TransactionID
		t["bank_type"] = "OTHERS"
		t["success_time"] = o.SuccessTime.In(china).Format(time.RFC3339)
		t["payer"] = map[string]string{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}
		t["amount"] = amount{Total: &o.Total, PayerTotal: &o.Total, Currency: "CNY", PayerCur: "CNY"}
	}
	return t
}

var stateDesc = map[string]string{"SUCCESS": "支付成功", "REFUND": "转入退款", "NOTPAY": "未支付", "CLOSED": "已关闭",
	"USERPAYING": "用户支付中", "PAYERROR": "支付失败"}

var china = time.FixedZone("CST", 8*3600)

// query is GET /v3/pay/transactions/out-trade-no/{no}?mchid=….
func (s *Server) query(no string, q url.Values) reply {
	if q.Get("mchid") != s.opts.MchID {
		return paramError("mchid与请求头中的商户号不一致")
	}
	o, ok := s.orders[no]
	if !ok {
		return fail(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
	}
	s.lapse(o)
	return answer(http.StatusOK, s.transaction(o))
}

// close is POST /v3/pay/transactions/out-trade-no/{no}/close: 204.
func (s *Server) close(no string, body []byte) reply {
	var req struct {
		MchID string `json:"mchid"`
	}
	if err := decode(body, &req); err != nil || req.MchID != s.opts.MchID {
		return paramError("mchid与请求头中的商户号不一致")
	}
	o, ok := s.orders[no]
	if !ok {
		return fail(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
	}
	s.lapse(o)
	switch o.TradeState {
	case "SUCCESS", "REFUND":
		return fail(http.StatusBadRequest, "ORDERPAID", "订单已支付")
	}
	o.TradeState = "CLOSED"
	return reply{status: http.StatusNoContent}
}

// refundObject renders a refund as WeChat Pay's refund object.
func (s *Server) refundObject(r *Refund) map[string]any {
	o := s.orders[r.OutTradeNo]
	obj := map[string]any{"refund_id": r.RefundID, "out_refund_no": r.OutRefundNo, "transaction_id": o.TransactionID,
		"out_trade_no": r.OutTradeNo, "channel": "ORIGINAL", "user_received_account": "支付用户零钱",
		"create_time": r.Created.In(china).Format(time.RFC3339), "status": r.Status, "funds_account": "AVAILABLE",
		"amount": map[string]any{"total": r.Total, "refund": r.Refund, "payer_total": r.Total, "payer_refund": r.Refund,
			"settlement_refund": r.Refund, "settlement_total": r.Total, "discount_refund": 0, "currency": "CNY"}}
	if r.Status == "SUCCESS" {
		obj["success_time"] = s.clock.Now().In(china).Format(time.RFC3339)
	}
	return obj
}

// refund is POST /v3/refund/domestic/refunds: one refund per out_refund_no.
func (s *Server) refund(body []byte) reply {
	var req struct {
		TransactionID string `json:"transaction_id"`
		OutTradeNo    string `json:"out_trade_no"`
		OutRefundNo   string `json:"out_refund_no"`
		Reason        string `json:"reason"`
		NotifyURL     string `json:"notify_url"`
		FundsAccount  string `json:"funds_account"`
		Amount        amount `json:"amount"`
	}
	if err := decode(body, &req); err != nil {
		return paramError("输入源“/body”映射到值字段失败: " + err.Error())
	}
	if s.refundOutage {
		return fail(http.StatusInternalServerError, "SYSTEM_ERROR", "系统超时，请稍后重试")
	}
	switch {
	case !outRefundNo.MatchString(req.OutRefundNo):
		return paramError("out_refund_no 格式错误")
	case req.Amount.Refund == nil || req.Amount.Total == nil || *req.Amount.Refund < 1 || req.Amount.Currency != "CNY":
		return paramError("amount.refund、amount.total 和 amount.currency 必填")
	case req.NotifyURL != "" && !checkNotifyURL(req.NotifyURL):
		return paramError("notify_url 需为https且不能携带参数")
	case len(req.Reason) > 80:
		return paramError("reason 不能超过80字节")
	}
	if r, ok := s.refunds[req.OutRefundNo]; ok {
		if r.OutTradeNo != req.OutTradeNo || r.Refund != *req.Amount.Refund {
			return fail(http.StatusBadRequest, "INVALID_REQUEST", "退款单号重复，且请求参数与原退款不一致")
		}
		return answer(http.StatusOK, s.refundObject(r))
	}
	o, ok := s.orders[req.OutTradeNo]
	if !ok {
		return fail(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "订单不存在")
	}
	if o.TradeState != "SUCCESS" && o.TradeState != "REFUND" {
		return fail(http.StatusBadRequest, "INVALID_REQUEST", "订单未支付，不能退款")
	}
	if *req.Amount.Total != o.Total {
		return paramError("订单金额与原订单金额不一致")
	}
	var refunded int64
	for _, r := range s.refunds {
		if r.OutTradeNo == o.OutTradeNo && r.Status != "CLOSED" && r.Status != "ABNORMAL" {
			refunded += r.Refund
		}
	}
	if refunded+*req.Amount.Refund > o.Total {
		return paramError("申请退款金额超过订单可退金额")
	}
	if s.refuseCode != "" {
		return fail(http.StatusForbidden, s.refuseCode, s.refuseMsg)
	}
	r := &Refund{RefundID: "50" + digits(30), OutRefundNo: req.OutRefundNo, OutTradeNo: o.OutTradeNo, Refund: *req.Amount.Refund,
		Total: o.Total, Reason: req.Reason, NotifyURL: req.NotifyURL, Status: "PROCESSING", Created: s.clock.Now()}
	s.refunds[r.OutRefundNo] = r
	s.refundSeq = append(s.refundSeq, r.OutRefundNo)
	o.TradeState = "REFUND"
	if s.refundAtOnce {
		r.Status = "SUCCESS"
		s.Post(Note{Notification: s.refundNotification(r)})
	}
	return answer(http.StatusOK, s.refundObject(r))
}

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func random(n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err)
		}
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

func letters(n int) string { return random(n, alnum) }
func digits(n int) string  { return random(n, "0123456789") }

// NewAPIv3Key returns a random API v3 key: 32 letters and digits.
func NewAPIv3Key() string { return letters(32) }

// NewMchID returns a random merchant number; NewAppID a random appid (wx and 16 hex digits).
func NewMchID() string { return "1" + digits(9) }
func NewAppID() string { return "wx" + random(16, "0123456789abcdef") }

// NewSerial returns a random certificate serial number as WeChat Pay writes it (40 upper-case
// hex digits).
func NewSerial() string { return random(40, "0123456789ABCDEF") }
