package epay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/epay"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/domain"
)

func withRefunds(c *epay.Config) { c.Refunds = true }

// paidPayment creates the order, has the buyer pay it and returns the payment as the shop
// stores it.
func paidPayment(t *testing.T, sim *epaysim.Sim, g *epay.Gateway, n uint64, amount domain.Money) domain.Payment {
	t.Helper()
	s := newShop(t, g)
	no := orderNo(n)
	created(t, sim, g, request(no, amount, s.notifyURL()))
	if err := sim.Pay(context.Background(), string(no)); err != nil {
		t.Fatal(err)
	}
	o, _ := sim.Order(string(no))
	return domain.Payment{OrderNo: no, Provider: "epay", ProviderRef: o.TradeNo, Amount: amount, Currency: cny, Status: domain.PaymentPaid}
}

func refundOf(p domain.Payment) domain.RefundRequest {
	return domain.RefundRequest{RefundNo: domain.RefundNoOf(p.OrderNo), Amount: p.Amount, Currency: p.Currency}
}

// refundCalls returns the api.php?act=refund requests the gateway received.
func refundCalls(sim *epaysim.Sim) []epaysim.Request {
	var out []epaysim.Request
	for _, r := range sim.Requests() {
		if r.Path == "/api.php" && r.Query.Get("act") == "refund" {
			out = append(out, r)
		}
	}
	return out
}

func TestRefundsOffAreUnsupported(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	p := paidPayment(t, sim, g, 60, 4200)
	before := len(sim.Requests())
	if _, err := g.Refund(context.Background(), p, refundOf(p)); !errors.Is(err, domain.ErrUnsupported) {
		t.Fatalf("%v", err)
	}
	if n := len(sim.Requests()) - before; n != 0 {
		t.Fatalf("%d requests", n)
	}
}

func TestRefundSucceedsOnceAndIsNotAskedTwice(t *testing.T) {
	for _, zero := range []bool{false, true} {
		sim := newSim(t, epaysim.Config{RefundCodeZero: zero})
		g := newGateway(t, sim, withRefunds)
		p := paidPayment(t, sim, g, 61, 4200)
		ctx := context.Background()
		st, err := g.Refund(ctx, p, refundOf(p))
		if err != nil || st.Outcome != domain.RefundSucceeded || st.ProviderRef != p.ProviderRef {
			t.Fatalf("code zero %v: %+v %v", zero, st, err)
		}
		calls := refundCalls(sim)
		if len(calls) != 1 {
			t.Fatalf("%d refund calls", len(calls))
		}
		c := calls[0]
		if c.Method != http.MethodPost || c.Form.Get("pid") != sim.PID() || c.Form.Get("key") != sim.Key() ||
			c.Form.Get("trade_no") != p.ProviderRef || c.Form.Get("money") != "42.00" || c.Query.Get("key") != "" {
			t.Fatalf("refund request %+v %+v", c.Query, c.Form)
		}
		// Asked again: the order reads refunded, no second call.
		again, err := g.Refund(ctx, p, refundOf(p))
		if err != nil || again != st {
			t.Fatalf("again: %+v %v", again, err)
		}
		if n := len(refundCalls(sim)); n != 1 || sim.Payouts(string(p.OrderNo)) != 1 {
			t.Fatalf("%d calls, %d payouts", n, sim.Payouts(string(p.OrderNo)))
		}
		// The payment reads refunded, never paid.
		if q, err := g.Query(ctx, p); err != nil || q.Outcome != domain.OutcomeRefunded {
			t.Fatalf("query %+v %v", q, err)
		}
	}
}

