package wechatsim_test

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/wechatsim"
	"cardshop/adapters/memory"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	sim    *wechatsim.Server
	opts   wechatsim.Options
	client *http.Client
	key    *rsa.PrivateKey
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	o := wechatsim.Options{MchID: wechatsim.NewMchID(), AppID: wechatsim.NewAppID(), MerchantSerial: wechatsim.NewSerial(),
		MerchantKey: &key.PublicKey, APIv3Key: wechatsim.NewAPIv3Key(), PlatformKey: key, PublicKeyKey: key,
		Clock: memory.NewFakeClock(start)}
	s, err := wechatsim.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &fixture{sim: s, opts: o, client: s.Client(), key: key}
}

// call sends a request signed as the merchant does (signer nil: unsigned).
func (f *fixture) call(t *testing.T, method, uri string, body []byte, signer *rsa.PrivateKey) (*http.Response, []byte) {
	t.Helper()
	return f.callNaming(t, "", method, uri, body, signer)
}

// callNaming is call with serial in the request's Wechatpay-Serial ("": none).
func (f *fixture) callNaming(t *testing.T, serial, method, uri string, body []byte, signer *rsa.PrivateKey) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, f.sim.URL+uri, bytes.NewReader(body))
	if serial != "" {
		req.Header.Set("Wechatpay-Serial", serial)
	}
	if signer != nil {
		ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), "593BEC0C930BF1AFEB40B4A08C8FB242"
		sum := sha256.Sum256([]byte(method + "\n" + uri + "\n" + ts + "\n" + nonce + "\n" + string(body) + "\n"))
		sig, _ := rsa.SignPKCS1v15(nil, signer, crypto.SHA256, sum[:])
		req.Header.Set("Authorization", fmt.Sprintf(`WECHATPAY2-SHA256-RSA2048 mchid="%s",nonce_str="%s",signature="%s",timestamp="%s",serial_no="%s"`,
			f.opts.MchID, nonce, base64.StdEncoding.EncodeToString(sig), ts, f.opts.MerchantSerial))
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (f *fixture) order(no string, total int) []byte {
	b, _ := json.Marshal(map[string]any{"appid": f.opts.AppID, "mchid": f.opts.MchID, "description": "Card", "out_trade_no": no,
		"time_expire": "2025-03-01T20:15:00+08:00", "notify_url": "https://shop.example/notify",
		"amount": map[string]any{"total": total, "currency": "CNY"}})
	return b
}

