package wechatpay_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/wechatsim"
	"cardshop/adapters/memory"
	"cardshop/adapters/wechatpay"
	"cardshop/domain"
)

var (
	start   = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cny     = domain.Currency{Code: "CNY", Exponent: 2}
	orderNo = domain.OrderNo("2503011200001234123456789012")
)

// keys are RSA keys shared by the tests (generating one takes a while).
type keys struct {
	merchant, platform, public *rsa.PrivateKey
}

var (
	keysOnce sync.Once
	shared   keys
)

func testKeys(t testing.TB) keys {
	t.Helper()
	keysOnce.Do(func() {
		for _, k := range []**rsa.PrivateKey{&shared.merchant, &shared.platform, &shared.public} {
			var err error
			if *k, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
				panic(err)
			}
		}
	})
	return shared
}

func privatePEM(k *rsa.PrivateKey) string {
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// rig is a gateway wired to a simulator whose notifications reach an HTTPS receiver that
// verifies them with the gateway and answers with its Reply, as the shop's notify route does.
type rig struct {
	t        *testing.T
	clock    *memory.FakeClock
	sim      *wechatsim.Server
	gw       *wechatpay.Gateway
	cfg      wechatpay.Config
	notify   string
	mu       sync.Mutex
	notices  []domain.ProviderNotice
	refused  []error
	receiver *httptest.Server
}

type rigOption func(*wechatsim.Options, *wechatpay.Config, *wechatsim.Server)

// certificateOnly configures the gateway with the platform certificate alone.
func certificateOnly(_ *wechatsim.Options, c *wechatpay.Config, _ *wechatsim.Server) {
	c.PublicKeyID, c.PublicKeyPEM = "", ""
}

// publicKeyOnly configures the gateway with the WeChat Pay public key alone.
func publicKeyOnly(_ *wechatsim.Options, c *wechatpay.Config, _ *wechatsim.Server) {
	c.PlatformCertificatesPEM = nil
}

func newRig(t *testing.T, opts ...rigOption) *rig {
	t.Helper()
	k := testKeys(t)
	r := &rig{t: t, clock: memory.NewFakeClock(start)}
	r.receiver = httptest.NewTLSServer(http.HandlerFunc(r.receive))
	t.Cleanup(r.receiver.Close)
	r.notify = r.receiver.URL + "/payments/wechatpay/notify"
	client := r.receiver.Client()
	client.Timeout = 10 * time.Second
	so := wechatsim.Options{MchID: wechatsim.NewMchID(), AppID: wechatsim.NewAppID(), MerchantSerial: wechatsim.NewSerial(),
		MerchantKey: &k.merchant.PublicKey, APIv3Key: wechatsim.NewAPIv3Key(), PlatformKey: k.platform, PublicKeyKey: k.public,
		Clock: r.clock, HTTPClient: client, RefundNotifyURL: r.notify}
	sim, err := wechatsim.New(so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	r.cfg = wechatpay.Config{BaseURL: sim.URL, MchID: so.MchID, AppID: so.AppID, MerchantSerial: so.MerchantSerial,
		MerchantPrivateKeyPEM: privatePEM(k.merchant), APIv3Key: so.APIv3Key,
		PlatformCertificatesPEM: []string{sim.CertificatePEM()}, PublicKeyID: sim.PublicKeyID(), PublicKeyPEM: sim.PublicKeyPEM(),
		RefundNotifyURL: r.notify, HTTPClient: sim.Client(), Clock: r.clock}
	for _, o := range opts {
		o(&so, &r.cfg, sim)
	}
	if r.gw, err = wechatpay.New(r.cfg); err != nil {
		t.Fatal(err)
	}
	r.sim = sim
	return r
}

// receive is the shop's side: raw bytes in, Verify, Reply out.
func (r *rig) receive(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	n, err := r.gw.Verify(req.Context(), domain.InboundRequest{Method: req.Method, Header: domain.Header(req.Header),
		Query: req.URL.Query(), Body: body, At: r.clock.Now()})
	r.mu.Lock()
	if err != nil {
		r.refused = append(r.refused, err)
	} else {
		r.notices = append(r.notices, n)
	}
	r.mu.Unlock()
	rp := replyOf(r.gw.Reply(err == nil))
	if rp.ContentType != "" {
		w.Header().Set("Content-Type", rp.ContentType)
	}
	w.WriteHeader(rp.Status)
	_, _ = w.Write(rp.Body)
}

func (r *rig) received() ([]domain.ProviderNotice, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]domain.ProviderNotice(nil), r.notices...), append([]error(nil), r.refused...)
}

func (r *rig) request(no domain.OrderNo, amount domain.Money) domain.PaymentRequest {
	return domain.PaymentRequest{OrderNo: no, Amount: amount, Currency: cny, Subject: "Gift card x2",
		ExpiresAt: r.clock.Now().Add(15 * time.Minute), ReturnURL: "https://shop.example/orders/" + string(no), NotifyURL: r.notify}
}

// create creates the order's payment and returns it as the shop stores it.
func (r *rig) create(no domain.OrderNo, amount domain.Money) domain.Payment {
	r.t.Helper()
	c, err := r.gw.Create(context.Background(), r.request(no, amount))
	if err != nil {
		r.t.Fatal(err)
	}
	return domain.Payment{OrderNo: no, Provider: wechatpay.Name, ProviderRef: c.ProviderRef, Amount: amount, Currency: cny,
		Status: domain.PaymentOpen, QRCode: c.QRCode}
}

// paid creates and pays the order, and returns the payment as the shop then stores it.
func (r *rig) paid(no domain.OrderNo, amount domain.Money) domain.Payment {
	r.t.Helper()
	p := r.create(no, amount)
	if _, err := r.sim.Pay(context.Background(), string(no)); err != nil {
		r.t.Fatal(err)
	}
	p.Status = domain.PaymentPaid
	return p
}

// reply is the gateway's Reply as one value: replyOf(g.Reply(accepted)).
type reply struct {
	Status      int
	ContentType string
	Body        []byte
}

func replyOf(status int, contentType string, body []byte) reply {
	return reply{status, contentType, body}
}
