// Package epaysim is a simulator of an epay v1 (易支付, "彩虹易支付") gateway, for tests: an
// httptest server with submit.php, mapi.php, api.php?act=order, api.php?act=refund and a
// cashier page, which
// checks and makes signatures the way the gateways do (parameters but sign, sign_type and
// empty values, sorted, "k=v&…" raw, the KEY appended directly or as "&key=KEY", MD5,
// lower-case hex). Pay sends the signed notification to the order's notify_url by GET and
// resends until the body of the answer is "success", as gateways do; switches resend,
// reorder, delay, drop and forge notifications, and take the gateway down. Every request it
// received and every notification it sent is kept for assertions.
//
// Where the gateways differ or say nothing, it picks one behaviour and says so: submitting an
// order number again with the same money, name and notify_url gives the same trade_no, with
// anything else it is refused; api.php answers code as a number and every other field as a
// string (PHP reading MySQL); a notification is acknowledged when the trimmed body is exactly
// "success", whatever the HTTP status.
//
// Refunds follow the upstream source: act in the URL, pid, key, trade_no or out_trade_no and
// money in the POST body; only a paid order (status 1) is refunded, at most its money, and the
// order becomes status 2 (refunded), so a second refund is refused ("只支持退款已支付状态的订单").
// The success code is 1 (RefundCodeZero: 0, as upstream). Switches: RefundsOff, RefundRefuse,
// LoseRefundReplies, RefundGap (a check and a payout that are not atomic); Payouts counts the
// refunds carried out. RefundInConsole is the merchant's
// refund in the gateway's console (status 2, no notification); Freeze the gateway's operator
// freezing a paid order (status 3) or releasing it (status 1). api.php?act=order answers the
// status as upstream does: 0 unpaid, 1 paid, 2 refunded, 3 frozen.
//
// It imports the standard library and the simulators' courier (adapters/lab/paysim/courier).
package epaysim

import (
	"context"
	"crypto/md5"
	"crypto/subtle"
	"encoding/hex"
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
	DefaultPID         = "1001"
	DefaultKey         = "sim8KEY4epay0merchant2sign6md5x9" // 32 characters, as gateways issue
	DefaultMaxAttempts = 5
)

// Errors of the notification senders.
var (
	// ErrUnknownOrder means the gateway has no order with that out_trade_no (the buyer never
	// opened the redirect, or mapi.php was never called).
	ErrUnknownOrder = errors.New("epaysim: no such order")
	// ErrNotPaid means a resend was asked for an order that was never paid.
	ErrNotPaid = errors.New("epaysim: order not paid")
	// ErrNotAcknowledged means the shop never answered "success" within the attempts.
	ErrNotAcknowledged = errors.New("epaysim: notification not acknowledged")
	// ErrHeld means the notification was queued (Hold is on): Release sends it.
	ErrHeld = errors.New("epaysim: notification held")
)

// Config configures a simulator. Zero values take the defaults.
type Config struct {
	PID    string // the merchant id; DefaultPID
	Key    string // the merchant KEY; DefaultKey
	AmpKey bool   // sign with "&key=KEY" instead of appending the KEY directly
	// MaxAttempts bounds the notifications Pay sends until one is acknowledged; DefaultMaxAttempts.
	MaxAttempts int
	// RetryPause is the pause between Pay's attempts (real gateways wait 15 s, 15 s, 30 s, 3 min,
	// 30 min…); none by default.
	RetryPause time.Duration
	// Answer is what mapi.php gives the buyer: "payurl", "qrcode" or "urlscheme"; by default
	// qrcode for wxpay and payurl for the others.
	Answer string
	// Client sends notifications; one with a 5 s timeout by default.
	Client *http.Client
	// Now is the gateway's clock; time.Now by default.
	Now func() time.Time
	// RefundCodeZero answers a successful refund with code 0, as the upstream 彩虹易支付 source
	// does; by default code 1, as the gateways built on it document.
	RefundCodeZero bool
}

