package epay_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/epay"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/domain"
)

func TestPayNotifiesAndTheShopAccepts(t *testing.T) {
	for _, amp := range []bool{false, true} {
		sim := newSim(t, epaysim.Config{AmpKey: amp})
		g := newGateway(t, sim, func(c *epay.Config) {
			if amp {
				c.Variant = epay.SignAmpKey
			}
		})
		s := newShop(t, g)
		no := orderNo(10)
		created(t, sim, g, request(no, 2500, s.notifyURL()))
		if err := sim.Pay(context.Background(), string(no)); err != nil {
			t.Fatal(err)
		}
		notices, errs := s.results()
		if len(errs) != 0 || len(notices) != 1 {
			t.Fatalf("amp=%v: notices %v errors %v", amp, notices, errs)
		}
		o, _ := sim.Order(string(no))
		n := notices[0]
		want := domain.ProviderNotice{OrderNo: no, ProviderRef: o.TradeNo, EventID: o.TradeNo + ":TRADE_SUCCESS",
			Outcome: domain.OutcomePaid, Amount: 2500, Currency: cny, Method: "alipay"}
		if n != want {
			t.Fatalf("notice\n got %+v\nwant %+v", n, want)
		}
		d := sim.Deliveries()
		if len(d) != 1 || !d[0].Accepted() || d[0].Status != http.StatusOK {
			t.Fatalf("deliveries %+v", d)
		}
	}
}

func TestRefusedNotificationsAreResentUntilSuccess(t *testing.T) {
	sim := newSim(t, epaysim.Config{MaxAttempts: 4})
	g := newGateway(t, sim, nil)
	s := newShop(t, g)
	no := orderNo(11)
	created(t, sim, g, request(no, 100, s.notifyURL()))
	s.refuseOK = true
	if err := sim.Pay(context.Background(), string(no)); !errors.Is(err, epaysim.ErrNotAcknowledged) {
		t.Fatalf("Pay = %v", err)
	}
	if d := sim.Deliveries(); len(d) != 4 || string(d[3].Reply) != "fail" {
		t.Fatalf("want 4 attempts answered fail: %+v", d)
	}
	s.mu.Lock()
	s.refuseOK = false
	s.mu.Unlock()
	d, err := sim.Renotify(context.Background(), string(no))
	if err != nil || !d.Accepted() {
		t.Fatalf("resend %+v %v", d, err)
	}
	// Every copy is the same event: the application dedupes on EventID.
	notices, _ := s.results()
	for _, n := range notices {
		if n.EventID != notices[0].EventID {
			t.Fatalf("event ids differ: %v", notices)
		}
	}
}

func TestForgedNotificationsAreRefused(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	s := newShop(t, g)
	no := orderNo(12)
	created(t, sim, g, request(no, 1000, s.notifyURL()))
	for _, f := range []epaysim.Forgery{epaysim.WrongKey, epaysim.TamperedMoney, epaysim.OtherPID, epaysim.Unsigned} {
		d, err := sim.Forge(context.Background(), string(no), f)
		if err != nil {
			t.Fatal(err)
		}
		if d.Accepted() || strings.TrimSpace(string(d.Reply)) != "fail" {
			t.Errorf("%v: accepted (%d %q)", f, d.Status, d.Reply)
		}
	}
	notices, errs := s.results()
	if len(notices) != 0 || len(errs) != 4 {
		t.Fatalf("notices %v errors %v", notices, errs)
	}
	for _, err := range errs {
		if !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("want ErrBadSignature: %v", err)
		}
	}
}

// signed returns a genuine notification's parameters for no, changed by mutate and signed
// again with the merchant's KEY.
func signed(sim *epaysim.Sim, no domain.OrderNo, mutate func(url.Values)) url.Values {
	p := url.Values{"pid": {sim.PID()}, "trade_no": {"2025030112000012345"}, "out_trade_no": {string(no)},
		"type": {"alipay"}, "name": {"card"}, "money": {"10.00"}, "trade_status": {"TRADE_SUCCESS"}}
	if mutate != nil {
		mutate(p)
	}
	p.Set("sign", sim.Sign(p))
	p.Set("sign_type", "MD5")
	return p
}

