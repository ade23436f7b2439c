// Package alipaysim is a simulator of Alipay's open platform gateway (gateway.do, RSA2,
// public-key mode), for tests: an httptest server answering alipay.trade.precreate,
// alipay.trade.page.pay and alipay.trade.wap.pay (the buyer's browser brings the signed GET
// and gets a cashier page), alipay.trade.query, alipay.trade.close, alipay.trade.refund and
// alipay.trade.fastpay.refund.query. It checks every request's signature with the merchant's
// public key and signs every answer with its own RSA key pair (Alipay's), over the exact bytes
// of the response object, as Alipay does. Pay sends the signed form notification to the
// trade's notify_url by POST and resends until the answer is "success", a bounded number of
// times; switches resend, reorder (hold, then release in any order), delay, drop and forge
// notifications, take the gateway down, fail refunds with ACQ.SYSTEM_ERROR, refuse them, or
// lose their answers after paying out. Every request it received and every notification it
// sent is kept for assertions, and refunds that moved money are counted.
//
// Where Alipay's documentation says nothing or the behaviour depends on the product, it picks
// one and says so:
//   - A trade exists (query, close and refund see it) once the buyer scans the code or opens
//     the cashier (Scan, Open of a pay URL, or Pay); before that they answer
//     ACQ.TRADE_NOT_EXIST. time_expire is enforced: Pay after it fails and the trade closes.
//   - precreate again with the same out_trade_no, amount and subject gives the same qr_code;
//     with others it is refused (ACQ.CONTEXT_INCONSISTENT); a paid or closed trade is refused
//     (ACQ.TRADE_HAS_SUCCESS, ACQ.TRADE_HAS_CLOSE).
//   - close of a trade that is not waiting for the buyer: ACQ.TRADE_STATUS_ERROR (paid or
//     closed alike).
//   - refund: a second request with the same out_request_no and amount moves no money and
//     answers code 10000 with the first's refund_fee and fund_change "N", as Alipay does (the
//     fastpay refund query then says REFUND_SUCCESS); with another amount it is refused
//     (ACQ.DISCORDANT_REPEAT_REQUEST). A new out_request_no on a fully refunded (closed) trade
//     is refused (ACQ.TRADE_STATUS_ERROR); more than what is left, ACQ.REFUND_AMT_NOT_EQUAL_TOTAL.
//   - A notification is acknowledged when the answer's body, trimmed of white space, is exactly
//     "success", whatever the HTTP status. Resends of one notification keep its notify_id.
//   - Request timestamps are not checked against the clock.
//
// It imports the standard library and the simulators' courier (adapters/lab/paysim/courier).
package alipaysim

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"cardshop/adapters/lab/paysim/courier"
)

// Defaults of Config.
const (
	DefaultAppID       = "9021000122680001"
	DefaultSellerID    = "2088721000000001"
	DefaultMaxAttempts = 5
)

// TimeLayout is Alipay's time format, in China time.
const TimeLayout = "2006-01-02 15:04:05"

// ChinaTime is UTC+8.
var ChinaTime = time.FixedZone("CST", 8*3600)

// Errors of the buyer's actions and the notification senders.
var (
	ErrUnknownTrade    = errors.New("alipaysim: no such trade")
	ErrNotPaid         = errors.New("alipaysim: trade not paid")
	ErrExpired         = errors.New("alipaysim: the trade's time_expire has passed")
	ErrClosed          = errors.New("alipaysim: the trade is closed")
	ErrNoRefund        = errors.New("alipaysim: the trade has no refund")
	ErrNotAcknowledged = errors.New("alipaysim: notification not acknowledged")
	ErrHeld            = errors.New("alipaysim: notification held")
)

// Config configures a simulator. Zero values take the defaults.
type Config struct {
	AppID    string // the application's id; DefaultAppID
	SellerID string // the merchant's Alipay user id; DefaultSellerID
	// MerchantKey is the application's public key: it verifies the requests. Required.
	MerchantKey *rsa.PublicKey
	// AlipayKey is Alipay's key pair; a new 2048-bit one when nil.
	AlipayKey *rsa.PrivateKey
	// MaxAttempts bounds the notifications Pay sends until one is acknowledged.
	MaxAttempts int
	// RetryPause is the pause between attempts (Alipay waits 2m, 10m, 10m, 1h, 2h, 6h, 15h);
	// none by default.
	RetryPause time.Duration
	// Client sends notifications; one with a 5 s timeout by default.
	Client *http.Client
	// Now is Alipay's clock; time.Now by default.
	Now func() time.Time
}