func TestAuthorizationIsRequiredAndAnswersAreSigned(t *testing.T) {
	f := newFixture(t)
	body := f.order("2503011200001234123456789012", 100)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	for _, signer := range []*rsa.PrivateKey{nil, other} {
		resp, b := f.call(t, "POST", "/v3/pay/transactions/native", body, signer)
		if resp.StatusCode != 401 || !bytes.Contains(b, []byte(`"SIGN_ERROR"`)) || resp.Header.Get("Wechatpay-Signature") != "" {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	resp, b := f.call(t, "POST", "/v3/pay/transactions/native", body, f.key)
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"code_url":"weixin://wxpay/bizpayurl?pr=`)) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	blk, _ := pem.Decode([]byte(f.sim.CertificatePEM()))
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || fmt.Sprintf("%X", cert.SerialNumber) != f.sim.CertificateSerial() || resp.Header.Get("Wechatpay-Serial") != f.sim.CertificateSerial() {
		t.Fatalf("serial %v %s %s", err, f.sim.CertificateSerial(), resp.Header.Get("Wechatpay-Serial"))
	}
	ts := resp.Header.Get("Wechatpay-Timestamp")
	if ts != strconv.FormatInt(start.Unix(), 10) {
		t.Fatalf("timestamp %s", ts)
	}
	sum := sha256.Sum256([]byte(ts + "\n" + resp.Header.Get("Wechatpay-Nonce") + "\n" + string(b) + "\n"))
	sig, _ := base64.StdEncoding.DecodeString(resp.Header.Get("Wechatpay-Signature"))
	if err := rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, sum[:], sig); err != nil {
		t.Fatal(err)
	}
	f.sim.SignWith(wechatsim.SignPublicKey)
	resp, _ = f.call(t, "POST", "/v3/pay/transactions/native", body, f.key)
	if resp.Header.Get("Wechatpay-Serial") != f.sim.PublicKeyID() {
		t.Fatal(resp.Header)
	}
}

// While a merchant switches to the public key, WeChat Pay signs an answer with the public key
// only when the request names it in Wechatpay-Serial; with the certificate when the request
// names the certificate or nothing. The switch's other modes sign with their key whatever the
// request names.
func TestMidSwitchSignsTheAnswerWithTheKeyTheRequestNames(t *testing.T) {
	f := newFixture(t)
	body := f.order("2503011200001234123456789012", 100)
	for _, tc := range []struct {
		mode   wechatsim.KeyKind
		naming string
		want   string
	}{
		{wechatsim.SignMidSwitch, "", f.sim.CertificateSerial()},
		{wechatsim.SignMidSwitch, f.sim.CertificateSerial(), f.sim.CertificateSerial()},
		{wechatsim.SignMidSwitch, f.sim.PublicKeyID(), f.sim.PublicKeyID()},
		{wechatsim.SignCertificate, f.sim.PublicKeyID(), f.sim.CertificateSerial()},
		{wechatsim.SignPublicKey, "", f.sim.PublicKeyID()},
	} {
		f.sim.SignWith(tc.mode)
		resp, b := f.callNaming(t, tc.naming, "POST", "/v3/pay/transactions/native", body, f.key)
		if resp.StatusCode != 200 || resp.Header.Get("Wechatpay-Serial") != tc.want {
			t.Fatalf("mode %d, request naming %q: %d, answer signed by %q, want %q: %s", tc.mode, tc.naming, resp.StatusCode,
				resp.Header.Get("Wechatpay-Serial"), tc.want, b)
		}
		reqs := f.sim.Requests()
		if got := reqs[len(reqs)-1].Serial; got != tc.naming {
			t.Fatalf("recorded Wechatpay-Serial %q, sent %q", got, tc.naming)
		}
	}
}

func TestARepeatedOutTradeNoIsTheSameOrderOnlyWithTheSameFields(t *testing.T) {
	f := newFixture(t)
	_, first := f.call(t, "POST", "/v3/pay/transactions/native", f.order("2503011200001234123456789012", 100), f.key)
	_, again := f.call(t, "POST", "/v3/pay/transactions/native", f.order("2503011200001234123456789012", 100), f.key)
	if !bytes.Equal(first, again) {
		t.Fatalf("%s %s", first, again)
	}
	resp, other := f.call(t, "POST", "/v3/pay/transactions/native", f.order("2503011200001234123456789012", 101), f.key)
	if resp.StatusCode != 400 || !bytes.Contains(other, []byte(`"INVALID_REQUEST"`)) {
		t.Fatalf("%d %s", resp.StatusCode, other)
	}
}

func TestEncryptMatchesTheDocumentedShape(t *testing.T) {
	ct, err := wechatsim.Encrypt("Vq8kD3pL0tZr7NcYx2mWb5HsJ4eFgA6u", "fdasflkja484", "transaction", []byte("{}"))
	raw, _ := base64.StdEncoding.DecodeString(ct)
	if err != nil || len(raw) != 2+16 {
		t.Fatalf("%v %d: the ciphertext is the plaintext's length plus the 16-byte tag", err, len(raw))
	}
	if _, err := wechatsim.Encrypt("Vq8kD3pL0tZr7NcYx2mWb5HsJ4eFgA6u", "short", "", nil); err == nil {
		t.Fatal("a short nonce was accepted")
	}
}
