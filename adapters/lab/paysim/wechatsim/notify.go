package wechatsim

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// The event types the simulator sends.
const (
	EventTransactionSuccess = "TRANSACTION.SUCCESS"
	EventRefundSuccess      = "REFUND.SUCCESS"
	EventRefundAbnormal     = "REFUND.ABNORMAL"
	EventRefundClosed       = "REFUND.CLOSED"
)

// Notification is one notification: Plain is the resource before encryption, Body the exact
// JSON WeChat Pay sends.
type Notification struct {
	ID          string
	EventType   string
	OrderNo     string
	OutRefundNo string
	URL         string
	Plain       []byte
	Body        []byte
}

// Forgery is how a delivery departs from WeChat Pay's.
type Forgery int

// The forgeries.
const (
	Genuine         Forgery = iota
	WrongKey                // signed under the genuine serial by a key that is not WeChat Pay's
	UnknownSerial           // genuine signature, Wechatpay-Serial of a key the merchant does not have
	StaleTimestamp          // correctly signed five minutes ago
	FutureTimestamp         // correctly signed five minutes ahead
	Unsigned                // no Wechatpay-Signature
	OtherMerchant           // the resource's mchid changed, re-encrypted, and signed correctly
	OtherApp                // the resource's appid changed, re-encrypted, and signed correctly
	TamperedAmount          // amount.total raised by 1 fen and re-encrypted correctly; the signature is the original body's
	BadCiphertext           // a ciphertext byte flipped, signed correctly
)

// Delivery is one POST of a notification (or one notification dropped).
type Delivery struct {
	ID        string
	EventType string
	OrderNo   string
	Forgery   Forgery
	Attempt   int  // 1 for the first POST of a delivery, then the retries
	Dropped   bool // never sent (Drop)
	Status    int  // the receiver's answer; 0 when none
	Reply     []byte
	Err       error
}

// Accepted reports whether the receiver answered 2xx, which is what WeChat Pay counts as
// received.
func (d Delivery) Accepted() bool { return d.Status >= 200 && d.Status < 300 }

// Encrypt is AEAD_AES_256_GCM as WeChat Pay applies it to a resource: AES-256-GCM under the
// API v3 key with a 12-byte nonce, the tag appended, base64.
func Encrypt(v3key, nonce, associatedData string, plain []byte) (string, error) {
	block, err := aes.NewCipher([]byte(v3key))
	if err != nil {
		return "", err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return "", err
	}
	if len(nonce) != gcm.NonceSize() {
		return "", errors.New("wechatsim: the nonce must be 12 bytes")
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plain, []byte(associatedData))), nil
}

// envelope is the JSON of a notification.
type envelope struct {
	ID           string   `json:"id"`
	CreateTime   string   `json:"create_time"`
	ResourceType string   `json:"resource_type"`
	EventType    string   `json:"event_type"`
	Summary      string   `json:"summary"`
	Resource     resource `json:"resource"`
}

type resource struct {
	OriginalType   string `json:"original_type"`
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	AssociatedData string `json:"associated_data"`
	Nonce          string `json:"nonce"`
}

// Seal builds the body of a notification of eventType carrying plain, encrypted under v3key.
func Seal(v3key, id, eventType, summary, originalType string, created time.Time, plain []byte) ([]byte, error) {
	nonce := letters(12)
	ct, err := Encrypt(v3key, nonce, originalType, plain)
	if err != nil {
		return nil, err
	}
	return json.Marshal(envelope{ID: id, CreateTime: created.In(china).Format(time.RFC3339), ResourceType: "encrypt-resource",
		EventType: eventType, Summary: summary,
		Resource: resource{OriginalType: originalType, Algorithm: "AEAD_AES_256_GCM", Ciphertext: ct, AssociatedData: originalType, Nonce: nonce}})
}

// notification builds a notification; under s.mu.
func (s *Server) notification(eventType, summary, originalType, target, orderNo, refundNo string, plain []byte) Notification {
	id := uuid()
	body, err := Seal(s.opts.APIv3Key, id, eventType, summary, originalType, s.clock.Now(), plain)
	if err != nil {
		panic(err)
	}
	return Notification{ID: id, EventType: eventType, OrderNo: orderNo, OutRefundNo: refundNo, URL: target, Plain: plain, Body: body}
}

func (s *Server) transactionNotification(o *Order) Notification {
	plain, _ := json.Marshal(s.transaction(o))
	return s.notification(EventTransactionSuccess, "支付成功", "transaction", o.NotifyURL, o.OutTradeNo, "", plain)
}

