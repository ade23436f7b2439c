package bootstrap

import (
	"testing"

	"cardshop/adapters/lab/captchasim"
)

// The service's human check is the provider CARDSHOP_CAPTCHA names, talking to the
// siteverify URL and checking the hostname the settings give: a token solved on the site
// passes once, one solved elsewhere is refused; "off" is no human check at all.
func TestHumanCheckFromTheSettings(t *testing.T) {
	for _, c := range []struct {
		provider string
		dialect  captchasim.Dialect
	}{{"turnstile", captchasim.Turnstile}, {"hcaptcha", captchasim.HCaptcha}} {
		t.Run(c.provider, func(t *testing.T) {
			sim := captchasim.New(captchasim.Config{Dialect: c.dialect, Secret: "sim-secret", SiteKey: "sim-site"})
			defer sim.Close()
			cfg, err := LoadConfig([]string{"CARDSHOP_ADMIN_TOKEN=admin-token-0123456789",
				"CARDSHOP_PAYMENT_SECRET=payment-secret-0123456789", "CARDSHOP_TOKEN_SECRET=token-secret-0123456789",
				"CARDSHOP_CAPTCHA=" + c.provider, "CARDSHOP_CAPTCHA_SITE_KEY=sim-site", "CARDSHOP_CAPTCHA_SECRET=sim-secret",
				"CARDSHOP_CAPTCHA_HOSTNAME=shop.example", "CARDSHOP_CAPTCHA_VERIFY_URL=" + sim.VerifyURL()})
			if err != nil {
				t.Fatal(err)
			}
			h, err := newHumanCheck(cfg)
			if err != nil || h.Check == nil {
				t.Fatalf("newHumanCheck = %+v, %v", h, err)
			}
			tok := sim.Solve("shop.example")
			for i, want := range []bool{true, false} { // the second verification is a replay
				v, err := h.Check.Verify(t.Context(), tok, "203.0.113.5")
				if err != nil || v.Success != want {
					t.Fatalf("verification %d = %+v, %v; want success %v", i+1, v, err, want)
				}
			}
			if v, err := h.Check.Verify(t.Context(), sim.Solve("evil.example"), ""); err != nil || v.Success {
				t.Fatalf("a token of another site = %+v, %v; want a refusal", v, err)
			}
		})
	}
	off, err := newHumanCheck(Config{Captcha: "off"})
	if err != nil || off.Check != nil {
		t.Fatalf("CARDSHOP_CAPTCHA=off gave %+v, %v; want no human check", off, err)
	}
}
