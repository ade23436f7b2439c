package wechatpay_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"cardshop/adapters/wechatpay"
	"cardshop/domain"
)

// vector is a notification computed outside the Go code.
type vector struct {
	PublicKeyID    string            `json:"public_key_id"`
	PublicKeyPEM   string            `json:"public_key_pem"`
	CertificatePEM string            `json:"certificate_pem"`
	APIv3Key       string            `json:"api_v3_key"`
	MchID          string            `json:"mchid"`
	AppID          string            `json:"appid"`
	Plaintext      string            `json:"plaintext"`
	Headers        map[string]string `json:"headers"`
	Body           string            `json:"body"`
}

func readVector(t testing.TB, name string) (vector, http.Header, time.Time) {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var v vector
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for k, val := range v.Headers {
		h.Set(k, val)
	}
	sec, _ := strconv.ParseInt(v.Headers["Wechatpay-Timestamp"], 10, 64)
	return v, h, time.Unix(sec, 0)
}

// vectorGateway is a gateway with the vector's WeChat Pay keys (and this package's merchant key).
func vectorGateway(t testing.TB, v vector) *wechatpay.Gateway {
	t.Helper()
	cfg := wechatpay.Config{MchID: v.MchID, AppID: v.AppID, MerchantSerial: "5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
		MerchantPrivateKeyPEM: privatePEM(testKeys(t).merchant), APIv3Key: v.APIv3Key, PublicKeyID: v.PublicKeyID, PublicKeyPEM: v.PublicKeyPEM}
	if v.CertificatePEM != "" {
		cfg.PlatformCertificatesPEM = []string{v.CertificatePEM}
	}
	if cfg.MchID == "" {
		cfg.MchID, cfg.AppID, cfg.APIv3Key = "1900000109", "wxd678efh567hg6787", "Vq8kD3pL0tZr7NcYx2mWb5HsJ4eFgA6u"
	}
	gw, err := wechatpay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// TestPythonComputedNotification checks signature and decryption against Python's
// cryptography (OpenSSL): testdata/vector.py wrote testdata/vector.json.
func TestPythonComputedNotification(t *testing.T) {
	v, h, at := readVector(t, "vector.json")
	gw := vectorGateway(t, v)
	n, err := gw.Verify(ctx, domain.InboundRequest{Method: "POST", Header: domain.Header(h), Body: []byte(v.Body), At: at.Add(4 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	want := domain.ProviderNotice{OrderNo: "2503011200001234123456789012", ProviderRef: "4200000000202503011234567890",
		EventID: "EV-2018022511223320873", Outcome: domain.OutcomePaid, Amount: 1998, Currency: cny}
	if n != want {
		t.Fatalf("%+v", n)
	}
	var env wechatpay.Notification
	_ = json.Unmarshal([]byte(v.Body), &env)
	plain, err := wechatpay.Decrypt(v.APIv3Key, env.Resource.Nonce, env.Resource.AssociatedData, env.Resource.Ciphertext)
	if err != nil || string(plain) != v.Plaintext {
		t.Fatalf("%s %v", plain, err)
	}
	if _, err := wechatpay.Decrypt(v.APIv3Key, env.Resource.Nonce, "refund", env.Resource.Ciphertext); err == nil {
		t.Fatal("decrypted under other associated data")
	}
	body := []byte(v.Body)
	body[len(body)-2] = ' '
	if _, err := gw.Verify(ctx, domain.InboundRequest{Method: "POST", Header: domain.Header(h), Body: body, At: at}); !errors.Is(err, domain.ErrBadSignature) {
		t.Fatalf("a changed body: %v", err)
	}
	if _, err := gw.Verify(ctx, domain.InboundRequest{Method: "POST", Header: domain.Header(h), Body: []byte(v.Body), At: at.Add(5 * time.Minute)}); !errors.Is(err, domain.ErrBadSignature) {
		t.Fatalf("five minutes late: %v", err)
	}
}

// TestSDKTestVectorSignature checks the signature of the notification in the SDK's own tests
// (testdata/sdk_notify_vector.json, signed by the SDK's test platform certificate): it
// verifies and, being of an event type the shop does not act on (PAYSCORE.…), is accepted
// without its resource (encrypted under a 16-byte test key); one second more on the timestamp
// and it does not verify.
func TestSDKTestVectorSignature(t *testing.T) {
	v, h, at := readVector(t, "sdk_notify_vector.json")
	gw := vectorGateway(t, v)
	n, err := gw.Verify(ctx, domain.InboundRequest{Method: "POST", Header: domain.Header(h), Body: []byte(v.Body), At: at})
	if err != nil || n.EventID != "3119dfba-e649-5eec-ab1e-3412bc4d2e17" || n.OrderNo != "" || n.Outcome != domain.OutcomePending {
		t.Fatalf("%+v %v", n, err)
	}
	h.Set(wechatpay.HeaderTimestamp, strconv.FormatInt(at.Unix()+1, 10))
	if _, err := gw.Verify(ctx, domain.InboundRequest{Method: "POST", Header: domain.Header(h), Body: []byte(v.Body), At: at}); !errors.Is(err, domain.ErrBadSignature) {
		t.Fatalf("%v", err)
	}
}