// Order is an order as the gateway recorded it.
type Order struct {
	TradeNo    string
	OutTradeNo string
	PID        string
	Type       string
	Name       string
	Money      string // as the gateway stores it: yuan with 2 decimals
	NotifyURL  string
	ReturnURL  string
	Param      string
	ClientIP   string
	Via        string // "submit.php" or "mapi.php"
	Paid       bool
	Refunded   bool   // refunded (status 2): no longer paid, never refunded again
	RefundedBy string // the money refunded
	Frozen     bool   // frozen by the gateway's operator (status 3, while paid and not refunded)
	AddTime    time.Time
	EndTime    time.Time // when paid
}

// Request is a request the gateway received.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Form   url.Values // the body's form (POST)
	// Refused is the gateway's error message ("签名校验失败！", …); "" when it was served.
	Refused string
}

// Note is one notification of the gateway, signed (or forged) when it was made.
type Note struct {
	OutTradeNo string
	URL        string     // notify_url with the parameters appended
	Params     url.Values // what was sent, signed or not
	Forged     Forgery    // NotForged for a genuine one
}

// Delivery is one attempt at a notification: sent, lost or queued. Accepted reports whether
// the shop acknowledged it: it answered, and the trimmed body is exactly "success".
type Delivery = courier.Delivery[Note]

// Forgery is a kind of forged notification.
type Forgery int

// The forgeries.
const (
	NotForged     Forgery = iota
	WrongKey              // signed with another KEY
	TamperedMoney         // money changed after signing
	OtherPID              // pid of another merchant, signed again with this merchant's KEY
	Unsigned              // sign and sign_type removed
)

var forgeryNames = map[Forgery]string{NotForged: "genuine", WrongKey: "wrong key",
	TamperedMoney: "tampered money", OtherPID: "other pid", Unsigned: "unsigned"}

// String names the forgery.
func (f Forgery) String() string { return forgeryNames[f] }

// Sim is a running simulated gateway. Its methods are safe for concurrent use.
//
// Its courier (embedded) carries the notifications: Retry, SetDelay, Drop, Hold, Held,
// Release, Resend, Deliveries.
type Sim struct {
	*courier.Courier[Note]

	cfg Config
	srv *httptest.Server

	mu         sync.Mutex
	orders     map[string]*Order // by out_trade_no
	byTradeNo  map[string]string // trade_no → out_trade_no
	seq        int
	requests   []Request
	outage     bool
	refundsOff bool
	refusal    string
	loseRefund int
	refundGap  time.Duration
	payouts    map[string]int // out_trade_no → refunds carried out
}