// Trade is a trade as Alipay recorded it. Amounts are in fen.
type Trade struct {
	OutTradeNo string
	TradeNo    string
	Method     string // the API that brought it
	Subject    string
	Total      int64
	NotifyURL  string
	ReturnURL  string
	TimeExpire time.Time // zero when none was given
	QRCode     string
	Exists     bool   // the buyer scanned or opened the cashier: query, close and refund see it
	Status     string // WAIT_BUYER_PAY, TRADE_SUCCESS, TRADE_CLOSED
	Refunded   int64
	Refunds    []Refund
	NotifyID   string // the payment notification's
	GmtCreate  time.Time
	GmtPayment time.Time
	GmtClose   time.Time
}

// Refund is a refund that moved money.
type Refund struct {
	OutRequestNo string
	Amount       int64
	Reason       string
	At           time.Time
	NotifyID     string
}

// Request is a request the gateway received.
type Request struct {
	HTTPMethod string
	Method     string     // the API method
	Params     url.Values // the common parameters and biz_content as sent
	Biz        map[string]any
	// Refused is the answer's sub_code (or code) when it was not a success; "" when served.
	Refused string
	// Payout is true for a refund that moved money.
	Payout bool
}

// Note is one notification of the gateway, signed (or forged) when it was made.
type Note struct {
	OutTradeNo string
	URL        string
	Params     url.Values
	Forged     Forgery
}

// Delivery is one attempt at a notification: sent, lost or queued. Accepted reports whether
// the shop acknowledged it: the trimmed body is exactly "success".
type Delivery = courier.Delivery[Note]

// Forgery is a kind of forged notification.
type Forgery int

// The forgeries.
const (
	NotForged      Forgery = iota
	WrongKey               // signed with another key than Alipay's
	TamperedAmount         // total_amount changed after signing
	OtherAppID             // for another application, genuinely signed by Alipay
	OtherSeller            // for another seller, genuinely signed by Alipay
	Unsigned               // sign and sign_type removed
)

var forgeryNames = map[Forgery]string{NotForged: "genuine", WrongKey: "wrong key", TamperedAmount: "tampered amount",
	OtherAppID: "other app_id", OtherSeller: "other seller_id", Unsigned: "unsigned"}

// String names the forgery.
func (f Forgery) String() string { return forgeryNames[f] }

// Sim is a running simulated gateway. Its methods are safe for concurrent use.
//
// Its courier (embedded) carries the notifications: Retry, SetDelay, Drop, Hold, Held,
// Release, Resend, Deliveries.
type Sim struct {
	*courier.Courier[Note]

	cfg   Config
	srv   *httptest.Server
	wrong *rsa.PrivateKey // for WrongKey, made on first use

	mu           sync.Mutex
	trades       map[string]*Trade // by out_trade_no
	seq          int
	payouts      int
	requests     []Request
	outage       bool
	refundOutage bool
	refuseCode   string
	refuseMsg    string
	loseRefunds  int
}

