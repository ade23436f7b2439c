package epay_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"cardshop/adapters/epay"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/domain"
)

func TestNewRefusesBadConfig(t *testing.T) {
	good := epay.Config{GatewayURL: "https://pay.example.com/", PID: "1001", Key: "0123456789abcdef0123456789abcdef"}
	if _, err := epay.New(good); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*epay.Config){
		"empty key":      func(c *epay.Config) { c.Key = "" },
		"short key":      func(c *epay.Config) { c.Key = "0123456789abcde" },
		"padded key":     func(c *epay.Config) { c.Key += " " },
		"empty pid":      func(c *epay.Config) { c.PID = "" },
		"pid with &":     func(c *epay.Config) { c.PID = "1001&x=1" },
		"no URL":         func(c *epay.Config) { c.GatewayURL = "" },
		"relative URL":   func(c *epay.Config) { c.GatewayURL = "pay.example.com" },
		"ftp URL":        func(c *epay.Config) { c.GatewayURL = "ftp://pay.example.com/" },
		"URL with query": func(c *epay.Config) { c.GatewayURL = "https://pay.example.com/?a=1" },
		"URL with user":  func(c *epay.Config) { c.GatewayURL = "https://u:p@pay.example.com/" },
		"bad type":       func(c *epay.Config) { c.Type = "Ali Pay" },
		"bad variant":    func(c *epay.Config) { c.Variant = 7 },
		"bad mode":       func(c *epay.Config) { c.Mode = 7 },
		"bad name":       func(c *epay.Config) { c.Name = "Epay!" },
	}
	for name, mutate := range cases {
		cfg := good
		mutate(&cfg)
		if _, err := epay.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), string(good.Key)) {
			t.Errorf("%s: the error shows the key", name)
		}
	}
}

func TestParseModeAndVariant(t *testing.T) {
	if m, err := epay.ParseMode("api"); err != nil || m != epay.ModeAPI {
		t.Fatal(m, err)
	}
	if m, err := epay.ParseMode("redirect"); err != nil || m != epay.ModeRedirect {
		t.Fatal(m, err)
	}
	if v, err := epay.ParseSignVariant("ampkey"); err != nil || v != epay.SignAmpKey {
		t.Fatal(v, err)
	}
	if v, err := epay.ParseSignVariant("append"); err != nil || v != epay.SignAppend {
		t.Fatal(v, err)
	}
	for _, s := range []string{"", "API", "post"} {
		if _, err := epay.ParseMode(s); err == nil {
			t.Errorf("mode %q accepted", s)
		}
		if _, err := epay.ParseSignVariant(s); err == nil {
			t.Errorf("variant %q accepted", s)
		}
	}
}

func TestProviderSupportsReplyClose(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	if g.Provider() != "epay" {
		t.Fatal(g.Provider())
	}
	if g2 := newGateway(t, sim, func(c *epay.Config) { c.Name = "epay-wx" }); g2.Provider() != "epay-wx" {
		t.Fatal(g2.Provider())
	}
	usd, _ := domain.ParseCurrency("USD")
	if !g.Supports(cny) || g.Supports(usd) || g.Supports(domain.Currency{}) {
		t.Fatal("Supports must be CNY only")
	}
	ok, no := replyOf(g.Reply(true)), replyOf(g.Reply(false))
	if ok.Status != http.StatusOK || string(ok.Body) != "success" || !strings.HasPrefix(ok.ContentType, "text/plain") {
		t.Fatalf("accepted reply %+v", ok)
	}
	if no.Status != http.StatusOK || string(no.Body) != "fail" || !strings.HasPrefix(no.ContentType, "text/plain") {
		t.Fatalf("refused reply %+v", no)
	}
	if err := g.Close(context.Background(), domain.Payment{OrderNo: orderNo(1)}); !errors.Is(err, domain.ErrUnsupported) {
		t.Fatalf("Close = %v, want ErrUnsupported", err)
	}
}

