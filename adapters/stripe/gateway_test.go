package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/stripesim"
	"cardshop/adapters/stripe"
	"cardshop/domain"
)

func TestNewRefusesWeakConfiguration(t *testing.T) {
	key, whsec := stripesim.NewSecretKey(), stripesim.NewWebhookSecret()
	client := &http.Client{Timeout: time.Second}
	good := stripe.Config{SecretKey: key, WebhookSecrets: []string{whsec}, HTTPClient: client}
	if _, err := stripe.New(good); err != nil {
		t.Fatalf("good configuration refused: %v", err)
	}
	cases := map[string]func(*stripe.Config){
		"empty key":                  func(c *stripe.Config) { c.SecretKey = "" },
		"publishable key":            func(c *stripe.Config) { c.SecretKey = "pk_test_" + key[8:] },
		"short key":                  func(c *stripe.Config) { c.SecretKey = "sk_test_abc123" },
		"placeholder key xxx":        func(c *stripe.Config) { c.SecretKey = "sk_test_xxxxxxxxxxxxxxxxxxxxxxxx" },
		"placeholder key YOUR":       func(c *stripe.Config) { c.SecretKey = "sk_live_YOURSECRETKEYGOESHERE123" },
		"key of one repeated char":   func(c *stripe.Config) { c.SecretKey = "sk_live_000000000000000000000000" },
		"key from Stripe's docs":     func(c *stripe.Config) { c.SecretKey = "sk_test_4eC39HqLyjWDarjtT1zdp7dc" },
		"no webhook secret":          func(c *stripe.Config) { c.WebhookSecrets = nil },
		"empty webhook secret":       func(c *stripe.Config) { c.WebhookSecrets = []string{""} },
		"short webhook secret":       func(c *stripe.Config) { c.WebhookSecrets = []string{"whsec_test_secret"} },
		"placeholder webhook secret": func(c *stripe.Config) { c.WebhookSecrets = []string{"whsec_xxxxxxxxxxxxxxxxxxxxxxxxxxxx"} },
		"second secret bad":          func(c *stripe.Config) { c.WebhookSecrets = []string{whsec, "whsec_..."} },
		"not a webhook secret":       func(c *stripe.Config) { c.WebhookSecrets = []string{key} },
		"http to a remote host":      func(c *stripe.Config) { c.BaseURL = "http://api.stripe.com" },
		"relative base URL":          func(c *stripe.Config) { c.BaseURL = "/v1" },
		"credentials in base URL":    func(c *stripe.Config) { c.BaseURL = "https://u:p@api.stripe.com" },
		"client without timeout":     func(c *stripe.Config) { c.HTTPClient = &http.Client{} },
	}
	for name, edit := range cases {
		cfg := good
		cfg.WebhookSecrets = append([]string(nil), good.WebhookSecrets...)
		edit(&cfg)
		gw, err := stripe.New(cfg)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if gw != nil || strings.Contains(err.Error(), key) || strings.Contains(err.Error(), whsec) {
			t.Errorf("%s: %v (gateway %v)", name, err, gw)
		}
	}
	local := good
	local.BaseURL = "http://127.0.0.1:12111"
	if _, err := stripe.New(local); err != nil {
		t.Errorf("http to loopback refused: %v", err)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	key, whsec := stripesim.NewSecretKey(), stripesim.NewWebhookSecret()
	cfg := stripe.Config{SecretKey: key, WebhookSecrets: []string{whsec}}
	gw, err := stripe.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, v := range []any{cfg, &cfg, gw, *gw} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			fmt.Fprintf(&out, verb+"\n", v)
		}
	}
	slog.New(slog.NewJSONHandler(&out, nil)).Info("x", "cfg", cfg, "gw", gw)
	slog.New(slog.NewTextHandler(&out, nil)).Info("x", "cfg", cfg, "gw", gw)
	for _, s := range []string{key, whsec, key[8:20], whsec[6:18]} {
		if strings.Contains(out.String(), s) {
			t.Fatalf("a secret was printed:\n%s", out.String())
		}
	}
}