// New starts a simulator; Close stops it.
func New(cfg Config) (*Sim, error) {
	if cfg.MerchantKey == nil {
		return nil, errors.New("alipaysim: the merchant's public key is required")
	}
	if cfg.AppID == "" {
		cfg.AppID = DefaultAppID
	}
	if cfg.SellerID == "" {
		cfg.SellerID = DefaultSellerID
	}
	if cfg.AlipayKey == nil {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		cfg.AlipayKey = k
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 5 * time.Second}
	}
	s := &Sim{cfg: cfg, trades: map[string]*Trade{}}
	s.Courier = courier.New(courier.Config[Note]{
		Client: cfg.Client,
		Seal: func(n Note, _ int) (courier.Post, error) {
			return courier.Post{Method: http.MethodPost, URL: n.URL, Body: []byte(n.Params.Encode()), Header: http.Header{
				"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}, "User-Agent": {"Mozilla/4.0"}}}, nil
		},
		Acknowledged: func(_ int, reply []byte) bool { return strings.TrimSpace(string(reply)) == "success" },
		Genuine:      func(n Note) bool { return n.Forged == NotForged },
		MaxAttempts:  cfg.MaxAttempts,
		Pause:        cfg.RetryPause,
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/gateway.do", s.gateway)
	mux.HandleFunc("/cashier/", s.cashier)
	s.srv = httptest.NewServer(s.down(mux))
	return s, nil
}

// URL is the gateway's address (…/gateway.do).
func (s *Sim) URL() string { return s.srv.URL + "/gateway.do" }

// AppID is the application's id.
func (s *Sim) AppID() string { return s.cfg.AppID }

// SellerID is the merchant's Alipay user id.
func (s *Sim) SellerID() string { return s.cfg.SellerID }

// PublicKeyPEM is Alipay's public key, PEM "PUBLIC KEY".
func (s *Sim) PublicKeyPEM() string {
	der, _ := x509.MarshalPKIXPublicKey(&s.cfg.AlipayKey.PublicKey)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// Close stops the server.
func (s *Sim) Close() { s.srv.Close() }

// Outage takes the gateway down (every request answers 502) or brings it back.
// Notifications are not affected.
func (s *Sim) Outage(on bool) { s.mu.Lock(); s.outage = on; s.mu.Unlock() }

// RefundOutage makes refunds answer ACQ.SYSTEM_ERROR without doing anything (on) or work again.
func (s *Sim) RefundOutage(on bool) { s.mu.Lock(); s.refundOutage = on; s.mu.Unlock() }

// RefundRefuse makes refunds refused with the business error subCode and subMsg (e.g.
// "ACQ.SELLER_BALANCE_NOT_ENOUGH", "卖家余额不足"), moving no money; "" lets them through.
func (s *Sim) RefundRefuse(subCode, subMsg string) {
	s.mu.Lock()
	s.refuseCode, s.refuseMsg = subCode, subMsg
	s.mu.Unlock()
}

// LoseRefundAnswers makes the next n refunds pay out and then lose the answer (the connection
// is closed before a byte is written), as a timeout does.
func (s *Sim) LoseRefundAnswers(n int) { s.mu.Lock(); s.loseRefunds = n; s.mu.Unlock() }

// Trade returns the trade with that out_trade_no.
func (s *Sim) Trade(outTradeNo string) (Trade, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trades[outTradeNo]
	if !ok {
		return Trade{}, false
	}
	c := *t
	c.Refunds = append([]Refund(nil), t.Refunds...)
	return c, true
}

// Payouts counts the refunds that moved money.
func (s *Sim) Payouts() int { s.mu.Lock(); defer s.mu.Unlock(); return s.payouts }

// Requests lists the requests received, oldest first.
func (s *Sim) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// SigningString is the string an RSA2 signature covers: every parameter but sign (and
// sign_type, for notifications), empty values skipped, sorted by name, "k=v&…" of the raw
// values (the first of each).
func SigningString(p url.Values, notification bool) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		if k == "sign" || (notification && k == "sign_type") || p.Get(k) == "" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + p.Get(k)
	}
	return strings.Join(parts, "&")
}

// Sign is RSA2: base64 of SHA256withRSA of data.
func Sign(key *rsa.PrivateKey, data []byte) string {
	sum := sha256.Sum256(data)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		panic("alipaysim: signing: " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(sig)
}

func verify(pub *rsa.PublicKey, data []byte, sig string) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	sum := sha256.Sum256(data)
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], raw) == nil
}

// Open is the buyer's browser opening a pay URL (page or wap): the gateway checks it, records
// the trade (it exists from now on: the buyer is at the cashier) and shows the cashier. It
// returns the page, or an error for a refusal.
func (s *Sim) Open(ctx context.Context, payURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, payURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	page := string(b)
	if resp.StatusCode != http.StatusOK || strings.Contains(page, `class="error"`) {
		return page, fmt.Errorf("alipaysim: the gateway refused the page (HTTP %d): %s", resp.StatusCode, page)
	}
	return page, nil
}

// Scan is the buyer scanning a precreate code (or logging in at the cashier): the trade exists
// from now on, waiting for the buyer.
func (s *Sim) Scan(outTradeNo string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trades[outTradeNo]
	if !ok {
		return ErrUnknownTrade
	}
	if err := s.expireLocked(t); err != nil {
		return err
	}
	if !t.Exists {
		t.Exists, t.GmtCreate = true, s.cfg.Now()
	}
	return nil
}

// expireLocked closes a waiting trade whose time_expire has passed.
func (s *Sim) expireLocked(t *Trade) error {
	if t.Status == "TRADE_CLOSED" {
		return ErrClosed
	}
	if t.Status == "WAIT_BUYER_PAY" && !t.TimeExpire.IsZero() && !s.cfg.Now().Before(t.TimeExpire) {
		if t.Exists {
			t.Status, t.GmtClose = "TRADE_CLOSED", s.cfg.Now()
		}
		return ErrExpired
	}
	return nil
}

