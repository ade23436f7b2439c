package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/stripesim"
	"cardshop/adapters/stripe"
	"cardshop/domain"
)

const fuzzSecret = "whsec_Vq8kD3pL0tZr7NcYx2mWb5HsJ4eFgA6u"

var fuzzAt = time.Unix(1740830405, 0)

func fuzzGateway(f *testing.F) *stripe.Gateway {
	gw, err := stripe.New(stripe.Config{SecretKey: "sk_test_Zf4kQ9rT2mW7xB1nC5vL8pS3", WebhookSecrets: []string{fuzzSecret}})
	if err != nil {
		f.Fatal(err)
	}
	return gw
}

// FuzzVerifyHeader: any Stripe-Signature header over a genuine event is refused with
// ErrBadSignature unless it carries the event's own v1 signature and a timestamp within the
// tolerance of the arrival; it never panics.
func FuzzVerifyHeader(f *testing.F) {
	gw := fuzzGateway(f)
	body, err := os.ReadFile("testdata/checkout_session_completed.json")
	if err != nil {
		f.Fatal(err)
	}
	ts := strconv.FormatInt(fuzzAt.Unix(), 10)
	good := stripesim.Sign(fuzzSecret, fuzzAt, body)
	for _, h := range []string{"t=" + ts + ",v1=" + good, "v1=" + good + ",t=" + ts, "t=" + ts + ",v1=00,v1=" + good,
		"t=" + ts + ",v0=" + good, "t=,v1=", "t=1,t=2,v1=" + good, "", ",", "=", "t=" + ts + ",v1=" + strings.ToUpper(good),
		"t=1740830000,v1=" + good, "t=" + ts + ",v1=" + good + ",v1=" + good} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, h string) {
		n, err := gw.Verify(context.Background(), domain.InboundRequest{Header: domain.Header{stripe.SignatureHeader: {h}}, Body: body, At: fuzzAt})
		if err != nil {
			if !errors.Is(err, domain.ErrBadSignature) {
				t.Fatalf("%q: %v", h, err)
			}
			return
		}
		var sigOK, tOK bool
		for item := range strings.SplitSeq(h, ",") {
			k, v, _ := strings.Cut(item, "=")
			switch k {
			case "v1":
				sigOK = sigOK || strings.EqualFold(v, good)
			case "t":
				sec, perr := strconv.ParseInt(v, 10, 64)
				d := fuzzAt.Sub(time.Unix(sec, 0))
				tOK = perr == nil && d <= stripe.Tolerance && d >= -stripe.Tolerance
			}
		}
		if !sigOK || !tOK || n.OrderNo != "2503011200001234123456789012" {
			t.Fatalf("accepted %q: %+v", h, n)
		}
	})
}

// FuzzVerifyBody: a correctly signed body is either a notice that holds together (a payment's,
// a refund's, or one that changes nothing) or a ValidationError, never a signature refusal and
// never a panic.
func FuzzVerifyBody(f *testing.F) {
	gw := fuzzGateway(f)
	vector, err := os.ReadFile("testdata/checkout_session_completed.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(vector)
	paid := `,"payment_status":"paid","status":"complete","amount_total":1998,"currency":"usd"`
	for _, b := range []string{
		`{"id":"evt_9","object":"event","type":"checkout.session.completed","data":{"object":` + session(paid) + `}}`,
		`{"id":"evt_9","object":"event","type":"checkout.session.async_payment_failed","data":{"object":` + session(`,"status":"complete"`) + `}}`,
		`{"id":"evt_9","object":"event","type":"checkout.session.expired","data":{"object":` + session(`,"amount_total":null,"currency":null`) + `}}`,
		`{"id":"evt_9","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1"}}}`,
		`{"id":"evt_9","object":"event","type":"checkout.session.completed","data":{"object":` + session(`,"payment_status":"paid","amount_total":1e3,"currency":"jpy"`) + `}}`,
		`{}`, `[]`, `null`, ``, `{"id":"evt_9","ID":"evt_8"}`,
		`{"id":"evt_9","object":"event","type":"refund.updated","data":{"object":` + refundJSON(`,"status":"succeeded"`) + `}}`,
		`{"id":"evt_9","object":"event","type":"refund.failed","data":{"object":` + refundJSON(`,"status":"failed","failure_reason":"declined"`) + `}}`,
		`{"id":"evt_9","object":"event","type":"charge.refunded","data":{"object":{"id":"ch_1","object":"charge","refunds":{"data":[` + refundJSON(`,"status":"pending"`) + `]}}}}`,
		`{"id":"evt_9","object":"event","type":"refund.created","data":{"object":{"id":"re_1","object":"refund","metadata":{}}}}`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h := http.Header{stripe.SignatureHeader: {stripesim.SignatureHeader(fuzzAt, body, fuzzSecret)}}
		n, err := gw.Verify(context.Background(), domain.InboundRequest{Header: domain.Header(h), Body: body, At: fuzzAt})
		if err != nil {
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || errors.Is(err, domain.ErrBadSignature) {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		if !strings.HasPrefix(n.EventID, "evt_") || n.Amount < 0 || n.Outcome.String() == "unknown" {
			t.Fatalf("%q: %+v", body, n)
		}
		switch {
		case n.RefundNo != "":
			// A refund notice: cardshop's refund of a valid order, a known outcome, the refund's
			// id, an amount in a currency; the payment outcome untouched.
			if _, err := domain.ParseOrderNo(string(n.OrderNo)); err != nil || n.Outcome != domain.OutcomePending ||
				n.RefundOutcome.String() == "unknown" || !(strings.HasPrefix(n.ProviderRef, "re_") || strings.HasPrefix(n.ProviderRef, "pyr_")) ||
				n.Currency.IsZero() {
				t.Fatalf("%q: %+v", body, n)
			}
		case n.RefundOutcome != 0:
			t.Fatalf("a refund outcome without a refund number: %+v", n)
		case n.OrderNo != "":
			if _, err := domain.ParseOrderNo(string(n.OrderNo)); err != nil || !strings.HasPrefix(n.ProviderRef, "cs_") {
				t.Fatalf("%q: %+v", body, n)
			}
		case n.Outcome != domain.OutcomePending || n.ProviderRef != "":
			t.Fatalf("a notice without an order must change nothing: %+v", n)
		}
		if n.Outcome == domain.OutcomePaid && (n.Currency.IsZero() || n.OrderNo == "") {
			t.Fatalf("paid without currency or order: %+v", n)
		}
		if !n.Currency.IsZero() {
			if c, err := domain.ParseCurrency(n.Currency.Code); err != nil || c != n.Currency {
				t.Fatalf("currency %+v", n.Currency)
			}
		}
	})
}
