package stripe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"cardshop/domain"
)

// RefundIdempotencyKey is the Idempotency-Key of the refund with cardshop's number refundNo:
// every attempt at one refund sends the same key, so Stripe creates it once.
func RefundIdempotencyKey(refundNo string) string { return "cardshop-refund-" + refundNo }

// RefundReason is the reason every refund is created with.
const RefundReason = "requested_by_customer"

var (
	refundNoShape   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	refundID        = regexp.MustCompile(`^(re|pyr)_[A-Za-z0-9_]{1,250}$`)
	paymentIntentID = regexp.MustCompile(`^pi_[A-Za-z0-9_]{1,250}$`)
)

// expandable is a Stripe reference: an id, null, or the expanded object with its id.
type expandable string

func (x *expandable) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*x = ""
		return nil
	case len(b) > 0 && b[0] == '{':
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		*x = expandable(o.ID)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*x = expandable(s)
	return nil
}

// RefundObject is the part of Stripe's refund object the gateway reads.
type RefundObject struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        *int64            `json:"amount"`
	Currency      string            `json:"currency"`
	Status        string            `json:"status"`
	FailureReason string            `json:"failure_reason"`
	PaymentIntent expandable        `json:"payment_intent"`
	Metadata      map[string]string `json:"metadata"`
}

// outcome maps a refund's status: succeeded; pending and requires_action are not final;
// failed and canceled are refusals, with failure_reason when Stripe gives one.
func (rf RefundObject) outcome() (domain.RefundOutcome, string, error) {
	switch rf.Status {
	case "succeeded":
		return domain.RefundSucceeded, "", nil
	case "pending", "requires_action":
		return domain.RefundPending, "", nil
	case "failed", "canceled":
		reason := "refund " + rf.Status
		if rf.FailureReason != "" {
			reason += ": " + rf.FailureReason
		}
		return domain.RefundRefused, reason, nil
	}
	return 0, "", fmt.Errorf("stripe: refund %s has the unknown status %q", rf.ID, rf.Status)
}

// state is the RefundState of rf.
func (rf RefundObject) state() (domain.RefundState, error) {
	o, reason, err := rf.outcome()
	if err != nil {
		return domain.RefundState{}, err
	}
	return domain.RefundState{Outcome: o, ProviderRef: rf.ID, Reason: reason}, nil
}

// check refuses a refund reply that is not a refund of the whole amount of pi.
func (rf RefundObject) check(pi string, amount domain.Money, currency string) error {
	if rf.Object != "refund" || !refundID.MatchString(rf.ID) {
		return errors.New("stripe: the reply is not a refund")
	}
	if string(rf.PaymentIntent) != pi || rf.Amount == nil || *rf.Amount != int64(amount) || rf.Currency != currency {
		return fmt.Errorf("stripe: refund %s is not of %s for the whole amount", rf.ID, pi)
	}
	return nil
}

