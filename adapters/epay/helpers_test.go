package epay_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/epay"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/domain"
)

var cny = domain.Currency{Code: "CNY", Exponent: 2}

func orderNo(n uint64) domain.OrderNo {
	return domain.NewOrderNo(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), "buyer-1", n)
}

func newSim(t *testing.T, cfg epaysim.Config) *epaysim.Sim {
	t.Helper()
	s := epaysim.New(cfg)
	t.Cleanup(s.Close)
	return s
}

func newGateway(t *testing.T, sim *epaysim.Sim, mutate func(*epay.Config)) *epay.Gateway {
	t.Helper()
	cfg := epay.Config{GatewayURL: sim.URL() + "/", PID: sim.PID(), Key: domain.Secret(sim.Key())}
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := epay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// shop is the receiving end of notifications: it verifies each with the gateway and answers
// what the gateway's Reply says.
type shop struct {
	g   *epay.Gateway
	srv *httptest.Server

	mu       sync.Mutex
	notices  []domain.ProviderNotice
	errs     []error
	inbound  []domain.InboundRequest
	refuseOK bool // answer "fail" even to good notifications
}

func newShop(t *testing.T, g *epay.Gateway) *shop {
	t.Helper()
	s := &shop{g: g}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		in := domain.InboundRequest{Method: r.Method, Header: domain.Header(r.Header), Query: r.URL.Query(), Body: body, At: time.Now()}
		n, err := g.Verify(r.Context(), in)
		s.mu.Lock()
		s.inbound = append(s.inbound, in)
		if err != nil {
			s.errs = append(s.errs, err)
		} else {
			s.notices = append(s.notices, n)
		}
		accepted := err == nil && !s.refuseOK
		s.mu.Unlock()
		rep := replyOf(g.Reply(accepted))
		w.Header().Set("Content-Type", rep.ContentType)
		w.WriteHeader(rep.Status)
		_, _ = w.Write(rep.Body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *shop) notifyURL() string { return s.srv.URL + "/pay/notify/epay" }

func (s *shop) results() ([]domain.ProviderNotice, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]domain.ProviderNotice(nil), s.notices...), append([]error(nil), s.errs...)
}

func request(no domain.OrderNo, amount domain.Money, notify string) domain.PaymentRequest {
	return domain.PaymentRequest{
		OrderNo: no, Amount: amount, Currency: cny, Subject: "Steam 充值卡 ×2",
		ExpiresAt: time.Now().Add(15 * time.Minute), ReturnURL: "https://shop.example/orders/" + string(no),
		NotifyURL: notify, ClientIP: "203.0.113.7",
	}
}

// created creates a payment through g and has the buyer open it, so the gateway knows it.
func created(t *testing.T, sim *epaysim.Sim, g *epay.Gateway, r domain.PaymentRequest) domain.PaymentCreated {
	t.Helper()
	c, err := g.Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Open(context.Background(), c.PayURL); err != nil {
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
