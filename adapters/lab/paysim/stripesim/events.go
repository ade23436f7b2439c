package stripesim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"cardshop/adapters/lab/paysim/courier"
)

// The event types the simulator sends.
const (
	EventCompleted      = "checkout.session.completed"
	EventAsyncSucceeded = "checkout.session.async_payment_succeeded"
	EventAsyncFailed    = "checkout.session.async_payment_failed"
	EventExpired        = "checkout.session.expired"
	EventRefundCreated  = "refund.created"
	EventRefundUpdated  = "refund.updated"
	EventRefundFailed   = "refund.failed"
	EventChargeRefunded = "charge.refunded"
)

// Event is one webhook event: Body is the exact JSON Stripe would send.
type Event struct {
	ID        string
	Type      string
	SessionID string
	RefundID  string // the refund of a refund.* or charge.refunded event
	OrderNo   string
	Created   time.Time
	Body      []byte
}

// Forgery is how a delivery departs from Stripe's.
type Forgery int

// The forgeries.
const (
	Genuine         Forgery = iota
	WrongSecret             // signed with a secret the receiver does not hold
	StaleTimestamp          // correctly signed ten minutes ago
	FutureTimestamp         // correctly signed ten minutes ahead
	TamperedBody            // signed, then the amount in the body changed
	Unsigned                // no Stripe-Signature header
	V0Only                  // only a v0 signature, no v1
)

// Note is one event as the courier carries it: delivered genuine or forged as Forgery says,
// signed at each attempt.
type Note struct {
	Event
	Forgery Forgery
}

// Delivery is one POST of an event to the webhook URL (or one event dropped or held); its
// Stripe-Signature header is Sent.Header's. Accepted reports whether the receiver answered
// 2xx, which is what Stripe counts as delivered.
type Delivery = courier.Delivery[Note]

// Sign is Stripe's v1 signature: hex HMAC-SHA256 under secret of "<unix t>." + body.
func Sign(secret string, t time.Time, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	_, _ = fmt.Fprintf(m, "%d.", t.Unix())
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// SignatureHeader is the Stripe-Signature header of body at t: t, then one v1 per secret.
func SignatureHeader(t time.Time, body []byte, secrets ...string) string {
	h := "t=" + strconv.FormatInt(t.Unix(), 10)
	for _, sec := range secrets {
		h += ",v1=" + Sign(sec, t, body)
	}
	return h
}

// eventObject is Stripe's event object.
type eventObject struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	APIVersion string `json:"api_version"`
	Created    int64  `json:"created"`
	Data       struct {
		Object any `json:"object"`
	} `json:"data"`
	Livemode        bool `json:"livemode"`
	PendingWebhooks int  `json:"pending_webhooks"`
	Request         struct {
		ID             *string `json:"id"`
		IdempotencyKey *string `json:"idempotency_key"`
	} `json:"request"`
	Type string `json:"type"`
}

// event builds an event of typ on the session as it stands; under s.mu.
func (s *Server) event(typ string, ss *Session) Event {
	return s.eventOf(typ, s.object(ss), Event{SessionID: ss.ID, OrderNo: ss.ClientReferenceID})
}

// eventOf builds an event of typ whose data.object is obj; ev brings the references.
func (s *Server) eventOf(typ string, obj any, ev Event) Event {
	now := s.clock.Now()
	o := eventObject{ID: "evt_" + randomID(24), Object: "event", APIVersion: APIVersion, Created: now.Unix(),
		Livemode: s.livemode, PendingWebhooks: 1, Type: typ}
	o.Data.Object = obj
	body, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		panic(err)
	}
	ev.ID, ev.Type, ev.Created, ev.Body = o.ID, typ, now, body
	return ev
}

// ErrNoSession means the order has no session in the state the change needs.
var ErrNoSession = errors.New("stripesim: no session of the order in a state that allows this")

// change applies f to the order's latest session under s.mu and returns the event of typ.
func (s *Server) change(orderNo, typ string, f func(*Session) bool) (Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.latest(orderNo)
	if ss == nil || !f(ss) {
		return Event{}, fmt.Errorf("%w (order %s, event %s)", ErrNoSession, orderNo, typ)
	}
	return s.event(typ, ss), nil
}

// Complete marks the order's open session complete, paid or (a delayed payment method) unpaid,
// and returns its checkout.session.completed event without sending it.
func (s *Server) Complete(orderNo string, paid bool) (Event, error) {
	return s.change(orderNo, EventCompleted, func(ss *Session) bool {
		if ss.Status != "open" {
			return false
		}
		ss.Status, ss.PaymentIntent, ss.Charge = "complete", "pi_"+randomID(24), "ch_"+randomID(24)
		if paid {
			ss.PaymentStatus = "paid"
		}
		return true
	})
}

// AsyncSucceed settles the delayed payment of a complete, unpaid session; the event is not sent.
func (s *Server) AsyncSucceed(orderNo string) (Event, error) {
	return s.change(orderNo, EventAsyncSucceeded, func(ss *Session) bool {
		if ss.Status != "complete" || ss.PaymentStatus != "unpaid" {
			return false
		}
		ss.PaymentStatus = "paid"
		return true
	})
}