// New starts a simulator; Close stops it.
func New(cfg Config) *Sim {
	if cfg.PID == "" {
		cfg.PID = DefaultPID
	}
	if cfg.Key == "" {
		cfg.Key = DefaultKey
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
	s := &Sim{cfg: cfg, orders: map[string]*Order{}, byTradeNo: map[string]string{}, payouts: map[string]int{}}
	s.Courier = courier.New(courier.Config[Note]{
		Client: cfg.Client,
		Seal: func(n Note, _ int) (courier.Post, error) {
			return courier.Post{Method: http.MethodGet, URL: n.URL, Header: http.Header{"User-Agent": {"epaysim"}}}, nil
		},
		Acknowledged: func(_ int, reply []byte) bool { return strings.TrimSpace(string(reply)) == "success" },
		Genuine:      func(n Note) bool { return n.Forged == NotForged },
		MaxAttempts:  cfg.MaxAttempts,
		Pause:        cfg.RetryPause,
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/submit.php", s.submit)
	mux.HandleFunc("/mapi.php", s.mapi)
	mux.HandleFunc("/api.php", s.api)
	mux.HandleFunc("/pay/", s.cashier)
	s.srv = httptest.NewServer(s.down(mux))
	return s
}

// URL is the gateway's base URL (submit.php and the others are under it).
func (s *Sim) URL() string { return s.srv.URL }

// PID is the merchant id.
func (s *Sim) PID() string { return s.cfg.PID }

// Key is the merchant KEY.
func (s *Sim) Key() string { return s.cfg.Key }

// Close stops the server.
func (s *Sim) Close() { s.srv.Close() }

// Outage takes the gateway down (every endpoint answers 502) or brings it back.
// Notifications are not affected.
func (s *Sim) Outage(on bool) { s.mu.Lock(); s.outage = on; s.mu.Unlock() }

// RefundsOff makes api.php?act=refund answer that the merchant's refund API is not enabled (on),
// as a gateway whose operator has not turned it on does.
func (s *Sim) RefundsOff(on bool) { s.mu.Lock(); s.refundsOff = on; s.mu.Unlock() }

// RefundRefuse makes refunds fail at the payment channel with this message ("" serves them
// again): the answer is code -1 "退款失败：" + msg and the order stays paid.
func (s *Sim) RefundRefuse(msg string) { s.mu.Lock(); s.refusal = msg; s.mu.Unlock() }

// LoseRefundReplies makes the next n refunds take effect and then close the connection without
// an answer: a refund carried out whose answer never arrives.
func (s *Sim) LoseRefundReplies(n int) { s.mu.Lock(); s.loseRefund = n; s.mu.Unlock() }

// RefundInConsole is the merchant refunding a paid order in the gateway's console: the money
// goes back (a payout), the order becomes status 2, and no notification tells the shop.
func (s *Sim) RefundInConsole(outTradeNo string) error {
	return s.withPaid(outTradeNo, func(o *Order) {
		o.Refunded, o.RefundedBy = true, o.Money
		s.payouts[outTradeNo]++
	})
}

// Freeze is the gateway's operator freezing a paid order (on: status 3, as a dispute or a risk
// check does) or releasing it (off: status 1 again). No notification tells the shop.
func (s *Sim) Freeze(outTradeNo string, on bool) error {
	return s.withPaid(outTradeNo, func(o *Order) { o.Frozen = on })
}

// withPaid runs change on a paid, unrefunded order under the lock: ErrUnknownOrder or
// ErrNotPaid otherwise.
func (s *Sim) withPaid(outTradeNo string, change func(o *Order)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[outTradeNo]
	switch {
	case !ok:
		return ErrUnknownOrder
	case !o.Paid || o.Refunded:
		return ErrNotPaid
	}
	change(o)
	return nil
}

// RefundGap makes a refund check the order (paid, not refunded), then wait d before it pays
// out, without checking again: a gateway whose check and payout are not one atomic step, so
// two refunds of one order within d both pay out. 0 (the default) makes them atomic again.
func (s *Sim) RefundGap(d time.Duration) { s.mu.Lock(); s.refundGap = d; s.mu.Unlock() }

// Payouts is how many refunds of the order were carried out: the times its money went back.
func (s *Sim) Payouts(outTradeNo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.payouts[outTradeNo]
}

// Order returns the order with that out_trade_no.
func (s *Sim) Order(outTradeNo string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[outTradeNo]
	if !ok {
		return Order{}, false
	}
	return *o, true
}

// Orders lists the orders, by trade_no.
func (s *Sim) Orders() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Order, 0, len(s.orders))
	for _, o := range s.orders {
		out = append(out, *o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TradeNo < out[j].TradeNo })
	return out
}

// Requests lists the requests received, oldest first.
func (s *Sim) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Sign signs params as the gateway does with its KEY and variant.
func (s *Sim) Sign(params url.Values) string { return Sign(params, s.cfg.Key, s.cfg.AmpKey) }

// Sign signs params as epay does: every parameter but sign, sign_type and empty values (the
// first value of each), sorted by key, "k=v&…" with the raw values, the KEY appended (or
// "&key=KEY" when ampKey), MD5, lower-case hex.
func Sign(params url.Values, key string, ampKey bool) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if k != "sign" && k != "sign_type" && params.Get(k) != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + params.Get(k)
	}
	str := strings.Join(parts, "&")
	if ampKey {
		str += "&key="
	}
	sum := md5.Sum([]byte(str + key))
	return hex.EncodeToString(sum[:])
}

// Open is the buyer's browser opening a pay URL (the redirect to submit.php, or mapi.php's
// payurl): it returns the page, or an error for a refusal.
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
		return page, fmt.Errorf("epaysim: the gateway refused the page (HTTP %d): %s", resp.StatusCode, page)
	}
	return page, nil
}

