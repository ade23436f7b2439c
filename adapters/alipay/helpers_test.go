package alipay_test

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

	"cardshop/adapters/alipay"
	"cardshop/adapters/lab/paysim/alipaysim"
	"cardshop/domain"
)

var cny = domain.Currency{Code: "CNY", Exponent: 2}

var (
	keysOnce               sync.Once
	merchantKey, alipayKey *rsa.PrivateKey
)

// keys are the test binary's two key pairs: the application's and Alipay's (2048 bits, made
// once: key generation is slow).
func keys(t testing.TB) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if merchantKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if alipayKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return merchantKey, alipayKey
}

func pkcs1PEM(k *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

func pkcs8PEM(k *rsa.PrivateKey) string {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func publicPEM(k *rsa.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func orderNo(n uint64) domain.OrderNo {
	return domain.NewOrderNo(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), "buyer-1", n)
}

func newSim(t *testing.T, mutate func(*alipaysim.Config)) *alipaysim.Sim {
	t.Helper()
	mk, ak := keys(t)
	cfg := alipaysim.Config{MerchantKey: &mk.PublicKey, AlipayKey: ak}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := alipaysim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func config(t testing.TB, sim *alipaysim.Sim, method alipay.Method) alipay.Config {
	mk, _ := keys(t)
	return alipay.Config{GatewayURL: sim.URL(), AppID: sim.AppID(), SellerID: sim.SellerID(),
		PrivateKey: domain.Secret(pkcs8PEM(mk)), AlipayPublicKey: sim.PublicKeyPEM(), Method: method}
}

func newGateway(t *testing.T, sim *alipaysim.Sim, method alipay.Method, mutate func(*alipay.Config)) *alipay.Gateway {
	t.Helper()
	cfg := config(t, sim, method)
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := alipay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// shop receives notifications: it verifies each with the gateway and answers what the
// gateway's Reply says.
type shop struct {
	srv     *httptest.Server
	mu      sync.Mutex
	notices []domain.ProviderNotice
	errs    []error
}

func newShop(t *testing.T, g *alipay.Gateway) *shop {
	t.Helper()
	s := &shop{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		in := domain.InboundRequest{Method: r.Method, Header: domain.Header(r.Header), Query: r.URL.Query(), Body: body, At: time.Now()}
		n, err := g.Verify(r.Context(), in)
		s.mu.Lock()
		if err != nil {
			s.errs = append(s.errs, err)
		} else {
			s.notices = append(s.notices, n)
		}
		s.mu.Unlock()
		rep := replyOf(g.Reply(err == nil))
		w.Header().Set("Content-Type", rep.ContentType)
		w.WriteHeader(rep.Status)
		_, _ = w.Write(rep.Body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *shop) notifyURL() string { return s.srv.URL + "/pay/notify/alipay" }

func (s *shop) results() ([]domain.ProviderNotice, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]domain.ProviderNotice(nil), s.notices...), append([]error(nil), s.errs...)
}

func request(no domain.OrderNo, amount domain.Money, notify string) domain.PaymentRequest {
	return domain.PaymentRequest{
		OrderNo: no, Amount: amount, Currency: cny, Subject: "Steam 充值卡 ×2 / 100=1&",
		ExpiresAt: time.Now().Add(15 * time.Minute).Truncate(time.Second), ReturnURL: "https://shop.example/orders/" + string(no),
		NotifyURL: notify, ClientIP: "203.0.113.7",
	}
}

// paid creates a precreate payment through g, has the buyer pay it, and returns the payment.
func paid(t *testing.T, sim *alipaysim.Sim, g *alipay.Gateway, sh *shop, no domain.OrderNo, amount domain.Money) domain.Payment {
	t.Helper()
	if _, err := g.Create(context.Background(), request(no, amount, sh.notifyURL())); err != nil {
		t.Fatal(err)
	}
	if err := sim.Pay(context.Background(), string(no)); err != nil {
		t.Fatal(err)
	}
	tr, _ := sim.Trade(string(no))
	return domain.Payment{OrderNo: no, Provider: g.Provider(), ProviderRef: tr.TradeNo, Amount: amount, Currency: cny, Status: domain.PaymentPaid}
}

func mustCurrency(t *testing.T, code string) domain.Currency {
	t.Helper()
	c, err := domain.ParseCurrency(code)
	if err != nil {
		t.Fatal(err)
	}
	return c
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