func verifyGET(g *epay.Gateway, q url.Values) (domain.ProviderNotice, error) {
	return g.Verify(context.Background(), domain.InboundRequest{Method: http.MethodGet, Query: q, At: time.Now()})
}

func TestVerifyOddAmountsAreValidationErrors(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	for _, money := range []string{"1", "1.0", "1.001", "-1.00", " 1.00", "1.00 ", "+1.00", "01.00", "1e2", "0.00",
		"1,00", "１.00", "", "0x10", ".50", "1.", "99999999999999999.00"} {
		q := signed(sim, orderNo(13), func(p url.Values) { p.Set("money", money) })
		_, err := verifyGET(g, q)
		if money == "" {
			// An empty money is not signed (empty values never are); the notice is still
			// refused as malformed.
			if !errors.Is(err, domain.ErrInvalidInput) {
				t.Errorf("money %q: %v", money, err)
			}
			continue
		}
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != "money" {
			t.Errorf("money %q: err = %v, want a validation error on money", money, err)
		}
	}
	for money, want := range map[string]domain.Money{"1.00": 100, "0.01": 1, "19.99": 1999, "0.50": 50, "100000.00": 10000000} {
		n, err := verifyGET(g, signed(sim, orderNo(13), func(p url.Values) { p.Set("money", money) }))
		if err != nil || n.Amount != want || n.Currency != cny {
			t.Errorf("money %q: %+v %v", money, n, err)
		}
	}
}

