package stripe

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cardshop/domain"
)

// SignatureHeader is the header of a webhook event's signature.
const SignatureHeader = "Stripe-Signature"

// Tolerance is how far a signature's timestamp may be from the event's arrival, either way.
const Tolerance = 300 * time.Second

// Bounds on a signature header, so that a hostile one costs little.
const (
	maxHeaderLen  = 4096
	maxSignatures = 16
)

// Event types the gateway acts on.
const (
	EventCompleted      = "checkout.session.completed"
	EventAsyncSucceeded = "checkout.session.async_payment_succeeded"
	EventAsyncFailed    = "checkout.session.async_payment_failed"
	EventExpired        = "checkout.session.expired"
	// Refund events: the refund is data.object.
	EventRefundCreated       = "refund.created"
	EventRefundUpdated       = "refund.updated"
	EventRefundFailed        = "refund.failed"
	EventChargeRefundUpdated = "charge.refund.updated" // the name before API version 2024-10-28
	// EventChargeRefunded has the charge as data.object; its refunds list only in API versions
	// before 2022-11-15 (or when expanded).
	EventChargeRefunded = "charge.refunded"
)

var refundEvents = map[string]bool{EventRefundCreated: true, EventRefundUpdated: true, EventRefundFailed: true, EventChargeRefundUpdated: true}

// Verify checks the event's signature and freshness, then reads it (see the package doc for the
// mapping).
func (g *Gateway) Verify(_ context.Context, in domain.InboundRequest) (domain.ProviderNotice, error) {
	at := in.At
	if at.IsZero() {
		at = g.clock.Now()
	}
	if err := g.checkSignature(in.Header, in.Body, at); err != nil {
		return domain.ProviderNotice{}, err
	}
	return parseEvent(in.Body)
}

// signedHeader is a parsed Stripe-Signature header.
type signedHeader struct {
	t    int64
	sigs [][]byte
}

// parseSignature reads "t=<unix>,v1=<hex>[,…]": exactly one t of 1 to 12 digits, every item
// "key=value"; v1 values that are not 64 hex digits and other schemes are ignored; at least one
// v1 must remain.
func parseSignature(h string) (signedHeader, error) {
	var sh signedHeader
	if h == "" {
		return sh, fmt.Errorf("%w: no %s header", domain.ErrBadSignature, SignatureHeader)
	}
	if len(h) > maxHeaderLen {
		return sh, fmt.Errorf("%w: %s header too long", domain.ErrBadSignature, SignatureHeader)
	}
	seenT := false
	for item := range strings.SplitSeq(h, ",") {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" || strings.Contains(v, "=") {
			return sh, fmt.Errorf("%w: malformed %s header", domain.ErrBadSignature, SignatureHeader)
		}
		switch k {
		case "t":
			if seenT || !digits(v) {
				return sh, fmt.Errorf("%w: malformed timestamp", domain.ErrBadSignature)
			}
			seenT = true
			sh.t, _ = strconv.ParseInt(v, 10, 64)
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				continue
			}
			if len(sh.sigs) == maxSignatures {
				return sh, fmt.Errorf("%w: too many signatures", domain.ErrBadSignature)
			}
			sh.sigs = append(sh.sigs, sig)
		}
	}
	if !seenT {
		return sh, fmt.Errorf("%w: no timestamp", domain.ErrBadSignature)
	}
	if len(sh.sigs) == 0 {
		return sh, fmt.Errorf("%w: no v1 signature", domain.ErrBadSignature)
	}
	return sh, nil
}

