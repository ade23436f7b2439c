package alipay_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"cardshop/adapters/alipay"
	"cardshop/adapters/lab/paysim/alipaysim"
	"cardshop/domain"
)

func TestReply(t *testing.T) {
	g := newGateway(t, newSim(t, nil), alipay.MethodPage, nil)
	ok, refused := replyOf(g.Reply(true)), replyOf(g.Reply(false))
	if ok.Status != 200 || string(ok.Body) != "success" || refused.Status != 200 || string(refused.Body) != "failure" ||
		ok.ContentType != "text/plain; charset=utf-8" {
		t.Fatalf("replies %+v %+v", ok, refused)
	}
}

func TestNotifyPaidAndResent(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	no := orderNo(10)
	paid(t, sim, g, sh, no, 1999)
	if _, err := sim.Renotify(context.Background(), string(no)); err != nil {
		t.Fatal(err)
	}
	notices, errs := sh.results()
	tr, _ := sim.Trade(string(no))
	if len(errs) != 0 || len(notices) != 2 {
		t.Fatalf("notices %+v errors %v", notices, errs)
	}
	want := domain.ProviderNotice{OrderNo: no, ProviderRef: tr.TradeNo, EventID: tr.NotifyID, Outcome: domain.OutcomePaid, Amount: 1999, Currency: cny}
	if notices[0] != want || notices[1] != want {
		t.Fatalf("notices %+v, want %+v twice (a resend keeps notify_id)", notices, want)
	}
	for _, d := range sim.Deliveries() {
		if !d.Accepted() || string(d.Reply) != "success" {
			t.Fatalf("delivery %+v", d)
		}
	}
}

func TestNotifyForgeriesRefused(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	no := orderNo(11)
	if _, err := g.Create(context.Background(), request(no, 1000, sh.notifyURL())); err != nil {
		t.Fatal(err)
	}
	for _, f := range []alipaysim.Forgery{alipaysim.WrongKey, alipaysim.TamperedAmount, alipaysim.OtherAppID, alipaysim.OtherSeller, alipaysim.Unsigned} {
		d, err := sim.Forge(context.Background(), string(no), f)
		if err != nil {
			t.Fatal(err)
		}
		if d.Accepted() || string(d.Reply) != "failure" {
			t.Errorf("%v: answered %q", f, d.Reply)
		}
	}
	notices, errs := sh.results()
	if len(notices) != 0 || len(errs) != 5 {
		t.Fatalf("notices %+v errors %v", notices, errs)
	}
	for _, err := range errs {
		if !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("not ErrBadSignature: %v", err)
		}
	}
	// Without a configured seller, the seller is not checked (the app_id still is).
	g2 := newGateway(t, sim, alipay.MethodPrecreate, func(c *alipay.Config) { c.SellerID = "" })
	sh2 := newShop(t, g2)
	d, _ := sim.Forge(context.Background(), string(no), alipaysim.OtherSeller)
	dd, _ := sim.Deliver(context.Background(), sh2.notifyURL(), d.Note.Params)
	app, _ := sim.Forge(context.Background(), string(no), alipaysim.OtherAppID)
	da, _ := sim.Deliver(context.Background(), sh2.notifyURL(), app.Note.Params)
	if !dd.Accepted() || da.Accepted() {
		t.Fatalf("without seller_id: other seller %q, other app %q", dd.Reply, da.Reply)
	}
}

// genuine is a correctly signed notification of the paid trade, with changes.
func genuine(t *testing.T, sim *alipaysim.Sim, no domain.OrderNo, change func(url.Values)) url.Values {
	t.Helper()
	d := sim.Deliveries()
	for i := len(d) - 1; i >= 0; i-- {
		if d[i].Note.OutTradeNo == string(no) && d[i].Note.Forged == alipaysim.NotForged {
			p := url.Values{}
			for k, v := range d[i].Note.Params {
				p[k] = append([]string(nil), v...)
			}
			change(p)
			sim.SignNotification(p)
			return p
		}
	}
	t.Fatal("no notification sent")
	return nil
}