func TestVerifyFieldsAndStatuses(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	no := orderNo(14)
	for status, want := range map[string]domain.PaymentOutcome{
		"TRADE_SUCCESS": domain.OutcomePaid, "WAIT_BUYER_PAY": domain.OutcomePending,
		"TRADE_CLOSED": domain.OutcomePending, "TRADE_FINISHED": domain.OutcomePending, "trade_success": domain.OutcomePending,
	} {
		n, err := verifyGET(g, signed(sim, no, func(p url.Values) { p.Set("trade_status", status) }))
		if err != nil || n.Outcome != want || n.EventID != "2025030112000012345:"+status {
			t.Errorf("%s: %+v %v", status, n, err)
		}
	}
	// Extra parameters the gateway signed (param, …) are part of the signature.
	if _, err := verifyGET(g, signed(sim, no, func(p url.Values) { p.Set("param", "a b c") })); err != nil {
		t.Fatal(err)
	}
	invalid := map[string]func(url.Values){
		"no out_trade_no":  func(p url.Values) { p.Del("out_trade_no") },
		"bad out_trade_no": func(p url.Values) { p.Set("out_trade_no", "../etc") },
		"no trade_no":      func(p url.Values) { p.Del("trade_no") },
		"bad trade_no":     func(p url.Values) { p.Set("trade_no", "12 34") },
		"no trade_status":  func(p url.Values) { p.Del("trade_status") },
		"no type":          func(p url.Values) { p.Del("type") },
		"bad type":         func(p url.Values) { p.Set("type", "Ali pay") },
	}
	for name, mutate := range invalid {
		if _, err := verifyGET(g, signed(sim, no, mutate)); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]func(url.Values){
		"other pid, signed with our key": func(p url.Values) { p.Set("pid", "1002") },
		"no pid":                         func(p url.Values) { p.Del("pid") },
	}
	for name, mutate := range bad {
		if _, err := verifyGET(g, signed(sim, no, mutate)); !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
	after := map[string]func(url.Values){
		"sign upper case":    func(p url.Values) { p.Set("sign", strings.ToUpper(p.Get("sign"))) },
		"sign_type RSA":      func(p url.Values) { p.Set("sign_type", "RSA") },
		"sign twice":         func(p url.Values) { p.Add("sign", p.Get("sign")) },
		"money twice":        func(p url.Values) { p.Add("money", "10.00") },
		"added parameter":    func(p url.Values) { p.Set("extra", "1") },
		"name changed":       func(p url.Values) { p.Set("name", "other") },
		"truncated sign":     func(p url.Values) { p.Set("sign", p.Get("sign")[:31]) },
		"status to success":  func(p url.Values) { p.Set("trade_status", "TRADE_SUCCESS") },
		"out_trade_no moved": func(p url.Values) { p.Set("out_trade_no", string(orderNo(15))) },
	}
	for name, mutate := range after {
		q := signed(sim, no, func(p url.Values) { p.Set("trade_status", "WAIT_BUYER_PAY") })
		mutate(q)
		if _, err := verifyGET(g, q); !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// An added empty parameter is not signed and changes nothing.
	q := signed(sim, no, nil)
	q.Set("empty", "")
	if _, err := verifyGET(g, q); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyMethods(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	q := signed(sim, orderNo(16), nil)
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}}
	cases := []struct {
		name string
		in   domain.InboundRequest
		ok   bool
	}{
		{"GET query", domain.InboundRequest{Method: http.MethodGet, Query: q}, true},
		{"POST form", domain.InboundRequest{Method: http.MethodPost, Header: domain.Header(form), Body: []byte(q.Encode())}, true},
		{"POST form, no content type", domain.InboundRequest{Method: http.MethodPost, Body: []byte(q.Encode())}, true},
		{"POST, params in query", domain.InboundRequest{Method: http.MethodPost, Query: q}, true},
		{"POST JSON", domain.InboundRequest{Method: http.MethodPost, Header: domain.Header{"Content-Type": {"application/json"}}, Body: []byte(q.Encode())}, false},
		{"POST broken form", domain.InboundRequest{Method: http.MethodPost, Header: domain.Header(form), Body: []byte(q.Encode() + "&x=%zz")}, false},
		{"PUT", domain.InboundRequest{Method: http.MethodPut, Query: q}, false},
		{"GET nothing", domain.InboundRequest{Method: http.MethodGet}, false},
	}
	for _, c := range cases {
		n, err := g.Verify(context.Background(), c.in)
		if c.ok && (err != nil || n.Outcome != domain.OutcomePaid) {
			t.Errorf("%s: %+v %v", c.name, n, err)
		}
		if !c.ok && !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", c.name, err)
		}
	}
}

func TestNotificationSwitches(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	s := newShop(t, g)
	a, b := orderNo(20), orderNo(21)
	created(t, sim, g, request(a, 100, s.notifyURL()))
	created(t, sim, g, request(b, 200, s.notifyURL()))

	// Dropped on the way: the shop sees the third attempt only.
	sim.Drop(2)
	if err := sim.Pay(context.Background(), string(a)); err != nil {
		t.Fatal(err)
	}
	if notices, _ := s.results(); len(notices) != 1 {
		t.Fatalf("notices after drops: %v", notices)
	}

	// Held and released in reverse: b's notification and a's duplicate arrive reordered.
	sim.Hold(true)
	if err := sim.Pay(context.Background(), string(b)); !errors.Is(err, epaysim.ErrHeld) {
		t.Fatal(err)
	}
	if _, err := sim.Renotify(context.Background(), string(a)); !errors.Is(err, epaysim.ErrHeld) {
		t.Fatal(err)
	}
	sim.Hold(false)
	out := sim.Release(context.Background(), 1, 0)
	if len(out) != 2 || out[0].Note.OutTradeNo != string(a) || out[1].Note.OutTradeNo != string(b) || !out[0].Accepted() || !out[1].Accepted() {
		t.Fatalf("released %+v", out)
	}
	notices, errs := s.results()
	if len(errs) != 0 || len(notices) != 3 || notices[1].OrderNo != a || notices[2].OrderNo != b {
		t.Fatalf("notices %v errors %v", notices, errs)
	}
}