func TestCreateSendsOneSessionForTheWholeAmount(t *testing.T) {
	r := newRig(t)
	req := r.request(orderNo, 1998)
	c, err := r.gw.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ss := r.sim.Sessions()
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	s := ss[0]
	if c.ProviderRef != s.ID || !strings.HasPrefix(c.ProviderRef, "cs_test_") || c.PayURL != s.URL || c.PayURL == "" {
		t.Fatalf("created %+v, session %s %s", c, s.ID, s.URL)
	}
	if s.AmountTotal != 1998 || s.UnitAmount != 1998 || s.Quantity != 1 || s.Currency != "usd" || s.ProductName != "Gift card x2" {
		t.Fatalf("line item: %+v", s)
	}
	if s.ClientReferenceID != string(orderNo) || s.Metadata["order_no"] != string(orderNo) || len(s.Metadata) != 1 {
		t.Fatalf("order reference: %q %v", s.ClientReferenceID, s.Metadata)
	}
	if s.SuccessURL != req.ReturnURL || s.CancelURL != req.ReturnURL {
		t.Fatalf("urls: %q %q", s.SuccessURL, s.CancelURL)
	}
	if want := req.ExpiresAt.Add(31 * time.Minute); !s.ExpiresAt.Equal(want) {
		t.Fatalf("expires_at %v, want %v", s.ExpiresAt, want)
	}
	rq := r.sim.Requests()
	if len(rq) != 1 || rq[0].IdempotencyKey != "cardshop-"+string(orderNo) || !rq[0].AuthOK ||
		rq[0].ContentType != "application/x-www-form-urlencoded" || rq[0].Method != http.MethodPost || rq[0].Path != "/v1/checkout/sessions" {
		t.Fatalf("request: %+v", rq)
	}
	if mode := rq[0].Form.Get("mode"); mode != "payment" {
		t.Fatalf("mode %q", mode)
	}
}

func TestCreateZeroDecimalCurrency(t *testing.T) {
	r := newRig(t)
	req := r.request(orderNo, 1500)
	req.Currency = domain.Currency{Code: "JPY", Exponent: 0}
	if _, err := r.gw.Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	s := r.sim.Sessions()[0]
	if s.Currency != "jpy" || s.AmountTotal != 1500 {
		t.Fatalf("%s %d", s.Currency, s.AmountTotal)
	}
}

func TestSupports(t *testing.T) {
	r := newRig(t)
	for code, want := range map[string]bool{"USD": true, "CNY": true, "EUR": true, "JPY": true, "KRW": true, "VND": true, "TWD": true} {
		c, err := domain.ParseCurrency(code)
		if err != nil {
			t.Fatal(err)
		}
		if r.gw.Supports(c) != want {
			t.Errorf("%s: %v", code, !want)
		}
	}
	for _, c := range []domain.Currency{{}, {Code: "JPY", Exponent: 2}, {Code: "USD", Exponent: 0}, {Code: "ISK", Exponent: 0},
		{Code: "KWD", Exponent: 2}, {Code: "usd", Exponent: 2}} {
		if r.gw.Supports(c) {
			t.Errorf("%+v supported", c)
		}
	}
	if r.gw.Provider() != "stripe" {
		t.Fatal(r.gw.Provider())
	}
}

