package application_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// webhookMessages lists the unsent webhook messages, due or not.
func webhookMessages(t *testing.T, f *fixture) []domain.OutboxMessage {
	t.Helper()
	ms, err := f.ledger.Outbox().Pending(f.ctx, f.shopNow().AddDate(1, 0, 0), 100, domain.TopicWebhook)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func relayWebhooks(t *testing.T, f *fixture) int {
	t.Helper()
	n, err := f.shop.Relay.RelayWebhooks(f.ctx)
	if err != nil {
		t.Fatalf("relay webhooks: %v", err)
	}
	return n
}

// Without a webhook nothing is recorded for one; with one, a paid order is notified once, with
// the event's id, type and payload, by the webhook relay and not by the broker's.
func TestWebhookNotifiesPaidOrder(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 5)
	f.mustPay(t, f.mustPlace(t, "alice", p.ID(), 1).No())
	if n, err := f.shop.Relay.WebhookBacklog(f.ctx); err != nil || n != 0 {
		t.Fatalf("webhook backlog without a webhook = %d, %v; want 0", n, err)
	}

	hook := memory.NewNotifier()
	f = newFixture(t, withNotifier(hook))
	p = f.createProduct(t, 3, 5)
	o := f.mustPlace(t, "alice", p.ID(), 2)
	f.mustPay(t, o.No())
	if n, err := f.shop.Relay.WebhookBacklog(f.ctx); err != nil || n != 1 {
		t.Fatalf("webhook backlog after a payment = %d, %v; want 1", n, err)
	}
	f.assertInvariants(t, p.ID()) // relays the broker's topics
	if hook.Attempts() != 0 {
		t.Fatalf("the broker's relay called the webhook %d times", hook.Attempts())
	}
	if n := relayWebhooks(t, f); n != 1 {
		t.Fatalf("RelayWebhooks sent %d, want 1", n)
	}
	if n := relayWebhooks(t, f); n != 0 {
		t.Fatalf("second RelayWebhooks sent %d, want 0", n)
	}
	sent := hook.Sent()
	if len(sent) != 1 {
		t.Fatalf("webhook got %d notifications, want 1", len(sent))
	}
	n := sent[0]
	if n.ID != "delivered:"+string(o.No()) || n.Type != domain.TopicDelivered || n.Attempt != 1 || !n.At.Equal(f.shopNow()) {
		t.Fatalf("notification = %+v, want id delivered:%s, type %s, attempt 1, at %v", n, o.No(), domain.TopicDelivered, f.shopNow())
	}
	var e domain.DeliveryEvent
	if err := json.Unmarshal(n.Data, &e); err != nil {
		t.Fatalf("notification data: %v", err)
	}
	if e.OrderNo != o.No() || e.Buyer != "alice" || e.Product != p.ID() || e.Qty != 2 || e.Amount != o.Amount() {
		t.Fatalf("delivery event = %+v, want order %s of alice, product %d, 2 units, amount %d", e, o.No(), p.ID(), o.Amount())
	}
	if n, _ := f.shop.Relay.WebhookBacklog(f.ctx); n != 0 {
		t.Fatalf("webhook backlog after delivery = %d, want 0", n)
	}
}

