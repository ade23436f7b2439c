package epay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"cardshop/adapters/epay"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/domain"
)

func TestQueryUnpaidThenPaid(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	s := newShop(t, g)
	no := orderNo(30)
	created(t, sim, g, request(no, 4200, s.notifyURL()))
	p := domain.Payment{OrderNo: no, Provider: "epay", Amount: 4200, Currency: cny}

	st, err := g.Query(context.Background(), p)
	o, _ := sim.Order(string(no))
	if err != nil || st.Outcome != domain.OutcomePending || st.ProviderRef != o.TradeNo || st.Amount != 4200 || st.Currency != cny {
		t.Fatalf("unpaid: %+v %v", st, err)
	}
	sim.Retry(false)
	sim.Drop(1) // the notification is lost: the query is how the shop learns
	_ = sim.Pay(context.Background(), string(no))
	st, err = g.Query(context.Background(), p)
	if err != nil || st.Outcome != domain.OutcomePaid || st.ProviderRef != o.TradeNo || st.Amount != 4200 {
		t.Fatalf("paid: %+v %v", st, err)
	}
	var q epaysim.Request
	for _, r := range sim.Requests() {
		if r.Path == "/api.php" {
			q = r
		}
	}
	if q.Method != http.MethodGet || q.Query.Get("act") != "order" || q.Query.Get("pid") != sim.PID() ||
		q.Query.Get("key") != sim.Key() || q.Query.Get("out_trade_no") != string(no) {
		t.Fatalf("api.php request %+v", q.Query)
	}
}

func TestQueryErrorsNeverShowTheKey(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	p := domain.Payment{OrderNo: orderNo(31), Provider: "epay"}

	// Unknown at the gateway (the buyer never opened the redirect): an error, not "unpaid".
	_, err := g.Query(context.Background(), p)
	if err == nil || errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "订单号不存在") {
		t.Fatalf("unknown order: %v", err)
	}
	check := func(name string, err error, unavailable bool) {
		t.Helper()
		if err == nil || errors.Is(err, domain.ErrUnavailable) != unavailable {
			t.Errorf("%s: %v (unavailable wanted: %v)", name, err, unavailable)
		}
		if err != nil && strings.Contains(err.Error(), sim.Key()) {
			t.Errorf("%s: the error shows the key: %v", name, err)
		}
	}
	wrong := newGateway(t, sim, func(c *epay.Config) { c.Key = "another-merchant-key-0123456789" })
	_, err = wrong.Query(context.Background(), p)
	check("wrong key", err, false)

	sim.Outage(true)
	_, err = g.Query(context.Background(), p)
	check("outage", err, true)
	sim.Close()
	_, err = g.Query(context.Background(), p)
	check("gateway gone", err, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = g.Query(ctx, p)
	check("cancelled", err, true)
}

// answering is a gateway that answers api.php with a fixed status and body.
func answering(t *testing.T, status int, body string) *epay.Gateway {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api.php" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	g, err := epay.New(epay.Config{GatewayURL: srv.URL, PID: "1001", Key: "0123456789abcdef0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestQueryAnswers(t *testing.T) {
	no := orderNo(32)
	p := domain.Payment{OrderNo: no, Provider: "epay"}
	ok := []struct {
		name, body string
		want       domain.PaymentState
	}{
		{"numbers", `{"code":1,"trade_no":"2025030112000099","out_trade_no":"` + string(no) + `","money":"9.99","status":1}`,
			domain.PaymentState{Outcome: domain.OutcomePaid, ProviderRef: "2025030112000099", Amount: 999, Currency: cny}},
		{"strings, BOM", "\xef\xbb\xbf" + `{"code":"1","msg":"succ","pid":"1001","trade_no":"T1","money":"0.01","status":"0","endtime":null}`,
			domain.PaymentState{Outcome: domain.OutcomePending, ProviderRef: "T1", Amount: 1, Currency: cny}},
		{"money as a number", `{"code":1,"trade_no":"T3","money":9.99,"status":1}`,
			domain.PaymentState{Outcome: domain.OutcomePaid, ProviderRef: "T3", Amount: 999, Currency: cny}},
		{"no money", `{"code":1,"trade_no":"T2","status":"1"}`,
			domain.PaymentState{Outcome: domain.OutcomePaid, ProviderRef: "T2"}},
		{"refunded: never paid", `{"code":1,"trade_no":"T4","status":"2"}`,
			domain.PaymentState{Outcome: domain.OutcomeRefunded, ProviderRef: "T4"}},
		{"frozen: never paid", `{"code":1,"trade_no":"T5","status":3}`,
			domain.PaymentState{Outcome: domain.OutcomeFrozen, ProviderRef: "T5"}},
	}
	for _, c := range ok {
		st, err := answering(t, 200, c.body).Query(context.Background(), p)
		if err != nil || st != c.want {
			t.Errorf("%s: %+v %v", c.name, st, err)
		}
	}
	bad := []struct {
		name, body  string
		status      int
		unavailable bool
	}{
		{"500", `{"code":1}`, 500, true},
		{"503 html", `<html>down</html>`, 503, true},
		{"429", ``, 429, true},
		{"404", `not found`, 404, false},
		{"302", ``, 302, false},
		{"not JSON", `<html>ok</html>`, 200, false},
		{"refused", `{"code":-1,"msg":"订单号不存在"}`, 200, false},
		{"another order", `{"code":1,"out_trade_no":"123","status":1}`, 200, false},
		{"another merchant", `{"code":1,"pid":"1002","status":1}`, 200, false},
		{"unknown status", `{"code":1,"status":4}`, 200, false},
		{"no status", `{"code":1}`, 200, false},
		{"odd money", `{"code":1,"status":1,"money":"9.9"}`, 200, false},
		{"bad trade_no", `{"code":1,"status":1,"trade_no":"a b"}`, 200, false},
		{"object code", `{"code":{},"status":1}`, 200, false},
	}
	for _, c := range bad {
		_, err := answering(t, c.status, c.body).Query(context.Background(), p)
		if err == nil || errors.Is(err, domain.ErrUnavailable) != c.unavailable {
			t.Errorf("%s: %v (unavailable wanted: %v)", c.name, err, c.unavailable)
		}
	}
	if _, err := answering(t, 200, `{}`).Query(context.Background(), domain.Payment{OrderNo: "a&key=x"}); !errors.Is(err, domain.ErrInvalidInput) {
		t.Errorf("bad order number: %v", err)
	}
}
