package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/stripesim"
	"cardshop/adapters/stripe"
	"cardshop/domain"
)

func TestEventsOverHTTP(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	nos := []domain.OrderNo{"2503011200001234000000000001", "2503011200001234000000000002", "2503011200001234000000000003",
		"2503011200001234000000000004", "2503011200001234000000000005"}
	ps := map[domain.OrderNo]domain.Payment{}
	for i, no := range nos {
		ps[no] = r.create(no, domain.Money(1000+i))
	}
	steps := []struct {
		do      func(context.Context, string) (stripesim.Delivery, error)
		no      domain.OrderNo
		outcome domain.PaymentOutcome
	}{
		{r.sim.Pay, nos[0], domain.OutcomePaid},
		{r.sim.PayDelayed, nos[1], domain.OutcomePending},
		{r.sim.Settle, nos[1], domain.OutcomePaid},
		{r.sim.PayDelayed, nos[2], domain.OutcomePending},
		{r.sim.Fail, nos[2], domain.OutcomeFailed},
		{r.sim.Expire, nos[3], domain.OutcomeExpired},
		{r.sim.Fail, nos[4], domain.OutcomeFailed}, // completed unpaid first, then failed
	}
	for i, s := range steps {
		d, err := s.do(ctx, string(s.no))
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != http.StatusOK || string(d.Reply) != `{"received":true}` || !d.Accepted() {
			t.Fatalf("step %d: %+v", i, d)
		}
		notices, refused := r.received()
		if len(refused) != 0 {
			t.Fatalf("refused: %v", refused)
		}
		n := notices[len(notices)-1]
		p := ps[s.no]
		if n.Outcome != s.outcome || n.OrderNo != s.no || n.ProviderRef != p.ProviderRef || n.Amount != p.Amount ||
			n.Currency != usd || n.EventID != d.Note.ID || !strings.HasPrefix(n.EventID, "evt_") {
			t.Fatalf("step %d: notice %+v, want %s of %s", i, n, s.outcome, s.no)
		}
	}
	if notices, _ := r.received(); len(notices) != 8 || notices[6].Outcome != domain.OutcomePending {
		t.Fatalf("%d notices (Fail of an open session sends two)", len(notices))
	}
}

func TestDuplicatesReorderingAndDrops(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, b := domain.OrderNo("2503011200001234000000000001"), domain.OrderNo("2503011200001234000000000002")
	r.create(a, 100)
	r.create(b, 200)

	first, err := r.sim.Pay(ctx, string(a))
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.sim.Resend(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	notices, _ := r.received()
	if len(again) != 2 || len(notices) != 3 {
		t.Fatalf("%d resent, %d notices", len(again), len(notices))
	}
	for i, d := range again {
		if !d.Accepted() || d.Note.ID != first.Note.ID {
			t.Fatalf("resend %d: %+v", i, d)
		}
		if n := notices[i+1]; n.EventID != first.Note.ID || n.Outcome != domain.OutcomePaid {
			t.Fatalf("duplicate %d: %+v", i, n)
		}
	}

	// Out of order: the delayed payment's success overtakes its checkout completion.
	r.sim.Hold(true)
	mustDelivery(t)(r.sim.PayDelayed(ctx, string(b)))
	mustDelivery(t)(r.sim.Settle(ctx, string(b)))
	held := r.sim.Held()
	if len(held) != 2 || held[0].Type != stripesim.EventCompleted || held[1].Type != stripesim.EventAsyncSucceeded {
		t.Fatalf("held %+v", held)
	}
	r.sim.Hold(false)
	for _, d := range r.sim.Release(ctx, 1, 0) {
		if !d.Accepted() {
			t.Fatalf("%+v", d)
		}
	}
	notices, _ = r.received()
	if got := notices[3:]; len(got) != 2 || got[0].Outcome != domain.OutcomePaid || got[1].Outcome != domain.OutcomePending || got[0].OrderNo != b {
		t.Fatalf("reordered: %+v", got)
	}

	// A dropped event never reaches the shop: the shop learns by Query.
	c := domain.OrderNo("2503011200001234000000000003")
	p := r.create(c, 300)
	r.sim.Drop(1)
	d := mustDelivery(t)(r.sim.Pay(ctx, string(c)))
	if !d.Dropped || d.Status != 0 {
		t.Fatalf("%+v", d)
	}
	if n, _ := r.received(); len(n) != 5 {
		t.Fatalf("%d notices after a drop", len(n))
	}
	if st, err := r.gw.Query(ctx, p); err != nil || st.Outcome != domain.OutcomePaid {
		t.Fatalf("query after the drop: %+v %v", st, err)
	}
}

func mustDelivery(t *testing.T) func(stripesim.Delivery, error) stripesim.Delivery {
	return func(d stripesim.Delivery, err error) stripesim.Delivery {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

func TestForgeriesAreRefused(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.create(orderNo, 100)
	r.sim.Hold(true)
	mustDelivery(t)(r.sim.Pay(ctx, string(orderNo)))
	ev := r.sim.Held()[0].Event
	for _, f := range []stripesim.Forgery{stripesim.WrongSecret, stripesim.StaleTimestamp, stripesim.FutureTimestamp,
		stripesim.TamperedBody, stripesim.Unsigned, stripesim.V0Only} {
		d := r.sim.Deliver(ctx, ev, f)
		if d.Status != http.StatusBadRequest || d.Err != nil {
			t.Errorf("forgery %d: %+v", f, d)
		}
	}
	notices, refused := r.received()
	if len(notices) != 0 || len(refused) != 6 {
		t.Fatalf("%d accepted, %d refused", len(notices), len(refused))
	}
	for _, err := range refused {
		if !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%v", err)
		}
	}
	if d := r.sim.Deliver(ctx, ev, stripesim.Genuine); !d.Accepted() {
		t.Fatalf("genuine: %+v", d)
	}
}

func TestRotatedSecrets(t *testing.T) {
	old, fresh := stripesim.NewWebhookSecret(), stripesim.NewWebhookSecret()
	cases := []struct {
		name        string
		sign, check []string
		ok          bool
	}{
		{"Stripe signs with both, shop holds the new", []string{old, fresh}, []string{fresh}, true},
		{"Stripe signs with both, shop holds the old", []string{old, fresh}, []string{old}, true},
		{"Stripe signs with the new, shop holds both", []string{fresh}, []string{old, fresh}, true},
		{"Stripe signs with the old, shop holds both", []string{old}, []string{fresh, old}, true},
		{"Stripe signs with the old, shop holds the new", []string{old}, []string{fresh}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, signingWith(c.sign...), verifyingWith(c.check...))
			r.create(orderNo, 100)
			d := mustDelivery(t)(r.sim.Pay(context.Background(), string(orderNo)))
			if d.Accepted() != c.ok || strings.Count(d.Sent.Header.Get("Stripe-Signature"), "v1=") != len(c.sign) {
				t.Fatalf("%+v", d)
			}
		})
	}
}

