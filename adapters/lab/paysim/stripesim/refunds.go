package stripesim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Refund is a refund as the simulator holds it.
type Refund struct {
	ID             string
	PaymentIntent  string
	Charge         string
	OrderNo        string // the client_reference_id of the refunded session
	Amount         int64
	Currency       string
	Reason         string
	Status         string // pending, requires_action, succeeded, failed, canceled
	FailureReason  string
	Metadata       map[string]string
	Created        time.Time
	IdempotencyKey string
}

// movesMoney reports whether the refund returns (or is returning) money: every status but
// failed and canceled.
func (r *Refund) movesMoney() bool { return r.Status != "failed" && r.Status != "canceled" }

// RefundPending makes new refunds answer status pending (on), as bank transfers and some cards
// do, until SettleRefund; off, they succeed at once.
func (s *Server) RefundPending(on bool) { s.set(func() { s.refundPending = on }) }

// RefundRefuse makes the creation of refunds answer 400 with this error code and message (a
// charge disputed, a balance too low…), recorded under the idempotency key as Stripe records an
// answer of an endpoint that ran; an empty code serves refunds again.
func (s *Server) RefundRefuse(code, message string) {
	s.set(func() {
		s.refundRefusal = nil
		if code != "" {
			s.refundRefusal = &apiError{Type: "invalid_request_error", Code: code, Message: message}
		}
	})
}

// RefundOutage makes the refund endpoints answer 503 (on), nothing recorded under a key, or
// serve again (off).
func (s *Server) RefundOutage(on bool) { s.set(func() { s.refundOutage = on }) }

// Refunds returns the refunds created so far, oldest first.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, 0, len(s.refundOrder))
	for _, id := range s.refundOrder {
		out = append(out, s.refundView(s.refunds[id]))
	}
	return out
}

// Payouts counts the refunds of an order that return money (all but failed and canceled ones)
// and the amount they return: what the buyer gets back.
func (s *Server) Payouts(orderNo string) (count int, amount int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.refundOrder {
		if rf := s.refunds[id]; rf.OrderNo == orderNo && rf.movesMoney() {
			count++
			amount += rf.Amount
		}
	}
	return count, amount
}

func (s *Server) refundView(rf *Refund) Refund {
	v := *rf
	v.Metadata = make(map[string]string, len(rf.Metadata))
	for k, val := range rf.Metadata {
		v.Metadata[k] = val
	}
	return v
}

// SettleRefund ends the order's latest pending refund, as the bank's answer does: succeeded
// delivers refund.updated, failed (with failureReason, e.g. expired_or_canceled_card)
// delivers refund.failed.
func (s *Server) SettleRefund(ctx context.Context, orderNo string, succeed bool, failureReason string) (Delivery, error) {
	s.mu.Lock()
	var rf *Refund
	for i := len(s.refundOrder) - 1; i >= 0; i-- {
		if c := s.refunds[s.refundOrder[i]]; c.OrderNo == orderNo && (c.Status == "pending" || c.Status == "requires_action") {
			rf = c
			break
		}
	}
	if rf == nil {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("%w (order %s: no pending refund)", ErrNoSession, orderNo)
	}
	typ := EventRefundUpdated
	rf.Status = "succeeded"
	if !succeed {
		typ, rf.Status, rf.FailureReason = EventRefundFailed, "failed", failureReason
		if rf.FailureReason == "" {
			rf.FailureReason = "unknown"
		}
	}
	ev := s.refundEvent(typ, rf)
	s.mu.Unlock()
	return s.emit(ctx, ev), nil
}

// refundObject is a refund as Stripe's API renders it.
type refundObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	BalanceTransaction *string           `json:"balance_transaction"`
	Charge             string            `json:"charge"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	FailureReason      string            `json:"failure_reason,omitempty"`
	Metadata           map[string]string `json:"metadata"`
	PaymentIntent      string            `json:"payment_intent"`
	Reason             *string           `json:"reason"`
	ReceiptNumber      *string           `json:"receipt_number"`
	Status             string            `json:"status"`
}

func refundObj(rf *Refund) refundObject {
	o := refundObject{ID: rf.ID, Object: "refund", Amount: rf.Amount, Charge: rf.Charge, Created: rf.Created.Unix(),
		Currency: rf.Currency, FailureReason: rf.FailureReason, Metadata: map[string]string{}, PaymentIntent: rf.PaymentIntent,
		Reason: orNull(rf.Reason), Status: rf.Status}
	if rf.Status == "succeeded" {
		bt := "txn_" + rf.ID[3:]
		o.BalanceTransaction = &bt
	}
	for k, v := range rf.Metadata {
		o.Metadata[k] = v
	}
	return o
}

// listObject is Stripe's list envelope.
type listObject struct {
	Object  string `json:"object"`
	Data    []any  `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

