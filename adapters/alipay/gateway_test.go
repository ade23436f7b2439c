package alipay_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/alipay"
	"cardshop/adapters/lab/paysim/alipaysim"
	"cardshop/domain"
)

// checkCommon checks the common parameters of a request the simulator received.
func checkCommon(t *testing.T, r alipaysim.Request, method string) {
	t.Helper()
	p := r.Params
	if p.Get("method") != method || p.Get("format") != "JSON" || p.Get("charset") != "utf-8" || p.Get("sign_type") != "RSA2" ||
		p.Get("version") != "1.0" || p.Get("sign") == "" {
		t.Fatalf("common parameters %v", p)
	}
	ts, err := time.ParseInLocation(alipay.TimeLayout, p.Get("timestamp"), alipay.ChinaTime)
	if err != nil || time.Since(ts).Abs() > time.Hour {
		t.Fatalf("timestamp %q: %v", p.Get("timestamp"), err)
	}
}

func TestCreatePrecreate(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	no := orderNo(1)
	r := request(no, 1999, "https://shop.example/pay/notify/alipay")
	c, err := g.Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := sim.Trade(string(no))
	if !ok || c.QRCode != tr.QRCode || c.PayURL != "" || tr.Total != 1999 || tr.Exists {
		t.Fatalf("created %+v, trade %+v", c, tr)
	}
	if tr.Subject != "Steam 充值卡 ×2 100 1" || tr.NotifyURL != r.NotifyURL {
		t.Fatalf("subject %q notify %q", tr.Subject, tr.NotifyURL)
	}
	reqs := sim.Requests()
	if len(reqs) != 1 || reqs[0].HTTPMethod != "POST" || reqs[0].Refused != "" {
		t.Fatalf("requests %+v", reqs)
	}
	checkCommon(t, reqs[0], "alipay.trade.precreate")
	wantExpire := r.ExpiresAt.In(alipay.ChinaTime).Format("2006-01-02 15:04:05")
	if b := reqs[0].Biz; b["total_amount"] != "19.99" || b["out_trade_no"] != string(no) || b["time_expire"] != wantExpire ||
		b["timeout_express"] != nil {
		t.Fatalf("biz_content %v, want time_expire %s", b, wantExpire)
	}
	if !tr.TimeExpire.Equal(r.ExpiresAt) {
		t.Fatalf("the simulator read time_expire %v, want %v", tr.TimeExpire, r.ExpiresAt)
	}
	// A retry is the same trade; a different amount under the same number is refused.
	again, err := g.Create(context.Background(), r)
	if err != nil || again != c {
		t.Fatalf("retry: %+v %v", again, err)
	}
	r.Amount = 2000
	if _, err := g.Create(context.Background(), r); err == nil || errors.Is(err, domain.ErrUnavailable) ||
		!strings.Contains(err.Error(), "ACQ.CONTEXT_INCONSISTENT") {
		t.Fatalf("conflicting create: %v", err)
	}
}

func TestCreatePageAndWap(t *testing.T) {
	for _, tc := range []struct {
		method  alipay.Method
		api     string
		product string
	}{{alipay.MethodPage, "alipay.trade.page.pay", "FAST_INSTANT_TRADE_PAY"}, {alipay.MethodWap, "alipay.trade.wap.pay", "QUICK_WAP_WAY"}} {
		t.Run(string(tc.method), func(t *testing.T) {
			sim := newSim(t, nil)
			g := newGateway(t, sim, tc.method, nil)
			no := orderNo(2)
			c, err := g.Create(context.Background(), request(no, 50, "https://shop.example/n"))
			if err != nil {
				t.Fatal(err)
			}
			if c.QRCode != "" || !strings.HasPrefix(c.PayURL, sim.URL()+"?") || len(sim.Requests()) != 0 {
				t.Fatalf("created %+v; requests %d", c, len(sim.Requests()))
			}
			page, err := sim.Open(context.Background(), c.PayURL)
			if err != nil || !strings.Contains(page, "0.50") {
				t.Fatalf("open: %v %s", err, page)
			}
			reqs := sim.Requests()
			checkCommon(t, reqs[0], tc.api)
			if reqs[0].HTTPMethod != "GET" || reqs[0].Params.Get("return_url") != "https://shop.example/orders/"+string(no) ||
				reqs[0].Biz["product_code"] != tc.product {
				t.Fatalf("request %+v", reqs[0])
			}
			if tr, ok := sim.Trade(string(no)); !ok || !tr.Exists || tr.Total != 50 {
				t.Fatalf("trade %+v", tr)
			}
			// The URL is signed: a changed amount is refused by the gateway.
			u, _ := url.Parse(c.PayURL)
			q := u.Query()
			q.Set("biz_content", strings.Replace(q.Get("biz_content"), `"0.50"`, `"0.01"`, 1))
			u.RawQuery = q.Encode()
			if _, err := sim.Open(context.Background(), u.String()); err == nil || !strings.Contains(err.Error(), "isv.invalid-signature") {
				t.Fatalf("tampered URL: %v", err)
			}
		})
	}
}