func TestV0AlongsideV1IsIgnored(t *testing.T) {
	r := newRig(t, func(o *stripesim.Options, _ *stripe.Config) { o.SendV0 = true })
	r.create(orderNo, 100)
	d := mustDelivery(t)(r.sim.Pay(context.Background(), string(orderNo)))
	if !d.Accepted() || !strings.Contains(d.Sent.Header.Get("Stripe-Signature"), ",v0=") {
		t.Fatalf("%+v", d)
	}
}

// verifyAt verifies body under header at, with a gateway that holds secrets.
func verifyAt(t *testing.T, secrets []string, header string, body []byte, at time.Time) (domain.ProviderNotice, error) {
	t.Helper()
	gw, err := stripe.New(stripe.Config{SecretKey: stripesim.NewSecretKey(), WebhookSecrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if header != "" {
		h.Set(stripe.SignatureHeader, header)
	}
	return gw.Verify(context.Background(), domain.InboundRequest{Method: http.MethodPost, Header: domain.Header(h), Body: body, At: at})
}

// The example is computed outside Go (OpenSSL: printf '1740830405.' | cat - the file |
// openssl dgst -sha256 -hmac <secret>), so a shared mistake of the gateway and the simulator
// cannot pass it.
func TestSignatureAgainstAnIndependentExample(t *testing.T) {
	body, err := os.ReadFile("testdata/checkout_session_completed.json")
	if err != nil {
		t.Fatal(err)
	}
	const (
		secretA = "whsec_Vq8kD3pL0tZr7NcYx2mWb5HsJ4eFgA6u"
		secretB = "whsec_Rt1nB9yQe4KcU7oXv3LmZ8aWs2HdJ6pF"
		sigA    = "1dc6db26a0bcd4785b69ab594dfe0e664af74c7bc2f361f0f6cdf74adf60c257"
		sigB    = "9c866aad25623ce347c14b4a59ef56db2ca216b8654a76f52b85e193997c53b2"
	)
	at := time.Unix(1740830405, 0)
	if got := stripesim.Sign(secretA, at, body); got != sigA {
		t.Fatalf("simulator signs %s", got)
	}
	n, err := verifyAt(t, []string{secretA}, "t=1740830405,v1="+sigA, body, at.Add(42*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := domain.ProviderNotice{OrderNo: "2503011200001234123456789012", ProviderRef: "cs_test_a1VectorSession000000000000000000000000000000000000000",
		EventID: "evt_1QvVectorTestEvent000001", Outcome: domain.OutcomePaid, Amount: 1998, Currency: usd}
	if n != want {
		t.Fatalf("%+v", n)
	}
	// Rotation: both signatures, either secret.
	both := "t=1740830405,v1=" + sigB + ",v1=" + sigA
	for _, s := range []string{secretA, secretB} {
		if _, err := verifyAt(t, []string{s}, both, body, at); err != nil {
			t.Errorf("%v", err)
		}
	}
	// One changed byte anywhere refuses.
	for _, h := range []string{"t=1740830406,v1=" + sigA, "t=1740830405,v1=" + sigA[:63] + "0", "t=1740830405,v1=" + sigB} {
		if _, err := verifyAt(t, []string{secretA}, h, body, at); !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%s: %v", h, err)
		}
	}
	if _, err := verifyAt(t, []string{secretA}, "t=1740830405,v1="+sigA, append(body, '\n'), at); !errors.Is(err, domain.ErrBadSignature) {
		t.Errorf("body with an extra byte: %v", err)
	}
}

func TestTolerance(t *testing.T) {
	secret := stripesim.NewWebhookSecret()
	body := []byte(`{"id":"evt_1","object":"event","type":"customer.created","data":{"object":{}}}`)
	signed := time.Unix(1740830400, 0)
	header := stripesim.SignatureHeader(signed, body, secret)
	for d, ok := range map[time.Duration]bool{0: true, 300 * time.Second: true, -300 * time.Second: true,
		301 * time.Second: false, -301 * time.Second: false, time.Hour: false} {
		_, err := verifyAt(t, []string{secret}, header, body, signed.Add(d))
		if (err == nil) != ok || (err != nil && !errors.Is(err, domain.ErrBadSignature)) {
			t.Errorf("arrived %s after signing: %v", d, err)
		}
	}
}

func TestSignatureHeaderShapes(t *testing.T) {
	secret := stripesim.NewWebhookSecret()
	body := []byte(`{"id":"evt_1","object":"event","type":"customer.created","data":{"object":{}}}`)
	at := time.Unix(1740830400, 0)
	ts := strconv.FormatInt(at.Unix(), 10)
	good := stripesim.Sign(secret, at, body)
	other := stripesim.Sign(stripesim.NewWebhookSecret(), at, body)
	cases := map[string]bool{
		"t=" + ts + ",v1=" + good:                  true,
		"v1=" + good + ",t=" + ts:                  true,
		"t=" + ts + ",v1=" + other + ",v1=" + good: true,
		"t=" + ts + ",v1=bad_signature,v1=" + good: true, // an unreadable v1 is ignored
		"t=" + ts + ",v1=" + strings.ToUpper(good): true, // hex in either case
		"t=" + ts + ",v0=" + good + ",v1=" + good:  true,
		"t=" + ts + ",x=1,v1=" + good:              true,
		"":                                         false,
		"t=":                                       false,
		"v1,t=1":                                   false,
		"t=" + ts:                                  false,
		"v1=" + good:                               false,
		"t=" + ts + ",v1=" + other:                 false,
		"t=" + ts + ",v1=bad_signature":            false,
		"t=" + ts + ",v0=" + good:                  false,
		"t=" + ts + ",t=" + ts + ",v1=" + good:     false,
		"t=+" + ts + ",v1=" + good:                 false,
		"t=" + ts + ".0,v1=" + good:                false,
		"t=" + ts + ", v1=" + good:                 false,
		"t=" + ts + ",v1=" + good + ",":            false,
		"t=" + ts + ",v1=" + good + "=":            false,
		"t=0000001740830400,v1=" + good:            false,
		"t=" + ts + ",v1=" + good[:62]:             false,
		"t=" + ts + strings.Repeat(",v1="+other, 16) + ",v1=" + good: false,
	}
	for h, ok := range cases {
		_, err := verifyAt(t, []string{secret}, h, body, at)
		if (err == nil) != ok || (err != nil && !errors.Is(err, domain.ErrBadSignature)) {
			t.Errorf("%q: %v", h, err)
		}
	}
	gw, err := stripe.New(stripe.Config{SecretKey: stripesim.NewSecretKey(), WebhookSecrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	two := http.Header{stripe.SignatureHeader: {"t=" + ts + ",v1=" + good, "t=" + ts + ",v1=" + good}}
	if _, err := gw.Verify(context.Background(), domain.InboundRequest{Header: domain.Header(two), Body: body, At: at}); !errors.Is(err, domain.ErrBadSignature) {
		t.Errorf("two headers: %v", err)
	}
}

// session renders a checkout session object for a hand-built event.
func session(fields string) string {
	return `{"id":"cs_test_abc","object":"checkout.session","client_reference_id":"2503011200001234123456789012",` +
		`"metadata":{"order_no":"2503011200001234123456789012"}` + fields + `}`
}

func TestEventMapping(t *testing.T) {
	secret := stripesim.NewWebhookSecret()
	at := time.Unix(1740830400, 0)
	paid := `,"payment_status":"paid","status":"complete","amount_total":1998,"currency":"usd"`
	unpaid := `,"payment_status":"unpaid","status":"complete","amount_total":1998,"currency":"usd"`
	cases := []struct {
		typ, object string
		outcome     domain.PaymentOutcome
		order       bool
	}{
		{"checkout.session.completed", session(paid), domain.OutcomePaid, true},
		{"checkout.session.completed", session(unpaid), domain.OutcomePending, true},
		{"checkout.session.completed", session(`,"payment_status":"no_payment_required","status":"complete","amount_total":0,"currency":"usd"`), domain.OutcomePending, true},
		{"checkout.session.async_payment_succeeded", session(paid), domain.OutcomePaid, true},
		{"checkout.session.async_payment_succeeded", session(unpaid), domain.OutcomePending, true},
		{"checkout.session.async_payment_failed", session(unpaid), domain.OutcomeFailed, true},
		{"checkout.session.expired", session(`,"payment_status":"unpaid","status":"expired","amount_total":1998,"currency":"usd"`), domain.OutcomeExpired, true},
		{"checkout.session.expired", session(`,"status":"expired"`), domain.OutcomeExpired, true},
		{"payment_intent.succeeded", `{"id":"pi_1","object":"payment_intent","amount":1998}`, domain.OutcomePending, false},
		{"charge.refunded", `{"id":"ch_1","object":"charge"}`, domain.OutcomePending, false},
	}
	for _, c := range cases {
		body := []byte(`{"id":"evt_9","object":"event","type":"` + c.typ + `","data":{"object":` + c.object + `}}`)
		n, err := verifyAt(t, []string{secret}, stripesim.SignatureHeader(at, body, secret), body, at)
		if err != nil {
			t.Errorf("%s %s: %v", c.typ, c.object, err)
			continue
		}
		if n.Outcome != c.outcome || n.EventID != "evt_9" || (n.OrderNo != "") != c.order {
			t.Errorf("%s %s: %+v", c.typ, c.object, n)
		}
		if c.order && (n.ProviderRef != "cs_test_abc" || (n.Currency.IsZero() && n.Amount != 0) || (!n.Currency.IsZero() && n.Currency != usd)) {
			t.Errorf("%s: %+v", c.typ, n)
		}
		if c.outcome == domain.OutcomeFailed && n.Reason == "" {
			t.Errorf("failed without a reason")
		}
	}
}

func TestMalformedEventsAreValidationErrors(t *testing.T) {
	secret := stripesim.NewWebhookSecret()
	at := time.Unix(1740830400, 0)
	paid := `,"payment_status":"paid","status":"complete"`
	bodies := []string{
		``, `null`, `[]`, `{"id":"evt_1"`, `"evt"`,
		`{"id":"evt_1","object":"event","data":{"object":{}}}`,
		`{"id":"ev_1","object":"event","type":"checkout.session.completed","data":{"object":` + session(paid+`,"amount_total":1,"currency":"usd"`) + `}}`,
		`{"id":"evt_1","object":"charge","type":"checkout.session.completed","data":{"object":` + session(paid+`,"amount_total":1,"currency":"usd"`) + `}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed"}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":{"id":"pi_1","object":"payment_intent"}}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":{"id":"cs_1","object":"checkout.session","payment_status":"paid","amount_total":1,"currency":"usd"}}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":{"id":"cs_1","object":"checkout.session","client_reference_id":"../1","payment_status":"paid","amount_total":1,"currency":"usd"}}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":{"id":"cs_1","object":"checkout.session","client_reference_id":"2503011200001234123456789012","metadata":{"order_no":"2503011200001234000000000009"},"payment_status":"paid","amount_total":1,"currency":"usd"}}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":` + session(paid) + `}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":` + session(paid+`,"amount_total":1998,"currency":"USD"`) + `}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":` + session(paid+`,"amount_total":-1,"currency":"usd"`) + `}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":` + session(paid+`,"amount_total":19.98,"currency":"usd"`) + `}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":` + session(paid+`,"amount_total":"1998","currency":"usd"`) + `}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":` + session(paid+`,"amount_total":1998,"currency":"xts"`) + `}}`,
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":` + session(paid+`,"amount_total":1998`) + `}}`,
	}
	for _, b := range bodies {
		body := []byte(b)
		_, err := verifyAt(t, []string{secret}, stripesim.SignatureHeader(at, body, secret), body, at)
		if !errors.Is(err, domain.ErrInvalidInput) || errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%s: %v", b, err)
		}
	}
}