func (s *Server) refundNotification(r *Refund) Notification {
	o := s.orders[r.OutTradeNo]
	plain, _ := json.Marshal(map[string]any{"mchid": s.opts.MchID, "out_trade_no": r.OutTradeNo, "transaction_id": o.TransactionID,
		"out_refund_no": r.OutRefundNo, "refund_id": r.RefundID, "refund_status": r.Status,
		"success_time": s.clock.Now().In(china).Format(time.RFC3339), "user_received_account": "支付用户零钱",
		"amount": map[string]int64{"total": r.Total, "refund": r.Refund, "payer_total": r.Total, "payer_refund": r.Refund}})
	target := r.NotifyURL
	if target == "" {
		target = s.refundNotify
	}
	return s.notification("REFUND."+r.Status, "退款成功", "refund", target, r.OutTradeNo, r.OutRefundNo, plain)
}

// ErrState means the order or refund is not in a state that allows the change.
var ErrState = errors.New("wechatsim: no order or refund in a state that allows this")

// Pay has the buyer pay the order (NOTPAY, not expired) and delivers TRANSACTION.SUCCESS.
func (s *Server) Pay(ctx context.Context, orderNo string) ([]Delivery, error) {
	n, err := s.PayNotification(orderNo)
	if err != nil {
		return nil, err
	}
	return s.emit(ctx, n), nil
}

// PayNotification has the buyer pay the order and returns its notification without sending it.
func (s *Server) PayNotification(orderNo string) (Notification, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderNo]
	if ok {
		s.lapse(o)
	}
	if !ok || o.TradeState != "NOTPAY" {
		return Notification{}, fmt.Errorf("%w (pay order %s)", ErrState, orderNo)
	}
	o.TradeState, o.TransactionID, o.SuccessTime = "SUCCESS", "42000"+digits(23), s.clock.Now()
	return s.transactionNotification(o), nil
}

// FailPayment marks the order's payment failed (PAYERROR): WeChat Pay sends no notification
// for it, a query tells.
func (s *Server) FailPayment(orderNo string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderNo]
	if !ok || o.TradeState != "NOTPAY" {
		return fmt.Errorf("%w (fail order %s)", ErrState, orderNo)
	}
	o.TradeState = "PAYERROR"
	return nil
}

// CompleteRefund ends a PROCESSING refund with status (SUCCESS, CLOSED or ABNORMAL) and
// delivers its REFUND.<status> notification.
func (s *Server) CompleteRefund(ctx context.Context, outRefundNo, status string) ([]Delivery, error) {
	s.mu.Lock()
	r, ok := s.refunds[outRefundNo]
	if !ok || r.Status != "PROCESSING" || (status != "SUCCESS" && status != "CLOSED" && status != "ABNORMAL") {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w (refund %s to %s)", ErrState, outRefundNo, status)
	}
	r.Status = status
	n := s.refundNotification(r)
	s.mu.Unlock()
	return s.emit(ctx, n), nil
}

// emit sends n as the switches say: held, dropped, or delivered.
func (s *Server) emit(ctx context.Context, n Notification) []Delivery {
	s.mu.Lock()
	if s.hold {
		s.held = append(s.held, n)
		s.mu.Unlock()
		return nil
	}
	if s.drop > 0 {
		s.drop--
		d := Delivery{ID: n.ID, EventType: n.EventType, OrderNo: n.OrderNo, Dropped: true}
		s.deliveries = append(s.deliveries, d)
		s.mu.Unlock()
		return []Delivery{d}
	}
	s.mu.Unlock()
	return s.Deliver(ctx, n, Genuine)
}

// Drop makes the next n notifications vanish.
func (s *Server) Drop(n int) { s.set(func() { s.drop = n }) }

// SetDelay makes every POST wait d (or until its context ends).
func (s *Server) SetDelay(d time.Duration) { s.set(func() { s.delay = d }) }

// Hold queues notifications (on) instead of sending them; Release sends them.
func (s *Server) Hold(on bool) { s.set(func() { s.hold = on }) }

// Held returns the queued notifications, oldest first.
func (s *Server) Held() []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Notification(nil), s.held...)
}

// Release delivers the held notifications in queue order, or in the order of the given
// indexes into Held() (an index may repeat; one left out stays held).
func (s *Server) Release(ctx context.Context, order ...int) []Delivery {
	s.mu.Lock()
	held := s.held
	if order == nil {
		for i := range held {
			order = append(order, i)
		}
	}
	sent := map[int]bool{}
	for _, i := range order {
		sent[i] = true
	}
	var rest []Notification
	for i, n := range held {
		if !sent[i] {
			rest = append(rest, n)
		}
	}
	s.held = rest
	s.mu.Unlock()
	var out []Delivery
	for _, i := range order {
		if i >= 0 && i < len(held) {
			out = append(out, s.Deliver(ctx, held[i], Genuine)...)
		}
	}
	return out
}

// Flush sends the notifications API calls caused (a refund answered SUCCESS at once).
func (s *Server) Flush(ctx context.Context) []Delivery {
	s.mu.Lock()
	box := s.outbox
	s.outbox = nil
	s.mu.Unlock()
	var out []Delivery
	for _, n := range box {
		out = append(out, s.emit(ctx, n)...)
	}
	return out
}

