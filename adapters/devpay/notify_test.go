package devpay

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"cardshop/domain"
)

func goodNotice() notice {
	return notice{EventID: "evt_0123456789abcdef01234567", OrderNo: string(testOrder), ProviderRef: "dev_00112233445566778899aabb",
		Outcome: "paid", Amount: 1999, Currency: "CNY"}
}

// signed returns a notification signed at at, with the body given.
func signed(g *Gateway, body string, at time.Time) domain.InboundRequest {
	ts := strconv.FormatInt(at.Unix(), 10)
	h := domain.Header{}
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, "v1="+g.notifySig(ts, []byte(body)))
	return domain.InboundRequest{Method: http.MethodPost, Header: h, Body: []byte(body), At: at}
}

func TestVerifyAcceptsItsOwnNotificationWithinTheWindow(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	in := g.notification(goodNotice(), t0)
	for _, d := range []time.Duration{0, Tolerance, -Tolerance, time.Minute} {
		in.At = t0.Add(d)
		n, err := g.Verify(ctx, in)
		want := domain.ProviderNotice{OrderNo: testOrder, ProviderRef: goodNotice().ProviderRef, EventID: goodNotice().EventID,
			Outcome: domain.OutcomePaid, Amount: 1999, Currency: cny}
		if err != nil || n != want {
			t.Fatalf("at %s: %+v %v", d, n, err)
		}
	}
}

func TestVerifyRefusesForgedStaleAndTampered(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	other, _ := newTestGateway(t, "another-secret-0123456789")
	good := g.notification(goodNotice(), t0)

	cases := map[string]domain.InboundRequest{
		"other secret":    other.notification(goodNotice(), t0),
		"stale":           withAt(good, t0.Add(Tolerance+time.Second)),
		"from the future": withAt(good, t0.Add(-Tolerance-time.Second)),
		"GET":             withMethod(good, http.MethodGet),
	}
	tampered := clone(good)
	tampered.Body = []byte(string(good.Body[:len(good.Body)-1]) + ` `)
	tampered.Body = append(tampered.Body, '}')
	cases["tampered whitespace"] = tampered
	cheaper := clone(good)
	cheaper.Body = []byte(`{"event_id":"evt_0123456789abcdef01234567","order_no":"` + string(testOrder) +
		`","provider_ref":"dev_00112233445566778899aabb","outcome":"paid","amount":1,"currency":"CNY"}`)
	cases["tampered amount"] = cheaper
	moved := clone(good)
	moved.Header.Set(HeaderTimestamp, strconv.FormatInt(t0.Unix()+1, 10))
	cases["other timestamp"] = moved
	for name, mutate := range map[string]func(h domain.Header){
		"no timestamp":    func(h domain.Header) { h.Del(HeaderTimestamp) },
		"no signature":    func(h domain.Header) { h.Del(HeaderSignature) },
		"two signatures":  func(h domain.Header) { h.Add(HeaderSignature, h.Get(HeaderSignature)) },
		"no scheme":       func(h domain.Header) { h.Set(HeaderSignature, h.Get(HeaderSignature)[3:]) },
		"other scheme":    func(h domain.Header) { h.Set(HeaderSignature, "v0="+h.Get(HeaderSignature)[3:]) },
		"not hex":         func(h domain.Header) { h.Set(HeaderSignature, "v1=XX"+h.Get(HeaderSignature)[5:]) },
		"short signature": func(h domain.Header) { h.Set(HeaderSignature, h.Get(HeaderSignature)[:20]) },
		"malformed time":  func(h domain.Header) { h.Set(HeaderTimestamp, "soon") },
		"negative time":   func(h domain.Header) { h.Set(HeaderTimestamp, "-1") },
		"huge time":       func(h domain.Header) { h.Set(HeaderTimestamp, "99999999999999999") },
	} {
		in := clone(good)
		mutate(in.Header)
		cases[name] = in
	}
	for name, in := range cases {
		if n, err := g.Verify(ctx, in); !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%s: %+v %v", name, n, err)
		}
	}
	if _, err := g.Verify(ctx, good); err != nil {
		t.Fatalf("the genuine notification: %v", err)
	}
}

func TestVerifyRefusesWellSignedBodiesThatDoNotParse(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	for name, body := range map[string]string{
		"empty":          ``,
		"not json":       `paid`,
		"unknown field":  `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"paid","amount":1,"currency":"CNY","paid":true}`,
		"trailing":       `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"paid","amount":1,"currency":"CNY"} {}`,
		"order":          `{"event_id":"evt_01","order_no":"N/1","provider_ref":"dev_01","outcome":"paid","amount":1,"currency":"CNY"}`,
		"event":          `{"event_id":"01","order_no":"N1","provider_ref":"dev_01","outcome":"paid","amount":1,"currency":"CNY"}`,
		"ref":            `{"event_id":"evt_01","order_no":"N1","provider_ref":"pi_01","outcome":"paid","amount":1,"currency":"CNY"}`,
		"outcome":        `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"PAID","amount":1,"currency":"CNY"}`,
		"expired":        `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"expired","amount":1,"currency":"CNY"}`,
		"zero amount":    `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"paid","amount":0,"currency":"CNY"}`,
		"float amount":   `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"paid","amount":19.99,"currency":"CNY"}`,
		"string amount":  `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"paid","amount":"1999","currency":"CNY"}`,
		"lower currency": `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"paid","amount":1,"currency":"cny"}`,
		"no currency":    `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"paid","amount":1}`,
	} {
		if n, err := g.Verify(ctx, signed(g, body, t0)); !errors.Is(err, domain.ErrInvalidInput) || errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%s: %+v %v", name, n, err)
		}
	}
	ok := `{"event_id":"evt_01","order_no":"N1","provider_ref":"dev_01","outcome":"failed","amount":1,"currency":"JPY","reason":"no"}`
	if n, err := g.Verify(ctx, signed(g, ok, t0)); err != nil || n.Outcome != domain.OutcomeFailed || n.Currency != jpy || n.Reason != "no" {
		t.Fatalf("a valid failure: %+v %v", n, err)
	}
}

func TestReply(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	if status, ct, body := g.Reply(true); status != 200 || string(body) != `{"received":true}` || ct != "application/json" {
		t.Fatalf("accepted: %d %s %q", status, ct, body)
	}
	if status, ct, body := g.Reply(false); status != 400 {
		t.Fatalf("refused: %d %s %q", status, ct, body)
	}
}

func clone(in domain.InboundRequest) domain.InboundRequest {
	in.Header = domain.Header(http.Header(in.Header).Clone())
	in.Body = append([]byte(nil), in.Body...)
	return in
}

func withAt(in domain.InboundRequest, at time.Time) domain.InboundRequest {
	in = clone(in)
	in.At = at
	return in
}

func withMethod(in domain.InboundRequest, m string) domain.InboundRequest {
	in = clone(in)
	in.Method = m
	return in
}