// chargeObject is the part of a charge that charge.refunded carries; Refunds only in the legacy
// shape.
type chargeObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	AmountCaptured int64             `json:"amount_captured"`
	AmountRefunded int64             `json:"amount_refunded"`
	Captured       bool              `json:"captured"`
	Currency       string            `json:"currency"`
	Livemode       bool              `json:"livemode"`
	Metadata       map[string]string `json:"metadata"`
	Paid           bool              `json:"paid"`
	PaymentIntent  string            `json:"payment_intent"`
	Refunded       bool              `json:"refunded"`
	Refunds        *listObject       `json:"refunds,omitempty"`
	Status         string            `json:"status"`
}

// refundEvent builds an event on a refund; under s.mu.
func (s *Server) refundEvent(typ string, rf *Refund) Event {
	return s.eventOf(typ, refundObj(rf), Event{RefundID: rf.ID, OrderNo: rf.OrderNo, SessionID: s.sessionOfCharge(rf.Charge)})
}

// chargeRefundedEvent builds charge.refunded for the charge of rf; under s.mu.
func (s *Server) chargeRefundedEvent(ss *Session, rf *Refund) Event {
	refunded := s.refundedOn(ss.Charge)
	c := chargeObject{ID: ss.Charge, Object: "charge", Amount: ss.AmountTotal, AmountCaptured: ss.AmountTotal,
		AmountRefunded: refunded, Captured: true, Currency: ss.Currency, Livemode: s.livemode, Metadata: map[string]string{},
		Paid: true, PaymentIntent: ss.PaymentIntent, Refunded: refunded == ss.AmountTotal, Status: "succeeded"}
	if s.opts.LegacyChargeRefunds {
		c.Refunds = &listObject{Object: "list", Data: s.refundList(ss.PaymentIntent), URL: "/v1/charges/" + ss.Charge + "/refunds"}
	}
	return s.eventOf(EventChargeRefunded, c, Event{SessionID: ss.ID, RefundID: rf.ID, OrderNo: ss.ClientReferenceID})
}

func (s *Server) sessionOfCharge(charge string) string {
	for _, id := range s.order {
		if s.sessions[id].Charge == charge {
			return id
		}
	}
	return ""
}

// refundedOn sums the refunds of a charge that return money.
func (s *Server) refundedOn(charge string) int64 {
	var sum int64
	for _, rf := range s.refunds {
		if rf.Charge == charge && rf.movesMoney() {
			sum += rf.Amount
		}
	}
	return sum
}

// refundList lists the refunds of a payment intent, newest first, as Stripe lists.
func (s *Server) refundList(pi string) []any {
	out := []any{}
	for i := len(s.refundOrder) - 1; i >= 0; i-- {
		if rf := s.refunds[s.refundOrder[i]]; pi == "" || rf.PaymentIntent == pi {
			out = append(out, refundObj(rf))
		}
	}
	return out
}

var (
	refundParams  = map[string]bool{"payment_intent": true, "charge": true, "amount": true, "reason": true}
	refundReasons = map[string]bool{"duplicate": true, "fraudulent": true, "requested_by_customer": true}
)

// routeRefunds serves /v1/refunds (create, list) and /v1/refunds/{id} (retrieve).
func (s *Server) routeRefunds(r *http.Request, form url.Values, key, rest string) reply {
	switch {
	case rest == "" && r.Method == http.MethodPost:
		return s.createRefund(form, key)
	case rest == "" && r.Method == http.MethodGet:
		pi := form.Get("payment_intent")
		if pi == "" && form.Get("charge") != "" {
			pi = "-"
			for _, ss := range s.sessions {
				if ss.Charge != "" && ss.Charge == form.Get("charge") {
					pi = ss.PaymentIntent
				}
			}
		}
		return ok(listObject{Object: "list", Data: s.refundList(pi), URL: "/v1/refunds"})
	case strings.HasPrefix(rest, "/") && !strings.Contains(rest[1:], "/") && r.Method == http.MethodGet:
		rf, found := s.refunds[rest[1:]]
		if !found {
			return invalid(http.StatusNotFound, apiError{Code: "resource_missing", Param: "id", Message: "No such refund: '" + rest[1:] + "'"})
		}
		return ok(refundObj(rf))
	}
	return invalid(http.StatusNotFound, apiError{Message: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path)})
}

