package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/alertpush"
	"cardshop/adapters/lab/alertsim"
	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/adapters/porttest"
	"cardshop/application"
	"cardshop/domain"
)

const (
	simToken = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
	simChat  = -1001234567890
	simKey   = "693a91f6-7xxx-4bc4-97a0-0ec2sifa5aaa"
)

var admin = application.Identity{Name: "root", Role: domain.RoleAdmin}

// pushRig is several shop instances over one ledger, pushing to a Telegram and a WeCom
// simulator through the real pusher, on one fake clock.
type pushRig struct {
	ctx    context.Context
	clock  *memory.FakeClock
	ledger domain.Ledger
	apps   []*application.App
	tg     *alertsim.Telegram
	wc     *alertsim.WeCom
}

func newPushRig(t *testing.T, ledger domain.Ledger, instances int, cfg func(*application.Config)) *pushRig {
	t.Helper()
	r := &pushRig{ctx: context.Background(), clock: memory.NewFakeClock(t0), ledger: ledger}
	r.tg = alertsim.NewTelegram(alertsim.TelegramConfig{Token: simToken, Chats: []int64{simChat}})
	r.wc = alertsim.NewWeCom(alertsim.WeComConfig{Key: simKey, Now: r.clock.Now})
	t.Cleanup(r.tg.Close)
	t.Cleanup(r.wc.Close)
	pusher := alertpush.New(alertpush.Config{TelegramURL: r.tg.URL(), WeComURL: r.wc.URL(), Timeout: 2 * time.Second})
	signer, err := paysig.New(testSecret, paysig.DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	c := application.DefaultConfig()
	if cfg != nil {
		cfg(&c)
	}
	for range instances {
		q := memory.NewDelayQueue(r.clock)
		t.Cleanup(q.Close)
		app, err := application.New(c, application.Deps{Ledger: ledger, Gate: memory.NewGate(r.clock), Queue: q,
			Publisher: memory.NewPublisher(), Verifier: signer, Alerter: memory.NewAlerts(quiet), AlertPusher: pusher,
			Clock: r.clock, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		r.apps = append(r.apps, app)
	}
	// Channels of earlier runs (a database keeps them) would take these alerts too.
	cs, err := ledger.AlertChannels().Channels(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range cs {
		if _, err := r.apps[0].AlertChannels.Remove(r.ctx, admin, ch.ID); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *pushRig) channel(t *testing.T, c domain.AlertChannel) domain.AlertChannel {
	t.Helper()
	c.Name = fmt.Sprintf("%s-%d", c.Name, porttest.NewProductID())
	saved, err := r.apps[0].AlertChannels.Save(r.ctx, admin, c)
	if err != nil {
		t.Fatalf("save channel %s: %v", c.Name, err)
	}
	return saved
}

// relay runs every instance's alert relay at once, rounds times.
func (r *pushRig) relay(t *testing.T, rounds int) {
	t.Helper()
	for range rounds {
		var wg sync.WaitGroup
		for _, a := range r.apps {
			for range 2 {
				wg.Go(func() {
					if _, err := a.Relay.RelayAlerts(r.ctx); err != nil {
						t.Errorf("relay alerts: %v", err)
					}
				})
			}
		}
		wg.Wait()
	}
}

func (r *pushRig) raise(kind string, p domain.ProductID, msg string) {
	r.apps[0].RaiseAlert(r.ctx, domain.Alert{Kind: kind, Product: p, Message: msg})
}

func (r *pushRig) channelNow(t *testing.T, id int64) domain.AlertChannel {
	t.Helper()
	c, err := r.ledger.AlertChannels().Channel(r.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func countContaining[T any](xs []T, text func(T) string, sub string) int {
	n := 0
	for _, x := range xs {
		if strings.Contains(text(x), sub) {
			n++
		}
	}
	return n
}

func tgText(m alertsim.TelegramMessage) string { return m.Text }
func wcText(m alertsim.WeComMessage) string    { return m.Content }

func TestAlertPushMemory(t *testing.T) {
	runAlertPush(t, func(*testing.T) domain.Ledger { return memory.NewLedger() })
}

func TestAlertPushMariaDB(t *testing.T) {
	real := newRealLedger(t, "cardshop_test_alert_push", false)
	runAlertPush(t, func(t *testing.T) domain.Ledger {
		l, _ := real.get(t)
		return l
	})
}

func runAlertPush(t *testing.T, newLedger func(*testing.T) domain.Ledger) {
	t.Run("OncePerChannelFilteredAcrossInstances", func(t *testing.T) {
		r := newPushRig(t, newLedger(t), 3, nil)
		tg := r.channel(t, domain.AlertChannel{Name: "tg", Type: domain.ChannelTelegram, Target: fmt.Sprint(simChat),
			Secret: simToken, Kinds: []string{"fulfil_failed"}, Enabled: true})
		r.channel(t, domain.AlertChannel{Name: "wc", Type: domain.ChannelWeCom, Secret: simKey, Enabled: true})
		r.channel(t, domain.AlertChannel{Name: "off", Type: domain.ChannelTelegram, Target: fmt.Sprint(simChat),
			Secret: simToken, Enabled: false})
		p := porttest.NewProductID()
		// Twenty raises of one condition from every instance at once fold into one alert: one
		// push per channel. Another kind passes the WeCom channel's filter only.
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				r.apps[i%len(r.apps)].RaiseAlert(r.ctx, domain.Alert{Kind: "fulfil_failed", Product: p,
					Message: fmt.Sprintf("fulfil of product %d failed", p)})
			})
		}
		wg.Wait()
		r.raise("late_payment", p, "late")
		r.relay(t, 3)
		tm, wm := r.tg.Messages(), r.wc.Messages()
		if got := countContaining(tm, tgText, fmt.Sprint(p)); got != 1 || len(tm) != 1 {
			t.Fatalf("telegram got %d messages about product %d (%d in all), want 1: %+v", got, p, len(tm), tm)
		}
		if !strings.Contains(tm[0].Text, "fulfil_failed") {
			t.Errorf("telegram's message %q does not name the kind", tm[0].Text)
		}
		if a, b := countContaining(wm, wcText, "fulfil_failed"), countContaining(wm, wcText, "late_payment"); a != 1 || b != 1 || len(wm) != 2 {
			t.Fatalf("wecom got %+v, want one fulfil_failed and one late_payment", wm)
		}
		for _, a := range r.apps {
			if n, err := a.Relay.AlertBacklog(r.ctx); err != nil || n != 0 {
				t.Fatalf("alert backlog %d, %v; want 0", n, err)
			}
		}
		if c := r.channelNow(t, tg.ID); c.LastOKAt.IsZero() || c.LastError != "" {
			t.Errorf("telegram channel's outcome: ok at %v, error %q", c.LastOKAt, c.LastError)
		}
		// A raise folded into the open alert pushes nothing; once acknowledged, the next one does.
		r.raise("fulfil_failed", p, "again")
		r.relay(t, 1)
		if got := len(r.tg.Messages()); got != 1 {
			t.Fatalf("a folded raise pushed again: %d telegram messages", got)
		}
		as, err := r.apps[0].Admin.Alerts(r.ctx, domain.AlertFilter{Kind: "fulfil_failed", Product: p})
		if err != nil || len(as) != 1 || as[0].Count != 21 {
			t.Fatalf("alerts %+v, %v; want one open alert counting 21 raises", as, err)
		}
		if _, err := r.apps[0].Admin.AcknowledgeAlert(r.ctx, as[0].ID, "root", ""); err != nil {
			t.Fatal(err)
		}
		r.raise("fulfil_failed", p, "once more")
		r.relay(t, 1)
		if got := countContaining(r.tg.Messages(), tgText, "once more"); got != 1 {
			t.Fatalf("the raise after the acknowledgement reached telegram %d times, want 1", got)
		}
	})

	t.Run("RateLimitsWaitForRetryAfter", func(t *testing.T) {
		r := newPushRig(t, newLedger(t), 2, nil)
		r.channel(t, domain.AlertChannel{Name: "tg", Type: domain.ChannelTelegram, Target: fmt.Sprint(simChat),
			Secret: simToken, Enabled: true})
		r.channel(t, domain.AlertChannel{Name: "wc", Type: domain.ChannelWeCom, Secret: simKey, Enabled: true})
		r.tg.Throttle(1, 30)
		r.wc.Throttle(1)
		p := porttest.NewProductID()
		r.raise("mail_failed", p, "throttled")
		r.relay(t, 1)
		if len(r.tg.Messages())+len(r.wc.Messages()) != 0 {
			t.Fatal("a rate-limited push went through")
		}
		r.clock.Advance(29 * time.Second)
		r.relay(t, 1)
		if n := r.tg.Requests(); n != 1 {
			t.Fatalf("telegram was asked %d times before its retry_after (30 s) passed, want 1", n)
		}
		r.clock.Advance(2 * time.Second)
		r.relay(t, 1)
		if len(r.tg.Messages()) != 1 || len(r.wc.Messages()) != 0 {
			t.Fatalf("after 31 s: telegram %d, wecom %d messages; want 1 and 0 (WeCom waits out its minute)",
				len(r.tg.Messages()), len(r.wc.Messages()))
		}
		r.clock.Advance(30 * time.Second)
		r.relay(t, 1)
		if len(r.tg.Messages()) != 1 || len(r.wc.Messages()) != 1 {
			t.Fatalf("after 61 s: telegram %d, wecom %d messages; want 1 each", len(r.tg.Messages()), len(r.wc.Messages()))
		}
	})

	t.Run("DeadChannelRecordsTheErrorAfterTheLastAttempt", func(t *testing.T) {
		r := newPushRig(t, newLedger(t), 2, func(c *application.Config) { c.AlertAttempts = 3 })
		// A wrong key is refused for good at the first attempt.
		bad := r.channel(t, domain.AlertChannel{Name: "badkey", Type: domain.ChannelWeCom, Secret: "0000000-wrong-key", Enabled: true})
		r.raise("mail_failed", porttest.NewProductID(), "nobody hears")
		for range 3 {
			r.relay(t, 1)
			r.clock.Advance(time.Hour)
		}
		if n := r.wc.Requests(); n != 1 {
			t.Fatalf("the robot was asked %d times with a wrong key, want 1", n)
		}
		if b := r.channelNow(t, bad.ID); !strings.Contains(b.LastError, "93000") || !strings.Contains(b.LastError, "at attempt 1") ||
			strings.Contains(b.LastError, "0000000-wrong-key") {
			t.Fatalf("wrong key's outcome: %q", b.LastError)
		}
		if _, err := r.apps[0].AlertChannels.Remove(r.ctx, admin, bad.ID); err != nil {
			t.Fatal(err)
		}
		// An outage: three attempts, then given up with the error recorded.
		wc := r.channel(t, domain.AlertChannel{Name: "wc", Type: domain.ChannelWeCom, Secret: simKey, Enabled: true})
		r.wc.SetOutage(alertsim.Error5xx)
		r.raise("mail_failed", porttest.NewProductID(), "nobody hears either")
		for range 6 {
			r.relay(t, 1)
			r.clock.Advance(time.Hour)
		}
		if n := r.wc.Requests(); n != 1+3 {
			t.Fatalf("the robot was asked %d times, want 1 (wrong key) + 3 (outage)", n)
		}
		c := r.channelNow(t, wc.ID)
		if !c.LastOKAt.IsZero() || !strings.Contains(c.LastError, "at attempt 3") || !strings.Contains(c.LastError, "502") {
			t.Fatalf("dead channel's outcome: ok %v, error %q", c.LastOKAt, c.LastError)
		}
		if strings.Contains(c.LastError, simKey) {
			t.Fatal("a recorded error holds the robot's key")
		}
		if n, _ := r.apps[0].Relay.AlertBacklog(r.ctx); n != 0 {
			t.Fatalf("backlog %d after giving up, want 0", n)
		}
	})

	t.Run("TestButtonSaysWhatTheChannelAnswered", func(t *testing.T) {
		r := newPushRig(t, newLedger(t), 1, nil)
		wrong := r.channel(t, domain.AlertChannel{Name: "tg", Type: domain.ChannelTelegram, Target: fmt.Sprint(simChat),
			Secret: "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDXXX", Enabled: true})
		_, err := r.apps[0].AlertChannels.Test(r.ctx, admin, wrong.ID, "test message")
		var refused *domain.PushRefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "401") {
			t.Fatalf("test with a wrong token: %v, want telegram's 401", err)
		}
		if strings.Contains(err.Error(), "AAHdq") {
			t.Fatalf("the error %q holds the token", err)
		}
		wrong.Secret = simToken
		fixed, err := r.apps[0].AlertChannels.Save(r.ctx, admin, wrong)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.apps[0].AlertChannels.Test(r.ctx, admin, fixed.ID, "test message"); err != nil {
			t.Fatalf("test with the right token: %v", err)
		}
		if m := r.tg.Messages(); len(m) != 1 || !strings.Contains(m[0].Text, "test message") {
			t.Fatalf("telegram got %+v", m)
		}
		viewer := application.Identity{Name: "v", Role: domain.RoleOperator}
		if _, err := r.apps[0].AlertChannels.Test(r.ctx, viewer, fixed.ID, "x"); !errors.Is(err, domain.ErrForbidden) {
			t.Fatalf("an operator's test: %v, want ErrForbidden", err)
		}
	})
}

// TestStockEventsArePushedToTheChannelsThatTakeThem: a stock crossing writes, in its own
// transaction, one push per enabled channel that takes stock events (none for a channel that
// does not, nor for a disabled one), with the crossing's id; an alert kind filter does not
// apply to them.
func TestStockEventsArePushedToTheChannelsThatTakeThem(t *testing.T) {
	f := newFixture(t)
	save := func(name string, stock, enabled bool) domain.AlertChannel {
		c, err := f.shop.AlertChannels.Save(f.ctx, admin, domain.AlertChannel{Name: name, Type: domain.ChannelWeCom,
			Secret: simKey, Kinds: []string{"mail_failed"}, Stock: stock, Enabled: enabled})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	takes := save("stock", true, true)
	save("alerts-only", false, true)
	save("off", true, false)
	p := f.stockProduct(t, 3, 5)
	f.sell(t, p.ID(), 5)
	if n := f.watch(t); n != 2 {
		t.Fatalf("%d stock events, want low stock and sold out", n)
	}
	ms, err := f.ledger.Outbox().Pending(f.ctx, f.shopNow().AddDate(1, 0, 0), 100, domain.TopicAlertPush)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, m := range ms {
		var push domain.AlertPush
		if err := json.Unmarshal(m.Payload, &push); err != nil {
			t.Fatal(err)
		}
		if push.ChannelID != takes.ID || !push.Stock || push.Product != p.ID() || !strings.HasPrefix(push.ID, "stock-"+push.Kind+":") {
			t.Errorf("push %+v", push)
		}
		kinds = append(kinds, push.Kind)
	}
	if want := []string{domain.EventLowStock, domain.EventSoldOut}; !slices.Equal(kinds, want) {
		t.Fatalf("stock pushes %v, want %v for the one channel that takes them", kinds, want)
	}
}