func TestCreateRefusesWhatStripeCannotCharge(t *testing.T) {
	r := newRig(t)
	cases := map[string]func(*domain.PaymentRequest){
		"zero amount":        func(p *domain.PaymentRequest) { p.Amount = 0 },
		"no order":           func(p *domain.PaymentRequest) { p.OrderNo = "" },
		"unsupported":        func(p *domain.PaymentRequest) { p.Currency = domain.Currency{Code: "ISK"} },
		"relative return":    func(p *domain.PaymentRequest) { p.ReturnURL = "/orders/1" },
		"order expired":      func(p *domain.PaymentRequest) { p.ExpiresAt = r.clock.Now() },
		"return not http(s)": func(p *domain.PaymentRequest) { p.ReturnURL = "javascript:alert(1)" },
	}
	for name, edit := range cases {
		req := r.request(orderNo, 100)
		edit(&req)
		if _, err := r.gw.Create(context.Background(), req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	req := r.request(orderNo, 100)
	req.ExpiresAt = r.clock.Now().Add(-time.Second)
	if _, err := r.gw.Create(context.Background(), req); !errors.Is(err, domain.ErrOrderNotPayable) {
		t.Errorf("expired order: %v", err)
	}
	if n := len(r.sim.Requests()); n != 0 {
		t.Fatalf("%d requests reached Stripe", n)
	}
}

// A reply lost on the way back: the session exists at Stripe, the shop saw a transport error
// and retries later (a minute on, the same order). The retry must get the same session.
func TestCreateIdempotentAcrossALostReply(t *testing.T) {
	r := newRig(t)
	req := r.request(orderNo, 1998)
	r.sim.LoseReplies(1)
	if _, err := r.gw.Create(context.Background(), req); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("lost reply: %v", err)
	}
	if n := len(r.sim.Sessions()); n != 1 {
		t.Fatalf("%d sessions after the lost reply", n)
	}
	r.clock.Advance(time.Minute)
	c, err := r.gw.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ss, rq := r.sim.Sessions(), r.sim.Requests()
	if len(ss) != 1 || c.ProviderRef != ss[0].ID {
		t.Fatalf("retry created %s; sessions %d", c.ProviderRef, len(ss))
	}
	if len(rq) != 2 || !rq[0].Lost || !rq[1].Replayed || rq[0].IdempotencyKey != rq[1].IdempotencyKey {
		t.Fatalf("requests %+v", rq)
	}
}

// The creation after an outage: nothing was recorded under the key, so the retry creates the
// one session.
func TestUnavailableDuringOutageAndThrottle(t *testing.T) {
	r := newRig(t)
	p := r.create("2503011200001234000000000001", 500)
	ctx := context.Background()
	for _, sw := range []func(bool){r.sim.Outage, r.sim.Throttle} {
		sw(true)
		if _, err := r.gw.Create(ctx, r.request(orderNo, 100)); !errors.Is(err, domain.ErrUnavailable) {
			t.Errorf("create: %v", err)
		}
		if _, err := r.gw.Query(ctx, p); !errors.Is(err, domain.ErrUnavailable) {
			t.Errorf("query: %v", err)
		}
		if err := r.gw.Close(ctx, p); !errors.Is(err, domain.ErrUnavailable) || errors.Is(err, domain.ErrAlreadyPaid) {
			t.Errorf("close: %v", err)
		}
		sw(false)
	}
	if _, err := r.gw.Create(ctx, r.request(orderNo, 100)); err != nil {
		t.Fatal(err)
	}
	if n := len(r.sim.Sessions()); n != 2 {
		t.Fatalf("%d sessions", n)
	}
}

func TestTransportFailureIsUnavailable(t *testing.T) {
	r := newRig(t)
	p := r.create(orderNo, 100)
	r.sim.Close()
	if _, err := r.gw.Query(context.Background(), p); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("%v", err)
	}
}

func TestRefusalIsAPlainErrorWithoutTheKey(t *testing.T) {
	r := newRig(t)
	other, err := stripe.New(stripe.Config{BaseURL: r.sim.URL, SecretKey: stripesim.NewSecretKey(),
		WebhookSecrets: r.secrets, HTTPClient: r.sim.Client(), Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Create(context.Background(), r.request(orderNo, 100))
	if err == nil || errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "Invalid API Key") {
		t.Fatalf("%v", err)
	}
	if strings.Contains(err.Error(), "sk_test_") {
		t.Fatalf("key in error: %v", err)
	}
	p := r.create(orderNo, 100)
	p.ProviderRef = "cs_test_doesnotexist"
	if _, err := r.gw.Query(context.Background(), p); err == nil || errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "No such checkout.session") {
		t.Fatalf("missing session: %v", err)
	}
}

