package stripe_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/stripesim"
	"cardshop/adapters/memory"
	"cardshop/adapters/stripe"
	"cardshop/domain"
)

var (
	start   = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	usd     = domain.Currency{Code: "USD", Exponent: 2}
	orderNo = domain.OrderNo("2503011200001234123456789012")
)

// rig is a gateway wired to a simulator whose events reach a receiver that verifies them with
// the gateway and answers with its Reply, as the shop's webhook route does.
type rig struct {
	t       *testing.T
	clock   *memory.FakeClock
	sim     *stripesim.Server
	gw      *stripe.Gateway
	key     string
	secrets []string

	mu      sync.Mutex
	notices []domain.ProviderNotice
	refused []error
}

type rigOption func(*stripesim.Options, *stripe.Config)

// signingWith makes the simulator sign with these secrets (the gateway keeps its own).
func signingWith(secrets ...string) rigOption {
	return func(o *stripesim.Options, _ *stripe.Config) { o.WebhookSecrets = secrets }
}

// verifyingWith makes the gateway verify with these secrets.
func verifyingWith(secrets ...string) rigOption {
	return func(_ *stripesim.Options, c *stripe.Config) { c.WebhookSecrets = secrets }
}

func newRig(t *testing.T, opts ...rigOption) *rig {
	t.Helper()
	r := &rig{t: t, clock: memory.NewFakeClock(start), key: stripesim.NewSecretKey()}
	r.secrets = []string{stripesim.NewWebhookSecret()}
	so := stripesim.Options{SecretKey: r.key, WebhookSecrets: r.secrets, Clock: r.clock}
	gc := stripe.Config{SecretKey: r.key, WebhookSecrets: r.secrets, Clock: r.clock}
	for _, o := range opts {
		o(&so, &gc)
	}
	sim, err := stripesim.New(so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	gc.BaseURL, gc.HTTPClient = sim.URL, sim.Client()
	gw, err := stripe.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	receiver := httptest.NewServer(http.HandlerFunc(r.receive))
	t.Cleanup(receiver.Close)
	sim.SetWebhookURL(receiver.URL + "/payments/stripe/notify")
	r.sim, r.gw = sim, gw
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
	w.Header().Set("Content-Type", rp.ContentType)
	w.WriteHeader(rp.Status)
	_, _ = w.Write(rp.Body)
}

func (r *rig) received() ([]domain.ProviderNotice, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]domain.ProviderNotice(nil), r.notices...), append([]error(nil), r.refused...)
}

func (r *rig) request(no domain.OrderNo, amount domain.Money) domain.PaymentRequest {
	return domain.PaymentRequest{OrderNo: no, Amount: amount, Currency: usd, Subject: "Gift card x2",
		ExpiresAt: r.clock.Now().Add(15 * time.Minute), ReturnURL: "https://shop.example/orders/" + string(no),
		NotifyURL: "https://shop.example/payments/stripe/notify"}
}

// create creates the order's session and returns the payment as the shop stores it.
func (r *rig) create(no domain.OrderNo, amount domain.Money) domain.Payment {
	r.t.Helper()
	c, err := r.gw.Create(context.Background(), r.request(no, amount))
	if err != nil {
		r.t.Fatal(err)
	}
	return domain.Payment{OrderNo: no, Provider: stripe.Name, ProviderRef: c.ProviderRef, Amount: amount, Currency: usd,
		Status: domain.PaymentOpen, PayURL: c.PayURL}
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
