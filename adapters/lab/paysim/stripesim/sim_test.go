package stripesim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/stripesim"
	"cardshop/adapters/memory"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func newSim(t *testing.T) (*stripesim.Server, *memory.FakeClock, string) {
	t.Helper()
	clock := memory.NewFakeClock(start)
	key := stripesim.NewSecretKey()
	s, err := stripesim.New(stripesim.Options{SecretKey: key, WebhookSecrets: []string{stripesim.NewWebhookSecret()}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, clock, key
}

func form(expires time.Time) url.Values {
	return url.Values{"mode": {"payment"}, "line_items[0][price_data][currency]": {"usd"},
		"line_items[0][price_data][unit_amount]": {"1998"}, "line_items[0][price_data][product_data][name]": {"Card"},
		"line_items[0][quantity]": {"1"}, "success_url": {"https://shop.example/r"}, "client_reference_id": {"2503011200001234123456789012"},
		"metadata[order_no]": {"2503011200001234123456789012"}, "expires_at": {strconv.FormatInt(expires.Unix(), 10)}}
}

// call sends one API request with the key as a bearer token (or none when key is "").
func call(t *testing.T, s *stripesim.Server, method, path, key, idem string, f url.Values) (int, map[string]any, http.Header) {
	t.Helper()
	var body io.Reader
	if f != nil {
		body = strings.NewReader(f.Encode())
	}
	req, _ := http.NewRequest(method, s.URL+path, body)
	if f != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: not JSON: %v", method, path, err)
	}
	return resp.StatusCode, out, resp.Header
}

func errorOf(m map[string]any) map[string]any {
	e, _ := m["error"].(map[string]any)
	return e
}

func TestIdempotencyKeyReplaysAndRefusesOtherParameters(t *testing.T) {
	s, clock, key := newSim(t)
	exp := start.Add(46 * time.Minute)
	st, first, _ := call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "cardshop-1", form(exp))
	if st != 200 || first["object"] != "checkout.session" || first["status"] != "open" || first["url"] == nil {
		t.Fatalf("%d %v", st, first)
	}
	st, again, h := call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "cardshop-1", form(exp))
	if st != 200 || again["id"] != first["id"] || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", st, again)
	}
	// What a retry computing expires_at from "now" would send a minute later.
	clock.Advance(time.Minute)
	st, other, _ := call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "cardshop-1", form(clock.Now().Add(30*time.Minute)))
	if st != 400 || errorOf(other)["type"] != "idempotency_error" {
		t.Fatalf("other parameters: %d %v", st, other)
	}
	if n := len(s.Sessions()); n != 1 {
		t.Fatalf("%d sessions", n)
	}
}

func TestCreateValidatesAsStripeDoes(t *testing.T) {
	s, _, key := newSim(t)
	ok := form(start.Add(time.Hour))
	cases := map[string]func(url.Values){
		"expires in 29 minutes": func(f url.Values) { f.Set("expires_at", strconv.FormatInt(start.Add(29*time.Minute).Unix(), 10)) },
		"expires in 25 hours":   func(f url.Values) { f.Set("expires_at", strconv.FormatInt(start.Add(25*time.Hour).Unix(), 10)) },
		"unknown parameter":     func(f url.Values) { f.Set("amount", "1") },
		"upper-case currency":   func(f url.Values) { f.Set("line_items[0][price_data][currency]", "USD") },
		"fractional amount":     func(f url.Values) { f.Set("line_items[0][price_data][unit_amount]", "19.98") },
		"no product name":       func(f url.Values) { f.Del("line_items[0][price_data][product_data][name]") },
		"mode subscription":     func(f url.Values) { f.Set("mode", "subscription") },
		"no success url":        func(f url.Values) { f.Del("success_url") },
	}
	for name, edit := range cases {
		f := url.Values{}
		for k, v := range ok {
			f[k] = append([]string(nil), v...)
		}
		edit(f)
		st, body, _ := call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "k-"+name, f)
		if st != 400 || errorOf(body)["type"] != "invalid_request_error" {
			t.Errorf("%s: %d %v", name, st, body)
		}
		// A refused parameter records nothing: the corrected request may use the key.
		if st, _, _ := call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "k-"+name, ok); st != 200 {
			t.Errorf("%s: the corrected request answered %d", name, st)
		}
	}
}

