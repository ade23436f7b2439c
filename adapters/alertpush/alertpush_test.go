package alertpush_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/alertpush"
	"cardshop/adapters/lab/alertsim"
	"cardshop/adapters/paysig"
	"cardshop/domain"
)

const (
	token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
	key   = "693a91f6-7b1c-4bc4-97a0-0ec2f1fa5aaa"
)

var push = domain.AlertPush{ID: "alert-7", Kind: "paid_unfulfilled", Product: 1001, OrderNo: "2611290840277479473482445261",
	Message: "paid but no codes: refund or fulfil", At: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}

// TestTelegramAndWeComAnswersBecomeTheRightErrors: delivered with the alert's kind, product,
// order and message; rate limits become RetryAfterError with the service's wait (Telegram's
// retry_after, WeCom's minute); wrong tokens, keys and chats become PushRefusedError; an
// outage or a hang is an error to retry, and no error holds the token or the key.
func TestTelegramAndWeComAnswersBecomeTheRightErrors(t *testing.T) {
	tg := alertsim.NewTelegram(alertsim.TelegramConfig{Token: token, Chats: []int64{-100123}})
	defer tg.Close()
	wc := alertsim.NewWeCom(alertsim.WeComConfig{Key: key})
	defer wc.Close()
	p := alertpush.New(alertpush.Config{TelegramURL: tg.URL(), WeComURL: wc.URL(), Timeout: 300 * time.Millisecond, Shop: "Demo shop"})
	ctx := context.Background()
	telegram := domain.AlertChannel{Type: domain.ChannelTelegram, Target: "-100123", Secret: token}
	wecom := domain.AlertChannel{Type: domain.ChannelWeCom, Secret: key}

	for _, c := range []domain.AlertChannel{telegram, wecom} {
		if err := p.Push(ctx, c, push); err != nil {
			t.Fatalf("%s: %v", c.Type, err)
		}
	}
	for _, text := range []string{tg.Messages()[0].Text, wc.Messages()[0].Content} {
		for _, want := range []string{"[Demo shop] paid_unfulfilled", "product 1001", "order 2611290840277479473482445261",
			"paid but no codes", "2026-12-04 12:00:00 UTC"} {
			if !strings.Contains(text, want) {
				t.Errorf("message %q lacks %q", text, want)
			}
		}
	}

	tg.Throttle(1, 42)
	var ra *domain.RetryAfterError
	if err := p.Push(ctx, telegram, push); !errors.As(err, &ra) || ra.After != 42*time.Second {
		t.Fatalf("telegram throttled: %v", err)
	}
	wc.Throttle(1)
	if err := p.Push(ctx, wecom, push); !errors.As(err, &ra) || ra.After != time.Minute || !strings.Contains(ra.Reason, "45009") {
		t.Fatalf("wecom throttled: %v", err)
	}

	badToken, badKey := "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDbad", "00000000-dead-beef-0000-000000000000"
	var refused *domain.PushRefusedError
	for _, c := range []struct {
		ch   domain.AlertChannel
		want string
	}{
		{domain.AlertChannel{Type: domain.ChannelTelegram, Target: "-100123", Secret: domain.Secret(badToken)}, "telegram 401: Unauthorized"},
		{domain.AlertChannel{Type: domain.ChannelTelegram, Target: "-999", Secret: token}, "telegram 400: Bad Request: chat not found"},
		{domain.AlertChannel{Type: domain.ChannelWeCom, Secret: domain.Secret(badKey)}, "wecom 93000"},
	} {
		err := p.Push(ctx, c.ch, push)
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, c.want) {
			t.Errorf("%s: %v, want a refusal %q", c.ch.Type, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), badToken) || strings.Contains(err.Error(), badKey) || strings.Contains(err.Error(), token)) {
			t.Errorf("the error %q holds a secret", err)
		}
	}

	for _, o := range []alertsim.Outage{alertsim.Error5xx, alertsim.Hang} {
		tg.SetOutage(o)
		wc.SetOutage(o)
		for _, c := range []domain.AlertChannel{telegram, wecom} {
			err := p.Push(ctx, c, push)
			if err == nil || errors.As(err, &refused) || errors.As(err, &ra) || !errors.Is(err, domain.ErrUnavailable) {
				t.Errorf("%s in outage %d: %v, want ErrUnavailable to retry", c.Type, o, err)
			}
			if err != nil && (strings.Contains(err.Error(), token) || strings.Contains(err.Error(), key)) {
				t.Errorf("the error %q holds a secret", err)
			}
		}
	}
}

// TestWebhookPushIsSignedAndEmailCarriesTheID: the webhook's POST verifies with the channel's
// secret, its event id the push's; the e-mail goes to the target with the push's id.
func TestWebhookPushIsSignedAndEmailCarriesTheID(t *testing.T) {
	const secret = "alert-webhook-secret-0123456789"
	signer, err := paysig.New(secret, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		sync.Mutex
		body []byte
		err  error
		id   string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Lock()
		defer got.Unlock()
		got.body, got.id = b, r.Header.Get("X-Cardshop-Event-Id")
		got.err = signer.Check(r.Header.Get(paysig.HeaderTimestamp), r.Header.Get(paysig.HeaderSignature), b, time.Now())
	}))
	defer srv.Close()
	mail := &fakeMailer{}
	p := alertpush.New(alertpush.Config{Mailer: mail})
	if err := p.Push(context.Background(), domain.AlertChannel{Type: domain.ChannelWebhook, Target: srv.URL, Secret: secret}, push); err != nil {
		t.Fatal(err)
	}
	got.Lock()
	var ev struct {
		ID   string           `json:"id"`
		Type string           `json:"type"`
		Data domain.AlertPush `json:"data"`
	}
	if got.err != nil || json.Unmarshal(got.body, &ev) != nil || ev.ID != "alert-7" || got.id != "alert-7" || ev.Type != "alert" ||
		ev.Data.Kind != "paid_unfulfilled" || ev.Data.OrderNo != push.OrderNo {
		t.Fatalf("webhook: signature %v, event %s", got.err, got.body)
	}
	got.Unlock()
	if err := p.Push(context.Background(), domain.AlertChannel{Type: domain.ChannelEmail, Target: "ops@shop.example"}, push); err != nil {
		t.Fatal(err)
	}
	if mail.to != "ops@shop.example" || mail.id != "alert-7" || !strings.Contains(mail.subject, "paid_unfulfilled") ||
		!strings.Contains(mail.text, "paid but no codes") {
		t.Fatalf("mail: %+v", mail)
	}
	var refused *domain.PushRefusedError
	if err := alertpush.New(alertpush.Config{}).Push(context.Background(), domain.AlertChannel{Type: domain.ChannelEmail,
		Target: "ops@shop.example"}, push); !errors.As(err, &refused) {
		t.Fatalf("e-mail without a mailer: %v, want a refusal", err)
	}
}

type fakeMailer struct{ to, id, subject, text string }

func (m *fakeMailer) SendAlertMail(_ context.Context, to, id, subject, text string) error {
	m.to, m.id, m.subject, m.text = to, id, subject, text
	return nil
}
