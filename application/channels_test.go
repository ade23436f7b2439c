package application_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// testKit configures the scripted provider "acme" from the console: a URL, a mode and a key
// (secret) of at least 8 characters starting with "good" or "bad" (a key the provider
// refuses: its queries answer a bad signature). Each build is a new gateway, as the real kit's.
type testKit struct {
	builds atomic.Int32
	mu     sync.Mutex
	last   *scriptedGateway
}

func (k *testKit) Specs() []application.ChannelSpec {
	return []application.ChannelSpec{{Provider: "acme", Fields: []application.ChannelField{
		{Name: "url", Required: true}, {Name: "mode", Choices: []string{"redirect", "api"}},
		{Name: "key", Secret: true, Required: true}}}}
}

func (k *testKit) Build(s domain.ChannelSettings) (domain.PaymentGateway, error) {
	if !strings.HasPrefix(s.Fields["url"], "https://") {
		return nil, errors.New("acme gateway URL must be an https URL")
	}
	key := s.Secrets["key"].Reveal()
	if len(key) < 8 || !strings.HasPrefix(key, "good") && !strings.HasPrefix(key, "bad") {
		return nil, errors.New("acme key is malformed")
	}
	k.builds.Add(1)
	g := &keyedGateway{scriptedGateway: newScripted(string(s.Provider)), good: strings.HasPrefix(key, "good")}
	k.mu.Lock()
	k.last = g.scriptedGateway
	k.mu.Unlock()
	return g, nil
}

// keyedGateway answers queries as a provider does to a good or a wrong key.
type keyedGateway struct {
	*scriptedGateway
	good bool
}

func (g *keyedGateway) Query(ctx context.Context, p domain.Payment) (domain.PaymentState, error) {
	if !g.good {
		return domain.PaymentState{}, errors.New("acme query: refused (code -3): KEY invalid")
	}
	return g.scriptedGateway.Query(ctx, p)
}

func goodAcme(version int64) application.ChannelChange {
	return application.ChannelChange{Provider: "acme", Enabled: true, Version: version,
		Fields: map[string]string{"url": "https://acme.example/", "mode": "api"}, Secrets: map[string]string{"key": "good-key-0123456789abcdef"}}
}

