package epaysim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/epaysim"
)

func newSim(t *testing.T, cfg epaysim.Config) *epaysim.Sim {
	t.Helper()
	s := epaysim.New(cfg)
	t.Cleanup(s.Close)
	return s
}

// receiver answers notifications with body and counts them.
func receiver(t *testing.T, body *atomic.Value, hits *atomic.Int64) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, body.Load().(string))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/notify"
}

func order(s *epaysim.Sim, no, money, notify string) url.Values {
	p := url.Values{"pid": {s.PID()}, "type": {"alipay"}, "out_trade_no": {no}, "notify_url": {notify},
		"return_url": {"https://shop.example/back"}, "name": {"卡 & 码"}, "money": {money}}
	p.Set("sign", s.Sign(p))
	p.Set("sign_type", "MD5")
	return p
}

func TestSubmitChecksAndRecords(t *testing.T) {
	s := newSim(t, epaysim.Config{})
	ctx := context.Background()
	if _, err := s.Open(ctx, s.URL()+"/submit.php?"+order(s, "A1", "1", "https://shop.example/n").Encode()); err != nil {
		t.Fatal(err)
	}
	o, ok := s.Order("A1")
	if !ok || o.Money != "1.00" || o.Name != "卡 & 码" || o.Paid || len(o.TradeNo) < 19 {
		t.Fatalf("order %+v", o)
	}
	// The same order again gives the same trade_no; different content is refused.
	if _, err := s.Open(ctx, s.URL()+"/submit.php?"+order(s, "A1", "1.00", "https://shop.example/n").Encode()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, s.URL()+"/submit.php?"+order(s, "A1", "2.00", "https://shop.example/n").Encode()); err == nil {
		t.Fatal("conflicting resubmission accepted")
	}
	tampered := order(s, "A2", "1.00", "https://shop.example/n")
	tampered.Set("money", "0.01")
	for name, q := range map[string]url.Values{
		"tampered": tampered,
		"bad money": func() url.Values {
			return order(s, "A3", "1.001", "https://shop.example/n")
		}(),
		"unsigned": func() url.Values { p := order(s, "A4", "1.00", "https://shop.example/n"); p.Del("sign"); return p }(),
	} {
		page, err := s.Open(ctx, s.URL()+"/submit.php?"+q.Encode())
		if err == nil {
			t.Errorf("%s: accepted: %s", name, page)
		}
	}
	if len(s.Orders()) != 1 {
		t.Fatalf("orders %+v", s.Orders())
	}
	reqs := s.Requests()
	if len(reqs) != 6 || reqs[0].Refused != "" || reqs[1].Refused != "" || reqs[2].Refused != "该订单号已存在" || reqs[5].Refused == "" {
		t.Fatalf("requests %+v", reqs)
	}
}