// Resend delivers the last genuinely delivered notification n more times, re-signed.
func (s *Server) Resend(ctx context.Context, n int) ([]Delivery, error) {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if last == nil {
		return nil, errors.New("wechatsim: no notification delivered yet")
	}
	var out []Delivery
	for range n {
		out = append(out, s.Deliver(ctx, *last, Genuine)...)
	}
	return out, nil
}

// Deliveries returns every POST (and drop) so far, oldest first.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

var (
	rogueOnce sync.Once
	rogueKey  *rsa.PrivateKey
)

// rogue is a key that is not WeChat Pay's, made once.
func rogue() *rsa.PrivateKey {
	rogueOnce.Do(func() {
		var err error
		if rogueKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return rogueKey
}

// Deliver POSTs n to its URL now, forged as f says, re-signed and retried until a 2xx at most
// MaxAttempts times, and returns the attempts.
func (s *Server) Deliver(ctx context.Context, n Notification, f Forgery) []Delivery {
	s.mu.Lock()
	if f == Genuine {
		c := n
		s.last = &c
	}
	attempts := s.opts.MaxAttempts
	s.mu.Unlock()
	var out []Delivery
	for a := 1; a <= attempts; a++ {
		d := s.post(ctx, n, f)
		d.Attempt = a
		out = append(out, d)
		s.mu.Lock()
		s.deliveries = append(s.deliveries, d)
		s.mu.Unlock()
		if d.Accepted() || ctx.Err() != nil {
			break
		}
	}
	return out
}

// forge returns the body to send and the body to sign for f.
func (s *Server) forge(n Notification, f Forgery) (send, signed []byte) {
	reseal := func(edit func(map[string]any)) []byte {
		var plain map[string]any
		_ = json.Unmarshal(n.Plain, &plain)
		edit(plain)
		p, _ := json.Marshal(plain)
		var env envelope
		_ = json.Unmarshal(n.Body, &env)
		b, err := Seal(s.opts.APIv3Key, env.ID, env.EventType, env.Summary, env.Resource.OriginalType, s.clock.Now(), p)
		if err != nil {
			panic(err)
		}
		return b
	}
	switch f {
	case OtherMerchant:
		b := reseal(func(p map[string]any) { p["mchid"] = NewMchID() })
		return b, b
	case OtherApp:
		b := reseal(func(p map[string]any) { p["appid"] = NewAppID() })
		return b, b
	case TamperedAmount:
		b := reseal(func(p map[string]any) {
			if a, ok := p["amount"].(map[string]any); ok {
				for _, k := range []string{"total", "payer_total", "refund", "payer_refund"} {
					if v, ok := a[k].(float64); ok {
						a[k] = v + 1
					}
				}
			}
		})
		return b, n.Body
	case BadCiphertext:
		var env envelope
		_ = json.Unmarshal(n.Body, &env)
		ct, _ := base64.StdEncoding.DecodeString(env.Resource.Ciphertext)
		if len(ct) > 0 {
			ct[0] ^= 1
		}
		env.Resource.Ciphertext = base64.StdEncoding.EncodeToString(ct)
		b, _ := json.Marshal(env)
		return b, b
	}
	return n.Body, n.Body
}

// post sends one attempt.
func (s *Server) post(ctx context.Context, n Notification, f Forgery) Delivery {
	s.mu.Lock()
	delay, kind := s.delay, s.answerKey("") // a notification answers no request: it names no key
	s.mu.Unlock()
	d := Delivery{ID: n.ID, EventType: n.EventType, OrderNo: n.OrderNo, Forgery: f}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	at := s.clock.Now()
	switch f {
	case StaleTimestamp:
		at = at.Add(-5 * time.Minute)
	case FutureTimestamp:
		at = at.Add(5 * time.Minute)
	}
	send, signed := s.forge(n, f)
	s.mu.Lock()
	h := s.signedHeaders(signed, at, kind)
	s.mu.Unlock()
	switch f {
	case WrongKey:
		h.Set("Wechatpay-Signature", Sign(rogue(), h.Get("Wechatpay-Timestamp"), h.Get("Wechatpay-Nonce"), signed))
	case UnknownSerial:
		h.Set("Wechatpay-Serial", NewSerial())
	case Unsigned:
		h.Del("Wechatpay-Signature")
	}
	if n.URL == "" {
		d.Err = errors.New("wechatsim: no notify_url")
		return d
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(send))
	if err != nil {
		d.Err = err
		return d
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Mozilla/4.0")
	resp, err := s.client.Do(req)
	if err != nil {
		d.Err = err
		return d
	}
	defer func() { _ = resp.Body.Close() }()
	d.Status = resp.StatusCode
	d.Reply, d.Err = io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return d
}

// uuid is a random RFC 4122 version 4 id, as notification ids are.
func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
