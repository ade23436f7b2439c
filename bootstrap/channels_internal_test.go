package bootstrap

import (
	"slices"
	"strings"
	"testing"

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