// AsyncFail fails the delayed payment of a complete, unpaid session; the event is not sent.
func (s *Server) AsyncFail(orderNo string) (Event, error) {
	return s.change(orderNo, EventAsyncFailed, func(ss *Session) bool {
		return ss.Status == "complete" && ss.PaymentStatus == "unpaid"
	})
}

// ExpireSession expires the order's open session (as Stripe does at expires_at); the event is
// not sent.
func (s *Server) ExpireSession(orderNo string) (Event, error) {
	return s.change(orderNo, EventExpired, func(ss *Session) bool {
		if ss.Status != "open" {
			return false
		}
		ss.Status = "expired"
		return true
	})
}

// Pay has the buyer pay the order's session and delivers checkout.session.completed (paid).
func (s *Server) Pay(ctx context.Context, orderNo string) (Delivery, error) {
	return s.emitted(ctx)(s.Complete(orderNo, true))
}

// PayDelayed has the buyer complete checkout with a delayed payment method and delivers
// checkout.session.completed with payment_status unpaid; Settle or Fail follows.
func (s *Server) PayDelayed(ctx context.Context, orderNo string) (Delivery, error) {
	return s.emitted(ctx)(s.Complete(orderNo, false))
}

// Settle delivers checkout.session.async_payment_succeeded for a delayed payment.
func (s *Server) Settle(ctx context.Context, orderNo string) (Delivery, error) {
	return s.emitted(ctx)(s.AsyncSucceed(orderNo))
}

// Fail fails the order's payment and delivers checkout.session.async_payment_failed. Only
// delayed methods fail after checkout (a declined card is retried on Stripe's page): an open
// session is first completed unpaid, with its checkout.session.completed delivered.
func (s *Server) Fail(ctx context.Context, orderNo string) (Delivery, error) {
	if ss, found := s.SessionOf(orderNo); found && ss.Status == "open" {
		if _, err := s.PayDelayed(ctx, orderNo); err != nil {
			return Delivery{}, err
		}
	}
	return s.emitted(ctx)(s.AsyncFail(orderNo))
}

// Expire expires the order's open session and delivers checkout.session.expired.
func (s *Server) Expire(ctx context.Context, orderNo string) (Delivery, error) {
	return s.emitted(ctx)(s.ExpireSession(orderNo))
}

func (s *Server) emitted(ctx context.Context) func(Event, error) (Delivery, error) {
	return func(ev Event, err error) (Delivery, error) {
		if err != nil {
			return Delivery{}, err
		}
		return s.emit(ctx, ev), nil
	}
}

// emit sends ev through the courier's switches (held, dropped, or delivered genuine).
func (s *Server) emit(ctx context.Context, ev Event) Delivery {
	ds := s.Send(ctx, Note{Event: ev})
	return ds[len(ds)-1]
}

// Deliver POSTs ev to the webhook URL now, past Hold and Drop, signed as f says, and records
// the answer.
func (s *Server) Deliver(ctx context.Context, ev Event, f Forgery) Delivery {
	ds := s.SendNow(ctx, Note{Event: ev, Forgery: f})
	return ds[len(ds)-1]
}

// seal signs n's body at this moment as its Forgery says: the courier's Seal.
func (s *Server) seal(n Note, _ int) (courier.Post, error) {
	s.mu.Lock()
	target, secrets := s.webhookURL, s.opts.WebhookSecrets
	s.mu.Unlock()
	if target == "" {
		return courier.Post{}, errors.New("stripesim: no webhook URL")
	}
	at, body := s.clock.Now(), n.Body
	switch n.Forgery {
	case WrongSecret:
		secrets = []string{NewWebhookSecret()}
	case StaleTimestamp:
		at = at.Add(-10 * time.Minute)
	case FutureTimestamp:
		at = at.Add(10 * time.Minute)
	default: // genuine, or forged after signing
	}
	sig := SignatureHeader(at, body, secrets...)
	if s.opts.SendV0 {
		sig += ",v0=" + Sign("v0-scheme-"+secrets[0], at, body)
	}
	switch n.Forgery {
	case TamperedBody:
		body = tamper(body)
	case Unsigned:
		sig = ""
	case V0Only:
		sig = "t=" + strconv.FormatInt(at.Unix(), 10) + ",v0=" + Sign(secrets[0], at, body)
	default: // genuine, or forged before signing
	}
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"},
		"User-Agent": {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"}, "Cache-Control": {"no-cache"}}
	if sig != "" {
		h.Set("Stripe-Signature", sig)
	}
	return courier.Post{Method: http.MethodPost, URL: target, Header: h, Body: body}, nil
}

// tamper raises the amount in an event body (or, without one, changes a byte): what an
// attacker who edits a captured event sends.
func tamper(body []byte) []byte {
	out := bytes.Replace(body, []byte(`"amount_total": `), []byte(`"amount_total": 1`), 1)
	if bytes.Equal(out, body) {
		out = bytes.Replace(body, []byte(`"amount": `), []byte(`"amount": 1`), 1)
	}
	if bytes.Equal(out, body) {
		out = append(bytes.Clone(body), ' ')
	}
	return out
}