func TestNotifyStatusesAndShapes(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	no := orderNo(12)
	paid(t, sim, g, sh, no, 1234)
	verify := func(p url.Values, get bool) (domain.ProviderNotice, error) {
		in := domain.InboundRequest{Method: http.MethodPost, Header: domain.Header{"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}},
			Body: []byte(p.Encode()), At: time.Now()}
		if get {
			in = domain.InboundRequest{Method: http.MethodGet, Query: p, At: time.Now()}
		}
		return g.Verify(context.Background(), in)
	}
	for status, want := range map[string]domain.PaymentOutcome{
		"TRADE_SUCCESS": domain.OutcomePaid, "TRADE_FINISHED": domain.OutcomePaid,
		"TRADE_CLOSED": domain.OutcomeExpired, "WAIT_BUYER_PAY": domain.OutcomePending,
	} {
		for _, get := range []bool{false, true} {
			n, err := verify(genuine(t, sim, no, func(p url.Values) { p.Set("trade_status", status) }), get)
			if err != nil || n.Outcome != want || n.RefundNo != "" {
				t.Errorf("%s (GET %v): %+v %v", status, get, n, err)
			}
		}
	}
	for name, change := range map[string]func(url.Values){
		"unknown status":   func(p url.Values) { p.Set("trade_status", "TRADE_PENDING") },
		"rounded amount":   func(p url.Values) { p.Set("total_amount", "12.345") },
		"negative amount":  func(p url.Values) { p.Set("total_amount", "-12.34") },
		"zero amount":      func(p url.Values) { p.Set("total_amount", "0.00") },
		"no amount":        func(p url.Values) { p.Del("total_amount") },
		"bad order":        func(p url.Values) { p.Set("out_trade_no", "../x") },
		"no trade_no":      func(p url.Values) { p.Del("trade_no") },
		"no notify_id":     func(p url.Values) { p.Del("notify_id") },
		"refund no number": func(p url.Values) { p.Set("refund_fee", "12.34") },
	} {
		if _, err := verify(genuine(t, sim, no, change), false); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	p := genuine(t, sim, no, func(url.Values) {})
	p.Set("sign_type", "RSA")
	if _, err := verify(p, false); !errors.Is(err, domain.ErrBadSignature) {
		t.Errorf("sign_type RSA: %v", err)
	}
	p = genuine(t, sim, no, func(url.Values) {})
	p.Add("total_amount", "0.01")
	if _, err := verify(p, false); !errors.Is(err, domain.ErrBadSignature) {
		t.Errorf("a parameter sent twice: %v", err)
	}
	p = genuine(t, sim, no, func(url.Values) {})
	in := domain.InboundRequest{Method: http.MethodPost, Header: domain.Header{"Content-Type": {"application/json"}}, Body: []byte(p.Encode())}
	if _, err := g.Verify(context.Background(), in); !errors.Is(err, domain.ErrBadSignature) {
		t.Errorf("a JSON content type: %v", err)
	}
	if _, err := g.Verify(context.Background(), domain.InboundRequest{Method: http.MethodPut, Query: p}); !errors.Is(err, domain.ErrBadSignature) {
		t.Errorf("PUT: %v", err)
	}
	// A payment notification carrying refund_fee=0.00 is not a refund's.
	if n, err := verify(genuine(t, sim, no, func(p url.Values) { p.Set("refund_fee", "0.00") }), false); err != nil || n.RefundNo != "" || n.Outcome != domain.OutcomePaid {
		t.Errorf("refund_fee 0.00: %+v %v", n, err)
	}
}

func TestNotifyHeldAndReordered(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	a, b := orderNo(13), orderNo(14)
	for _, no := range []domain.OrderNo{a, b} {
		if _, err := g.Create(context.Background(), request(no, 100, sh.notifyURL())); err != nil {
			t.Fatal(err)
		}
	}
	sim.Hold(true)
	for _, no := range []domain.OrderNo{a, b} {
		if err := sim.Pay(context.Background(), string(no)); !errors.Is(err, alipaysim.ErrHeld) {
			t.Fatalf("held pay: %v", err)
		}
	}
	sim.Hold(false)
	out := sim.Release(context.Background(), 1, 0)
	notices, errs := sh.results()
	if len(out) != 2 || !out[0].Accepted() || !out[1].Accepted() || len(errs) != 0 || len(notices) != 2 ||
		notices[0].OrderNo != b || notices[1].OrderNo != a {
		t.Fatalf("released %+v notices %+v errors %v", out, notices, errs)
	}
}

func TestNotifyRefund(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	no := orderNo(15)
	p := paid(t, sim, g, sh, no, 800)
	st, err := g.Refund(context.Background(), p, domain.RefundRequest{RefundNo: domain.RefundNoOf(no), Amount: 800, Currency: cny})
	if err != nil || st.Outcome != domain.RefundSucceeded {
		t.Fatalf("refund %+v %v", st, err)
	}
	if err := sim.NotifyRefund(context.Background(), string(no)); err != nil {
		t.Fatal(err)
	}
	notices, errs := sh.results()
	last := notices[len(notices)-1]
	tr, _ := sim.Trade(string(no))
	if len(errs) != 0 || last.RefundNo != domain.RefundNoOf(no) || last.RefundOutcome != domain.RefundSucceeded ||
		last.Outcome != domain.OutcomePending || last.EventID != tr.Refunds[0].NotifyID || last.EventID == notices[0].EventID ||
		last.Amount != 800 || last.OrderNo != no {
		t.Fatalf("refund notice %+v; errors %v", last, errs)
	}
	// A partial refund's notification is pending: cardshop refunds whole payments.
	n, err := g.Verify(context.Background(), domain.InboundRequest{Method: http.MethodGet,
		Query: genuine(t, sim, no, func(p url.Values) { p.Set("refund_fee", "1.00"); p.Set("trade_status", "TRADE_SUCCESS") })})
	if err != nil || n.RefundOutcome != domain.RefundPending || n.RefundNo != domain.RefundNoOf(no) {
		t.Fatalf("partial: %+v %v", n, err)
	}
}