func TestQueryMapsTheSession(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	nos := []domain.OrderNo{"2503011200001234000000000001", "2503011200001234000000000002", "2503011200001234000000000003", "2503011200001234000000000004"}
	ps := make([]domain.Payment, len(nos))
	for i, no := range nos {
		ps[i] = r.create(no, domain.Money(100*(i+1)))
	}
	mustEvent(t)(r.sim.Complete(string(nos[1]), true))
	mustEvent(t)(r.sim.Complete(string(nos[2]), false))
	mustEvent(t)(r.sim.ExpireSession(string(nos[3])))
	want := []domain.PaymentOutcome{domain.OutcomePending, domain.OutcomePaid, domain.OutcomePending, domain.OutcomeExpired}
	for i, p := range ps {
		st, err := r.gw.Query(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Outcome != want[i] || st.ProviderRef != p.ProviderRef || st.Amount != p.Amount || st.Currency != usd {
			t.Errorf("%s: %+v, want %s", p.OrderNo, st, want[i])
		}
	}
	// The session expires at its expires_at even without a call.
	r.clock.Advance(47 * time.Minute)
	if st, err := r.gw.Query(ctx, ps[0]); err != nil || st.Outcome != domain.OutcomeExpired {
		t.Fatalf("lapsed: %+v %v", st, err)
	}
	// A session of another order is refused: never report one order's payment for another.
	cross := ps[1]
	cross.OrderNo = nos[0]
	if _, err := r.gw.Query(ctx, cross); err == nil {
		t.Fatal("a session of another order was accepted")
	}
	for _, ref := range []string{"", "pi_123", "cs_test_../../v1/charges", "cs_test_a?b"} {
		bad := ps[0]
		bad.ProviderRef = ref
		if _, err := r.gw.Query(ctx, bad); err == nil {
			t.Errorf("ref %q accepted", ref)
		}
	}
}

func mustEvent(t *testing.T) func(stripesim.Event, error) stripesim.Event {
	return func(ev stripesim.Event, err error) stripesim.Event {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
}

func TestCloseExpiresTheSession(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := r.create(orderNo, 100)
	if err := r.gw.Close(ctx, p); err != nil {
		t.Fatal(err)
	}
	s, _ := r.sim.SessionOf(string(orderNo))
	if s.Status != "expired" {
		t.Fatalf("status %s", s.Status)
	}
	if ob := r.sim.Outbox(); len(ob) != 1 || ob[0].Type != stripesim.EventExpired {
		t.Fatalf("outbox %+v", ob)
	}
	// Closing again: Stripe refuses, the session reads expired, which is what was asked.
	if err := r.gw.Close(ctx, p); err != nil {
		t.Fatalf("second close: %v", err)
	}
	rq := r.sim.Requests()
	if last := rq[len(rq)-1]; last.Method != http.MethodGet {
		t.Fatalf("no read-back after the refusal: %+v", rq)
	}
	if rq[len(rq)-2].Status != http.StatusBadRequest {
		t.Fatalf("second expire answered %d", rq[len(rq)-2].Status)
	}
	// The expiry's event, once Stripe sends it, reads expired.
	r.sim.Flush(ctx)
	notices, _ := r.received()
	if len(notices) != 1 || notices[0].Outcome != domain.OutcomeExpired || notices[0].OrderNo != orderNo {
		t.Fatalf("notices %+v", notices)
	}
}

func TestCloseOfAPaidSessionIsAlreadyPaid(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	paid := r.create("2503011200001234000000000001", 100)
	delayed := r.create("2503011200001234000000000002", 100)
	mustEvent(t)(r.sim.Complete(string(paid.OrderNo), true))
	mustEvent(t)(r.sim.Complete(string(delayed.OrderNo), false))
	for _, p := range []domain.Payment{paid, delayed} {
		if err := r.gw.Close(ctx, p); !errors.Is(err, domain.ErrAlreadyPaid) {
			t.Errorf("%s: %v", p.OrderNo, err)
		}
	}
	missing := paid
	missing.ProviderRef = "cs_test_missing"
	if err := r.gw.Close(ctx, missing); err == nil || errors.Is(err, domain.ErrAlreadyPaid) || errors.Is(err, domain.ErrUnavailable) {
		t.Errorf("missing session: %v", err)
	}
}

func TestReply(t *testing.T) {
	r := newRig(t)
	ok, no := replyOf(r.gw.Reply(true)), replyOf(r.gw.Reply(false))
	var body map[string]bool
	if ok.Status != 200 || ok.ContentType != "application/json" || json.Unmarshal(ok.Body, &body) != nil || !body["received"] {
		t.Fatalf("accepted: %+v", ok)
	}
	if no.Status != 400 {
		t.Fatalf("refused: %+v", no)
	}
}

// TestProbeTellsAnAcceptedKeyFromARefusedOne: the probe of a made-up session is answered
// resource_missing with the account's key (authenticated), 401 with another (refused, without
// the key in the error).
func TestProbeTellsAnAcceptedKeyFromARefusedOne(t *testing.T) {
	r := newRig(t)
	answer, err := r.gw.Probe(context.Background(), string(orderNo))
	if err != nil || !strings.Contains(answer, "resource_missing") {
		t.Fatalf("probe with the account's key = %q, %v; want authenticated, resource_missing", answer, err)
	}
	other, err := stripe.New(stripe.Config{BaseURL: r.sim.URL, SecretKey: stripesim.NewSecretKey(),
		WebhookSecrets: r.secrets, HTTPClient: r.sim.Client(), Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Probe(context.Background(), string(orderNo))
	if err == nil || errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "sk_test_") {
		t.Fatalf("probe with another key: %v; want a refusal naming 401, without the key", err)
	}
}
