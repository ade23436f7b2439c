package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/fx"

	"cardshop/adapters/alipay"
	"cardshop/adapters/epay"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/stripe"
	"cardshop/adapters/wechatpay"
	"cardshop/application"
	"cardshop/domain"
)

// channelKit builds the payment channels configured in the console with the provider
// adapters' own constructors (application.ChannelKit). The environment's providers are built by
// newPaymentGateways and are not the kit's: the console shows them read-only.
type channelKit struct {
	cfg   Config
	clock domain.Clock

	mu sync.Mutex
	// origins are the pay-page origins of every gateway built for a provider: a build for a
	// save's check may precede the reload that puts it in force (or a refused store), so an
	// origin is kept rather than replaced; each is one an admin configured.
	origins map[domain.Provider]map[string]bool
}

// channelProvider is one provider the console configures: its fields, how its gateway is
// built from them, and the origin its pay form leads to (for the storefront's CSP).
type channelProvider struct {
	fields []application.ChannelField
	build  func(k *channelKit, v channelValues) (gateway, string, error)
}

// channelValues reads a channel's settings, plain and secret alike.
type channelValues domain.ChannelSettings

func (v channelValues) get(name string) string {
	if s, ok := v.Secrets[name]; ok {
		return s.Reveal()
	}
	return v.Fields[name]
}

// or is the value of name, or def when it is unset.
func (v channelValues) or(name, def string) string {
	if s := v.get(name); s != "" {
		return s
	}
	return def
}

// pem is a PEM field's value: the console takes the text itself, never a file's path.
func (v channelValues) pem(name string) (string, error) {
	s := v.get(name)
	if s != "" && !strings.Contains(s, "-----BEGIN") {
		return "", fmt.Errorf("%s: paste the PEM text (-----BEGIN …), not a file's path", name)
	}
	return s, nil
}

// epayName is epay's provider name (its adapter's default).
const epayName domain.Provider = "epay"

// choices of the fields that take one of a few values.
var (
	epaySigns     = []string{"append", "ampkey"}
	epayModes     = []string{"redirect", "api"}
	onOff         = []string{"off", "on"}
	alipayMethods = []string{"precreate", "page", "wap"}
)

// channelProviders are the providers the console configures, by name. The dev provider is
// not among them: it is a development aid, turned on by CARDSHOP_DEV_PAYMENTS only.
var channelProviders = map[domain.Provider]channelProvider{
	epayName: {
		fields: []application.ChannelField{
			{Name: "url", Required: true}, {Name: "pid", Required: true}, {Name: "key", Secret: true, Required: true},
			{Name: "sign", Choices: epaySigns}, {Name: "type"}, {Name: "mode", Choices: epayModes}, {Name: "refunds", Choices: onOff},
		},
		build: func(k *channelKit, v channelValues) (gateway, string, error) {
			variant, err := epay.ParseSignVariant(v.or("sign", "append"))
			if err != nil {
				return nil, "", err
			}
			mode, err := epay.ParseMode(v.or("mode", "redirect"))
			if err != nil {
				return nil, "", err
			}
			g, err := epay.New(epay.Config{GatewayURL: v.get("url"), PID: v.get("pid"), Key: domain.Secret(v.get("key")),
				Variant: variant, Type: v.or("type", "alipay"), Mode: mode, Refunds: v.get("refunds") == "on", HTTPClient: providerClient()})
			return g, v.get("url"), err
		},
	},
	stripe.Name: {
		fields: []application.ChannelField{
			{Name: "secret_key", Secret: true, Required: true}, {Name: "webhook_secrets", Secret: true, Required: true},
			{Name: "api_url"},
		},
		build: func(k *channelKit, v channelValues) (gateway, string, error) {
			var secrets []string
			for _, s := range strings.Split(v.get("webhook_secrets"), ",") {
				if s = strings.TrimSpace(s); s != "" {
					secrets = append(secrets, s)
				}
			}
			g, err := stripe.New(stripe.Config{BaseURL: v.or("api_url", "https://api.stripe.com"), SecretKey: v.get("secret_key"),
				WebhookSecrets: secrets, HTTPClient: providerClient(), Clock: k.clock})
			return g, "https://checkout.stripe.com", err
		},
	},
	alipay.Name: {
		fields: []application.ChannelField{
			{Name: "app_id", Required: true}, {Name: "private_key", Secret: true, Required: true, Multiline: true},
			{Name: "alipay_public_key", Required: true, Multiline: true}, {Name: "seller_id"},
			{Name: "method", Choices: alipayMethods}, {Name: "url"},
		},
		build: func(k *channelKit, v channelValues) (gateway, string, error) {
			method, err := alipay.ParseMethod(v.or("method", "precreate"))
			if err != nil {
				return nil, "", err
			}
			priv, err := v.pem("private_key")
			if err != nil {
				return nil, "", err
			}
			pub, err := v.pem("alipay_public_key")
			if err != nil {
				return nil, "", err
			}
			u := v.or("url", "https://openapi.alipay.com/gateway.do")
			g, err := alipay.New(alipay.Config{GatewayURL: u, AppID: v.get("app_id"), SellerID: v.get("seller_id"),
				PrivateKey: domain.Secret(priv), AlipayPublicKey: pub, Method: method, HTTPClient: providerClient(), Clock: k.clock})
			return g, u, err
		},
	},
	wechatpay.Name: {
		fields: []application.ChannelField{
			{Name: "mchid", Required: true}, {Name: "appid", Required: true}, {Name: "serial", Required: true},
			{Name: "private_key", Secret: true, Required: true, Multiline: true}, {Name: "apiv3_key", Secret: true, Required: true},
			{Name: "public_key_id"}, {Name: "public_key", Multiline: true}, {Name: "platform_certs", Multiline: true}, {Name: "url"},
		},
		build: func(k *channelKit, v channelValues) (gateway, string, error) {
			priv, err := v.pem("private_key")
			if err != nil {
				return nil, "", err
			}
			wc := wechatpay.Config{BaseURL: v.or("url", "https://api.mch.weixin.qq.com"), MchID: v.get("mchid"), AppID: v.get("appid"),
				MerchantSerial: v.get("serial"), MerchantPrivateKeyPEM: priv, APIv3Key: v.get("apiv3_key"),
				PublicKeyID: v.get("public_key_id"), HTTPClient: providerClient(), Clock: k.clock}
			if strings.HasPrefix(k.cfg.PublicURL, "https://") {
				wc.RefundNotifyURL = k.cfg.PublicURL + strings.ReplaceAll(httpapi.NotifyPath, "{provider}", string(wechatpay.Name))
			}
			certs, err := v.pem("platform_certs")
			if err != nil {
				return nil, "", err
			}
			wc.PlatformCertificatesPEM = splitPEM(certs)
			if wc.PublicKeyPEM, err = v.pem("public_key"); err != nil {
				return nil, "", err
			}
			g, err := wechatpay.New(wc)
			return g, "", err
		},
	},
}