// createRefund is POST /v1/refunds: a refund of a paid session's payment intent (or charge),
// the unrefunded rest when amount is absent.
func (s *Server) createRefund(form url.Values, key string) reply {
	meta := map[string]string{}
	for name, vs := range form {
		if len(vs) != 1 {
			return param(name, "Invalid value for "+name+": given more than once.")
		}
		if m := metadataParam.FindStringSubmatch(name); m != nil {
			if len(vs[0]) > 500 {
				return param(name, "Metadata values can have up to 500 characters.")
			}
			meta[m[1]] = vs[0]
			continue
		}
		if !refundParams[name] {
			return invalid(http.StatusBadRequest, apiError{Code: "parameter_unknown", Param: name, Message: "Received unknown parameter: " + name})
		}
	}
	pi, charge := form.Get("payment_intent"), form.Get("charge")
	if (pi == "") == (charge == "") {
		return invalid(http.StatusBadRequest, apiError{Code: "parameter_missing",
			Message: "One of the following params should be provided for this request: payment_intent or charge."})
	}
	var ss *Session
	for _, id := range s.order {
		if c := s.sessions[id]; c.PaymentIntent != "" && (c.PaymentIntent == pi || c.Charge == charge) {
			ss = c
		}
	}
	if ss == nil {
		what, id := "payment_intent", pi
		if charge != "" {
			what, id = "charge", charge
		}
		return invalid(http.StatusNotFound, apiError{Code: "resource_missing", Param: what, Message: "No such " + what + ": '" + id + "'"})
	}
	reason := form.Get("reason")
	if reason != "" && !refundReasons[reason] {
		return param("reason", "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer")
	}
	amount := int64(-1)
	if raw, given := form["amount"]; given {
		n, err := strconv.ParseInt(raw[0], 10, 64)
		if err != nil || n < 1 {
			return param("amount", "Invalid positive integer")
		}
		amount = n
	}
	refusal := func(code, msg string) reply {
		return reply{status: http.StatusBadRequest, keep: true, body: errorBody(apiError{Type: "invalid_request_error", Code: code, Message: msg})}
	}
	if ss.PaymentStatus != "paid" {
		return refusal("payment_intent_unexpected_state", "This PaymentIntent ("+ss.PaymentIntent+") does not have a successful charge to refund.")
	}
	if s.refundRefusal != nil {
		return reply{status: http.StatusBadRequest, keep: true, body: errorBody(*s.refundRefusal)}
	}
	rest := ss.AmountTotal - s.refundedOn(ss.Charge)
	if rest <= 0 {
		return refusal("charge_already_refunded", "Charge "+ss.Charge+" has already been refunded.")
	}
	if amount < 0 {
		amount = rest
	}
	if amount > rest {
		return refusal("amount_too_large", fmt.Sprintf("Refund amount (%d %s) is greater than unrefunded amount on charge (%d %s)", amount, ss.Currency, rest, ss.Currency))
	}
	status := "succeeded"
	if s.refundPending {
		status = "pending"
	}
	rf := &Refund{ID: "re_" + randomID(24), PaymentIntent: ss.PaymentIntent, Charge: ss.Charge, OrderNo: ss.ClientReferenceID,
		Amount: amount, Currency: ss.Currency, Reason: reason, Status: status, Metadata: meta, Created: s.clock.Now(), IdempotencyKey: key}
	s.refunds[rf.ID] = rf
	s.refundOrder = append(s.refundOrder, rf.ID)
	s.Post(Note{Event: s.refundEvent(EventRefundCreated, rf)})
	s.Post(Note{Event: s.chargeRefundedEvent(ss, rf)})
	return ok(refundObj(rf))
}

// ErrNoRefund means no refund has that id.
var ErrNoRefund = errors.New("stripesim: no such refund")

// RefundEvent builds an event of typ on a refund as it stands, without sending it (Deliver
// sends it): for a resent, reordered or hand-picked refund event.
func (s *Server) RefundEvent(typ, refundID string) (Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rf, found := s.refunds[refundID]
	if !found {
		return Event{}, ErrNoRefund
	}
	return s.refundEvent(typ, rf), nil
}
