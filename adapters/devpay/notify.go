package devpay

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cardshop/domain"
)

// Header names of a dev notification.
const (
	HeaderTimestamp = "Devpay-Timestamp"
	HeaderSignature = "Devpay-Signature"
)

// maxBody is the largest notification body Verify reads; the provider's own are far smaller.
const maxBody = 8 << 10

// notice is the JSON body of a dev notification.
type notice struct {
	EventID     string `json:"event_id"`
	OrderNo     string `json:"order_no"`
	ProviderRef string `json:"provider_ref"`
	Outcome     string `json:"outcome"` // "paid" or "failed"
	Amount      int64  `json:"amount"`  // minor units of currency
	Currency    string `json:"currency"`
	Reason      string `json:"reason,omitempty"`
}

// notifySig is the hex signature of body at the unix timestamp ts.
func (g *Gateway) notifySig(ts string, body []byte) string {
	m := hmac.New(sha256.New, g.notifyKey)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// notification builds the signed request the dev provider sends for n at at.
func (g *Gateway) notification(n notice, at time.Time) domain.InboundRequest {
	body, _ := json.Marshal(n) // strings and an integer: cannot fail
	ts := strconv.FormatInt(at.Unix(), 10)
	h := domain.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, "v1="+g.notifySig(ts, body))
	return domain.InboundRequest{Method: http.MethodPost, Header: h, Body: body, At: at}
}

// Verify checks a dev notification's signature (constant time) and its timestamp (within
// Tolerance of in.At), then parses its body strictly.
func (g *Gateway) Verify(_ context.Context, in domain.InboundRequest) (domain.ProviderNotice, error) {
	if in.Method != http.MethodPost {
		return domain.ProviderNotice{}, fmt.Errorf("%w: dev notifications are POSTs", domain.ErrBadSignature)
	}
	ts, sig := in.Header.Get(HeaderTimestamp), in.Header.Get(HeaderSignature)
	if len(in.Header.Values(HeaderTimestamp)) != 1 || len(in.Header.Values(HeaderSignature)) != 1 {
		return domain.ProviderNotice{}, fmt.Errorf("%w: missing or repeated signature headers", domain.ErrBadSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(ts) > 12 || sec <= 0 {
		return domain.ProviderNotice{}, fmt.Errorf("%w: malformed timestamp", domain.ErrBadSignature)
	}
	hexSig, ok := strings.CutPrefix(sig, "v1=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(got) != sha256.Size {
		return domain.ProviderNotice{}, fmt.Errorf("%w: malformed signature", domain.ErrBadSignature)
	}
	want, _ := hex.DecodeString(g.notifySig(ts, in.Body))
	if !hmac.Equal(got, want) {
		return domain.ProviderNotice{}, fmt.Errorf("%w: signature does not match", domain.ErrBadSignature)
	}
	if d := in.At.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return domain.ProviderNotice{}, fmt.Errorf("%w: timestamp outside the %s window", domain.ErrBadSignature, Tolerance)
	}
	return parseNotice(in.Body)
}

// parseNotice reads a verified body: unknown fields, trailing data, a malformed order number,
// an unknown outcome or currency, a non-positive amount are refused.
func parseNotice(body []byte) (domain.ProviderNotice, error) {
	if len(body) > maxBody {
		return domain.ProviderNotice{}, domain.Invalid("body", "too large")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var n notice
	if err := dec.Decode(&n); err != nil {
		return domain.ProviderNotice{}, domain.Invalid("body", "not a dev notification")
	}
	if _, err := dec.Token(); err != io.EOF {
		return domain.ProviderNotice{}, domain.Invalid("body", "trailing data after the JSON object")
	}
	no, err := domain.ParseOrderNo(n.OrderNo)
	if err != nil {
		return domain.ProviderNotice{}, domain.Invalid("order_no", "missing or malformed")
	}
	if !validID(n.EventID, "evt_") {
		return domain.ProviderNotice{}, domain.Invalid("event_id", "missing or malformed")
	}
	if !validID(n.ProviderRef, "dev_") {
		return domain.ProviderNotice{}, domain.Invalid("provider_ref", "missing or malformed")
	}
	cur, err := domain.ParseCurrency(n.Currency)
	if err != nil || cur.Code != n.Currency {
		return domain.ProviderNotice{}, domain.Invalid("currency", "not an upper-case ISO 4217 code the shop sells in")
	}
	if n.Amount <= 0 {
		return domain.ProviderNotice{}, domain.Invalid("amount", "must be positive")
	}
	if len(n.Reason) > 256 {
		return domain.ProviderNotice{}, domain.Invalid("reason", "too long")
	}
	out := domain.ProviderNotice{OrderNo: no, ProviderRef: n.ProviderRef, EventID: n.EventID,
		Amount: domain.Money(n.Amount), Currency: cur, Reason: n.Reason}
	switch n.Outcome {
	case "paid":
		out.Outcome = domain.OutcomePaid
	case "failed":
		out.Outcome = domain.OutcomeFailed
	default:
		return domain.ProviderNotice{}, domain.Invalid("outcome", `must be "paid" or "failed"`)
	}
	return out, nil
}

// validID reports whether s is prefix followed by 1 to 64 lower-case hex digits.
func validID(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) == 0 || len(rest) > 64 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Reply is 200 {"received":true} when accepted, 400 {"received":false} when refused.
func (g *Gateway) Reply(accepted bool) (status int, contentType string, body []byte) {
	if accepted {
		return http.StatusOK, "application/json", []byte(`{"received":true}`)
	}
	return http.StatusBadRequest, "application/json", []byte(`{"received":false}`)
}
