package bootstrap

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"cardshop/adapters/devpay"
	"cardshop/adapters/epay"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/stripe"
	"cardshop/domain"
)

// paymentGateways are the enabled payment providers, and the dev provider's pages when it is
// enabled.
type paymentGateways struct {
	all []domain.PaymentGateway
	dev httpapi.DevPages // nil unless CARDSHOP_DEV_PAYMENTS
}

// providerClient is the HTTP client of every provider call: bounded, never following a
// redirect (a provider answers its API calls, it does not send them elsewhere).
func providerClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSHandshakeTimeout: 5 * time.Second, ResponseHeaderTimeout: 10 * time.Second, MaxIdleConnsPerHost: 16},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// newPaymentGateways builds the providers the configuration enables: Stripe with
// CARDSHOP_STRIPE_SECRET_KEY, epay with CARDSHOP_EPAY_URL, dev with CARDSHOP_DEV_PAYMENTS.
// A provider that cannot be built (a malformed key, a currency it cannot charge) stops the
// start, naming it.
func newPaymentGateways(cfg Config, clock domain.Clock) (paymentGateways, error) {
	var out paymentGateways
	if cfg.StripeKey != "" {
		var secrets []string
		for _, s := range strings.Split(cfg.StripeWebhook.Reveal(), ",") {
			if s = strings.TrimSpace(s); s != "" {
				secrets = append(secrets, s)
			}
		}
		g, err := stripe.New(stripe.Config{BaseURL: cfg.StripeAPIURL, SecretKey: cfg.StripeKey.Reveal(),
			WebhookSecrets: secrets, HTTPClient: providerClient(), Clock: clock})
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_STRIPE_*: %w", err)
		}
		out.all = append(out.all, g)
	}
	if cfg.EpayURL != "" {
		variant, err := epay.ParseSignVariant(cfg.EpaySign)
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_EPAY_SIGN: %w", err)
		}
		mode, err := epay.ParseMode(cfg.EpayMode)
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_EPAY_MODE: %w", err)
		}
		g, err := epay.New(epay.Config{GatewayURL: cfg.EpayURL, PID: cfg.EpayPID, Key: epay.Key(cfg.EpayKey.Reveal()),
			Variant: variant, Type: cfg.EpayType, Mode: mode, HTTPClient: providerClient()})
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_EPAY_*: %w", err)
		}
		out.all = append(out.all, g)
	}
	if cfg.DevPayments {
		// A secret of this process: a pay link from before a restart shows "not valid".
		g, err := devpay.New(devpay.Config{Secret: devpay.NewSecret(), BaseURL: cfg.PublicURL, Now: clock.Now})
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_DEV_PAYMENTS: %w", err)
		}
		out.all = append(out.all, g)
		out.dev = g
	}
	for _, g := range out.all {
		if !g.Supports(cfg.Currency) {
			return out, fmt.Errorf("payment provider %s cannot charge %s (CARDSHOP_CURRENCY)", g.Provider(), cfg.Currency)
		}
	}
	return out, nil
}