func storedChannels(t *testing.T, f *fixture) []domain.ChannelSettings {
	t.Helper()
	all, err := f.ledger.Channels().Channels(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestChannelSaveRefusalsChangeNothing: every refused save leaves the store, the providers
// offered and the gateways in force as they were, and says what is wrong.
func TestChannelSaveRefusalsChangeNothing(t *testing.T) {
	env := newScripted("envpay")
	f := newFixture(t, withGateways(env), withChannelKit(&testKit{}))
	ch := f.shop.Channels
	if _, err := ch.Save(f.ctx, "root", goodAcme(0)); err != nil {
		t.Fatalf("good save: %v", err)
	}
	before := storedChannels(t, f)
	for _, c := range []struct {
		name   string
		change func(c *application.ChannelChange)
		want   string
	}{
		{"a provider the environment manages", func(c *application.ChannelChange) { c.Provider = "envpay" }, "environment"},
		{"an unknown provider", func(c *application.ChannelChange) { c.Provider = "nopay" }, "not a payment provider"},
		{"a stale version", func(c *application.ChannelChange) { c.Version = 0 }, "changed meanwhile"},
		{"a malformed key", func(c *application.ChannelChange) { c.Secrets["key"] = "xyz-not-a-key" }, "acme key is malformed"},
		{"a bad URL", func(c *application.ChannelChange) { c.Fields["url"] = "ftp://acme.example/" }, "https URL"},
		{"a choice not offered", func(c *application.ChannelChange) { c.Fields["mode"] = "telepathy" }, "want one of redirect, api"},
		{"an unknown field", func(c *application.ChannelChange) { c.Fields["colour"] = "red" }, "not a setting"},
		{"a secret sent as plain", func(c *application.ChannelChange) { c.Fields["key"] = "good-key-plain-000" }, "not a setting"},
		{"enabled without its URL", func(c *application.ChannelChange) { delete(c.Fields, "url") }, "required to enable"},
	} {
		change := goodAcme(1)
		c.change(&change)
		_, err := ch.Save(f.ctx, "root", change)
		if !errors.Is(err, domain.ErrInvalidInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Save = %v, want ErrInvalidInput saying %q", c.name, err, c.want)
		}
		if after := storedChannels(t, f); len(after) != 1 || after[0].Version != before[0].Version ||
			!maps.Equal(after[0].Fields, before[0].Fields) || !maps.Equal(after[0].Secrets, before[0].Secrets) {
			t.Fatalf("%s: the store changed: %+v, was %+v", c.name, after, before)
		}
		if got := f.shop.Payments.Providers(); !slices.Equal(got, []domain.Provider{"acme", "envpay"}) {
			t.Fatalf("%s: providers %v, want acme and envpay", c.name, got)
		}
	}
	// A half-configured channel may be kept disabled, not enabled.
	half := application.ChannelChange{Provider: "acme", Version: 1, Fields: map[string]string{"mode": "api"}}
	if _, err := ch.Save(f.ctx, "root", half); err != nil {
		t.Fatalf("a disabled draft: %v", err)
	}
	if got := f.shop.Payments.Providers(); !slices.Equal(got, []domain.Provider{"envpay"}) {
		t.Fatalf("providers %v after disabling acme, want envpay only", got)
	}
}

// TestChannelSecretsAreKeptAndNeverShown: a save with the secret left blank keeps the stored
// one; the view shows a fingerprint, never the secret.
func TestChannelSecretsAreKeptAndNeverShown(t *testing.T) {
	f := newFixture(t, withChannelKit(&testKit{}))
	ch := f.shop.Channels
	if _, err := ch.Save(f.ctx, "root", goodAcme(0)); err != nil {
		t.Fatal(err)
	}
	again := goodAcme(1)
	again.Secrets = nil
	again.Fields["url"] = "https://acme2.example/"
	if _, err := ch.Save(f.ctx, "root", again); err != nil {
		t.Fatalf("save keeping the key: %v", err)
	}
	c := storedChannels(t, f)[0]
	if c.Secrets["key"].Reveal() != "good-key-0123456789abcdef" || c.Version != 2 || c.UpdatedBy != "root" {
		t.Fatalf("stored %+v: want the first key kept, version 2, by root", c)
	}
	views, err := ch.List(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := views[0]
	if v.Provider != "acme" || v.Source != application.SourceConsole || !v.Enabled || !v.Active {
		t.Fatalf("view %+v", v)
	}
	fp := v.Fingerprints["key"]
	if !strings.HasPrefix(fp, "sha256:") || !strings.HasSuffix(fp, "cdef") || strings.Contains(fp, "good-key") {
		t.Fatalf("fingerprint %q: want sha256:… and the last four characters only", fp)
	}
	if strings.Contains(fmt.Sprintf("%+v", views), "good-key-0123") {
		t.Fatal("the view holds the secret")
	}
}

// TestDisabledChannelStillCompletesItsPayments: a channel disabled while a payment is open is
// no longer offered, but its notification still pays the order and its refund still runs.
func TestDisabledChannelStillCompletesItsPayments(t *testing.T) {
	kit := &testKit{}
	f := newFixture(t, withChannelKit(kit))
	ch := f.shop.Channels
	if _, err := ch.Save(f.ctx, "root", goodAcme(0)); err != nil {
		t.Fatal(err)
	}
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	mustCreatePayment(t, f, o, "acme")
	if err := ch.Disable(f.ctx, "root", "acme", 1); err != nil {
		t.Fatal(err)
	}
	if got := f.shop.Payments.Providers(); len(got) != 0 {
		t.Fatalf("providers %v after the disable, want none", got)
	}
	o2 := f.mustPlace(t, "bob", p.ID(), 1)
	if _, _, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: "bob", OrderNo: o2.No(), Provider: "acme"}); !errors.Is(err, domain.ErrProviderUnknown) {
		t.Fatalf("a new payment at a disabled channel: %v, want ErrProviderUnknown", err)
	}
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
		t.Fatalf("the disabled channel's notification: %v", err)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPaid {
		t.Fatalf("order %s, want PAID", got.Status())
	}
	rep, err := f.shop.Payments.RefundOrder(f.ctx, application.Refund{OrderNo: o.No(), Reason: "test"})
	if err != nil || rep.Money.ByHand {
		t.Fatalf("refund through the disabled channel: %+v, %v; want it refunded at the provider", rep.Money, err)
	}
}

// TestChannelTestCall: the test call tells a key the provider accepts from one it refuses.
func TestChannelTestCall(t *testing.T) {
	f := newFixture(t, withChannelKit(&testKit{}))
	ch := f.shop.Channels
	bad := goodAcme(0)
	bad.Secrets["key"] = "bad-key-0123456789"
	if _, err := ch.Save(f.ctx, "root", bad); err != nil {
		t.Fatal(err)
	}
	got, err := ch.Test(f.ctx, "acme")
	if err != nil || got.Authenticated || !got.Reachable || !strings.Contains(got.Answer, "KEY invalid") {
		t.Fatalf("test with a refused key = %+v, %v", got, err)
	}
	if _, err := ch.Save(f.ctx, "root", goodAcme(1)); err != nil {
		t.Fatal(err)
	}
	got, err = ch.Test(f.ctx, "acme")
	if err != nil || !got.Authenticated || got.OrderNo == "" {
		t.Fatalf("test with a good key = %+v, %v", got, err)
	}
	if _, err := ch.Test(f.ctx, "nopay"); !errors.Is(err, domain.ErrProviderUnknown) {
		t.Fatalf("test of an unknown provider: %v", err)
	}
}

// TestChannelReloadSeesAnotherInstancesSave: two apps on one ledger; a save through one is in
// force on the other after its Reload, and a Reload without a change builds nothing.
func TestChannelReloadSeesAnotherInstancesSave(t *testing.T) {
	kitA, kitB := &testKit{}, &testKit{}
	a := newFixture(t, withChannelKit(kitA))
	b := newFixture(t, withChannelKit(kitB), withLedger(func(*memory.Ledger) domain.Ledger { return a.ledger }))
	if _, err := a.shop.Channels.Save(a.ctx, "root", goodAcme(0)); err != nil {
		t.Fatal(err)
	}
	if got := b.shop.Payments.Providers(); len(got) != 0 {
		t.Fatalf("b offers %v before its reload", got)
	}
	if err := b.shop.Channels.Reload(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.shop.Payments.Providers(); !slices.Equal(got, []domain.Provider{"acme"}) {
		t.Fatalf("b offers %v after its reload, want acme", got)
	}
	n := kitB.builds.Load()
	for range 3 {
		if err := b.shop.Channels.Reload(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if kitB.builds.Load() != n {
		t.Fatalf("reloads without a change built %d gateways", kitB.builds.Load()-n)
	}
}

// TestChannelSwapsWhileOrdersArePaid: orders are paid through the console channel from many
// goroutines while other goroutines save, disable and enable it again and reload: no payment
// is lost (every order whose payment was created ends PAID by its notification), and no race.
func TestChannelSwapsWhileOrdersArePaid(t *testing.T) {
	f := newFixture(t, withChannelKit(&testKit{}))
	ch := f.shop.Channels
	if _, err := ch.Save(f.ctx, "root", goodAcme(0)); err != nil {
		t.Fatal(err)
	}
	const buyers = 40
	p := f.createProduct(t, 1, buyers)
	stop := make(chan struct{})
	var swaps sync.WaitGroup
	swaps.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			views, err := ch.List(f.ctx)
			if err != nil {
				t.Error(err)
				return
			}
			change := goodAcme(views[0].Version)
			change.Enabled = i%3 != 2 // now and then not offered for a moment
			change.Fields["url"] = fmt.Sprintf("https://acme%d.example/", i)
			if _, err := ch.Save(f.ctx, "root", change); err != nil && !errors.Is(err, application.ErrChannelChanged) {
				t.Error(err)
				return
			}
		}
	})
	swaps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := ch.Reload(f.ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var created atomic.Int32
	var orders sync.Map
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			buyer := domain.BuyerID(fmt.Sprintf("buyer-%02d", i))
			o := f.mustPlace(t, buyer, p.ID(), 1)
			for { // the channel is offered most of the time: retry while it is not
				_, _, err := f.shop.Payments.CreatePayment(f.ctx, application.NewPayment{Buyer: buyer, OrderNo: o.No(), Provider: "acme"})
				if err == nil {
					break
				}
				if !errors.Is(err, domain.ErrProviderUnknown) {
					t.Errorf("create payment: %v", err)
					return
				}
			}
			created.Add(1)
			orders.Store(o.No(), o)
			if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(o, "paid", o.Amount(), "CNY"), ""); err != nil {
				t.Errorf("notification of %s: %v", o.No(), err)
			}
		})
	}
	wg.Wait()
	close(stop)
	swaps.Wait()
	if created.Load() != buyers {
		t.Fatalf("%d payments created, want %d", created.Load(), buyers)
	}
	orders.Range(func(k, v any) bool {
		if got := f.order(t, k.(domain.OrderNo)); got.Status() != domain.StatusPaid {
			t.Errorf("order %s is %s, want PAID", k, got.Status())
		}
		return true
	})
	f.assertInvariants(t, p.ID())
}
