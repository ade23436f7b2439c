package captcha_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/captcha"
	"cardshop/adapters/lab/captchasim"
	"cardshop/domain"
)

const (
	secret   = "0x4AAAAAAAsimsecret"
	siteKey  = "0x4AAAAAAAsimsitekey"
	hostname = "shop.example"
)

// simClock is the provider's clock, moved by the tests.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rig is a simulator of one dialect and a Verifier configured for it.
type rig struct {
	sim   *captchasim.Sim
	v     *captcha.Verifier
	clock *simClock
}

func newRig(t *testing.T, p captcha.Provider, edit func(*captcha.Config)) rig {
	t.Helper()
	clock := &simClock{t: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	d := captchasim.Turnstile
	if p == captcha.HCaptcha {
		d = captchasim.HCaptcha
	}
	sim := captchasim.New(captchasim.Config{Dialect: d, Secret: secret, SiteKey: siteKey, Now: clock.now})
	t.Cleanup(sim.Close)
	cfg := captcha.Config{Provider: p, Secret: secret, SiteKey: siteKey, Hostname: hostname,
		VerifyURL: sim.VerifyURL(), Timeout: 300 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	v, err := captcha.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rig{sim: sim, v: v, clock: clock}
}

var providers = []captcha.Provider{captcha.Turnstile, captcha.HCaptcha}

func wantVerdict(t *testing.T, r rig, token string, success bool, code string) {
	t.Helper()
	v, err := r.v.Verify(t.Context(), token, "203.0.113.9")
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if v.Success != success || code != "" && !slices.Contains(v.Codes, code) {
		t.Fatalf("Verify = %+v, want success %v with code %q", v, success, code)
	}
}

// TestSolvedTokenPassesOnce: a solved token verifies once, for this site's hostname; the
// second verification is refused in each provider's words.
func TestSolvedTokenPassesOnce(t *testing.T) {
	for _, p := range providers {
		t.Run(string(p), func(t *testing.T) {
			r := newRig(t, p, nil)
			tok := r.sim.Solve(hostname)
			wantVerdict(t, r, tok, true, "")
			replay := "timeout-or-duplicate"
			if p == captcha.HCaptcha {
				replay = "already-seen-response"
			}
			wantVerdict(t, r, tok, false, replay)
		})
	}
}

// TestForgedExpiredAndForeignTokensAreRefused: a token the provider never issued, one older
// than 300 s, one solved on another site, and (hCaptcha) one of another site key are refused.
func TestForgedExpiredAndForeignTokensAreRefused(t *testing.T) {
	for _, p := range providers {
		t.Run(string(p), func(t *testing.T) {
			r := newRig(t, p, nil)
			wantVerdict(t, r, "0.forged-token-"+strings.Repeat("x", 40), false, "invalid-input-response")

			old := r.sim.Solve(hostname)
			r.clock.advance(captchasim.TokenLifetime + time.Second)
			expired := "timeout-or-duplicate"
			if p == captcha.HCaptcha {
				expired = "expired-input-response"
			}
			wantVerdict(t, r, old, false, expired)

			wantVerdict(t, r, r.sim.Solve("evil.example"), false, captcha.CodeHostnameMismatch)
			wantVerdict(t, r, r.sim.Solve(strings.ToUpper(hostname)), true, "") // host names ignore case

			other := r.sim.SolveFor("another-site-key", hostname, "", "")
			wantVerdict(t, r, other, false, "invalid-input-response")
		})
	}
}

// TestEmptyAndOversizedTokensCostNoCall: an empty token (and a Turnstile token over 2048
// characters) is refused without asking the provider.
func TestEmptyAndOversizedTokensCostNoCall(t *testing.T) {
	for _, p := range providers {
		t.Run(string(p), func(t *testing.T) {
			r := newRig(t, p, nil)
			wantVerdict(t, r, "", false, captcha.CodeMissingResponse)
			if p == captcha.Turnstile {
				wantVerdict(t, r, strings.Repeat("a", 2049), false, captcha.CodeInvalidResponse)
			}
			if n := r.sim.Calls(); n != 0 {
				t.Fatalf("%d calls to the provider, want 0", n)
			}
		})
	}
}

// TestWrongSecretOrSiteKeyIsUnavailable: the provider refusing the site's own secret (or
// hCaptcha its site key) is no buyer's fault: ErrHumanCheckUnavailable, for the shop's
// fail-open or fail-closed setting to decide.
func TestWrongSecretOrSiteKeyIsUnavailable(t *testing.T) {
	for _, p := range providers {
		t.Run(string(p), func(t *testing.T) {
			r := newRig(t, p, func(c *captcha.Config) { c.Secret = "wrong" })
			if _, err := r.v.Verify(t.Context(), r.sim.Solve(hostname), ""); !errors.Is(err, domain.ErrHumanCheckUnavailable) {
				t.Fatalf("wrong secret: err = %v, want ErrHumanCheckUnavailable", err)
			}
		})
	}
	r := newRig(t, captcha.HCaptcha, func(c *captcha.Config) { c.SiteKey = "not-ours" })
	if _, err := r.v.Verify(t.Context(), r.sim.Solve(hostname), ""); !errors.Is(err, domain.ErrHumanCheckUnavailable) {
		t.Fatalf("a site key the secret does not own: err = %v, want ErrHumanCheckUnavailable", err)
	}
}

// TestOutagesAreUnavailableWithinTheTimeout: a 5xx and a provider that hangs are
// ErrHumanCheckUnavailable, the hang within the configured timeout (bounded, not a timing
// claim: the test would hang otherwise); a token not consumed by the outage verifies after it.
func TestOutagesAreUnavailableWithinTheTimeout(t *testing.T) {
	for _, p := range providers {
		for _, o := range []captchasim.Outage{captchasim.Error5xx, captchasim.Hang} {
			t.Run(string(p), func(t *testing.T) {
				r := newRig(t, p, nil)
				tok := r.sim.Solve(hostname)
				r.sim.SetOutage(o)
				if _, err := r.v.Verify(t.Context(), tok, ""); !errors.Is(err, domain.ErrHumanCheckUnavailable) {
					t.Fatalf("outage %d: err = %v, want ErrHumanCheckUnavailable", o, err)
				}
				r.sim.SetOutage(captchasim.Up)
				wantVerdict(t, r, tok, true, "")
			})
		}
	}
}

// TestNewRefusesIncompleteSettings: no secret, no hostname, an unknown provider, hCaptcha
// without its site key, a verify URL that is not http(s).
func TestNewRefusesIncompleteSettings(t *testing.T) {
	ok := captcha.Config{Provider: captcha.Turnstile, Secret: "s", Hostname: "h", SiteKey: "k"}
	for name, edit := range map[string]func(*captcha.Config){
		"no secret":        func(c *captcha.Config) { c.Secret = "" },
		"no hostname":      func(c *captcha.Config) { c.Hostname = "" },
		"unknown provider": func(c *captcha.Config) { c.Provider = "recaptcha" },
		"hcaptcha no key":  func(c *captcha.Config) { c.Provider, c.SiteKey = captcha.HCaptcha, "" },
		"bad url":          func(c *captcha.Config) { c.VerifyURL = "ftp://x" },
	} {
		c := ok
		edit(&c)
		if _, err := captcha.New(c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
	v, err := captcha.New(ok)
	if err != nil {
		t.Fatalf("complete settings refused: %v", err)
	}
	if w := v.Widget(); w.Provider != "turnstile" || w.SiteKey != "k" {
		t.Fatalf("Widget = %+v", w)
	}
}