// Refund returns the whole amount of the payment's session (see the package doc).
func (g *Gateway) Refund(ctx context.Context, p domain.Payment, r domain.RefundRequest) (domain.RefundState, error) {
	if !refundNoShape.MatchString(r.RefundNo) {
		return domain.RefundState{}, domain.Invalid("refund_no", "1 to 64 of A-Z a-z 0-9 _ -")
	}
	if r.Amount <= 0 || r.Amount != p.Amount || r.Currency != p.Currency || !g.Supports(r.Currency) {
		return domain.RefundState{}, domain.Invalid("refund", "the whole amount of the payment, in its currency, is refunded")
	}
	s, err := g.session(ctx, p)
	if err != nil {
		return domain.RefundState{}, fmt.Errorf("stripe: refund %s: %w", r.RefundNo, err)
	}
	pi := string(s.PaymentIntent)
	if s.Status != "complete" || s.PaymentStatus != "paid" || pi == "" {
		return domain.RefundState{Outcome: domain.RefundRefused, Reason: fmt.Sprintf(
			"session %s holds no payment to refund (status %s, payment_status %s)", s.ID, s.Status, s.PaymentStatus)}, nil
	}
	if !paymentIntentID.MatchString(pi) {
		return domain.RefundState{}, fmt.Errorf("stripe: session %s has the malformed payment_intent %q", s.ID, pi)
	}
	currency := strings.ToLower(r.Currency.Code)
	if s.AmountTotal == nil || *s.AmountTotal != int64(r.Amount) || s.Currency != currency {
		return domain.RefundState{}, fmt.Errorf("stripe: session %s charged another amount or currency than payment %s", s.ID, p.OrderNo)
	}
	form := url.Values{
		"payment_intent":      {pi},
		"amount":              {strconv.FormatInt(int64(r.Amount), 10)},
		"reason":              {RefundReason},
		"metadata[order_no]":  {string(p.OrderNo)},
		"metadata[refund_no]": {r.RefundNo},
	}
	var rf RefundObject
	err = g.call(ctx, http.MethodPost, "/v1/refunds", form, RefundIdempotencyKey(r.RefundNo), &rf)
	var refused *apiError
	switch {
	case err == nil:
		if err := rf.check(pi, r.Amount, currency); err != nil {
			return domain.RefundState{}, err
		}
		if rf.Metadata["refund_no"] != r.RefundNo {
			return domain.RefundState{}, fmt.Errorf("stripe: refund %s carries another refund number", rf.ID)
		}
		return g.current(ctx, rf, pi, r.Amount, currency)
	case errors.As(err, &refused) && !errors.Is(err, domain.ErrUnavailable):
		if refused.code == "charge_already_refunded" {
			return g.refunded(ctx, pi, r, refused)
		}
		return domain.RefundState{Outcome: domain.RefundRefused, Reason: refused.Error()}, nil
	}
	return domain.RefundState{}, fmt.Errorf("stripe: refund %s of session %s: %w", r.RefundNo, s.ID, err)
}

// RefundIdempotent is true: the refund is created with the refund number as its
// Idempotency-Key, which Stripe keeps for a day.
func (g *Gateway) RefundIdempotent() bool { return true }

// refunded answers a refund Stripe refused because the charge is refunded already: the money
// went back once, by this refund number's refund (an earlier attempt whose idempotency record
// expired) or by another (from the dashboard). The refunds of pi are read: this number's
// refund, else the newest one that returns money, gives the state.
func (g *Gateway) refunded(ctx context.Context, pi string, r domain.RefundRequest, refused *apiError) (domain.RefundState, error) {
	var list struct {
		Object string         `json:"object"`
		Data   []RefundObject `json:"data"`
	}
	q := url.Values{"payment_intent": {pi}, "limit": {"100"}}
	if err := g.call(ctx, http.MethodGet, "/v1/refunds?"+q.Encode(), nil, "", &list); err != nil {
		return domain.RefundState{}, fmt.Errorf("stripe: list the refunds of %s: %w", pi, err)
	}
	if list.Object != "list" {
		return domain.RefundState{}, fmt.Errorf("stripe: the refunds of %s are not a list", pi)
	}
	var other *RefundObject
	for i, rf := range list.Data {
		if rf.Object != "refund" || !refundID.MatchString(rf.ID) || string(rf.PaymentIntent) != pi {
			return domain.RefundState{}, fmt.Errorf("stripe: the refunds of %s hold something else", pi)
		}
		if rf.Metadata["refund_no"] == r.RefundNo {
			return rf.state()
		}
		if o, _, err := rf.outcome(); err == nil && o != domain.RefundRefused && other == nil {
			other = &list.Data[i]
		}
	}
	if other != nil {
		return other.state()
	}
	return domain.RefundState{Outcome: domain.RefundRefused, Reason: refused.Error()}, nil
}

// current is the state of rf as it stands now. A retried creation replays the first answer,
// which for a refund that was pending is stale: a refund that is not final is read again. When
// that read fails, the answer's own state stands (pending: the caller asks again later).
func (g *Gateway) current(ctx context.Context, rf RefundObject, pi string, amount domain.Money, currency string) (domain.RefundState, error) {
	st, err := rf.state()
	if err != nil || st.Outcome != domain.RefundPending {
		return st, err
	}
	var now RefundObject
	if err := g.call(ctx, http.MethodGet, "/v1/refunds/"+rf.ID, nil, "", &now); err != nil || now.ID != rf.ID || now.check(pi, amount, currency) != nil {
		return st, nil
	}
	if fresh, err := now.state(); err == nil {
		return fresh, nil
	}
	return st, nil
}
