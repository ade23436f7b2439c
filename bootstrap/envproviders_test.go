package bootstrap_test

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"cardshop/bootstrap"
)

func publicKeyPEM(t *testing.T, k any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// TestMalformedProviderSettingsAreRefusedInOneLine: a payment provider's setting that is set and
// malformed stops LoadConfig with one short line naming the variable and the reason (the
// adapter's words, as the console's), whether its provider is enabled or not; never a wiring
// trace, never the secret.
func TestMalformedProviderSettingsAreRefusedInOneLine(t *testing.T) {
	keys := testPayKeys()
	alipayOn := []string{"CARDSHOP_ALIPAY_APP_ID=2021000000000001", "CARDSHOP_ALIPAY_PUBLIC_KEY=" + publicKeyPEM(t, &keys.alipay.PublicKey)}
	wechatOn := []string{"CARDSHOP_WECHAT_MCHID=1900000109", "CARDSHOP_WECHAT_APPID=wx0123456789abcdef",
		"CARDSHOP_WECHAT_SERIAL=5157F09EFDC096DE15EBE81A47057A7232F1B8E1", "CARDSHOP_WECHAT_PRIVATE_KEY=" + privateKeyPEM(keys.wechatMerchant),
		"CARDSHOP_WECHAT_PUBLIC_KEY_ID=PUB_KEY_ID_0114232134912410000000", "CARDSHOP_WECHAT_PUBLIC_KEY=" + publicKeyPEM(t, &keys.wechatPublic.PublicKey)}
	const goodV3Key = "CARDSHOP_WECHAT_APIV3_KEY=Qw7rT2yU9iO4pA6sD1fG3hJ8kL5zX0cV"
	epayOn := []string{"CARDSHOP_EPAY_URL=https://pay.example", "CARDSHOP_EPAY_PID=1001", "CARDSHOP_EPAY_KEY=epay-merchant-key-0123456789abcdef"}
	const badPEM = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"
	for _, c := range []struct {
		name    string
		environ []string
		mention string // the variable
		reason  string
	}{
		{"epay sign, epay off", []string{"CARDSHOP_EPAY_SIGN=md5"}, "CARDSHOP_EPAY_SIGN", `sign variant "md5"`},
		{"epay sign, epay on", append(epayOn, "CARDSHOP_EPAY_SIGN=md5"), "CARDSHOP_EPAY_SIGN", `sign variant "md5"`},
		{"epay mode, epay off", []string{"CARDSHOP_EPAY_MODE=qr"}, "CARDSHOP_EPAY_MODE", `mode "qr"`},
		{"epay key, epay off", []string{"CARDSHOP_EPAY_KEY=short-key"}, "CARDSHOP_EPAY_KEY", "at least 16 characters"},
		{"epay key, epay on", append(epayOn, "CARDSHOP_EPAY_KEY=short-key"), "CARDSHOP_EPAY_KEY", "at least 16 characters"},
		{"Alipay private key, Alipay off", []string{"CARDSHOP_ALIPAY_PRIVATE_KEY=" + badPEM}, "CARDSHOP_ALIPAY_PRIVATE_KEY", "alipay private key"},
		{"Alipay private key, Alipay on", append(alipayOn, "CARDSHOP_ALIPAY_PRIVATE_KEY="+badPEM), "CARDSHOP_ALIPAY_PRIVATE_KEY", "alipay private key"},
		{"Alipay key file missing, Alipay off", []string{"CARDSHOP_ALIPAY_PUBLIC_KEY=/nonexistent/alipay.pem"}, "CARDSHOP_ALIPAY_PUBLIC_KEY", "neither PEM nor a readable file"},
		{"Alipay method, Alipay off", []string{"CARDSHOP_ALIPAY_METHOD=qr"}, "CARDSHOP_ALIPAY_METHOD", `method "qr"`},
		{"Alipay's key is the app's own, Alipay on", []string{"CARDSHOP_ALIPAY_APP_ID=2021000000000001",
			"CARDSHOP_ALIPAY_PRIVATE_KEY=" + privateKeyPEM(keys.alipayApp), "CARDSHOP_ALIPAY_PUBLIC_KEY=" + publicKeyPEM(t, &keys.alipayApp.PublicKey)},
			"CARDSHOP_ALIPAY", "application's own public key"},
		{"WeChat APIv3 key, WeChat off", []string{"CARDSHOP_WECHAT_APIV3_KEY=short"}, "CARDSHOP_WECHAT_APIV3_KEY", "not 32 letters and digits"},
		{"WeChat APIv3 key, WeChat on", append(wechatOn, "CARDSHOP_WECHAT_APIV3_KEY=your32characterapiv3keyhere00000"), "CARDSHOP_WECHAT_APIV3_KEY", "placeholder"},
		{"WeChat private key, WeChat off", []string{"CARDSHOP_WECHAT_PRIVATE_KEY=" + badPEM}, "CARDSHOP_WECHAT_PRIVATE_KEY", "not an RSA private key"},
		{"WeChat appid, WeChat off", []string{"CARDSHOP_WECHAT_APPID=app1"}, "CARDSHOP_WECHAT_APPID", "shaped like wx"},
		{"Stripe key, Stripe on", []string{"CARDSHOP_STRIPE_SECRET_KEY=pk_test_0123456789abcdefghijKLMN",
			"CARDSHOP_STRIPE_WEBHOOK_SECRETS=whsec_0123456789abcdefghijKLMNOP"}, "CARDSHOP_STRIPE_SECRET_KEY", "not shaped like one"},
		{"Stripe webhook secret, Stripe on", []string{"CARDSHOP_STRIPE_SECRET_KEY=sk_test_0123456789abcdefghijKLMN",
			"CARDSHOP_STRIPE_WEBHOOK_SECRETS=whsec_0123456789abcdefghijKLMNOP, whsec_x"}, "CARDSHOP_STRIPE_WEBHOOK_SECRETS", "not shaped like one"},
		{"Stripe API URL in clear, Stripe off", []string{"CARDSHOP_STRIPE_API_URL=http://api.stripe.example"}, "CARDSHOP_STRIPE_API_URL", "loopback address only"},
		{"Stripe with a key of the documentation", []string{"CARDSHOP_STRIPE_SECRET_KEY=sk_test_4eC39HqLyjWDarjtT1zdp7dc",
			"CARDSHOP_STRIPE_WEBHOOK_SECRETS=whsec_0123456789abcdefghijKLMNOP"}, "CARDSHOP_STRIPE_SECRET_KEY", "Stripe's documentation"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := bootstrap.LoadConfig(env(c.environ...))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, c.mention) || !strings.Contains(msg, c.reason) {
				t.Fatalf("error %q: want %s first and %q", msg, c.mention, c.reason)
			}
			if strings.Contains(msg, "\n") || len(msg) > 300 || strings.Contains(msg, "could not build") {
				t.Fatalf("error %q: want one short line", msg)
			}
			for _, s := range []string{"epay-merchant-key", "bm90IGEga2V5", "your32character", "pk_test_0123", "4eC39HqLyjWDarjtT1zdp7dc"} {
				if strings.Contains(msg, s) {
					t.Fatalf("error %q shows a secret", msg)
				}
			}
		})
	}
	alipayOn = append(alipayOn, "CARDSHOP_ALIPAY_PRIVATE_KEY="+privateKeyPEM(keys.alipayApp))
	for _, ok := range [][]string{alipayOn, alipayOn[1:], append(wechatOn, goodV3Key), epayOn, {wechatOn[3], "CARDSHOP_EPAY_SIGN=ampkey", goodV3Key},
		{"CARDSHOP_STRIPE_SECRET_KEY=sk_test_0123456789abcdefghijKLMN", "CARDSHOP_STRIPE_WEBHOOK_SECRETS=whsec_0123456789abcdefghijKLMNOP"}} {
		if _, err := bootstrap.LoadConfig(env(ok...)); err != nil {
			t.Errorf("well-formed settings refused: %v", err)
		}
	}
}