// Pay is the buyer paying: the trade is paid (ErrExpired after its time_expire, ErrClosed
// when closed) and its TRADE_SUCCESS notification sent until the shop acknowledges it, at most
// MaxAttempts times (once when Retry is off). Paying a paid trade sends its notification again.
func (s *Sim) Pay(ctx context.Context, outTradeNo string) error {
	s.mu.Lock()
	t, ok := s.trades[outTradeNo]
	if !ok {
		s.mu.Unlock()
		return ErrUnknownTrade
	}
	if t.Status == "WAIT_BUYER_PAY" {
		if err := s.expireLocked(t); err != nil {
			s.mu.Unlock()
			return err
		}
		now := s.cfg.Now()
		if !t.Exists {
			t.Exists, t.GmtCreate = true, now
		}
		t.Status, t.GmtPayment, t.NotifyID = "TRADE_SUCCESS", now, s.notifyIDLocked()
	} else if t.Status == "TRADE_CLOSED" && t.GmtPayment.IsZero() {
		s.mu.Unlock()
		return ErrClosed
	}
	snap := *t
	s.mu.Unlock()
	return s.untilAcknowledged(ctx, s.notification(snap, "TRADE_SUCCESS", snap.NotifyID, nil, NotForged))
}

// untilAcknowledged sends n until the shop acknowledges it, as the courier's Retry says.
func (s *Sim) untilAcknowledged(ctx context.Context, n Note) error {
	ds := s.Send(ctx, n)
	last := ds[len(ds)-1]
	switch {
	case last.Held:
		return ErrHeld
	case last.Accepted():
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("%w after %d attempts: last answer %d %q, %v", ErrNotAcknowledged, len(ds), last.Status, last.Reply, last.Err)
}

// Renotify sends a paid trade's notification once more (same notify_id), as Alipay's resends
// do.
func (s *Sim) Renotify(ctx context.Context, outTradeNo string) (Delivery, error) {
	t, err := s.snapshot(outTradeNo)
	if err != nil {
		return Delivery{}, err
	}
	if t.GmtPayment.IsZero() {
		return Delivery{}, ErrNotPaid
	}
	return s.send(ctx, s.notification(t, "TRADE_SUCCESS", t.NotifyID, nil, NotForged))
}

// Notify sends a genuine notification of the trade with trade_status (WAIT_BUYER_PAY,
// TRADE_CLOSED, TRADE_FINISHED, or anything else) and a new notify_id, once.
func (s *Sim) Notify(ctx context.Context, outTradeNo, tradeStatus string) (Delivery, error) {
	t, err := s.snapshot(outTradeNo)
	if err != nil {
		return Delivery{}, err
	}
	s.mu.Lock()
	id := s.notifyIDLocked()
	s.mu.Unlock()
	return s.send(ctx, s.notification(t, tradeStatus, id, nil, NotForged))
}

// NotifyRefund sends the notification of the trade's last refund (trade_status TRADE_CLOSED
// after a full refund, TRADE_SUCCESS after a partial one; out_biz_no, refund_fee, gmt_refund)
// until the shop acknowledges it.
func (s *Sim) NotifyRefund(ctx context.Context, outTradeNo string) error {
	t, err := s.snapshot(outTradeNo)
	if err != nil {
		return err
	}
	if len(t.Refunds) == 0 {
		return ErrNoRefund
	}
	r := t.Refunds[len(t.Refunds)-1]
	return s.untilAcknowledged(ctx, s.notification(t, t.Status, r.NotifyID, &r, NotForged))
}

// Forge sends a forged TRADE_SUCCESS notification of the trade (paid or not), once.
func (s *Sim) Forge(ctx context.Context, outTradeNo string, f Forgery) (Delivery, error) {
	t, err := s.snapshot(outTradeNo)
	if err != nil {
		return Delivery{}, err
	}
	s.mu.Lock()
	id := s.notifyIDLocked()
	if t.TradeNo == "" {
		t.TradeNo = s.tradeNoLocked()
	}
	s.mu.Unlock()
	if t.GmtPayment.IsZero() {
		t.GmtPayment = s.cfg.Now()
	}
	return s.send(ctx, s.notification(t, "TRADE_SUCCESS", id, nil, f))
}

// Deliver POSTs params as a notification to notifyURL, as they are (sign them with
// SignNotification first for a genuine one).
func (s *Sim) Deliver(ctx context.Context, notifyURL string, params url.Values) (Delivery, error) {
	return s.send(ctx, Note{OutTradeNo: params.Get("out_trade_no"), URL: notifyURL, Params: params})
}

// SignNotification sets sign_type and sign on params with Alipay's key.
func (s *Sim) SignNotification(params url.Values) {
	params.Del("sign")
	params.Set("sign_type", "RSA2")
	params.Set("sign", Sign(s.cfg.AlipayKey, []byte(SigningString(params, true))))
}

func (s *Sim) send(ctx context.Context, n Note) (Delivery, error) {
	d := s.SendOnce(ctx, n)
	if d.Held {
		return d, ErrHeld
	}
	return d, nil
}

func (s *Sim) snapshot(outTradeNo string) (Trade, error) {
	t, ok := s.Trade(outTradeNo)
	if !ok {
		return Trade{}, ErrUnknownTrade
	}
	return t, nil
}

func (s *Sim) notifyIDLocked() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "gt"
}

