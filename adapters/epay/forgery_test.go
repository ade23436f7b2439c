package epay_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"cardshop/adapters/epay"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/domain"
)

// injection is a product name that, signed raw inside a pay URL's name, makes the pay URL's
// signature also the signature of a TRADE_SUCCESS of victim (same amount).
func injection(victim domain.OrderNo, pid string) string {
	return "P&out_trade_no=" + string(victim) + "&pid=" + pid + "&trade_no=X1&trade_status=TRADE_SUCCESS&type=alipay&z="
}

// forgedFromPayURL is what an attacker builds from a pay URL whose name carries injection:
// the parameters the injection names, and z absorbing the rest of the signed string, with the
// pay URL's own signature.
func forgedFromPayURL(t *testing.T, payURL string, victim domain.OrderNo, pid string) url.Values {
	t.Helper()
	u, err := url.Parse(payURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	p := epay.Params{}
	for k := range q {
		p[k] = q.Get(k)
	}
	joined := epay.SigningString(p, "", epay.SignAppend) // no key: the string as the attacker sees it
	i := strings.Index(joined, "&notify_url=")
	if i < 0 {
		t.Fatalf("no notify_url in %q", joined)
	}
	return url.Values{"money": {q.Get("money")}, "name": {"P"}, "out_trade_no": {string(victim)}, "pid": {pid},
		"trade_no": {"X1"}, "trade_status": {epay.TradeSuccess}, "type": {"alipay"}, "z": {" × 2" + joined[i:]},
		"sign": {q.Get("sign")}, "sign_type": {"MD5"}}
}

// A product name carrying "&k=v" pairs never makes a pay URL's signature the signature of a
// notification: the name is signed with look-alikes of the separators, and a notification
// with a separator in a value is refused before its signature is looked at.
func TestAPayURLsSignatureIsNeverANotifications(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil) // redirect: the pay URL carries the signature
	s := newShop(t, g)
	victim, attacker := orderNo(80), orderNo(81)
	created(t, sim, g, request(victim, 2000, s.notifyURL())) // PENDING, 20.00, at the gateway

	r := request(attacker, 2000, s.notifyURL())
	r.Subject = injection(victim, sim.PID()) + " × 2"
	c, err := g.Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(c.PayURL)
	name := u.Query().Get("name")
	if strings.ContainsAny(name, "&=") || !strings.Contains(name, "P＆out_trade_no＝"+string(victim)) {
		t.Fatalf("the signed name %q keeps a separator", name)
	}
	if _, err := sim.Open(context.Background(), c.PayURL); err != nil {
		t.Fatalf("the gateway refuses the sanitised pay URL: %v", err)
	}

	// The attack on the pay URL as it is: its signature covers another string.
	forged := forgedFromPayURL(t, c.PayURL, victim, sim.PID())
	d, err := sim.Deliver(context.Background(), s.notifyURL(), forged)
	if err != nil || d.Accepted() {
		t.Fatalf("the forged success was acknowledged: %+v %v", d, err)
	}
	// The attack on a pay URL signed with the raw name (as a shop that does not sanitise signs
	// it): the signature is right, and the value with separators is refused.
	raw := url.Values{}
	for k, vs := range forged {
		raw[k] = vs
	}
	q := u.Query()
	q.Set("name", r.Subject)
	raw.Set("sign", sim.Sign(q))
	if _, err := verifyGET(g, raw); !errors.Is(err, domain.ErrBadSignature) {
		t.Fatalf("a notification carrying separators: %v, want ErrBadSignature", err)
	}
	notices, errs := s.results()
	if len(notices) != 0 || len(errs) != 1 || !errors.Is(errs[0], domain.ErrBadSignature) {
		t.Fatalf("notices %+v errors %v", notices, errs)
	}
	if o, _ := sim.Order(string(victim)); o.Paid {
		t.Fatal("the victim is paid at the gateway?")
	}
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"Steam 充值卡 × 2":     "Steam 充值卡 × 2",
		"a&b=c":             "a＆b＝c",
		" x\ny\t\x00z\x7f ": "x y z",
		"bad\xffutf8":       "bad utf8",
		"&=":                "＆＝",
		"\r\n":              "",
	} {
		if got := epay.SafeName(in); got != want {
			t.Errorf("SafeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Create signs no value with a separator or a control character: the subject is made safe, a
// client IP that is not an address is left out, a return URL with a query is refused.
func TestCreateSignsNoSeparator(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	for _, mode := range []epay.Mode{epay.ModeRedirect, epay.ModeAPI} {
		g := newGateway(t, sim, func(c *epay.Config) { c.Mode = mode })
		r := request(orderNo(82), 100, "https://shop.example/api/payments/epay/notify")
		r.Subject, r.ClientIP = "a&b=c\n", "203.0.113.7&x=1"
		if _, err := g.Create(context.Background(), r); err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		var got url.Values
		for _, req := range sim.Requests() {
			if req.Form.Get("out_trade_no") == string(r.OrderNo) || req.Query.Get("out_trade_no") == string(r.OrderNo) {
				got = req.Form
			}
		}
		if mode == epay.ModeAPI && (got.Get("name") != "a＆b＝c" || got.Has("clientip")) {
			t.Fatalf("mapi.php got %v", got)
		}
		r.ReturnURL = "https://shop.example/back?order=1&x=2"
		var ve *domain.ValidationError
		if _, err := g.Create(context.Background(), r); !errors.As(err, &ve) || ve.Field != "return_url" {
			t.Fatalf("%v: a return URL with a query: %v", mode, err)
		}
	}
}

// A notification with '&', '=', a control character or invalid UTF-8 in a value, or an odd
// parameter name, is refused however it is signed.
func TestVerifyRefusesSeparatorsInValues(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	for name, mutate := range map[string]func(url.Values){
		"& in name":        func(p url.Values) { p.Set("name", "a&b") },
		"= in name":        func(p url.Values) { p.Set("name", "a=b") },
		"newline in name":  func(p url.Values) { p.Set("name", "a\nb") },
		"NUL in param":     func(p url.Values) { p.Set("param", "a\x00") },
		"invalid UTF-8":    func(p url.Values) { p.Set("name", "a\xff") },
		"& in extra value": func(p url.Values) { p.Set("z", "x&out_trade_no=1") },
		"= in a name":      func(p url.Values) { p.Set("a=b", "1") },
		"& in a name":      func(p url.Values) { p.Set("a&b", "1") },
	} {
		if _, err := verifyGET(g, signed(sim, orderNo(83), mutate)); !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
}

// confirmable is a paid order at the simulator, its payment as the shop stores it and the
// notice of its success.
func confirmable(t *testing.T, sim *epaysim.Sim, g *epay.Gateway, n uint64, pay bool) (domain.Payment, domain.ProviderNotice) {
	t.Helper()
	s := newShop(t, g)
	no := orderNo(n)
	c := created(t, sim, g, request(no, 2000, s.notifyURL()))
	if pay {
		if err := sim.Pay(context.Background(), string(no)); err != nil {
			t.Fatal(err)
		}
	} else if _, err := sim.Notify(context.Background(), string(no), epay.TradeSuccess); err != nil {
		t.Fatal(err) // signed with the KEY, for an order the gateway has unpaid
	}
	notices, errs := s.results()
	if len(notices) != 1 || len(errs) != 0 {
		t.Fatalf("notices %+v errors %v", notices, errs)
	}
	return domain.Payment{OrderNo: no, Provider: "epay", ProviderRef: c.ProviderRef, Amount: 2000, Currency: cny,
		Status: domain.PaymentOpen, PayURL: c.PayURL, QRCode: c.QRCode}, notices[0]
}

// ConfirmPaid answers the gateway's record of a success that matches the payment, and refuses
// one that does not.
func TestConfirmPaid(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []epay.Mode{epay.ModeRedirect, epay.ModeAPI} {
		sim := newSim(t, epaysim.Config{})
		g := newGateway(t, sim, func(c *epay.Config) { c.Mode = mode })
		p, n := confirmable(t, sim, g, 84, true)
		o, _ := sim.Order(string(p.OrderNo))
		st, err := g.ConfirmPaid(ctx, p, n)
		if err != nil || st != (domain.PaymentState{Outcome: domain.OutcomePaid, ProviderRef: o.TradeNo, Amount: 2000, Currency: cny}) {
			t.Fatalf("%v: a genuine success: %+v %v", mode, st, err)
		}
		refused := map[string]func(*domain.Payment, *domain.ProviderNotice){
			"another trade_no":          func(_ *domain.Payment, n *domain.ProviderNotice) { n.ProviderRef = "X1" },
			"the payment's ref differs": func(p *domain.Payment, _ *domain.ProviderNotice) { p.ProviderRef = "X1" },
			"another type":              func(_ *domain.Payment, n *domain.ProviderNotice) { n.Method = "wxpay" },
			"another amount":            func(p *domain.Payment, _ *domain.ProviderNotice) { p.Amount = 2001 },
			"another order":             func(_ *domain.Payment, n *domain.ProviderNotice) { n.OrderNo = orderNo(99) },
			"not a success":             func(_ *domain.Payment, n *domain.ProviderNotice) { n.Outcome = domain.OutcomePending },
		}
		for name, mutate := range refused {
			p2, n2 := p, n
			mutate(&p2, &n2)
			if st, err := g.ConfirmPaid(ctx, p2, n2); err == nil || errors.Is(err, domain.ErrUnavailable) {
				t.Errorf("%v: %s: %+v %v, want refused", mode, name, st, err)
			}
		}

		// Signed with the KEY, but the gateway has the order unpaid: its record says pending.
		up, un := confirmable(t, sim, g, 85, false)
		if st, err := g.ConfirmPaid(ctx, up, un); err != nil || st.Outcome != domain.OutcomePending {
			t.Fatalf("%v: an unpaid order: %+v %v", mode, st, err)
		}

		// Refunded or frozen at the gateway: said so, never paid.
		if err := sim.Freeze(string(p.OrderNo), true); err != nil {
			t.Fatal(err)
		}
		if st, err := g.ConfirmPaid(ctx, p, n); err != nil || st.Outcome != domain.OutcomeFrozen {
			t.Fatalf("%v: frozen: %+v %v", mode, st, err)
		}
		_ = sim.Freeze(string(p.OrderNo), false)
		if err := sim.RefundInConsole(string(p.OrderNo)); err != nil {
			t.Fatal(err)
		}
		if st, err := g.ConfirmPaid(ctx, p, n); err != nil || st.Outcome != domain.OutcomeRefunded {
			t.Fatalf("%v: refunded: %+v %v", mode, st, err)
		}
		if st, err := g.Query(ctx, p); err != nil || st.Outcome != domain.OutcomeRefunded {
			t.Fatalf("%v: query of the refunded: %+v %v", mode, st, err)
		}

		// The gateway down: unavailable, nothing confirmed.
		sim.Outage(true)
		if _, err := g.ConfirmPaid(ctx, p, n); !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("%v: outage: %v", mode, err)
		}
		sim.Outage(false)
	}
}

// ConfirmPaid refuses a record that does not match the notice: another trade_no, money, type or
// merchant, or no money.
func TestConfirmPaidRecords(t *testing.T) {
	no := orderNo(86)
	p := domain.Payment{OrderNo: no, Provider: "epay", ProviderRef: "T1", Amount: 999, Currency: cny}
	n := domain.ProviderNotice{OrderNo: no, ProviderRef: "T1", Outcome: domain.OutcomePaid, Amount: 999, Currency: cny, Method: "alipay"}
	ok := `{"code":1,"pid":"1001","trade_no":"T1","out_trade_no":"` + string(no) + `","type":"alipay","money":"9.99","status":1}`
	if st, err := answering(t, 200, ok).ConfirmPaid(context.Background(), p, n); err != nil || st.Outcome != domain.OutcomePaid {
		t.Fatalf("a matching record: %+v %v", st, err)
	}
	for name, body := range map[string]string{
		"another trade_no": strings.Replace(ok, `"T1"`, `"T2"`, 1),
		"no trade_no":      strings.Replace(ok, `"trade_no":"T1",`, ``, 1),
		"another money":    strings.Replace(ok, `"9.99"`, `"9.98"`, 1),
		"no money":         strings.Replace(ok, `"money":"9.99",`, ``, 1),
		"another type":     strings.Replace(ok, `"alipay"`, `"wxpay"`, 1),
		"another pid":      strings.Replace(ok, `"1001"`, `"1002"`, 1),
		"another order":    strings.Replace(ok, string(no), string(orderNo(87)), 1),
		"unknown status":   strings.Replace(ok, `"status":1`, `"status":9`, 1),
		"refused":          `{"code":-1,"msg":"订单号不存在"}`,
	} {
		if st, err := answering(t, 200, body).ConfirmPaid(context.Background(), p, n); err == nil || errors.Is(err, domain.ErrUnavailable) {
			t.Errorf("%s: %+v %v, want refused", name, st, err)
		}
	}
	// A record without a type: the configured type (alipay) is the payment's.
	noType := strings.Replace(ok, `"type":"alipay",`, ``, 1)
	if _, err := answering(t, 200, noType).ConfirmPaid(context.Background(), p, n); err != nil {
		t.Fatalf("a record without a type: %v", err)
	}
	n.Method = "wxpay"
	if _, err := answering(t, 200, noType).ConfirmPaid(context.Background(), p, n); err == nil {
		t.Fatal("a wxpay notice confirmed for an alipay gateway")
	}
	if _, err := answering(t, 503, `down`).ConfirmPaid(context.Background(), p, n); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("503: %v", err)
	}
}