func TestAuthRoutesAndSwitches(t *testing.T) {
	s, _, key := newSim(t)
	if st, body, _ := call(t, s, http.MethodGet, "/v1/checkout/sessions/cs_test_x", "", "", nil); st != 401 || errorOf(body)["message"] == nil {
		t.Fatalf("no key: %d %v", st, body)
	}
	if st, _, _ := call(t, s, http.MethodGet, "/v1/checkout/sessions/cs_test_x", stripesim.NewSecretKey(), "", nil); st != 401 {
		t.Fatalf("wrong key: %d", st)
	}
	if st, body, _ := call(t, s, http.MethodGet, "/v1/checkout/sessions/cs_test_x", key, "", nil); st != 404 || errorOf(body)["code"] != "resource_missing" {
		t.Fatalf("missing: %d %v", st, body)
	}
	if st, _, _ := call(t, s, http.MethodGet, "/v1/charges", key, "", nil); st != 404 {
		t.Fatalf("unknown route: %d", st)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/v1/checkout/sessions/cs_test_x", nil)
	req.SetBasicAuth(key, "")
	resp, err := s.Client().Do(req)
	if err != nil || resp.StatusCode != 404 {
		t.Fatalf("basic auth: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	s.Outage(true)
	if st, body, _ := call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "k", form(start.Add(time.Hour))); st != 503 || errorOf(body)["type"] != "api_error" {
		t.Fatalf("outage: %d %v", st, body)
	}
	s.Outage(false)
	s.Throttle(true)
	if st, body, _ := call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "k", form(start.Add(time.Hour))); st != 429 || errorOf(body)["code"] != "rate_limit" {
		t.Fatalf("throttle: %d %v", st, body)
	}
	s.Throttle(false)
	if st, _, h := call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "k", form(start.Add(time.Hour))); st != 200 || h.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after the outage the key is fresh: %d", st)
	}
}

func TestSessionLifeAndEventShape(t *testing.T) {
	s, _, key := newSim(t)
	var got []byte
	var sig string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		sig = r.Header.Get("Stripe-Signature")
		w.WriteHeader(200)
	}))
	defer hook.Close()
	s.SetWebhookURL(hook.URL)
	_, created, _ := call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "k", form(start.Add(time.Hour)))
	id := created["id"].(string)
	d, err := s.Pay(context.Background(), "2503011200001234123456789012")
	if err != nil || !d.Accepted() || sig != d.Sent.Header.Get("Stripe-Signature") || !strings.HasPrefix(sig, "t="+strconv.FormatInt(start.Unix(), 10)+",v1=") {
		t.Fatalf("%+v %v %q", d, err, sig)
	}
	var ev struct {
		ID, Object, Type string
		Data             struct{ Object map[string]any }
	}
	if err := json.Unmarshal(got, &ev); err != nil {
		t.Fatal(err)
	}
	o := ev.Data.Object
	if ev.Object != "event" || ev.Type != stripesim.EventCompleted || !strings.HasPrefix(ev.ID, "evt_") || o["id"] != id ||
		o["payment_status"] != "paid" || o["status"] != "complete" || o["amount_total"] != 1998.0 || o["currency"] != "usd" ||
		o["client_reference_id"] != "2503011200001234123456789012" || o["url"] != nil || o["payment_intent"] == nil {
		t.Fatalf("event %s", got)
	}
	// Paid: expiring is refused and the session stays complete.
	if st, body, _ := call(t, s, http.MethodPost, "/v1/checkout/sessions/"+id+"/expire", key, "", url.Values{}); st != 400 || errorOf(body)["type"] != "invalid_request_error" {
		t.Fatalf("expire a paid session: %d %v", st, body)
	}
	if _, body, _ := call(t, s, http.MethodGet, "/v1/checkout/sessions/"+id, key, "", nil); body["status"] != "complete" {
		t.Fatalf("%v", body)
	}
	// The simulator refuses to pay twice.
	if _, err := s.Pay(context.Background(), "2503011200001234123456789012"); err == nil {
		t.Fatal("paid twice")
	}
}