func TestRefundRefusals(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, withRefunds)
	ctx := context.Background()
	p := paidPayment(t, sim, g, 62, 1000)

	sim.RefundRefuse("余额不足")
	st, err := g.Refund(ctx, p, refundOf(p))
	if err != nil || st.Outcome != domain.RefundRefused || !strings.Contains(st.Reason, "退款失败：余额不足") || !strings.Contains(st.Reason, "-1") {
		t.Fatalf("channel refusal: %+v %v", st, err)
	}
	sim.RefundRefuse("")
	sim.RefundsOff(true)
	if st, err := g.Refund(ctx, p, refundOf(p)); err != nil || st.Outcome != domain.RefundRefused || !strings.Contains(st.Reason, "未开启") {
		t.Fatalf("refund API off: %+v %v", st, err)
	}
	sim.RefundsOff(false)
	if n := sim.Payouts(string(p.OrderNo)); n != 0 {
		t.Fatalf("%d payouts after refusals", n)
	}
	// epay keeps no refusal: asked again once the cause is fixed, it refunds.
	if st, err := g.Refund(ctx, p, refundOf(p)); err != nil || st.Outcome != domain.RefundSucceeded {
		t.Fatalf("after the refusals: %+v %v", st, err)
	}

	// The gateway has the order unpaid: refused without a refund call.
	s := newShop(t, g)
	unpaid := orderNo(63)
	created(t, sim, g, request(unpaid, 500, s.notifyURL()))
	before := len(refundCalls(sim))
	up := domain.Payment{OrderNo: unpaid, Provider: "epay", Amount: 500, Currency: cny}
	if st, err := g.Refund(ctx, up, refundOf(up)); err != nil || st.Outcome != domain.RefundRefused {
		t.Fatalf("unpaid: %+v %v", st, err)
	}
	if len(refundCalls(sim)) != before {
		t.Fatal("an unpaid order was asked to refund")
	}

	// A wrong key: refused, and the key is nowhere in the answer.
	wrong := newGateway(t, sim, func(c *epay.Config) { withRefunds(c); c.Key = "another-merchant-key-0123456789" })
	if _, err := wrong.Refund(ctx, p, refundOf(p)); err == nil || strings.Contains(err.Error(), sim.Key()) || strings.Contains(err.Error(), "another-merchant") {
		t.Fatalf("wrong key: %v", err)
	}
	// Requests that are not the payment's whole amount in CNY never leave.
	before = len(sim.Requests())
	for _, q := range []domain.RefundRequest{
		{RefundNo: "x", Amount: 999, Currency: cny},
		{RefundNo: "x", Amount: 1000, Currency: domain.Currency{Code: "USD", Exponent: 2}},
		{RefundNo: "x", Amount: 0, Currency: cny},
	} {
		if _, err := g.Refund(ctx, p, q); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%+v: %v", q, err)
		}
	}
	if len(sim.Requests()) != before {
		t.Fatal("an invalid refund reached the gateway")
	}
}

// The refund is carried out and its answer lost (or the gateway down): ErrUnavailable; the retry
// finds the order refunded and pays nothing out again.
func TestRefundLostAnswerThenRetryPaysOutOnce(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, withRefunds)
	ctx := context.Background()
	p := paidPayment(t, sim, g, 64, 1998)

	sim.Outage(true)
	if _, err := g.Refund(ctx, p, refundOf(p)); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("outage: %v", err)
	}
	sim.Outage(false)
	sim.LoseRefundReplies(1)
	if _, err := g.Refund(ctx, p, refundOf(p)); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("lost answer: %v", err)
	}
	if n := sim.Payouts(string(p.OrderNo)); n != 1 {
		t.Fatalf("the lost refund was not carried out: %d", n)
	}
	st, err := g.Refund(ctx, p, refundOf(p))
	if err != nil || st.Outcome != domain.RefundSucceeded {
		t.Fatalf("retry: %+v %v", st, err)
	}
	if n, calls := sim.Payouts(string(p.OrderNo)), len(refundCalls(sim)); n != 1 || calls != 1 {
		t.Fatalf("%d payouts, %d refund calls", n, calls)
	}
}

// fakeGateway answers act=order with the statuses given, one per call (the last repeats), and
// act=refund with a fixed status and body.
type fakeGateway struct {
	mu          sync.Mutex
	statuses    []string
	money       string
	refundCode  int
	refundBody  string
	refundCalls int
}