func (s *Sim) tradeNoLocked() string {
	s.seq++
	return fmt.Sprintf("%s22001%012d", s.cfg.Now().In(ChinaTime).Format("20060102"), s.seq)
}

// notification builds the trade's notification with trade_status, forged as f says; with a
// refund, the refund's fields.
func (s *Sim) notification(t Trade, status, notifyID string, r *Refund, f Forgery) Note {
	now := s.cfg.Now()
	amount := yuan(t.Total)
	p := url.Values{
		"notify_time":      {now.In(ChinaTime).Format(TimeLayout)},
		"notify_type":      {"trade_status_sync"},
		"notify_id":        {notifyID},
		"app_id":           {s.cfg.AppID},
		"auth_app_id":      {s.cfg.AppID},
		"charset":          {"utf-8"},
		"version":          {"1.0"},
		"trade_no":         {t.TradeNo},
		"out_trade_no":     {t.OutTradeNo},
		"buyer_id":         {"2088102177846880"},
		"seller_id":        {s.cfg.SellerID},
		"trade_status":     {status},
		"total_amount":     {amount},
		"receipt_amount":   {amount},
		"invoice_amount":   {amount},
		"buyer_pay_amount": {amount},
		"point_amount":     {"0.00"},
		"subject":          {t.Subject},
		"fund_bill_list":   {`[{"amount":"` + amount + `","fundChannel":"ALIPAYACCOUNT"}]`},
	}
	if !t.GmtCreate.IsZero() {
		p.Set("gmt_create", t.GmtCreate.In(ChinaTime).Format(TimeLayout))
	}
	if !t.GmtPayment.IsZero() {
		p.Set("gmt_payment", t.GmtPayment.In(ChinaTime).Format(TimeLayout))
	}
	if status == "TRADE_CLOSED" {
		gc := t.GmtClose
		if gc.IsZero() {
			gc = now
		}
		p.Set("gmt_close", gc.In(ChinaTime).Format(TimeLayout))
	}
	if r != nil {
		p.Set("out_biz_no", r.OutRequestNo)
		p.Set("refund_fee", yuan(t.Refunded))
		p.Set("gmt_refund", r.At.In(ChinaTime).Format(TimeLayout)+".000")
	}
	key := s.cfg.AlipayKey
	switch f {
	case WrongKey:
		key = s.wrongKey()
	case OtherAppID:
		p.Set("app_id", "9021000199990009")
		p.Set("auth_app_id", "9021000199990009")
	case OtherSeller:
		p.Set("seller_id", "2088999999999999")
	default: // not forged, or forged after signing
	}
	p.Set("sign_type", "RSA2")
	p.Set("sign", Sign(key, []byte(SigningString(p, true))))
	switch f {
	case TamperedAmount:
		p.Set("total_amount", "0.01")
		if amount == "0.01" {
			p.Set("total_amount", "0.02")
		}
	case Unsigned:
		p.Del("sign")
		p.Del("sign_type")
	default: // not forged, or forged before signing
	}
	return Note{OutTradeNo: t.OutTradeNo, URL: t.NotifyURL, Params: p, Forged: f}
}

func (s *Sim) wrongKey() *rsa.PrivateKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrong == nil {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		s.wrong = k
	}
	return s.wrong
}

// yuan formats fen as Alipay does: yuan with 2 decimals.
func yuan(fen int64) string { return fmt.Sprintf("%d.%02d", fen/100, fen%100) }
