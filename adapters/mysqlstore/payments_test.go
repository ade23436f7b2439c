package mysqlstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"cardshop/adapters/mysqlstore"
	"cardshop/domain"
)

// A notification's texts come from outside: invalid UTF-8, which a utf8mb4 column in strict
// mode refuses, is recorded as U+FFFD instead of failing the Record.
func TestNotificationWithInvalidUTF8IsRecorded(t *testing.T) {
	l := newLedger(t)
	no := domain.OrderNo("pt-utf8-" + time.Now().Format("150405.000000"))
	rec := domain.NotificationRecord{Provider: "pt-a", At: time.Now(), Method: "P\xffST", Remote: "192.0.2.1",
		Result: "refused: \xc3\x28", OrderNo: no, EventID: "evt-\xff", Outcome: "paid"}
	if err := l.Notifications().Record(t.Context(), rec); err != nil {
		t.Fatalf("Record with invalid UTF-8: %v", err)
	}
	got, err := l.Notifications().Recent(t.Context(), domain.NotificationQuery{OrderNo: no, Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("Recent = %+v, %v", got, err)
	}
	if got[0].Method != "P\uFFFDST" || got[0].Result != "refused: \uFFFD(" || got[0].EventID != "evt-\uFFFD" {
		t.Fatalf("read back method %q, result %q, event id %q", got[0].Method, got[0].Result, got[0].EventID)
	}
}

// A payment's own texts are not clipped: one too long for its column is refused as invalid.
func TestPaymentTooLongIsInvalid(t *testing.T) {
	l := newLedger(t)
	cny, _ := domain.ParseCurrency("CNY")
	p := domain.Payment{OrderNo: domain.OrderNo("pt-long-" + time.Now().Format("150405.000000")), Provider: "pt-a",
		Amount: 100, Currency: cny, Status: domain.PaymentOpen, PayURL: "https://pay.example/" + strings.Repeat("x", 3000),
		CreatedAt: time.Now()}
	var ve *domain.ValidationError
	if err := l.Payments().Create(t.Context(), p); !errors.As(err, &ve) {
		t.Fatalf("Create with a 3000-byte pay_url: err = %v, want a ValidationError", err)
	}
	if _, err := l.Payments().Payment(t.Context(), p.OrderNo, p.Provider); !errors.Is(err, domain.ErrPaymentNotFound) {
		t.Fatalf("the refused payment is stored (err = %v)", err)
	}
}

// FuzzClip: whatever the input, clip returns valid UTF-8 of at most width characters that
// begins the input made valid.
func FuzzClip(f *testing.F) {
	f.Add("paid", 16)
	f.Add("界界界", 2)
	f.Add("a\xffb\xc3\x28", 3)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, width int) {
		width = min(max(width, 0), 300)
		got := mysqlstore.Clip(s, width)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > width {
			t.Fatalf("Clip(%q, %d) = %q: invalid or too long", s, width, got)
		}
		valid := strings.ToValidUTF8(s, "\uFFFD")
		if !strings.HasPrefix(valid, got) {
			t.Fatalf("Clip(%q, %d) = %q: not a prefix of %q", s, width, got, valid)
		}
		if utf8.RuneCountInString(valid) <= width && got != valid {
			t.Fatalf("Clip(%q, %d) = %q: cut a text that fits", s, width, got)
		}
	})
}