func digits(s string) bool {
	if s == "" || len(s) > 12 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// sign is the v1 signature of body at t under one endpoint secret.
func sign(whsec domain.Secret, t int64, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(whsec.Reveal()))
	m.Write([]byte(strconv.FormatInt(t, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// checkSignature accepts one header whose timestamp is within Tolerance of at and one of whose
// v1 signatures is body's under one of the endpoint secrets.
func (g *Gateway) checkSignature(h domain.Header, body []byte, at time.Time) error {
	values := h.Values(SignatureHeader)
	if len(values) > 1 {
		return fmt.Errorf("%w: %d %s headers", domain.ErrBadSignature, len(values), SignatureHeader)
	}
	sh, err := parseSignature(h.Get(SignatureHeader))
	if err != nil {
		return err
	}
	if d := at.Sub(time.Unix(sh.t, 0)); d > Tolerance || d < -Tolerance {
		return fmt.Errorf("%w: timestamp outside the %s window", domain.ErrBadSignature, Tolerance)
	}
	for _, whsec := range g.whsecs {
		want := sign(whsec, sh.t, body)
		for _, got := range sh.sigs {
			if hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", domain.ErrBadSignature)
}

// event is the part of Stripe's event object the gateway reads.
type event struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Type   string `json:"type"`
	Data   struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// parseEvent reads a verified event. A body that is not an event, or a checkout event whose
// session lacks an order number or carries a malformed amount, is a ValidationError.
func parseEvent(body []byte) (domain.ProviderNotice, error) {
	var e event
	if err := json.Unmarshal(body, &e); err != nil {
		return domain.ProviderNotice{}, domain.Invalid("body", "not a Stripe event JSON object")
	}
	if e.Object != "event" || !strings.HasPrefix(e.ID, "evt_") || len(e.ID) > 255 || e.Type == "" {
		return domain.ProviderNotice{}, domain.Invalid("body", "not a Stripe event (object, id or type)")
	}
	n := domain.ProviderNotice{EventID: e.ID, Outcome: domain.OutcomePending}
	switch {
	case refundEvents[e.Type]:
		return parseRefund(n, e.Data.Object)
	case e.Type == EventChargeRefunded:
		return parseChargeRefunded(n, e.Data.Object)
	case !strings.HasPrefix(e.Type, "checkout.session."):
		n.Reason = "event type " + e.Type + " is not acted on"
		return n, nil
	}
	var s Session
	if err := json.Unmarshal(e.Data.Object, &s); err != nil || s.Object != "checkout.session" || !sessionID.MatchString(s.ID) {
		return domain.ProviderNotice{}, domain.Invalid("data.object", "not a checkout session")
	}
	no, err := domain.ParseOrderNo(s.ClientReferenceID)
	if err != nil {
		return domain.ProviderNotice{}, domain.Invalid("client_reference_id", "not an order number")
	}
	if m, ok := s.Metadata["order_no"]; ok && m != s.ClientReferenceID {
		return domain.ProviderNotice{}, domain.Invalid("metadata.order_no", "differs from client_reference_id")
	}
	n.OrderNo, n.ProviderRef = no, s.ID
	if n.Amount, n.Currency, err = s.money(); err != nil {
		return domain.ProviderNotice{}, err
	}
	switch e.Type {
	case EventCompleted, EventAsyncSucceeded:
		if s.PaymentStatus == "paid" {
			n.Outcome = domain.OutcomePaid
		} else {
			n.Reason = e.Type + " with payment_status " + s.PaymentStatus
		}
	case EventAsyncFailed:
		n.Outcome, n.Reason = domain.OutcomeFailed, "the delayed payment failed"
	case EventExpired:
		n.Outcome = domain.OutcomeExpired
	default:
		n.Reason = "event type " + e.Type + " is not acted on"
	}
	if n.Outcome == domain.OutcomePaid && n.Currency.IsZero() {
		return domain.ProviderNotice{}, domain.Invalid("amount_total", "a paid session without amount and currency")
	}
	return n, nil
}

// Reply is 200 {"received":true} for an accepted event; 400 for a refused one, which Stripe
// sends again.
func (g *Gateway) Reply(accepted bool) (status int, contentType string, body []byte) {
	if accepted {
		return http.StatusOK, "application/json", []byte(`{"received":true}`)
	}
	return http.StatusBadRequest, "application/json", []byte(`{"received":false}`)
}

// parseRefund reads a refund event's refund into n. A refund without metadata[refund_no] was
// not made by cardshop (the dashboard, another system): it is accepted and changes nothing.
// One with it must name its order in metadata[order_no] and have a known status.
func parseRefund(n domain.ProviderNotice, raw json.RawMessage) (domain.ProviderNotice, error) {
	var rf RefundObject
	if err := json.Unmarshal(raw, &rf); err != nil || rf.Object != "refund" || !refundID.MatchString(rf.ID) {
		return domain.ProviderNotice{}, domain.Invalid("data.object", "not a refund")
	}
	refundNo, ours := rf.Metadata["refund_no"]
	if !ours {
		n.Reason = "refund " + rf.ID + " was not made by cardshop (no metadata.refund_no)"
		return n, nil
	}
	if !refundNoShape.MatchString(refundNo) {
		return domain.ProviderNotice{}, domain.Invalid("metadata.refund_no", "malformed")
	}
	no, err := domain.ParseOrderNo(rf.Metadata["order_no"])
	if err != nil {
		return domain.ProviderNotice{}, domain.Invalid("metadata.order_no", "not an order number")
	}
	outcome, reason, err := rf.outcome()
	if err != nil {
		return domain.ProviderNotice{}, domain.Invalid("status", "not a refund status")
	}
	if n.Amount, n.Currency, err = moneyOf("amount", rf.Amount, rf.Currency); err != nil {
		return domain.ProviderNotice{}, err
	}
	if n.Currency.IsZero() {
		return domain.ProviderNotice{}, domain.Invalid("amount", "a refund without amount and currency")
	}
	n.OrderNo, n.ProviderRef, n.RefundNo, n.RefundOutcome, n.Reason = no, rf.ID, refundNo, outcome, reason
	return n, nil
}

// parseChargeRefunded reads charge.refunded: the charge's refunds list, when the event has one
// (older API versions, or expanded), gives cardshop's refund, newest first; without one the
// event says nothing the refund events do not, and is accepted without change.
func parseChargeRefunded(n domain.ProviderNotice, raw json.RawMessage) (domain.ProviderNotice, error) {
	var c struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Refunds *struct {
			Data []json.RawMessage `json:"data"`
		} `json:"refunds"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Object != "charge" || !strings.HasPrefix(c.ID, "ch_") {
		return domain.ProviderNotice{}, domain.Invalid("data.object", "not a charge")
	}
	if c.Refunds != nil {
		for _, r := range c.Refunds.Data {
			var probe struct {
				Metadata map[string]string `json:"metadata"`
			}
			if err := json.Unmarshal(r, &probe); err == nil && probe.Metadata["refund_no"] != "" {
				return parseRefund(n, r)
			}
		}
	}
	n.Reason = "charge " + c.ID + " refunded: the refund events carry the refund"
	return n, nil
}