func TestRefundEndpoint(t *testing.T) {
	s, _, key := newSim(t)
	call(t, s, http.MethodPost, "/v1/checkout/sessions", key, "k", form(start.Add(time.Hour)))
	no := "2503011200001234123456789012"
	if _, err := s.Complete(no, true); err != nil {
		t.Fatal(err)
	}
	ss, _ := s.SessionOf(no)
	if !strings.HasPrefix(ss.PaymentIntent, "pi_") || !strings.HasPrefix(ss.Charge, "ch_") {
		t.Fatalf("%+v", ss)
	}
	good := url.Values{"payment_intent": {ss.PaymentIntent}, "amount": {"1998"}, "reason": {"requested_by_customer"}, "metadata[refund_no]": {"R1"}}
	for name, c := range map[string]struct {
		edit   func(url.Values)
		status int
		code   string
	}{
		"unknown parameter": {func(f url.Values) { f.Set("amount_total", "1") }, 400, "parameter_unknown"},
		"no intent":         {func(f url.Values) { f.Del("payment_intent") }, 400, "parameter_missing"},
		"unknown intent":    {func(f url.Values) { f.Set("payment_intent", "pi_nope") }, 404, "resource_missing"},
		"bad reason":        {func(f url.Values) { f.Set("reason", "changed_mind") }, 400, "parameter_invalid"},
		"zero amount":       {func(f url.Values) { f.Set("amount", "0") }, 400, "parameter_invalid"},
		"too much":          {func(f url.Values) { f.Set("amount", "1999") }, 400, "amount_too_large"},
	} {
		f := url.Values{}
		for k, v := range good {
			f[k] = append([]string(nil), v...)
		}
		c.edit(f)
		st, body, _ := call(t, s, http.MethodPost, "/v1/refunds", key, "", f)
		if st != c.status || errorOf(body)["code"] != c.code {
			t.Errorf("%s: %d %v", name, st, body)
		}
	}
	st, rf, _ := call(t, s, http.MethodPost, "/v1/refunds", key, "r1", good)
	if st != 200 || rf["object"] != "refund" || rf["status"] != "succeeded" || rf["amount"] != 1998.0 || rf["charge"] != ss.Charge ||
		rf["metadata"].(map[string]any)["refund_no"] != "R1" {
		t.Fatalf("%d %v", st, rf)
	}
	if st, again, h := call(t, s, http.MethodPost, "/v1/refunds", key, "r1", good); st != 200 || again["id"] != rf["id"] || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", st, again)
	}
	if st, body, _ := call(t, s, http.MethodPost, "/v1/refunds", key, "r2", good); st != 400 || errorOf(body)["code"] != "charge_already_refunded" {
		t.Fatalf("second refund: %d %v", st, body)
	}
	if _, list, _ := call(t, s, http.MethodGet, "/v1/refunds?payment_intent="+ss.PaymentIntent, key, "", nil); list["object"] != "list" || len(list["data"].([]any)) != 1 {
		t.Fatalf("list %v", list)
	}
	if st, got, _ := call(t, s, http.MethodGet, "/v1/refunds/"+rf["id"].(string), key, "", nil); st != 200 || got["id"] != rf["id"] {
		t.Fatalf("retrieve %d %v", st, got)
	}
	if n, amount := s.Payouts(no); n != 1 || amount != 1998 {
		t.Fatalf("payouts %d %d", n, amount)
	}
	if ob := s.Outbox(); len(ob) != 2 || ob[0].Type != stripesim.EventRefundCreated || ob[1].Type != stripesim.EventChargeRefunded || ob[0].RefundID != rf["id"] {
		t.Fatalf("outbox %+v", ob)
	}
}
