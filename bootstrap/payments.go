package bootstrap

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"cardshop/adapters/alipay"
	"cardshop/adapters/devpay"
	"cardshop/adapters/epay"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/stripe"
	"cardshop/adapters/wechatpay"
	"cardshop/domain"
)

// paymentGateways are the enabled payment providers, the answers their notifications expect,
// and the dev provider's pages when it is enabled.
type paymentGateways struct {
	all     []domain.PaymentGateway
	replies map[domain.Provider]httpapi.NotifyReplier
	dev     httpapi.DevPages // nil unless CARDSHOP_DEV_PAYMENTS
}

// gateway is a provider adapter: the port, and the answer its notify route gives.
type gateway interface {
	domain.PaymentGateway
	httpapi.NotifyReplier
}

func (p *paymentGateways) add(g gateway) {
	p.all = append(p.all, g)
	p.replies[g.Provider()] = g
}

// devPages serves the dev provider's pages to the HTTP adapter.
type devPages struct{ g *devpay.Gateway }

func (d devPages) PayPage(query url.Values) httpapi.Page { return httpapi.Page(d.g.PayPage(query)) }

func (d devPages) Confirm(ctx context.Context, form url.Values, deliver func(context.Context, domain.InboundRequest) error) httpapi.Page {
	return httpapi.Page(d.g.Confirm(ctx, form, deliver))
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
	out := paymentGateways{replies: map[domain.Provider]httpapi.NotifyReplier{}}
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
		out.add(g)
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
		g, err := epay.New(epay.Config{GatewayURL: cfg.EpayURL, PID: cfg.EpayPID, Key: cfg.EpayKey,
			Variant: variant, Type: cfg.EpayType, Mode: mode, Refunds: cfg.EpayRefunds, HTTPClient: providerClient()})
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_EPAY_*: %w", err)
		}
		out.add(g)
	}
	if cfg.AlipayAppID != "" {
		method, err := alipay.ParseMethod(cfg.AlipayMethod)
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_ALIPAY_METHOD: %w", err)
		}
		priv, err := pemOrFile(cfg.AlipayPrivateKey.Reveal())
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_ALIPAY_PRIVATE_KEY: %w", err)
		}
		pub, err := pemOrFile(cfg.AlipayPublicKey)
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_ALIPAY_PUBLIC_KEY: %w", err)
		}
		g, err := alipay.New(alipay.Config{GatewayURL: cfg.AlipayURL, AppID: cfg.AlipayAppID, SellerID: cfg.AlipaySellerID,
			PrivateKey: domain.Secret(priv), AlipayPublicKey: pub, Method: method, HTTPClient: providerClient(), Clock: clock})
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_ALIPAY_*: %w", err)
		}
		out.add(g)
	}
	if cfg.WechatMchID != "" {
		priv, err := pemOrFile(cfg.WechatPrivateKey.Reveal())
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_WECHAT_PRIVATE_KEY: %w", err)
		}
		wc := wechatpay.Config{BaseURL: cfg.WechatURL, MchID: cfg.WechatMchID, AppID: cfg.WechatAppID,
			MerchantSerial: cfg.WechatSerial, MerchantPrivateKeyPEM: priv, APIv3Key: cfg.WechatAPIv3Key.Reveal(),
			PublicKeyID: cfg.WechatPubKeyID, HTTPClient: providerClient(), Clock: clock}
		if strings.HasPrefix(cfg.PublicURL, "https://") {
			// WeChat Pay sends a refund's result only to the URL sent with it (https only); over
			// plain http a refund it answers PROCESSING is finished by running the refund again.
			wc.RefundNotifyURL = cfg.PublicURL + strings.ReplaceAll(httpapi.NotifyPath, "{provider}", string(wechatpay.Name))
		}
		if cfg.WechatPlatformPEM != "" {
			certs, err := pemOrFile(cfg.WechatPlatformPEM)
			if err != nil {
				return out, fmt.Errorf("CARDSHOP_WECHAT_PLATFORM_CERTS: %w", err)
			}
			wc.PlatformCertificatesPEM = splitPEM(certs)
		}
		if cfg.WechatPubKeyPEM != "" {
			if wc.PublicKeyPEM, err = pemOrFile(cfg.WechatPubKeyPEM); err != nil {
				return out, fmt.Errorf("CARDSHOP_WECHAT_PUBLIC_KEY: %w", err)
			}
		}
		g, err := wechatpay.New(wc)
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_WECHAT_*: %w", err)
		}
		out.add(g)
	}
	if cfg.DevPayments {
		// A secret of this process: a pay link from before a restart shows "not valid".
		g, err := devpay.New(devpay.Config{Secret: devpay.NewSecret(), BaseURL: cfg.PublicURL, Now: clock.Now})
		if err != nil {
			return out, fmt.Errorf("CARDSHOP_DEV_PAYMENTS: %w", err)
		}
		out.add(g)
		out.dev = devPages{g}
	}
	for _, g := range out.all {
		if !g.Supports(cfg.Currency) {
			return out, fmt.Errorf("payment provider %s cannot charge %s (CARDSHOP_CURRENCY)", g.Provider(), cfg.Currency)
		}
	}
	return out, nil
}

// pemOrFile is a key or certificate given in the environment: PEM text as it is, or else the
// path of a file holding it (keys are often kept as files mounted into the container).
func pemOrFile(v string) (string, error) {
	if strings.Contains(v, "-----BEGIN") {
		return v, nil
	}
	b, err := os.ReadFile(v) //nolint:gosec // G304: a path from the service's configuration
	if err != nil {
		return "", fmt.Errorf("neither PEM nor a readable file: %w", err)
	}
	return string(b), nil
}

// splitPEM splits concatenated PEM blocks (several platform certificates during a rotation).
func splitPEM(s string) []string {
	var out []string
	for {
		block, rest := pem.Decode([]byte(s))
		if block == nil {
			return out
		}
		out = append(out, string(pem.EncodeToMemory(block)))
		s = string(rest)
	}
}