// Pay is the buyer paying: the order is marked paid and its TRADE_SUCCESS notification sent
// until the shop acknowledges it, at most MaxAttempts times (once when Retry is off). Paying
// a paid order sends its notification again.
func (s *Sim) Pay(ctx context.Context, outTradeNo string) error {
	s.mu.Lock()
	o, ok := s.orders[outTradeNo]
	if !ok {
		s.mu.Unlock()
		return ErrUnknownOrder
	}
	if !o.Paid {
		o.Paid, o.EndTime = true, s.cfg.Now()
	}
	snap := *o
	s.mu.Unlock()
	return s.acknowledged(ctx, s.Send(ctx, s.notification(snap, "TRADE_SUCCESS", NotForged)))
}

// acknowledged is Pay's answer once the courier's attempts ds are over.
func (s *Sim) acknowledged(ctx context.Context, ds []Delivery) error {
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

// Renotify sends a paid order's notification once more, as a merchant's "re-notify" button or
// a gateway's late retry does.
func (s *Sim) Renotify(ctx context.Context, outTradeNo string) (Delivery, error) {
	o, err := s.snapshot(outTradeNo)
	if err != nil {
		return Delivery{}, err
	}
	if !o.Paid {
		return Delivery{}, ErrNotPaid
	}
	return s.send(ctx, s.notification(o, "TRADE_SUCCESS", NotForged))
}

// Notify sends a correctly signed notification of the order with another trade_status. Real
// epay v1 gateways only send TRADE_SUCCESS; this is for the shop's handling of anything else.
func (s *Sim) Notify(ctx context.Context, outTradeNo, tradeStatus string) (Delivery, error) {
	o, err := s.snapshot(outTradeNo)
	if err != nil {
		return Delivery{}, err
	}
	return s.send(ctx, s.notification(o, tradeStatus, NotForged))
}

// Forge sends a forged TRADE_SUCCESS notification of the order (paid or not).
func (s *Sim) Forge(ctx context.Context, outTradeNo string, f Forgery) (Delivery, error) {
	o, err := s.snapshot(outTradeNo)
	if err != nil {
		return Delivery{}, err
	}
	return s.send(ctx, s.notification(o, "TRADE_SUCCESS", f))
}

// Deliver sends params as a notification to notifyURL by GET, as they are (sign them with
// Sign first for a genuine one).
func (s *Sim) Deliver(ctx context.Context, notifyURL string, params url.Values) (Delivery, error) {
	return s.send(ctx, Note{OutTradeNo: params.Get("out_trade_no"), URL: withQuery(notifyURL, params), Params: params})
}

func (s *Sim) send(ctx context.Context, n Note) (Delivery, error) {
	d := s.SendOnce(ctx, n)
	if d.Held {
		return d, ErrHeld
	}
	return d, nil
}

func (s *Sim) snapshot(outTradeNo string) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[outTradeNo]
	if !ok {
		return Order{}, ErrUnknownOrder
	}
	return *o, nil
}

// notification builds the order's notification with trade_status, forged as f says.
func (s *Sim) notification(o Order, status string, f Forgery) Note {
	p := url.Values{
		"pid":          {o.PID},
		"trade_no":     {o.TradeNo},
		"out_trade_no": {o.OutTradeNo},
		"type":         {o.Type},
		"name":         {o.Name},
		"money":        {o.Money},
		"trade_status": {status},
	}
	if o.Param != "" {
		p.Set("param", o.Param)
	}
	key := s.cfg.Key
	switch f {
	case WrongKey:
		key = "wrong-" + key
	case OtherPID:
		p.Set("pid", s.cfg.PID+"9")
	default: // not forged, or forged after signing
	}
	p.Set("sign", Sign(p, key, s.cfg.AmpKey))
	p.Set("sign_type", "MD5")
	switch f {
	case TamperedMoney:
		p.Set("money", "0.01")
		if o.Money == "0.01" {
			p.Set("money", "0.02")
		}
	case Unsigned:
		p.Del("sign")
		p.Del("sign_type")
	default: // not forged, or forged before signing
	}
	return Note{OutTradeNo: o.OutTradeNo, URL: withQuery(o.NotifyURL, p), Params: p, Forged: f}
}

// withQuery appends params to u as gateways do: after "?", or "&" when u has a query.
func withQuery(u string, params url.Values) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + params.Encode()
}

// validKey compares a KEY from a request in constant time.
func (s *Sim) validKey(k string) bool {
	return subtle.ConstantTimeCompare([]byte(k), []byte(s.cfg.Key)) == 1
}