func (f *fakeGateway) serve(t *testing.T) *epay.Gateway {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("act") == "refund" {
			f.refundCalls++
			w.WriteHeader(f.refundCode)
			_, _ = w.Write([]byte(f.refundBody))
			return
		}
		st := f.statuses[0]
		if len(f.statuses) > 1 {
			f.statuses = f.statuses[1:]
		}
		_, _ = w.Write([]byte(`{"code":1,"trade_no":"T9","pid":"1001","money":"` + f.money + `","status":"` + st + `"}`))
	}))
	t.Cleanup(srv.Close)
	g, err := epay.New(epay.Config{GatewayURL: srv.URL, PID: "1001", Key: "0123456789abcdef0123456789abcdef", Refunds: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestRefundAnswers(t *testing.T) {
	p := domain.Payment{OrderNo: orderNo(65), Provider: "epay", ProviderRef: "T9", Amount: 999, Currency: cny}
	cases := []struct {
		name       string
		statuses   []string
		money      string
		code       int
		body       string
		want       domain.RefundOutcome // 0: an error
		unavail    bool
		refundCall bool
	}{
		{"code 1", []string{"1"}, "9.99", 200, `{"code":1,"msg":"退款成功！"}`, domain.RefundSucceeded, false, true},
		{"code \"1\"", []string{"1"}, "9.99", 200, `{"code":"1"}`, domain.RefundSucceeded, false, true},
		{"upstream code 0", []string{"1"}, "9.99", 200, `{"code":0,"msg":"退款成功！退款金额￥9.99"}`, domain.RefundSucceeded, false, true},
		{"code 0 failure", []string{"1", "1"}, "9.99", 200, `{"code":0,"msg":"退款失败"}`, domain.RefundRefused, false, true},
		{"refused, order still paid", []string{"1", "1"}, "9.99", 200, `{"code":-1,"msg":"退款失败：渠道错误"}`, domain.RefundRefused, false, true},
		{"refused because another attempt refunded", []string{"1", "2"}, "9.99", 200, `{"code":-1,"msg":"只支持退款已支付状态的订单"}`, domain.RefundSucceeded, false, true},
		{"frozen order is refunded", []string{"3"}, "9.99", 200, `{"code":1}`, domain.RefundSucceeded, false, true},
		{"already refunded", []string{"2"}, "9.99", 200, `{"code":1}`, domain.RefundSucceeded, false, false},
		{"unpaid", []string{"0"}, "9.99", 200, `{"code":1}`, domain.RefundRefused, false, false},
		{"HTML answer, order refunded", []string{"1", "2"}, "9.99", 200, `<html>ok</html>`, domain.RefundSucceeded, false, true},
		{"HTML answer, order paid", []string{"1", "1"}, "9.99", 200, `<html>ok</html>`, 0, false, true},
		{"502", []string{"1"}, "9.99", 502, `<html>bad gateway</html>`, 0, true, true},
		{"another amount at the gateway", []string{"1"}, "10.00", 200, `{"code":1}`, 0, false, false},
		{"unknown status", []string{"7"}, "9.99", 200, `{"code":1}`, 0, false, false},
	}
	for _, c := range cases {
		f := &fakeGateway{statuses: c.statuses, money: c.money, refundCode: c.code, refundBody: c.body}
		st, err := f.serve(t).Refund(context.Background(), p, refundOf(p))
		if c.want == 0 {
			if err == nil || errors.Is(err, domain.ErrUnavailable) != c.unavail {
				t.Errorf("%s: %+v %v", c.name, st, err)
			}
		} else if err != nil || st.Outcome != c.want {
			t.Errorf("%s: %+v %v", c.name, st, err)
		}
		if (f.refundCalls == 1) != c.refundCall || f.refundCalls > 1 {
			t.Errorf("%s: %d refund calls", c.name, f.refundCalls)
		}
	}
}

// epay has no refund number: two refunds of one order at once both read it paid, and a gateway
// whose own check and payout are not atomic (RefundGap) pays both out. The gateway says so
// (RefundIdempotent false), and the shop lets one refund at a time call it.
func TestConcurrentRefundsAreNotIdempotent(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, withRefunds)
	if g.RefundIdempotent() {
		t.Fatal("epay's Refund reports itself idempotent by refund number")
	}
	p := paidPayment(t, sim, g, 70, 4200)
	sim.RefundGap(50 * time.Millisecond)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if st, err := g.Refund(context.Background(), p, refundOf(p)); err != nil || st.Outcome != domain.RefundSucceeded {
				t.Errorf("refund: %+v, %v", st, err)
			}
		})
	}
	wg.Wait()
	if n := sim.Payouts(string(p.OrderNo)); n != 2 {
		t.Fatalf("%d payouts: the simulator's gap should let two refunds at once both pay out", n)
	}
}
