// Package paysig signs and verifies payment provider callbacks: HMAC-SHA256 over
// "timestamp.body" with a shared secret, hex encoded, and a timestamp window. It implements
// domain.PaymentVerifier and is also what the `pay` command and tests use to sign.
//
// It imports the domain, strictjson and the standard library only.
package paysig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cardshop/adapters/strictjson"
	"cardshop/domain"
)

// Header names of a signed callback.
const (
	HeaderTimestamp = "X-Cardshop-Timestamp"
	HeaderSignature = "X-Cardshop-Signature"
)

// DefaultTolerance is how far a callback's timestamp may be from now, either way.
const DefaultTolerance = 5 * time.Minute

// MinSecretLength is the shortest accepted shared secret.
const MinSecretLength = 16

// Signer signs and verifies callbacks with one shared secret.
type Signer struct {
	secret    []byte
	tolerance time.Duration
}

// New returns a Signer. An empty or short secret is refused: a service must not start with
// callbacks that anyone can forge.
func New(secret string, tolerance time.Duration) (*Signer, error) {
	if len(secret) < MinSecretLength {
		return nil, fmt.Errorf("payment callback secret must be at least %d characters", MinSecretLength)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	return &Signer{secret: []byte(secret), tolerance: tolerance}, nil
}

// Sign returns the hex signature of body at the unix timestamp ts.
func (s *Signer) Sign(ts string, body []byte) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Notice is the JSON body of a callback.
type Notice struct {
	OrderNo    string `json:"order_no"`
	Status     string `json:"status"` // "paid" or "failed"
	Amount     int64  `json:"amount"` // minor units
	PaymentRef string `json:"payment_ref"`
	Reason     string `json:"reason,omitempty"`
}

// Verify checks the signature and the timestamp window, then parses the body.
func (s *Signer) Verify(timestamp, signature string, body []byte, now time.Time) (domain.PaymentNotice, error) {
	if err := s.Check(timestamp, signature, body, now); err != nil {
		return domain.PaymentNotice{}, err
	}
	return ParseNotice(body)
}

// Check checks that signature signs body at timestamp and that timestamp is within the window
// of now; errors wrap domain.ErrBadSignature. It is how a receiver of cardshop's signed
// webhooks checks them.
func (s *Signer) Check(timestamp, signature string, body []byte, now time.Time) error {
	if timestamp == "" || signature == "" {
		return fmt.Errorf("%w: missing signature headers", domain.ErrBadSignature)
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || len(timestamp) > 12 {
		return fmt.Errorf("%w: malformed timestamp", domain.ErrBadSignature)
	}
	got, err := hex.DecodeString(strings.ToLower(signature))
	if err != nil {
		return fmt.Errorf("%w: malformed signature", domain.ErrBadSignature)
	}
	want, _ := hex.DecodeString(s.Sign(timestamp, body))
	if !hmac.Equal(got, want) {
		return fmt.Errorf("%w: signature does not match", domain.ErrBadSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > s.tolerance || d < -s.tolerance {
		return fmt.Errorf("%w: timestamp outside the %s window", domain.ErrBadSignature, s.tolerance)
	}
	return nil
}

// ParseNotice parses a callback body strictly (strictjson): a key twice (also in another
// letter case), unknown fields (also a field's name in another case), wrong types, trailing
// data, a missing order number, an unknown status or a negative amount are refused.
func ParseNotice(body []byte) (domain.PaymentNotice, error) {
	var n Notice
	if err := strictjson.Decode(body, &n); err != nil {
		var ve *domain.ValidationError
		switch {
		case strictjson.IsDuplicate(err):
			return domain.PaymentNotice{}, err // names the key
		case errors.As(err, &ve) && ve.Reason == strictjson.ReasonTrailing:
			return domain.PaymentNotice{}, domain.Invalid("body", "trailing data after the JSON object")
		}
		return domain.PaymentNotice{}, domain.Invalid("body", "not a valid callback JSON object")
	}
	no, err := domain.ParseOrderNo(n.OrderNo)
	if err != nil {
		return domain.PaymentNotice{}, domain.Invalid("order_no", "missing or malformed")
	}
	if len(n.PaymentRef) > 64 || len(n.Reason) > 256 {
		return domain.PaymentNotice{}, domain.Invalid("payment_ref", "too long")
	}
	out := domain.PaymentNotice{OrderNo: no, Amount: domain.Money(n.Amount), PaymentRef: n.PaymentRef, Reason: n.Reason}
	switch n.Status {
	case "paid":
		out.Paid = true
	case "failed":
	default:
		return domain.PaymentNotice{}, domain.Invalid("status", `must be "paid" or "failed"`)
	}
	if n.Amount < 0 {
		return domain.PaymentNotice{}, domain.Invalid("amount", "must not be negative")
	}
	return out, nil
}

// SignedBody builds and signs a callback body: what a provider (or the `pay` command) sends.
func (s *Signer) SignedBody(n Notice, at time.Time) (body []byte, ts, sig string, err error) {
	body, err = json.Marshal(n)
	if err != nil {
		return nil, "", "", errors.New("encode callback")
	}
	ts = strconv.FormatInt(at.Unix(), 10)
	return body, ts, s.Sign(ts, body), nil
}
