package wechatsim

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"cardshop/adapters/lab/paysim/courier"
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

// Note is one notification as the courier carries it: delivered genuine or forged as Forgery
// says, signed at each attempt.
type Note struct {
	Notification
	Forgery Forgery
}

// Delivery is one POST of a notification (or one notification dropped or held). Accepted
// reports whether the receiver answered 2xx, which is what WeChat Pay counts as received.
type Delivery = courier.Delivery[Note]

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
	return s.Send(ctx, Note{Notification: n}), nil
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
	return s.Send(ctx, Note{Notification: n}), nil
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

// Deliver POSTs n to its URL now, past Hold and Drop, forged as f says, re-signed and retried
// until a 2xx at most MaxAttempts times, and returns the attempts.
func (s *Server) Deliver(ctx context.Context, n Notification, f Forgery) []Delivery {
	return s.SendNow(ctx, Note{Notification: n, Forgery: f})
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
	default: // genuine, or forged in the headers
	}
	return n.Body, n.Body
}

// seal signs one attempt of n at this moment, forged as its Forgery says: the courier's Seal.
func (s *Server) seal(n Note, _ int) (courier.Post, error) {
	s.mu.Lock()
	kind := s.answerKey("") // a notification answers no request: it names no key
	s.mu.Unlock()
	at := s.clock.Now()
	switch n.Forgery {
	case StaleTimestamp:
		at = at.Add(-5 * time.Minute)
	case FutureTimestamp:
		at = at.Add(5 * time.Minute)
	default: // the timestamp stays
	}
	send, signed := s.forge(n.Notification, n.Forgery)
	s.mu.Lock()
	h := s.signedHeaders(signed, at, kind)
	s.mu.Unlock()
	switch n.Forgery {
	case WrongKey:
		h.Set("Wechatpay-Signature", Sign(rogue(), h.Get("Wechatpay-Timestamp"), h.Get("Wechatpay-Nonce"), signed))
	case UnknownSerial:
		h.Set("Wechatpay-Serial", NewSerial())
	case Unsigned:
		h.Del("Wechatpay-Signature")
	default: // the headers stay
	}
	if n.URL == "" {
		return courier.Post{}, errors.New("wechatsim: no notify_url")
	}
	h.Set("Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048")
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Mozilla/4.0")
	return courier.Post{Method: http.MethodPost, URL: n.URL, Header: h, Body: send}, nil
}

// uuid is a random RFC 4122 version 4 id, as notification ids are.
func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