// TestServeRefusesABadProviderSettingInOneLine: "cardshop serve" with a malformed setting prints
// one line naming it and exits 1.
func TestServeRefusesABadProviderSettingInOneLine(t *testing.T) {
	for _, kv := range env("CARDSHOP_EPAY_URL=https://pay.example", "CARDSHOP_EPAY_PID=1001",
		"CARDSHOP_EPAY_KEY=epay-merchant-key-0123456789abcdef", "CARDSHOP_EPAY_SIGN=md5") {
		if name, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, "CARDSHOP_") {
			t.Setenv(name, v)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := bootstrap.Main([]string{"serve"}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if got := stderr.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "cardshop: CARDSHOP_EPAY_SIGN: ") {
		t.Fatalf("stderr %q: want one line naming CARDSHOP_EPAY_SIGN", got)
	}
}

// wellFormedProviderSettings are a well-formed value of every payment provider's setting, the
// PEM ones as files (as keys mounted into a container are given).
func wellFormedProviderSettings(t *testing.T) map[string]string {
	t.Helper()
	keys := testPayKeys()
	dir := t.TempDir()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(0x5157F09E), Subject: pkix.Name{CommonName: "Tenpay.com Root CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &keys.wechatPlatform.PublicKey, keys.wechatPlatform)
	if err != nil {
		t.Fatal(err)
	}
	file := func(name, text string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return map[string]string{
		"CARDSHOP_STRIPE_SECRET_KEY":      "sk_test_0123456789abcdefghijKLMN",
		"CARDSHOP_STRIPE_WEBHOOK_SECRETS": "whsec_0123456789abcdefghijKLMNOP",
		"CARDSHOP_STRIPE_API_URL":         "http://127.0.0.1:12111",
		"CARDSHOP_EPAY_KEY":               "epay-key-0123456789",
		"CARDSHOP_EPAY_URL":               "https://pay.example",
		"CARDSHOP_EPAY_PID":               "1001",
		"CARDSHOP_EPAY_SIGN":              "ampkey",
		"CARDSHOP_EPAY_MODE":              "api",
		"CARDSHOP_EPAY_TYPE":              "wxpay",
		"CARDSHOP_ALIPAY_URL":             "https://openapi-sandbox.dl.alipaydev.com/gateway.do",
		"CARDSHOP_ALIPAY_APP_ID":          "2021000000000001",
		"CARDSHOP_ALIPAY_SELLER_ID":       "2088000000000001",
		"CARDSHOP_ALIPAY_PRIVATE_KEY":     file("app.pem", privateKeyPEM(keys.alipayApp)),
		"CARDSHOP_ALIPAY_PUBLIC_KEY":      file("alipay.pem", publicKeyPEM(t, &keys.alipay.PublicKey)),
		"CARDSHOP_ALIPAY_METHOD":          "page",
		"CARDSHOP_WECHAT_URL":             "https://api.mch.weixin.qq.com",
		"CARDSHOP_WECHAT_MCHID":           "1900000109",
		"CARDSHOP_WECHAT_APPID":           "wx0123456789abcdef",
		"CARDSHOP_WECHAT_SERIAL":          "5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
		"CARDSHOP_WECHAT_PRIVATE_KEY":     file("merchant.pem", privateKeyPEM(keys.wechatMerchant)),
		"CARDSHOP_WECHAT_APIV3_KEY":       "Qw7rT2yU9iO4pA6sD1fG3hJ8kL5zX0cV",
		"CARDSHOP_WECHAT_PUBLIC_KEY_ID":   "PUB_KEY_ID_0114232134912410000000",
		"CARDSHOP_WECHAT_PUBLIC_KEY":      file("wechat.pem", publicKeyPEM(t, &keys.wechatPublic.PublicKey)),
		"CARDSHOP_WECHAT_PLATFORM_CERTS":  file("platform.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert}))),
	}
}

// TestServeSaysWhyItCannotStart: a start hook's failure (the listen address taken) is printed
// in one line, not an exit 1 without a word.
func TestServeSaysWhyItCannotStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, kv := range env("CARDSHOP_HTTP_ADDR=" + taken.Addr().String()) {
		if name, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, "CARDSHOP_") {
			t.Setenv(name, v)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := bootstrap.Main([]string{"serve"}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if got := stderr.String(); !strings.HasPrefix(got, "cardshop: start: ") || !strings.Contains(got, "address already in use") {
		t.Fatalf("stderr %q: want the start's failure, naming the address in use", got)
	}
}
