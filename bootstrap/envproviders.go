package bootstrap

import (
	"fmt"
	"strings"

	"cardshop/adapters/alipay"
	"cardshop/adapters/epay"
	"cardshop/adapters/memory"
	"cardshop/adapters/stripe"
	"cardshop/adapters/wechatpay"
	"cardshop/domain"
)

// providerSetting is one payment provider's environment variable and its adapter's own check
// of the value: the console's channel kit builds channels with the same adapters, so a setting
// is refused in the same words in the environment and in the console.
type providerSetting struct {
	name  string
	value func(c Config) string
	pem   bool // PEM text or the path of a file holding it
	check func(string) error
}

func each(check func(string) error) func(string) error {
	return func(v string) error {
		for _, s := range strings.Split(v, ",") {
			if err := check(strings.TrimSpace(s)); err != nil {
				return err
			}
		}
		return nil
	}
}

func eachPEM(check func(string) error) func(string) error {
	return func(v string) error {
		blocks := splitPEM(v)
		if len(blocks) == 0 {
			return check(v)
		}
		for _, b := range blocks {
			if err := check(b); err != nil {
				return err
			}
		}
		return nil
	}
}

func parsed[T any](parse func(string) (T, error)) func(string) error {
	return func(v string) error { _, err := parse(v); return err }
}

// providerSettings are checked whenever they are set, whether their provider is enabled or not:
// a malformed setting waiting for its provider to be turned on is refused now, not later.
var providerSettings = []providerSetting{
	{"CARDSHOP_STRIPE_SECRET_KEY", func(c Config) string { return c.StripeKey.Reveal() }, false, stripe.CheckSecretKey},
	{"CARDSHOP_STRIPE_WEBHOOK_SECRETS", func(c Config) string { return c.StripeWebhook.Reveal() }, false, each(stripe.CheckWebhookSecret)},
	{"CARDSHOP_STRIPE_API_URL", func(c Config) string { return c.StripeAPIURL }, false, stripe.CheckBaseURL},
	{"CARDSHOP_EPAY_URL", func(c Config) string { return c.EpayURL }, false, epay.CheckGatewayURL},
	{"CARDSHOP_EPAY_PID", func(c Config) string { return c.EpayPID }, false, epay.CheckPID},
	{"CARDSHOP_EPAY_KEY", func(c Config) string { return c.EpayKey.Reveal() }, false, func(v string) error { return epay.CheckKey(domain.Secret(v)) }},
	{"CARDSHOP_EPAY_SIGN", func(c Config) string { return c.EpaySign }, false, parsed(epay.ParseSignVariant)},
	{"CARDSHOP_EPAY_TYPE", func(c Config) string { return c.EpayType }, false, epay.CheckType},
	{"CARDSHOP_EPAY_MODE", func(c Config) string { return c.EpayMode }, false, parsed(epay.ParseMode)},
	{"CARDSHOP_ALIPAY_URL", func(c Config) string { return c.AlipayURL }, false, alipay.CheckGatewayURL},
	{"CARDSHOP_ALIPAY_APP_ID", func(c Config) string { return c.AlipayAppID }, false, alipay.CheckAppID},
	{"CARDSHOP_ALIPAY_SELLER_ID", func(c Config) string { return c.AlipaySellerID }, false, alipay.CheckSellerID},
	{"CARDSHOP_ALIPAY_PRIVATE_KEY", func(c Config) string { return c.AlipayPrivateKey.Reveal() }, true, parsed(alipay.ParsePrivateKey)},
	{"CARDSHOP_ALIPAY_PUBLIC_KEY", func(c Config) string { return c.AlipayPublicKey }, true, parsed(alipay.ParsePublicKey)},
	{"CARDSHOP_ALIPAY_METHOD", func(c Config) string { return c.AlipayMethod }, false, parsed(alipay.ParseMethod)},
	{"CARDSHOP_WECHAT_URL", func(c Config) string { return c.WechatURL }, false, wechatpay.CheckBaseURL},
	{"CARDSHOP_WECHAT_MCHID", func(c Config) string { return c.WechatMchID }, false, wechatpay.CheckMchID},
	{"CARDSHOP_WECHAT_APPID", func(c Config) string { return c.WechatAppID }, false, wechatpay.CheckAppID},
	{"CARDSHOP_WECHAT_SERIAL", func(c Config) string { return c.WechatSerial }, false, wechatpay.CheckSerial},
	{"CARDSHOP_WECHAT_PRIVATE_KEY", func(c Config) string { return c.WechatPrivateKey.Reveal() }, true, wechatpay.CheckPrivateKey},
	{"CARDSHOP_WECHAT_APIV3_KEY", func(c Config) string { return c.WechatAPIv3Key.Reveal() }, false, wechatpay.CheckAPIv3Key},
	{"CARDSHOP_WECHAT_PLATFORM_CERTS", func(c Config) string { return c.WechatPlatformPEM }, true, eachPEM(wechatpay.CheckPlatformCertificate)},
	{"CARDSHOP_WECHAT_PUBLIC_KEY_ID", func(c Config) string { return c.WechatPubKeyID }, false, wechatpay.CheckPublicKeyID},
	{"CARDSHOP_WECHAT_PUBLIC_KEY", func(c Config) string { return c.WechatPubKeyPEM }, true, wechatpay.CheckPublicKey},
}

// checkProviders refuses, in one line naming the variable, every payment setting that is set
// and malformed, its provider enabled or not, and then builds the enabled providers' gateways
// as the service will (a key pair that does not go together, a currency a provider cannot
// charge): a bad setting stops the start here, never inside the wiring.
func checkProviders(c Config) error {
	for _, s := range providerSettings {
		v := s.value(c)
		if v == "" {
			continue
		}
		if s.pem {
			var err error
			if v, err = pemOrFile(v); err != nil {
				return fmt.Errorf("%s: %s", s.name, oneLine(err))
			}
		}
		if err := s.check(v); err != nil {
			return fmt.Errorf("%s: %s", s.name, oneLine(err))
		}
	}
	c.DevPayments = false // built per process; nothing to check
	if _, err := newPaymentGateways(c, memory.SystemClock{}); err != nil {
		return fmt.Errorf("%s", oneLine(err))
	}
	return nil
}

// oneLine is err's message on one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