func getJSON(t *testing.T, u string) map[string]any {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAPIOrder(t *testing.T) {
	s := newSim(t, epaysim.Config{})
	if _, err := s.Open(context.Background(), s.URL()+"/submit.php?"+order(s, "B1", "3.50", "https://shop.example/n").Encode()); err != nil {
		t.Fatal(err)
	}
	q := func(key, no string) string {
		return s.URL() + "/api.php?" + url.Values{"act": {"order"}, "pid": {s.PID()}, "key": {key}, "out_trade_no": {no}}.Encode()
	}
	if m := getJSON(t, q("wrong", "B1")); m["code"] != float64(-3) {
		t.Fatalf("wrong key: %v", m)
	}
	if m := getJSON(t, q(s.Key(), "nope")); m["code"] != float64(-1) {
		t.Fatalf("unknown: %v", m)
	}
	m := getJSON(t, q(s.Key(), "B1"))
	if m["code"] != float64(1) || m["status"] != "0" || m["money"] != "3.50" || m["endtime"] != nil {
		t.Fatalf("unpaid: %v", m)
	}
	s.Retry(false)
	s.Drop(1)
	_ = s.Pay(context.Background(), "B1")
	if m := getJSON(t, q(s.Key(), "B1")); m["status"] != "1" || m["endtime"] == nil {
		t.Fatalf("paid: %v", m)
	}
	if m := getJSON(t, s.URL()+"/api.php?act=query"); m["code"] != float64(-5) {
		t.Fatalf("unknown act: %v", m)
	}
}

func TestPayRetriesBoundedAndSwitchable(t *testing.T) {
	s := newSim(t, epaysim.Config{MaxAttempts: 3})
	var body atomic.Value
	var hits atomic.Int64
	body.Store("fail")
	notify := receiver(t, &body, &hits)
	if _, err := s.Open(context.Background(), s.URL()+"/submit.php?"+order(s, "C1", "1.00", notify).Encode()); err != nil {
		t.Fatal(err)
	}
	if err := s.Pay(context.Background(), "C1"); !errors.Is(err, epaysim.ErrNotAcknowledged) || hits.Load() != 3 {
		t.Fatalf("Pay = %v after %d hits", err, hits.Load())
	}
	s.Retry(false)
	if err := s.Pay(context.Background(), "C1"); !errors.Is(err, epaysim.ErrNotAcknowledged) || hits.Load() != 4 {
		t.Fatalf("Pay without retry = %v after %d hits", err, hits.Load())
	}
	body.Store(" success\n")
	s.Retry(true)
	if err := s.Pay(context.Background(), "C1"); err != nil || hits.Load() != 5 {
		t.Fatalf("Pay = %v after %d hits", err, hits.Load())
	}
	body.Store("SUCCESS")
	if d, _ := s.Renotify(context.Background(), "C1"); d.Accepted() {
		t.Fatal("only the exact word success acknowledges")
	}
	d := s.Deliveries()
	if len(d) != 6 || d[0].Attempt != 1 || d[2].Attempt != 3 || d[0].Note.Params.Get("sign") != s.Sign(d[0].Note.Params) ||
		d[0].Note.Params.Get("trade_status") != "TRADE_SUCCESS" || !strings.Contains(d[0].Note.URL, "/notify?") {
		t.Fatalf("deliveries %+v", d)
	}
	if err := s.Pay(context.Background(), "nope"); !errors.Is(err, epaysim.ErrUnknownOrder) {
		t.Fatal(err)
	}
	if _, err := s.Renotify(context.Background(), "nope"); !errors.Is(err, epaysim.ErrUnknownOrder) {
		t.Fatal(err)
	}
}

func TestDelayedNotificationHonoursTheContext(t *testing.T) {
	s := newSim(t, epaysim.Config{})
	var body atomic.Value
	var hits atomic.Int64
	body.Store("success")
	notify := receiver(t, &body, &hits)
	if _, err := s.Open(context.Background(), s.URL()+"/submit.php?"+order(s, "D1", "1.00", notify).Encode()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renotify(context.Background(), "D1"); !errors.Is(err, epaysim.ErrNotPaid) {
		t.Fatal(err)
	}
	s.SetDelay(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Pay(ctx, "D1"); !errors.Is(err, context.Canceled) || hits.Load() != 0 {
		t.Fatalf("Pay = %v, %d hits", err, hits.Load())
	}
}

func TestOutage(t *testing.T) {
	s := newSim(t, epaysim.Config{})
	s.Outage(true)
	for _, path := range []string{"/submit.php", "/mapi.php", "/api.php?act=order"} {
		resp, err := http.Get(s.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
	s.Outage(false)
	resp, err := http.Get(s.URL() + "/api.php?act=order")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after the outage: %d", resp.StatusCode)
	}
}

func postJSON(t *testing.T, u string, form url.Values) map[string]any {
	t.Helper()
	resp, err := http.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAPIRefund(t *testing.T) {
	s := newSim(t, epaysim.Config{})
	ctx := context.Background()
	if _, err := s.Open(ctx, s.URL()+"/submit.php?"+order(s, "C1", "3.50", "https://shop.example/n").Encode()); err != nil {
		t.Fatal(err)
	}
	u := s.URL() + "/api.php?act=refund"
	f := func(key, money string) url.Values {
		return url.Values{"pid": {s.PID()}, "key": {key}, "out_trade_no": {"C1"}, "money": {money}}
	}
	if m := postJSON(t, u, f(s.Key(), "3.50")); m["code"] != float64(-1) || m["msg"] != "只支持退款已支付状态的订单" {
		t.Fatalf("unpaid: %v", m)
	}
	s.Retry(false)
	s.Drop(1)
	_ = s.Pay(ctx, "C1")
	// The upstream reads the POST body only: the same parameters in the URL are not a refund.
	if m := getJSON(t, u+"&"+f(s.Key(), "3.50").Encode()); m["code"] != float64(-3) {
		t.Fatalf("GET: %v", m)
	}
	for name, c := range map[string]struct {
		form url.Values
		code float64
	}{
		"wrong key":     {f("wrong", "3.50"), -3},
		"bad money":     {f(s.Key(), "3,50"), -1},
		"too much":      {f(s.Key(), "3.51"), -1},
		"no order":      {url.Values{"pid": {s.PID()}, "key": {s.Key()}, "money": {"1"}}, -4},
		"unknown order": {url.Values{"pid": {s.PID()}, "key": {s.Key()}, "trade_no": {"nope"}, "money": {"1"}}, -1},
	} {
		if m := postJSON(t, u, c.form); m["code"] != c.code {
			t.Errorf("%s: %v", name, m)
		}
	}
	if s.Payouts("C1") != 0 {
		t.Fatal("paid out on a refusal")
	}
	if m := postJSON(t, u, f(s.Key(), "3.50")); m["code"] != float64(1) || !strings.HasPrefix(m["msg"].(string), "退款成功") {
		t.Fatalf("refund: %v", m)
	}
	q := s.URL() + "/api.php?" + url.Values{"act": {"order"}, "pid": {s.PID()}, "key": {s.Key()}, "out_trade_no": {"C1"}}.Encode()
	if m := getJSON(t, q); m["status"] != "2" {
		t.Fatalf("after the refund: %v", m)
	}
	if m := postJSON(t, u, f(s.Key(), "3.50")); m["code"] != float64(-1) || s.Payouts("C1") != 1 {
		t.Fatalf("second refund: %v, %d payouts", m, s.Payouts("C1"))
	}
}

// The merchant's refund in the console and the gateway's freeze show in api.php?act=order as
// upstream has them (status 2, status 3), without a notification; only a paid order moves.
func TestRefundInConsoleAndFreeze(t *testing.T) {
	s := newSim(t, epaysim.Config{})
	ctx := context.Background()
	for _, no := range []string{"D1", "D2"} {
		if _, err := s.Open(ctx, s.URL()+"/submit.php?"+order(s, no, "3.50", "https://shop.example/n").Encode()); err != nil {
			t.Fatal(err)
		}
	}
	if !errors.Is(s.RefundInConsole("D1"), epaysim.ErrNotPaid) || !errors.Is(s.Freeze("D1", true), epaysim.ErrNotPaid) ||
		!errors.Is(s.Freeze("nope", true), epaysim.ErrUnknownOrder) {
		t.Fatal("an unpaid or unknown order moved")
	}
	s.Retry(false)
	s.Drop(2)
	_ = s.Pay(ctx, "D1")
	_ = s.Pay(ctx, "D2")
	sent := len(s.Deliveries())
	status := func(no string) any {
		q := s.URL() + "/api.php?" + url.Values{"act": {"order"}, "pid": {s.PID()}, "key": {s.Key()}, "out_trade_no": {no}}.Encode()
		return getJSON(t, q)["status"]
	}
	if err := s.RefundInConsole("D1"); err != nil || status("D1") != "2" || s.Payouts("D1") != 1 {
		t.Fatalf("refunded: %v, status %v, %d payouts", err, status("D1"), s.Payouts("D1"))
	}
	if !errors.Is(s.RefundInConsole("D1"), epaysim.ErrNotPaid) || s.Payouts("D1") != 1 {
		t.Fatal("refunded twice")
	}
	if err := s.Freeze("D2", true); err != nil || status("D2") != "3" {
		t.Fatalf("frozen: %v, status %v", err, status("D2"))
	}
	m := postJSON(t, s.URL()+"/api.php?act=refund", url.Values{"pid": {s.PID()}, "key": {s.Key()}, "out_trade_no": {"D2"}, "money": {"3.50"}})
	if m["code"] != float64(-1) || s.Payouts("D2") != 0 {
		t.Fatalf("refund of a frozen order: %v", m)
	}
	if err := s.Freeze("D2", false); err != nil || status("D2") != "1" {
		t.Fatalf("released: %v, status %v", err, status("D2"))
	}
	if len(s.Deliveries()) != sent {
		t.Fatal("a refund or a freeze sent a notification")
	}
}
