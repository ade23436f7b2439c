package alipay_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"cardshop/adapters/alipay"
	"cardshop/domain"
)

func TestSigningString(t *testing.T) {
	p := map[string]string{"sign": "S", "sign_type": "RSA2", "b": "2", "a": "1", "empty": "", "A": "x y", "subject": "卡&码"}
	if got, want := alipay.SigningString(p, "sign", "sign_type"), "A=x y&a=1&b=2&subject=卡&码"; got != want {
		t.Fatalf("notification string %q, want %q", got, want)
	}
	if got, want := alipay.SigningString(p, "sign"), "A=x y&a=1&b=2&sign_type=RSA2&subject=卡&码"; got != want {
		t.Fatalf("request string %q, want %q", got, want)
	}
}

func TestSignVerify(t *testing.T) {
	mk, ak := keys(t)
	data := []byte("app_id=9021000122680001&biz_content={\"out_trade_no\":\"1\"}&method=alipay.trade.query")
	sig, err := alipay.SignBytes(mk, data)
	if err != nil {
		t.Fatal(err)
	}
	if !alipay.VerifyBytes(&mk.PublicKey, data, sig) {
		t.Fatal("own signature does not verify")
	}
	if alipay.VerifyBytes(&ak.PublicKey, data, sig) {
		t.Fatal("verified under another key")
	}
	if alipay.VerifyBytes(&mk.PublicKey, append(data, '!'), sig) {
		t.Fatal("verified other data")
	}
	raw, _ := base64.StdEncoding.DecodeString(sig)
	for name, bad := range map[string]string{
		"not base64": "%%%", "empty": "", "url base64": base64.URLEncoding.EncodeToString(raw),
		"truncated": base64.StdEncoding.EncodeToString(raw[:len(raw)-1]), "padded": base64.StdEncoding.EncodeToString(append([]byte{0}, raw...)),
	} {
		if bad != sig && alipay.VerifyBytes(&mk.PublicKey, data, bad) {
			t.Errorf("%s signature verified", name)
		}
	}
}

// TestSignatureAgainstOpenSSL checks RSA2 both ways against an independent implementation:
// what SignBytes makes, openssl verifies, and what openssl signs, VerifyBytes accepts. (Alipay
// publishes no key pair with a signature to test against.)
func TestSignatureAgainstOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	mk, _ := keys(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data := []byte("charset=utf-8&notify_id=abc&subject=卡 x2&total_amount=19.99&trade_status=TRADE_SUCCESS")
	dataPath := write("data", data)
	pubPath := write("pub.pem", []byte(publicPEM(&mk.PublicKey)))
	privPath := write("priv.pem", []byte(pkcs8PEM(mk)))

	sig, err := alipay.SignBytes(mk, data)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(sig)
	sigPath := write("sig", raw)
	out, err := exec.Command(openssl, "dgst", "-sha256", "-verify", pubPath, "-signature", sigPath, dataPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Verified OK") {
		t.Fatalf("openssl does not verify SignBytes: %v %s", err, out)
	}
	out, err = exec.Command(openssl, "dgst", "-sha256", "-sign", privPath, dataPath).Output()
	if err != nil {
		t.Fatalf("openssl sign: %v", err)
	}
	if !alipay.VerifyBytes(&mk.PublicKey, data, base64.StdEncoding.EncodeToString(out)) {
		t.Fatal("VerifyBytes refuses openssl's signature")
	}
}