func TestCreateRedirect(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, func(c *epay.Config) { c.Type = "wxpay" })
	no := orderNo(2)
	r := request(no, 1999, "https://shop.example/pay/notify/epay")
	c, err := g.Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if c.ProviderRef != "" || c.QRCode != "" {
		t.Fatalf("redirect mode gives only a PayURL: %+v", c)
	}
	u, err := url.Parse(c.PayURL)
	if err != nil || u.Path != "/submit.php" || !strings.HasPrefix(c.PayURL, sim.URL()+"/submit.php?") {
		t.Fatalf("PayURL %s", c.PayURL)
	}
	q := u.Query()
	want := map[string]string{"pid": sim.PID(), "type": "wxpay", "out_trade_no": string(no),
		"notify_url": r.NotifyURL, "return_url": r.ReturnURL, "name": r.Subject, "money": "19.99", "sign_type": "MD5"}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, q.Get(k), v)
		}
	}
	if q.Has("clientip") {
		t.Error("clientip belongs to mapi.php only")
	}
	if q.Get("sign") != epaysim.Sign(q, sim.Key(), false) {
		t.Fatal("the redirect is not signed as the gateway signs")
	}
	// The same request gives the same URL: a retried create is harmless.
	if again, _ := g.Create(context.Background(), r); again.PayURL != c.PayURL {
		t.Fatal("redirect URL not deterministic")
	}
	// The gateway accepts it when the buyer opens it, and records the order.
	if _, ok := sim.Order(string(no)); ok {
		t.Fatal("the gateway knew the order before the buyer opened the redirect")
	}
	if _, err := sim.Open(context.Background(), c.PayURL); err != nil {
		t.Fatal(err)
	}
	o, ok := sim.Order(string(no))
	if !ok || o.Money != "19.99" || o.Via != "submit.php" || o.Name != r.Subject {
		t.Fatalf("recorded order %+v", o)
	}
}

