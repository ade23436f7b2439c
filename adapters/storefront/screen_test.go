package storefront_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/storefront"
	"cardshop/application"
	"cardshop/domain"
)

// recordingScreen refuses the addresses in refuse and records every check.
type recordingScreen struct {
	mu     sync.Mutex
	checks []storefront.BuyerCheck
	refuse map[string]error
}

func (s *recordingScreen) Check(_ context.Context, b storefront.BuyerCheck) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, b)
	return s.refuse[b.Email]
}

// TestScreenRunsBeforeTheOrder: with a bot defence, every checkout is checked first with the
// client's address, the e-mail typed and the widget's token; a refusal is a page in the
// buyer's language and reserves nothing; an unreachable defence is a page saying to retry.
func TestScreenRunsBeforeTheOrder(t *testing.T) {
	screen := &recordingScreen{refuse: map[string]error{
		"bot@example.com":  errors.New("captcha: forged token"),
		"down@example.com": fmt.Errorf("captcha: %w", domain.ErrUnavailable),
	}}
	h := newHarness(t, option{cfg: func(c *storefront.Config) {
		c.Screen, c.Widget = screen, storefront.Widget{Provider: storefront.WidgetHCaptcha, SiteKey: "site-key"}
	}})
	p := h.product(application.NewProduct{Name: "Drop", Price: 100}, 5)

	b := h.browser("zh-CN")
	form := orderForm(t, b, p, "1", "bot@example.com")
	form.Set("h-captcha-response", "token-1")
	r := b.post("/checkout", form)
	wantStatus(t, r, 403)
	wantContains(t, r, "人机验证未通过", `href="`+path(p)+`"`)

	form = orderForm(t, b, p, "1", "down@example.com")
	wantStatus(t, b.post("/checkout", form), 503)
	if n := len(h.orders()); n != 0 {
		t.Fatalf("%d orders placed past a refusal", n)
	}

	form = orderForm(t, b, p, "1", "human@example.com")
	form.Set("h-captcha-response", "token-3")
	form.Set("cf-turnstile-response", "not-this-one")
	placed(t, b.post("/checkout", form))
	screen.mu.Lock()
	defer screen.mu.Unlock()
	if len(screen.checks) != 3 {
		t.Fatalf("checks %+v", screen.checks)
	}
	last := screen.checks[2]
	if last.Email != "human@example.com" || last.HumanToken != "token-3" || last.IP == "" {
		t.Fatalf("check %+v", last)
	}
}

// TestCheckoutIsRateLimitedPerAddress: past the limit per client IP, an order is a page in
// the buyer's language and reaches neither the bot defence nor the application.
func TestCheckoutIsRateLimitedPerAddress(t *testing.T) {
	screen := &recordingScreen{}
	h := newHarness(t, option{cfg: func(c *storefront.Config) {
		c.CheckoutsPerWindow, c.CheckoutWindow, c.Screen = 2, time.Minute, screen
	}})
	p := h.product(application.NewProduct{Name: "Hot", Price: 100}, 10)
	b := h.browser("en")
	for i := range 2 {
		placed(t, b.post("/checkout", orderForm(t, b, p, "1", fmt.Sprintf("buyer%d@example.com", i))))
	}
	r := b.post("/checkout", orderForm(t, b, p, "1", "third@example.com"))
	wantStatus(t, r, 429)
	wantContains(t, r, "Too many orders in a short time", `href="`+path(p)+`"`)
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	if n := len(h.orders()); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
	screen.mu.Lock()
	checks := len(screen.checks)
	screen.mu.Unlock()
	if checks != 2 {
		t.Fatalf("the bot defence saw %d checks, want 2", checks)
	}
	h.clock.Advance(time.Minute)
	placed(t, b.post("/checkout", orderForm(t, b, p, "1", "third@example.com")))
}