func TestKeyFormats(t *testing.T) {
	mk, _ := keys(t)
	der8, _ := x509.MarshalPKCS8PrivateKey(mk)
	for name, s := range map[string]string{
		"pkcs1 pem": pkcs1PEM(mk), "pkcs8 pem": pkcs8PEM(mk),
		"pkcs8 base64": base64.StdEncoding.EncodeToString(der8),
		"pkcs1 base64": base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(mk)),
	} {
		k, err := alipay.ParsePrivateKey(s)
		if err != nil || !k.Equal(mk) {
			t.Errorf("%s: %v", name, err)
		}
	}
	derPub, _ := x509.MarshalPKIXPublicKey(&mk.PublicKey)
	for name, s := range map[string]string{"pkix pem": publicPEM(&mk.PublicKey), "pkix base64": base64.StdEncoding.EncodeToString(derPub)} {
		k, err := alipay.ParsePublicKey(s)
		if err != nil || !k.Equal(&mk.PublicKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	sim := newSim(t, nil)
	mk, ak := keys(t)
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*alipay.Config){
		"no private key":        func(c *alipay.Config) { c.PrivateKey = "" },
		"garbage private key":   func(c *alipay.Config) { c.PrivateKey = "-----BEGIN PRIVATE KEY-----\nzz\n-----END PRIVATE KEY-----" },
		"placeholder key":       func(c *alipay.Config) { c.PrivateKey = "your-private-key" },
		"weak private key":      func(c *alipay.Config) { c.PrivateKey = domain.Secret(pkcs1PEM(weak)) },
		"public as private":     func(c *alipay.Config) { c.PrivateKey = domain.Secret(publicPEM(&mk.PublicKey)) },
		"no alipay key":         func(c *alipay.Config) { c.AlipayPublicKey = "" },
		"weak alipay key":       func(c *alipay.Config) { c.AlipayPublicKey = publicPEM(&weak.PublicKey) },
		"own key as alipay's":   func(c *alipay.Config) { c.AlipayPublicKey = publicPEM(&mk.PublicKey) },
		"private as alipay's":   func(c *alipay.Config) { c.AlipayPublicKey = pkcs8PEM(ak) },
		"two pem blocks":        func(c *alipay.Config) { c.AlipayPublicKey = publicPEM(&ak.PublicKey) + publicPEM(&ak.PublicKey) },
		"no app id":             func(c *alipay.Config) { c.AppID = "" },
		"bad seller":            func(c *alipay.Config) { c.SellerID = "1234" },
		"bad method":            func(c *alipay.Config) { c.Method = "app" },
		"http to a remote host": func(c *alipay.Config) { c.GatewayURL = "http://openapi.alipay.com/gateway.do" },
		"gateway with query":    func(c *alipay.Config) { c.GatewayURL = "https://openapi.alipay.com/gateway.do?charset=utf-8" },
		"gateway with userinfo": func(c *alipay.Config) { c.GatewayURL = "https://u:p@openapi.alipay.com/gateway.do" },
		"bad provider name":     func(c *alipay.Config) { c.Name = "Ali Pay" },
	} {
		cfg := config(t, sim, alipay.MethodPrecreate)
		mutate(&cfg)
		if _, err := alipay.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "MII") {
			t.Errorf("%s: the error quotes key material: %v", name, err)
		}
	}
	cfg := config(t, sim, "")
	cfg.GatewayURL = ""
	g, err := alipay.New(cfg)
	if err != nil || g.Provider() != "alipay" || !g.Supports(cny) || g.Supports(mustCurrency(t, "USD")) {
		t.Fatalf("defaults: %v", err)
	}
}

func TestPrivateKeyNeverPrinted(t *testing.T) {
	sim := newSim(t, nil)
	cfg := config(t, sim, alipay.MethodPage)
	secret := string(cfg.PrivateKey)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", cfg, "key", cfg.PrivateKey)
	js, _ := json.Marshal(struct{ K domain.Secret }{cfg.PrivateKey})
	for _, out := range []string{
		fmt.Sprintf("%v %+v %#v %s %q %x", cfg, cfg, cfg, cfg.PrivateKey, cfg.PrivateKey, cfg.PrivateKey),
		fmt.Sprint(cfg.PrivateKey), cfg.PrivateKey.String(), logged.String(), string(js),
	} {
		if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, secret[40:80]) {
			t.Fatalf("the private key is printed: %s", out)
		}
		if !strings.Contains(out, "[REDACTED]") {
			t.Fatalf("no redaction mark: %s", out)
		}
	}
}
