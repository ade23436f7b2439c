package bootstrap_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"cardshop/adapters/lab/alertsim"
	"cardshop/adapters/paysig"
	"cardshop/adapters/porttest"
	"cardshop/application"
	"cardshop/bootstrap"
	"cardshop/domain"
)

// TestServiceAlertReachesThePhones runs the whole service, on the memory adapters and on the
// real ones with two instances, with a Telegram and a WeCom channel pointed at the simulators:
// a payment callback with the wrong amount raises amount_mismatch, sent three times (through
// both instances) it is one alert, and the relay workers bring it to each simulator exactly
// once.
func TestServiceAlertReachesThePhones(t *testing.T) {
	const (
		token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
		key   = "693a91f6-7b1c-4bc4-97a0-0ec2f1fa5aaa"
	)
	run := func(t *testing.T, cfg bootstrap.Config, instances int) {
		tg := alertsim.NewTelegram(alertsim.TelegramConfig{Token: token, Chats: []int64{-100777}})
		defer tg.Close()
		wc := alertsim.NewWeCom(alertsim.WeComConfig{Key: key})
		defer wc.Close()
		cfg.AlertTelegramURL, cfg.AlertWeComURL, cfg.RelayInterval = tg.URL(), wc.URL(), 50*time.Millisecond
		var channels *application.AlertChannels
		var cs []client
		for i := range instances {
			if i > 0 {
				cfg.HTTPAddr = freeAddr(t)
			}
			cs = append(cs, runService(t, cfg, io.Discard, fx.Populate(&channels)))
		}
		ctx := context.Background()
		// Channels of earlier runs (a database keeps them) are removed first.
		old, err := channels.List(ctx, application.LegacyAdminIdentity)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range old {
			if _, err := channels.Remove(ctx, application.LegacyAdminIdentity, c.ID); err != nil {
				t.Fatal(err)
			}
		}
		suffix := fmt.Sprint(porttest.NewProductID())
		for _, c := range []domain.AlertChannel{
			{Name: "tg-" + suffix, Type: domain.ChannelTelegram, Target: "-100777", Secret: token, Kinds: []string{"amount_mismatch"}, Enabled: true},
			{Name: "wc-" + suffix, Type: domain.ChannelWeCom, Secret: key, Enabled: true},
		} {
			if _, err := channels.Save(ctx, application.LegacyAdminIdentity, c); err != nil {
				t.Fatal(err)
			}
		}

		pid := porttest.NewProductID()
		a := cs[0]
		a.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Alerted","price":500,"max_per_order":2}`, pid), nil)
		a.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, fmt.Sprintf("AL-%d-1\nAL-%d-2", pid, pid), nil)
		var tok struct {
			Token string `json:"token"`
		}
		a.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"alerted"}`, &tok)
		var o orderBody
		a.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":1}`, pid), &o, "Idempotency-Key", "alert-"+suffix)
		signer, err := paysig.New(cfg.PaymentSecret.Reveal(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			body, ts, sig, err := signer.SignedBody(paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: 1, PaymentRef: "ref-" + suffix}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			c := cs[i%len(cs)]
			req, _ := http.NewRequest("POST", c.base+"/api/payments/callback", strings.NewReader(string(body)))
			req.Header.Set(paysig.HeaderTimestamp, ts)
			req.Header.Set(paysig.HeaderSignature, sig)
			resp, err := c.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		deadline := time.Now().Add(20 * time.Second)
		for len(tg.Messages()) < 1 || len(wc.Messages()) < 1 {
			if time.Now().After(deadline) {
				t.Fatalf("after 20 s: telegram %d, wecom %d messages", len(tg.Messages()), len(wc.Messages()))
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // ten more relay passes on each instance: nothing more comes
		tm, wm := tg.Messages(), wc.Messages()
		if len(tm) != 1 || len(wm) != 1 || !strings.Contains(tm[0].Text, "amount_mismatch") || !strings.Contains(tm[0].Text, o.OrderNo) ||
			!strings.Contains(wm[0].Content, "amount_mismatch") {
			t.Fatalf("telegram got %+v, wecom got %+v; want the alert once each", tm, wm)
		}
	}
	t.Run("memory", func(t *testing.T) {
		cfg, err := bootstrap.LoadConfig(env())
		if err != nil {
			t.Fatal(err)
		}
		cfg.HTTPAddr = freeAddr(t)
		run(t, cfg, 1)
	})
	t.Run("real", func(t *testing.T) {
		cfg, _, _ := realConfigIn(t, time.Minute, "cardshop_test_alert_push_e2e")
		cfg.MySQLConns = 8
		run(t, cfg, 2)
	})
}
