package paysig_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/paysig"
	"cardshop/domain"
)

const secret = "0123456789abcdef-shared"

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func signer(t testing.TB, secret string) *paysig.Signer {
	t.Helper()
	s, err := paysig.New(secret, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var paid = paysig.Notice{OrderNo: "2503011200001234123456789012", Status: "paid", Amount: 1998, PaymentRef: "pay-1"}

func TestSignVerifyRoundTrip(t *testing.T) {
	s := signer(t, secret)
	body, ts, sig, err := s.SignedBody(paid, now)
	if err != nil {
		t.Fatal(err)
	}
	if ts != strconv.FormatInt(now.Unix(), 10) || len(sig) != 64 {
		t.Fatalf("ts %q sig %q", ts, sig)
	}
	n, err := s.Verify(ts, sig, body, now)
	if err != nil {
		t.Fatal(err)
	}
	want := domain.PaymentNotice{OrderNo: domain.OrderNo(paid.OrderNo), Paid: true, Amount: 1998, PaymentRef: "pay-1"}
	if n != want {
		t.Fatalf("notice = %+v, want %+v", n, want)
	}
	// Upper-case hex is the same signature.
	if _, err := s.Verify(ts, strings.ToUpper(sig), body, now); err != nil {
		t.Errorf("upper-case signature refused: %v", err)
	}
	// The window's edges are inside it.
	for _, at := range []time.Time{now.Add(5 * time.Minute), now.Add(-5 * time.Minute)} {
		if _, err := s.Verify(ts, sig, body, at); err != nil {
			t.Errorf("verify at %v: %v", at.Sub(now), err)
		}
	}
	failed := paysig.Notice{OrderNo: "N-1", Status: "failed", Reason: "declined"}
	body, ts, sig, _ = s.SignedBody(failed, now)
	n, err = s.Verify(ts, sig, body, now)
	if err != nil || n.Paid || n.Reason != "declined" || n.OrderNo != "N-1" {
		t.Fatalf("failed notice = %+v, %v", n, err)
	}
	// The Signer is a domain.PaymentVerifier.
	var _ domain.PaymentVerifier = s
}

func TestVerifyRefuses(t *testing.T) {
	s := signer(t, secret)
	body, ts, sig, _ := s.SignedBody(paid, now)
	other := signer(t, "another-secret-of-16+")
	_, _, otherSig, _ := other.SignedBody(paid, now)
	stale := strconv.FormatInt(now.Add(-5*time.Minute-time.Second).Unix(), 10)
	future := strconv.FormatInt(now.Add(5*time.Minute+time.Second).Unix(), 10)
	edited := strings.Replace(string(body), "1998", "1", 1)
	tests := []struct {
		name    string
		ts, sig string
		body    string
	}{
		{"forged signature", ts, strings.Repeat("ab", 32), string(body)},
		{"signed with another secret", ts, otherSig, string(body)},
		{"no timestamp", "", sig, string(body)},
		{"no signature", ts, "", string(body)},
		{"no headers", "", "", string(body)},
		{"signature not hex", ts, strings.Repeat("zz", 32), string(body)},
		{"signature of odd length", ts, sig[:63], string(body)},
		{"signature truncated", ts, sig[:62], string(body)},
		{"signature with a prefix", ts, "sha256=" + sig, string(body)},
		{"timestamp not a number", "soon", sig, string(body)},
		{"timestamp too long", "0000000000000" + ts, sig, string(body)},
		{"timestamp changed", strconv.FormatInt(now.Unix()+1, 10), sig, string(body)},
		{"stale, correctly signed", stale, s.Sign(stale, body), string(body)},
		{"future, correctly signed", future, s.Sign(future, body), string(body)},
		{"negative timestamp, correctly signed", "-1", s.Sign("-1", body), string(body)},
		{"amount edited after signing", ts, sig, edited},
		{"whitespace added after signing", ts, sig, string(body) + " "},
		{"body emptied", ts, sig, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := s.Verify(tt.ts, tt.sig, []byte(tt.body), now)
			if !errors.Is(err, domain.ErrBadSignature) {
				t.Fatalf("err = %v, want ErrBadSignature", err)
			}
			if n != (domain.PaymentNotice{}) {
				t.Fatalf("a refused callback returned a notice: %+v", n)
			}
		})
	}
}

func TestNewRefusesWeakSecrets(t *testing.T) {
	for _, sec := range []string{"", "short", strings.Repeat("x", paysig.MinSecretLength-1)} {
		if s, err := paysig.New(sec, time.Minute); err == nil || s != nil {
			t.Errorf("New(%q) accepted", sec)
		}
	}
	if _, err := paysig.New(strings.Repeat("x", paysig.MinSecretLength), 0); err != nil {
		t.Errorf("a secret of the minimum length: %v", err)
	}
}

func TestDefaultTolerance(t *testing.T) {
	s, err := paysig.New(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{paysig.DefaultTolerance, -paysig.DefaultTolerance} {
		body, ts, sig, _ := s.SignedBody(paid, now.Add(d))
		if _, err := s.Verify(ts, sig, body, now); err != nil {
			t.Errorf("inside the default window (%v): %v", d, err)
		}
		body, ts, sig, _ = s.SignedBody(paid, now.Add(d+d/abs(d)*time.Second))
		if _, err := s.Verify(ts, sig, body, now); !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("outside the default window (%v): %v", d, err)
		}
	}
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func TestParseNotice(t *testing.T) {
	const no = `"order_no":"2503011200001234123456789012"`
	tests := []struct {
		name  string
		body  string
		field string // "" = valid
	}{
		{"paid", `{` + no + `,"status":"paid","amount":1998,"payment_ref":"p"}`, ""},
		{"failed with a reason", `{` + no + `,"status":"failed","amount":0,"reason":"declined"}`, ""},
		{"without a payment ref", `{` + no + `,"status":"paid","amount":5}`, ""},
		{"surrounding whitespace", " \n{" + no + `,"status":"paid","amount":5}` + "\n ", ""},
		{"unknown field", `{` + no + `,"status":"paid","amount":5,"currency":"EUR"}`, "body"},
		{"trailing object", `{` + no + `,"status":"paid","amount":5}{}`, "body"},
		{"trailing garbage", `{` + no + `,"status":"paid","amount":5} x`, "body"},
		{"trailing brace", `{` + no + `,"status":"paid","amount":5}}`, "body"},
		{"trailing bracket", `{` + no + `,"status":"paid","amount":5}]`, "body"},
		{"amount twice", `{` + no + `,"status":"paid","amount":1,"amount":200}`, "amount"},
		{"amount in two cases", `{` + no + `,"status":"paid","amount":1,"Amount":200}`, "Amount"},
		{"status folded with a long s", `{` + no + `,"status":"failed","\u017ftatus":"paid","amount":5}`, "\u017ftatus"},
		{"amount only in another case", `{` + no + `,"status":"paid","Amount":5}`, "body"},
		{"status in upper case", `{` + no + `,"status":"PAID","amount":5}`, "status"},
		{"unknown status", `{` + no + `,"status":"refunded","amount":5}`, "status"},
		{"no status", `{` + no + `,"amount":5}`, "status"},
		{"negative amount", `{` + no + `,"status":"paid","amount":-1}`, "amount"},
		{"fractional amount", `{` + no + `,"status":"paid","amount":1.5}`, "body"},
		{"amount as a string", `{` + no + `,"status":"paid","amount":"5"}`, "body"},
		{"amount overflows", `{` + no + `,"status":"paid","amount":9223372036854775808}`, "body"},
		{"missing order_no", `{"status":"paid","amount":5}`, "order_no"},
		{"empty order_no", `{"order_no":"","status":"paid","amount":5}`, "order_no"},
		{"malformed order_no", `{"order_no":"../x","status":"paid","amount":5}`, "order_no"},
		{"payment ref too long", `{` + no + `,"status":"paid","amount":5,"payment_ref":"` + strings.Repeat("r", 65) + `"}`, "payment_ref"},
		{"empty body", ``, "body"},
		{"null", `null`, "order_no"},
		{"array", `[]`, "body"},
		{"not JSON", `order_no=1&status=paid`, "body"},
		{"truncated", `{` + no + `,"status":"pa`, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := paysig.ParseNotice([]byte(tt.body))
			if tt.field == "" {
				if err != nil || n.OrderNo == "" {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("err = %v, want a ValidationError", err)
			}
			if ve.Field != tt.field {
				t.Fatalf("field = %q, want %q (%v)", ve.Field, tt.field, err)
			}
			if errors.Is(err, domain.ErrBadSignature) {
				t.Fatal("a parse error must not look like a bad signature")
			}
		})
	}
}

func TestVerifyParsesOnlyAfterTheSignature(t *testing.T) {
	// A well-signed body that does not parse is a validation error, not a bad signature; a
	// badly signed one is never parsed.
	s := signer(t, secret)
	body := []byte(`{"order_no":"x","status":"nope"}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	if _, err := s.Verify(ts, s.Sign(ts, body), body, now); !errors.Is(err, domain.ErrInvalidInput) {
		t.Errorf("well-signed bad body: %v", err)
	}
	if _, err := s.Verify(ts, strings.Repeat("0", 64), body, now); !errors.Is(err, domain.ErrBadSignature) {
		t.Errorf("badly signed bad body: %v", err)
	}
}

func FuzzParseNotice(f *testing.F) {
	f.Add([]byte(`{"order_no":"N1","status":"paid","amount":1998,"payment_ref":"p"}`))
	f.Add([]byte(`{"order_no":"N1","status":"failed","amount":0,"reason":"r"}`))
	f.Add([]byte(`{"order_no":"N1","status":"paid","amount":5}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"order_no":"N1","status":"paid","amount":-1}`))
	f.Add([]byte{0xff, '{'})
	f.Add([]byte(`{"order_no":"N1","status":"paid","amount":1,"Amount":200}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := paysig.ParseNotice(body)
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("error outside the ValidationError family: %v", err)
			}
			return
		}
		if _, err := domain.ParseOrderNo(string(n.OrderNo)); err != nil {
			t.Fatalf("accepted order number %q", n.OrderNo)
		}
		if n.Amount < 0 || len(n.PaymentRef) > 64 || len(n.Reason) > 256 {
			t.Fatalf("accepted %+v", n)
		}
	})
}

func FuzzVerify(f *testing.F) {
	s := signer(f, secret)
	body, ts, sig, _ := s.SignedBody(paid, now)
	f.Add(ts, sig, body, int64(0))
	f.Add(ts, sig, body, int64(301))
	f.Add("", "", []byte(nil), int64(0))
	f.Add("999999999999", strings.Repeat("f", 64), []byte("{}"), int64(-1<<40))
	f.Add("-9223372036854775808", "00", body, int64(1<<40))
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte, offset int64) {
		at := now.Add(time.Duration(offset) * time.Second)
		n, err := s.Verify(ts, sig, body, at)
		if err != nil {
			if !errors.Is(err, domain.ErrBadSignature) && !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("unexpected error family: %v", err)
			}
			return
		}
		// Accepted: it must be exactly our signature over exactly this body, inside the window.
		if strings.ToLower(sig) != s.Sign(ts, body) {
			t.Fatalf("accepted a signature that is not ours")
		}
		sec, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil {
			t.Fatalf("accepted timestamp %q", ts)
		}
		if d := at.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
			t.Fatalf("accepted a timestamp %v away", d)
		}
		if n.OrderNo == "" {
			t.Fatalf("accepted a notice without an order")
		}
	})
}