func newChannelKit(cfg Config, clock domain.Clock) *channelKit {
	return &channelKit{cfg: cfg, clock: clock, origins: map[domain.Provider]map[string]bool{}}
}

// Specs lists the providers the console configures, by name.
func (k *channelKit) Specs() []application.ChannelSpec {
	out := make([]application.ChannelSpec, 0, len(channelProviders))
	for _, p := range []domain.Provider{alipay.Name, epayName, stripe.Name, wechatpay.Name} {
		out = append(out, application.ChannelSpec{Provider: p, Fields: channelProviders[p].fields})
	}
	return out
}

// Build builds the channel's gateway; the error is the adapter's own, in its words.
func (k *channelKit) Build(s domain.ChannelSettings) (domain.PaymentGateway, error) {
	cp, ok := channelProviders[s.Provider]
	if !ok {
		return nil, fmt.Errorf("%s is not a provider the console configures", s.Provider)
	}
	g, pay, err := cp.build(k, channelValues(s))
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, errors.New("no gateway built")
	}
	if o := origin(pay); o != "" {
		k.mu.Lock()
		if k.origins[s.Provider] == nil {
			k.origins[s.Provider] = map[string]bool{}
		}
		k.origins[s.Provider][o] = true
		k.mu.Unlock()
	}
	return g, nil
}

// payOrigins are the pay-page origins of the providers offered now: the storefront's pay
// forms may lead there.
func (k *channelKit) payOrigins(offered []domain.Provider) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, p := range offered {
		for o := range k.origins[p] {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// origin is raw's scheme and host, or "" when it has none.
func origin(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return ""
}

// replier answers a provider's notifications. Every adapter's reply depends on the provider
// alone, never on its settings, so a zero gateway answers for a channel built later.
func replier(p domain.Provider) (httpapi.NotifyReplier, bool) {
	switch p {
	case epayName:
		return new(epay.Gateway), true
	case stripe.Name:
		return new(stripe.Gateway), true
	case alipay.Name:
		return new(alipay.Gateway), true
	case wechatpay.Name:
		return new(wechatpay.Gateway), true
	}
	return nil, false
}

// watchChannels reads the console's payment channels at the start (a start does not wait for
// the first tick to offer them) and every CARDSHOP_CHANNELS_EVERY, until the service stops.
func watchChannels(lc fx.Lifecycle, cfg Config, channels *application.Channels, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(start context.Context) error {
			if err := channels.Reload(start); err != nil {
				// The environment's providers are in force; the console's follow at a later pass.
				log.Warn("payment channels not read at start", "err", err)
			}
			go func() {
				defer close(done)
				t := time.NewTicker(cfg.ChannelsEvery)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
					if _, err := channels.ReloadPass(ctx); err != nil && ctx.Err() == nil {
						log.Warn("payment channels reload failed", "err", err)
					}
				}
			}()
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			<-done
			return nil
		},
	})
}

// withChannelReplies adds to the environment's notify replies one for every provider the
// console configures: the notify route answers a channel as soon as it is in force (the use
// case refuses a provider not in force, as before).
func withChannelReplies(env map[domain.Provider]httpapi.NotifyReplier, kit *channelKit) map[domain.Provider]httpapi.NotifyReplier {
	out := make(map[domain.Provider]httpapi.NotifyReplier, len(env)+len(channelProviders))
	for _, s := range kit.Specs() {
		if r, ok := replier(s.Provider); ok {
			out[s.Provider] = r
		}
	}
	for p, r := range env {
		out[p] = r
	}
	return out
}