func TestCreateRefusals(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	usd := mustCurrency(t, "USD")
	for name, mutate := range map[string]func(*domain.PaymentRequest){
		"usd":             func(r *domain.PaymentRequest) { r.Currency = usd },
		"zero":            func(r *domain.PaymentRequest) { r.Amount = 0 },
		"too much":        func(r *domain.PaymentRequest) { r.Amount = 100_000_000_01 },
		"no expiry":       func(r *domain.PaymentRequest) { r.ExpiresAt = time.Time{} },
		"expired":         func(r *domain.PaymentRequest) { r.ExpiresAt = time.Now().Add(-time.Second) },
		"relative notify": func(r *domain.PaymentRequest) { r.NotifyURL = "/notify" },
		"dash order":      func(r *domain.PaymentRequest) { r.OrderNo = "A-1" },
		"bad return":      func(r *domain.PaymentRequest) { r.ReturnURL = "javascript:alert(1)" },
	} {
		r := request(orderNo(3), 100, "https://shop.example/n")
		mutate(&r)
		if _, err := g.Create(context.Background(), r); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := len(sim.Requests()); n != 0 {
		t.Fatalf("%d requests sent for refused creations", n)
	}
}

func TestAnswersMustBeSignedByAlipay(t *testing.T) {
	sim := newSim(t, nil)
	_, ak := keys(t)
	// A gateway that trusts another key than the one answering.
	other := newSim(t, func(c *alipaysim.Config) { c.AlipayKey = nil })
	g := newGateway(t, sim, alipay.MethodPrecreate, func(c *alipay.Config) { c.AlipayPublicKey = other.PublicKeyPEM() })
	_, err := g.Create(context.Background(), request(orderNo(4), 100, "https://shop.example/n"))
	if err == nil || errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("answer under another key: %v", err)
	}
	if _, err := g.Query(context.Background(), domain.Payment{OrderNo: orderNo(4)}); err == nil || errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("query answer under another key: %v", err)
	}

	// DecodeAnswer: the signature covers the exact bytes of the object.
	obj := `{"code":"10000","msg":"Success","out_trade_no":"1","qr_code":"https://qr.alipay.com/x"}`
	sig, _ := alipay.SignBytes(ak, []byte(obj))
	var a struct {
		alipay.Answer
		QRCode string `json:"qr_code"`
	}
	body := `{"alipay_trade_precreate_response":` + obj + `,"sign":"` + sig + `"}`
	if err := alipay.DecodeAnswer(&ak.PublicKey, "alipay.trade.precreate", []byte(body), &a); err != nil || a.QRCode != "https://qr.alipay.com/x" {
		t.Fatalf("genuine answer: %v %+v", err, a)
	}
	spaced := `{"alipay_trade_precreate_response":` + strings.Replace(obj, `,"msg"`, `, "msg"`, 1) + `,"sign":"` + sig + `"}`
	if err := alipay.DecodeAnswer(&ak.PublicKey, "alipay.trade.precreate", []byte(spaced), &a); err == nil {
		t.Fatal("an answer re-spaced after signing verified")
	}
	unsignedOK := `{"alipay_trade_precreate_response":` + obj + `}`
	if err := alipay.DecodeAnswer(&ak.PublicKey, "alipay.trade.precreate", []byte(unsignedOK), &a); err == nil {
		t.Fatal("an unsigned success accepted")
	}
	busy := `{"alipay_trade_precreate_response":{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error","sub_msg":"系统繁忙"}}`
	if err := alipay.DecodeAnswer(&ak.PublicKey, "alipay.trade.precreate", []byte(busy), &a); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("unsigned 20000: %v", err)
	}
	errResp := `{"error_response":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-app-id","sub_msg":"无效的AppID参数"}}`
	if err := alipay.DecodeAnswer(&ak.PublicKey, "alipay.trade.precreate", []byte(errResp), &a); err == nil || errors.Is(err, domain.ErrUnavailable) ||
		!strings.Contains(err.Error(), "isv.invalid-app-id") {
		t.Fatalf("error_response: %v", err)
	}
}

func TestOutageIsUnavailable(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sim.Outage(true)
	p := domain.Payment{OrderNo: orderNo(5), Amount: 100, Currency: cny}
	if _, err := g.Create(context.Background(), request(p.OrderNo, 100, "https://shop.example/n")); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("create: %v", err)
	}
	if _, err := g.Query(context.Background(), p); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("query: %v", err)
	}
	if err := g.Close(context.Background(), p); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("close: %v", err)
	}
	if _, err := g.Refund(context.Background(), p, domain.RefundRequest{RefundNo: domain.RefundNoOf(p.OrderNo), Amount: 100, Currency: cny}); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("refund: %v", err)
	}
	sim.Outage(false)
	if _, err := g.Create(context.Background(), request(p.OrderNo, 100, "https://shop.example/n")); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	g2 := newGateway(t, sim, alipay.MethodPrecreate, func(c *alipay.Config) { c.GatewayURL = "http://127.0.0.1:1/gateway.do" })
	if _, err := g2.Query(context.Background(), p); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("unreachable: %v", err)
	}
}