func TestCreateAmpKeyVariantIsAcceptedByAnAmpKeyGateway(t *testing.T) {
	sim := newSim(t, epaysim.Config{AmpKey: true})
	no := orderNo(3)
	for _, v := range []epay.SignVariant{epay.SignAppend, epay.SignAmpKey} {
		g := newGateway(t, sim, func(c *epay.Config) { c.Variant = v })
		c, err := g.Create(context.Background(), request(no, 100, "https://shop.example/n"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = sim.Open(context.Background(), c.PayURL)
		if (err == nil) != (v == epay.SignAmpKey) {
			t.Fatalf("variant %v: open error %v", v, err)
		}
	}
}

func TestCreateRefusesWhatEpayCannotCharge(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	g := newGateway(t, sim, nil)
	usd, _ := domain.ParseCurrency("USD")
	base := request(orderNo(4), 500, "https://shop.example/pay/notify/epay")
	cases := map[string]func(*domain.PaymentRequest){
		"USD":               func(r *domain.PaymentRequest) { r.Currency = usd },
		"zero amount":       func(r *domain.PaymentRequest) { r.Amount = 0 },
		"negative amount":   func(r *domain.PaymentRequest) { r.Amount = -5 },
		"no notify URL":     func(r *domain.PaymentRequest) { r.NotifyURL = "" },
		"notify with query": func(r *domain.PaymentRequest) { r.NotifyURL += "?order=1" },
		"relative notify":   func(r *domain.PaymentRequest) { r.NotifyURL = "/pay/notify/epay" },
		"bad return URL":    func(r *domain.PaymentRequest) { r.ReturnURL = "javascript:alert(1)" },
		"bad order no":      func(r *domain.PaymentRequest) { r.OrderNo = "a&b" },
	}
	for name, mutate := range cases {
		r := base
		mutate(&r)
		if _, err := g.Create(context.Background(), r); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: err = %v, want a validation error", name, err)
		}
	}
	// An empty subject is named after the order (epay requires name).
	r := base
	r.Subject = "  "
	c, err := g.Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(c.PayURL)
	if u.Query().Get("name") != string(r.OrderNo) {
		t.Fatalf("name = %q", u.Query().Get("name"))
	}
}

func TestCreateAPI(t *testing.T) {
	for _, tc := range []struct {
		typ, answer         string
		payURL, qr, hasWhat string
	}{
		{typ: "alipay", hasWhat: "payurl"},
		{typ: "wxpay", hasWhat: "qrcode"},
		{typ: "wxpay", answer: "urlscheme", hasWhat: "urlscheme"},
	} {
		t.Run(tc.typ+"/"+tc.hasWhat, func(t *testing.T) {
			sim := newSim(t, epaysim.Config{Answer: tc.answer})
			g := newGateway(t, sim, func(c *epay.Config) { c.Mode, c.Type = epay.ModeAPI, tc.typ })
			no := orderNo(5)
			r := request(no, 1, "https://shop.example/pay/notify/epay")
			c, err := g.Create(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			o, ok := sim.Order(string(no))
			if !ok || o.Via != "mapi.php" || o.Money != "0.01" || o.ClientIP != r.ClientIP || o.Type != tc.typ {
				t.Fatalf("recorded %+v", o)
			}
			if c.ProviderRef != o.TradeNo {
				t.Fatalf("ProviderRef %q, trade_no %q", c.ProviderRef, o.TradeNo)
			}
			switch tc.hasWhat {
			case "payurl":
				if c.QRCode != "" || !strings.Contains(c.PayURL, o.TradeNo) {
					t.Fatalf("%+v", c)
				}
				if _, err := sim.Open(context.Background(), c.PayURL); err != nil {
					t.Fatal(err)
				}
			case "qrcode":
				if c.PayURL != "" || !strings.HasPrefix(c.QRCode, "weixin://") {
					t.Fatalf("%+v", c)
				}
			case "urlscheme":
				if c.QRCode != "" || !strings.HasPrefix(c.PayURL, "weixin://") {
					t.Fatalf("%+v", c)
				}
			}
			var last epaysim.Request
			for _, q := range sim.Requests() {
				if q.Path == "/mapi.php" {
					last = q
				}
			}
			if last.Method != http.MethodPost || last.Path != "/mapi.php" || last.Form.Get("clientip") != r.ClientIP ||
				last.Form.Get("sign") != epaysim.Sign(last.Form, sim.Key(), false) {
				t.Fatalf("mapi.php request %+v", last)
			}
		})
	}
}

func TestCreateAPIRefusalAndOutage(t *testing.T) {
	sim := newSim(t, epaysim.Config{})
	wrong := newGateway(t, sim, func(c *epay.Config) { c.Mode, c.Key = epay.ModeAPI, "another-merchant-key-0123456789" })
	_, err := wrong.Create(context.Background(), request(orderNo(6), 100, "https://shop.example/n"))
	if err == nil || errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "签名校验失败") {
		t.Fatalf("refusal: %v (want a plain error with the gateway's msg)", err)
	}
	g := newGateway(t, sim, func(c *epay.Config) { c.Mode = epay.ModeAPI })
	sim.Outage(true)
	if _, err := g.Create(context.Background(), request(orderNo(6), 100, "https://shop.example/n")); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("outage: %v", err)
	}
	sim.Outage(false)
	if _, err := g.Create(context.Background(), request(orderNo(6), 100, "https://shop.example/n")); err != nil {
		t.Fatal(err)
	}
	// The same order again, with the same content: the gateway gives the same trade_no.
	a, _ := sim.Order(string(orderNo(6)))
	c, err := g.Create(context.Background(), request(orderNo(6), 100, "https://shop.example/n"))
	if err != nil || c.ProviderRef != a.TradeNo {
		t.Fatalf("retried create: %+v %v", c, err)
	}
	sim.Close()
	if _, err := g.Create(context.Background(), request(orderNo(7), 100, "https://shop.example/n")); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("gateway gone: %v", err)
	}
}
