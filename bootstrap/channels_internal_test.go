package bootstrap

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/fx"

	"cardshop/adapters/memory"
	"cardshop/domain"
)

// TestChannelKitRefusesInPlainWords: each provider's settings are built by its adapter's own
// constructor, and a malformed one is refused with a short message naming what is wrong.
func TestChannelKitRefusesInPlainWords(t *testing.T) {
	k := newChannelKit(Config{PublicURL: "https://shop.example"}, memory.SystemClock{})
	epay := func(mut func(f map[string]string, s map[string]domain.Secret)) domain.ChannelSettings {
		c := domain.ChannelSettings{Provider: "epay", Fields: map[string]string{"url": "https://pay.example/", "pid": "1001"},
			Secrets: map[string]domain.Secret{"key": "0123456789abcdef0123456789abcdef"}}
		mut(c.Fields, c.Secrets)
		return c
	}
	wechatKey := testRSAKey(t)
	wechat := func(mut func(f map[string]string, s map[string]domain.Secret)) domain.ChannelSettings {
		c := domain.ChannelSettings{Provider: "wechatpay", Fields: map[string]string{"mchid": "1900000109", "appid": "wx0123456789abcdef",
			"serial": "5157F09EFDC096DE15EBE81A47057A7232F1B8E1", "public_key_id": "PUB_KEY_ID_0114232134912410000000",
			"public_key": wechatKey.public}, Secrets: map[string]domain.Secret{"private_key": domain.Secret(wechatKey.private),
			"apiv3_key": "Qw7rT2yU9iO4pA6sD1fG3hJ8kL5zX0cV"}}
		mut(c.Fields, c.Secrets)
		return c
	}
	if g, err := k.Build(wechat(func(map[string]string, map[string]domain.Secret) {})); err != nil || g.Provider() != "wechatpay" {
		t.Fatalf("good wechat settings: %v, %v", g, err)
	}
	for _, c := range []struct {
		name string
		s    domain.ChannelSettings
		want string
	}{
		{"epay short key", epay(func(_ map[string]string, s map[string]domain.Secret) { s["key"] = "short" }), "at least 16 characters"},
		{"epay sign", epay(func(f map[string]string, _ map[string]domain.Secret) { f["sign"] = "md5" }), `sign variant "md5"`},
		{"epay mode", epay(func(f map[string]string, _ map[string]domain.Secret) { f["mode"] = "qr" }), `mode "qr"`},
		{"epay URL", epay(func(f map[string]string, _ map[string]domain.Secret) { f["url"] = "ftp://pay.example/?a=1" }), "gateway URL"},
		{"alipay key not PEM", domain.ChannelSettings{Provider: "alipay", Fields: map[string]string{"app_id": "2021000000000001",
			"alipay_public_key": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"},
			Secrets: map[string]domain.Secret{"private_key": "/etc/keys/app.pem"}}, "paste the PEM text"},
		{"alipay bad PEM", domain.ChannelSettings{Provider: "alipay", Fields: map[string]string{"app_id": "2021000000000001",
			"alipay_public_key": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"},
			Secrets: map[string]domain.Secret{"private_key": "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"}}, "alipay"},
		{"stripe key not shaped", domain.ChannelSettings{Provider: "stripe", Secrets: map[string]domain.Secret{"secret_key": "pk_test_x", "webhook_secrets": "whsec_x"}}, "secret key is not shaped"},
		{"wechat key not PEM", wechat(func(_ map[string]string, s map[string]domain.Secret) { s["private_key"] = "/etc/keys/merchant.pem" }), "paste the PEM text"},
		{"wechat bad PEM", wechat(func(_ map[string]string, s map[string]domain.Secret) {
			s["private_key"] = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"
		}), "merchant private key"},
		{"wechat appid", wechat(func(f map[string]string, _ map[string]domain.Secret) { f["appid"] = "app1" }), "shaped like wx"},
		{"wechat v3 key", wechat(func(_ map[string]string, s map[string]domain.Secret) { s["apiv3_key"] = "0123456789abcdef" }), "not 32 letters and digits"},
		{"wechat no WeChat Pay key", wechat(func(f map[string]string, _ map[string]domain.Secret) { delete(f, "public_key") }), "WeChat Pay public key"},
		{"unknown provider", domain.ChannelSettings{Provider: "paypal"}, "not a provider the console configures"},
	} {
		_, err := k.Build(c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 300 {
			t.Errorf("%s: Build = %v, want a short refusal saying %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("%s: the refusal holds the key: %v", c.name, err)
		}
	}
	g, err := k.Build(epay(func(map[string]string, map[string]domain.Secret) {}))
	if err != nil || g.Provider() != "epay" {
		t.Fatalf("good epay settings: %v, %v", g, err)
	}
	if got := k.payOrigins([]domain.Provider{"epay", "stripe"}); !slices.Equal(got, []string{"https://pay.example"}) {
		t.Fatalf("pay origins %v, want the epay gateway's", got)
	}
	for _, s := range k.Specs() {
		if _, ok := replier(s.Provider); !ok {
			t.Errorf("no notify reply for %s", s.Provider)
		}
	}
}

// TestWiringErrorIsItsRootCause: a constructor's error at start is printed without the chain
// of functions fx and dig wrap around it.
func TestWiringErrorIsItsRootCause(t *testing.T) {
	type dep struct{}
	app := fx.New(fx.NopLogger, fx.Provide(func() (*dep, error) { return nil, errors.New("CARDSHOP_X: the reason") }),
		fx.Invoke(func(*dep) {}))
	if app.Err() == nil || !strings.Contains(app.Err().Error(), "could not build") {
		t.Fatalf("fx error %v, want a wiring trace to shorten", app.Err())
	}
	if got := wiringError(app.Err()).Error(); got != "CARDSHOP_X: the reason" {
		t.Fatalf("wiringError = %q, want the constructor's error", got)
	}
}

type rsaPEM struct{ private, public string }

// testRSAKey is a fresh RSA 2048 key pair as PEM.
func testRSAKey(t *testing.T) rsaPEM {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return rsaPEM{string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))}
}