// A storefront that fails is tried again after a backoff that doubles from about a second up
// to the cap, and the notification says which attempt it is. The broker's relay goes on.
func TestWebhookRetriesWithBackoff(t *testing.T) {
	hook := memory.NewNotifier()
	const limit = 8 * time.Second
	f := newFixture(t, withNotifier(hook), withConfig(func(c *application.Config) { c.WebhookMaxBackoff = limit }))
	p := f.createProduct(t, 3, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	f.mustPay(t, o.No())

	const failures = 7
	hook.FailNext(failures)
	for attempt := 1; attempt <= failures; attempt++ {
		if n := relayWebhooks(t, f); n != 0 {
			t.Fatalf("attempt %d: sent %d while the storefront fails", attempt, n)
		}
		if hook.Attempts() != attempt {
			t.Fatalf("after attempt %d the webhook was called %d times", attempt, hook.Attempts())
		}
		ms := webhookMessages(t, f)
		if len(ms) != 1 || ms[0].Attempts != attempt {
			t.Fatalf("after attempt %d: webhook messages %+v, want one with %d attempts", attempt, ms, attempt)
		}
		wait := ms[0].RetryAt.Sub(f.shopNow())
		full := time.Duration(math.Min(float64(time.Second<<(attempt-1)), float64(limit)))
		if wait < full/2 || wait > full {
			t.Fatalf("after attempt %d the retry waits %v, want within [%v, %v]", attempt, wait, full/2, full)
		}
		// Not before its time, whatever runs in between.
		f.clock.Advance(wait - time.Millisecond)
		if n := relayWebhooks(t, f); n != 0 || hook.Attempts() != attempt {
			t.Fatalf("retried %v early (attempts %d)", time.Millisecond, hook.Attempts())
		}
		f.assertInvariants(t, p.ID()) // the broker's relay is not held up by the storefront
		f.clock.Advance(time.Millisecond)
	}
	if n := relayWebhooks(t, f); n != 1 {
		t.Fatalf("sent %d once the storefront is back, want 1", n)
	}
	sent := hook.Sent()
	if len(sent) != 1 || sent[0].Attempt != failures+1 || sent[0].ID != "delivered:"+string(o.No()) {
		t.Fatalf("notifications = %+v, want one, attempt %d", sent, failures+1)
	}
	if d := f.deliveries(t); d[o.No()] != 1 {
		t.Fatalf("broker deliveries %v, want one", d)
	}
}

// A webhook message recorded while a webhook was configured waits in the outbox when the
// service runs without one, rather than being dropped.
func TestWebhookMessagesWaitWithoutAWebhook(t *testing.T) {
	f := newFixture(t, withNotifier(memory.NewNotifier()))
	p := f.createProduct(t, 3, 5)
	f.mustPay(t, f.mustPlace(t, "alice", p.ID(), 1).No())
	without, err := application.New(f.cfg, application.Deps{Ledger: f.ledger, Gate: f.gate, Queue: f.queue,
		Publisher: f.pub, Verifier: f.signer, Alerter: f.alerts, Clock: f.now})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := without.Relay.RelayWebhooks(f.ctx); err != nil || n != 0 {
		t.Fatalf("RelayWebhooks without a webhook = %d, %v; want 0, nil", n, err)
	}
	if n, _ := without.Relay.WebhookBacklog(f.ctx); n != 1 {
		t.Fatalf("webhook backlog = %d, want the message kept", n)
	}
}

func TestNewRefusesNegativeWebhookBackoff(t *testing.T) {
	f := newFixture(t)
	cfg := application.DefaultConfig()
	cfg.WebhookMaxBackoff = -time.Second
	if _, err := application.New(cfg, application.Deps{Ledger: f.ledger, Gate: f.gate, Queue: f.queue,
		Publisher: f.pub, Verifier: f.signer, Alerter: f.alerts, Clock: f.now}); err == nil {
		t.Fatal("New accepted a negative webhook backoff")
	}
}

// gatedNotifier holds every call until want calls are in flight together, and records the
// most it saw at once.
type gatedNotifier struct {
	want    int
	mu      sync.Mutex
	now     int
	most    int
	calls   int
	full    chan struct{}
	release sync.Once
}

func (g *gatedNotifier) Notify(ctx context.Context, _ domain.Notification) error {
	g.mu.Lock()
	g.now++
	g.calls++
	g.most = max(g.most, g.now)
	if g.now == g.want {
		g.release.Do(func() { close(g.full) })
	}
	g.mu.Unlock()
	select {
	case <-g.full:
	case <-time.After(5 * time.Second): // fewer in flight than wanted: let the test see it
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	return nil
}

// A burst of paid orders reaches the storefront eight requests at a time, never more.
func TestWebhookRelaySendsInParallel(t *testing.T) {
	hook := &gatedNotifier{want: 8, full: make(chan struct{})}
	f := newFixture(t, withNotifier(hook))
	p := f.createProduct(t, 1, 20)
	for i := range 20 {
		f.mustPay(t, f.mustPlace(t, domain.BuyerID(fmt.Sprint("buyer-", i)), p.ID(), 1).No())
	}
	if n := relayWebhooks(t, f); n != 20 {
		t.Fatalf("RelayWebhooks sent %d, want 20", n)
	}
	if hook.most != 8 || hook.calls != 20 {
		t.Fatalf("%d calls, at most %d at once; want 20 calls, 8 at once", hook.calls, hook.most)
	}
	if n, _ := f.shop.Relay.WebhookBacklog(f.ctx); n != 0 {
		t.Fatalf("webhook backlog %d, want 0", n)
	}
}

// countingNotifier counts notifications by event id; each call takes a little while, as a
// storefront does, so that relays running side by side read the same page.
type countingNotifier struct {
	mu    sync.Mutex
	byID  map[string]int
	pause time.Duration
}

func (c *countingNotifier) Notify(_ context.Context, n domain.Notification) error {
	time.Sleep(c.pause)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID[n.ID]++
	return nil
}

// Two instances relaying the same outbox side by side send every event once: each message is
// claimed before it is sent, and the instance that loses the claim leaves it.
func TestWebhookRelaysOnTwoInstancesSendEachEventOnce(t *testing.T) {
	hook := &countingNotifier{byID: map[string]int{}, pause: 2 * time.Millisecond}
	f := newFixture(t, withNotifier(hook))
	other, err := application.New(f.cfg, application.Deps{Ledger: f.ledger, Gate: f.gate, Queue: f.queue,
		Publisher: f.pub, Notifier: hook, Verifier: f.signer, Alerter: f.alerts, Clock: f.now})
	if err != nil {
		t.Fatal(err)
	}
	p := f.createProduct(t, 1, 40)
	for i := range 40 {
		f.mustPay(t, f.mustPlace(t, domain.BuyerID(fmt.Sprint("buyer-", i)), p.ID(), 1).No())
	}
	var wg sync.WaitGroup
	sent := make([]int, 2)
	for i, shop := range []*application.App{f.shop, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := shop.Relay.RelayWebhooks(f.ctx)
			if err != nil {
				t.Error(err)
			}
			sent[i] = n
		}()
	}
	wg.Wait()
	if sent[0]+sent[1] != 40 || len(hook.byID) != 40 {
		t.Fatalf("instances sent %v, storefront got %d events; want 40 in all", sent, len(hook.byID))
	}
	for id, n := range hook.byID {
		if n != 1 {
			t.Fatalf("event %s sent %d times, want once", id, n)
		}
	}
	if n, _ := f.shop.Relay.WebhookBacklog(f.ctx); n != 0 {
		t.Fatalf("webhook backlog %d, want 0", n)
	}
}
