package epay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf8"

	"cardshop/adapters/epay"
	"cardshop/domain"
)

const fuzzKey = domain.Secret("fuzz0123456789abcdef0123456789ab")

func fuzzGateway(f *testing.F) *epay.Gateway {
	g, err := epay.New(epay.Config{GatewayURL: "https://pay.example.com/", PID: "1001", Key: fuzzKey})
	if err != nil {
		f.Fatal(err)
	}
	return g
}

func signedQuery(p epay.Params) string {
	p["sign"] = epay.Sign(p, fuzzKey, epay.SignAppend)
	p["sign_type"] = "MD5"
	v := url.Values{}
	for k, val := range p {
		v.Set(k, val)
	}
	return v.Encode()
}

// FuzzVerify feeds raw query strings (GET) and form bodies (POST) to Verify: it never panics,
// refuses with ErrBadSignature or a ValidationError, and what it accepts is signed with the
// KEY, from the merchant, and carries the amount exactly as sent.
func FuzzVerify(f *testing.F) {
	g := fuzzGateway(f)
	no := string(orderNo(40))
	good := epay.Params{"pid": "1001", "trade_no": "2025030112000012345", "out_trade_no": no, "type": "alipay",
		"name": "卡 x2", "money": "10.00", "trade_status": "TRADE_SUCCESS"}
	f.Add(signedQuery(good), false)
	f.Add(signedQuery(good), true)
	odd := epay.Params{"pid": "1001", "trade_no": "T", "out_trade_no": no, "money": "1.0", "trade_status": "X"}
	f.Add(signedQuery(odd), false)
	f.Add("pid=1001&money=1.00&sign=00&sign=11", false)
	f.Add("a=%zz;b=1", true)
	inject := epay.Params{"pid": "1001", "trade_no": "T", "out_trade_no": no, "type": "alipay", "name": "x&trade_status=TRADE_SUCCESS",
		"money": "10.00", "trade_status": "WAIT", "z": "a=b"}
	f.Add(signedQuery(inject), false)
	f.Add("", false)
	f.Fuzz(func(t *testing.T, raw string, post bool) {
		in := domain.InboundRequest{Method: http.MethodGet}
		if post {
			in = domain.InboundRequest{Method: http.MethodPost, Body: []byte(raw),
				Header: domain.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}
		} else {
			q, err := url.ParseQuery(raw)
			if err != nil {
				return // the HTTP server would not get this far
			}
			in.Query = q
		}
		n, err := g.Verify(context.Background(), in)
		if err != nil {
			if !errors.Is(err, domain.ErrBadSignature) && !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		v, perr := url.ParseQuery(raw)
		if perr != nil {
			t.Fatalf("accepted what does not parse: %v", perr)
		}
		p := epay.Params{}
		for k := range v {
			p[k] = v.Get(k)
		}
		if epay.Sign(p, fuzzKey, epay.SignAppend) != p["sign"] || p["pid"] != "1001" {
			t.Fatalf("accepted an unsigned or foreign notification: %q", raw)
		}
		for k, val := range p {
			if strings.ContainsAny(k+val, "&=") || strings.ContainsFunc(k+val, unicode.IsControl) || !utf8.ValidString(k+val) {
				t.Fatalf("accepted a parameter that breaks the signed string's framing: %q=%q", k, val)
			}
		}
		if n.Method != p["type"] || n.Method == "" {
			t.Fatalf("notice %+v: type %q", n, p["type"])
		}
		if string(n.OrderNo) != p["out_trade_no"] || n.ProviderRef != p["trade_no"] || n.Currency.Code != "CNY" ||
			n.Amount <= 0 || n.Currency.Format(n.Amount) != p["money"] {
			t.Fatalf("notice %+v does not say what was signed: %q", n, raw)
		}
		if (n.Outcome == domain.OutcomePaid) != (p["trade_status"] == epay.TradeSuccess) {
			t.Fatalf("outcome %v for status %q", n.Outcome, p["trade_status"])
		}
	})
}

// FuzzParseMoney: an accepted amount is positive and is exactly what CNY's Format writes.
func FuzzParseMoney(f *testing.F) {
	for _, s := range []string{"1.00", "0.01", "19.99", "1", "1.0", "1.001", "-1.00", " 1.00", "01.00", "0.00", "1e2", "９.00", "999999999999999.99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := epay.ParseMoney(s)
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if m <= 0 || (domain.Currency{Code: "CNY", Exponent: 2}).Format(m) != s {
			t.Fatalf("%q accepted as %d", s, m)
		}
	})
}

// FuzzRefundAnswer feeds any body to Refund as api.php?act=refund's answer, with the order paid
// before and after: it never panics, never reports unavailable for a 200, never shows the KEY,
// and succeeds only on code 1 or the upstream "退款成功" message.
func FuzzRefundAnswer(f *testing.F) {
	var body atomic.Value
	body.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("act") == "refund" {
			_, _ = w.Write([]byte(body.Load().(string)))
			return
		}
		_, _ = w.Write([]byte(`{"code":1,"trade_no":"T1","money":"1.00","status":1}`))
	}))
	f.Cleanup(srv.Close)
	g, err := epay.New(epay.Config{GatewayURL: srv.URL, PID: "1001", Key: fuzzKey, Refunds: true})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{"code":1,"msg":"ok"}`, `{"code":"1"}`, `{"code":0,"msg":"退款成功！退款金额￥1.00"}`, `{"code":0,"msg":"失败"}`,
		`{"code":-1,"msg":"` + string(fuzzKey) + `"}`, `{"code":1.0}`, `{"code":null}`, `{"code":{}}`, `[]`, ``, "\xef\xbb\xbf{\"code\":1}", `<html>`} {
		f.Add(s)
	}
	p := domain.Payment{OrderNo: orderNo(41), Provider: "epay", Amount: 100, Currency: domain.Currency{Code: "CNY", Exponent: 2}}
	req := domain.RefundRequest{RefundNo: "R1", Amount: 100, Currency: p.Currency}
	f.Fuzz(func(t *testing.T, b string) {
		body.Store(b)
		st, err := g.Refund(context.Background(), p, req)
		if err != nil {
			if errors.Is(err, domain.ErrUnavailable) || strings.Contains(err.Error(), string(fuzzKey)) {
				t.Fatalf("%q: %v", b, err)
			}
			return
		}
		if strings.Contains(st.Reason, string(fuzzKey)) {
			t.Fatalf("the key in %q", st.Reason)
		}
		switch st.Outcome {
		case domain.RefundSucceeded:
			if !strings.Contains(b, "1") && !strings.Contains(b, "退款成功") {
				t.Fatalf("succeeded on %q", b)
			}
		case domain.RefundRefused:
		default:
			t.Fatalf("%q: %+v", b, st)
		}
	})
}

// FuzzCreateSigns feeds any subject, client IP and return URL to Create: what it signs never
// holds a separator or a control character, and the signed string splits back into exactly the
// parameters signed (one signature, one parameter set).
func FuzzCreateSigns(f *testing.F) {
	g := fuzzGateway(f)
	for _, s := range []string{"Steam 充值卡 × 2", "P&out_trade_no=1&trade_status=TRADE_SUCCESS&z=", "a=b", "\x00\n\r", "\xff\xfe", "＆＝"} {
		f.Add(s, "203.0.113.7", "")
	}
	f.Add("x", "1.2.3.4&x=1", "https://shop.example/o?a=1&b=2")
	no := orderNo(42)
	f.Fuzz(func(t *testing.T, subject, ip, ret string) {
		c, err := g.Create(context.Background(), domain.PaymentRequest{OrderNo: no, Amount: 100,
			Currency: domain.Currency{Code: "CNY", Exponent: 2}, Subject: subject, ClientIP: ip, ReturnURL: ret,
			NotifyURL: "https://shop.example/api/payments/epay/notify"})
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("%q %q %q: %v", subject, ip, ret, err)
			}
			return
		}
		u, err := url.Parse(c.PayURL)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		p := epay.Params{}
		for k := range q {
			p[k] = q.Get(k)
			if k != "sign" && k != "sign_type" && (strings.ContainsAny(k+p[k], "&=") ||
				strings.ContainsFunc(p[k], unicode.IsControl) || !utf8.ValidString(p[k])) {
				t.Fatalf("signed %q=%q", k, p[k])
			}
		}
		if epay.Sign(p, fuzzKey, epay.SignAppend) != p["sign"] {
			t.Fatalf("the pay URL's signature is not its parameters'")
		}
		joined := strings.TrimSuffix(epay.SigningString(p, fuzzKey, epay.SignAppend), string(fuzzKey))
		back := 0
		for _, kv := range strings.Split(joined, "&") {
			k, v, _ := strings.Cut(kv, "=")
			if p[k] != v {
				t.Fatalf("the signed string splits into %q=%q", k, v)
			}
			back++
		}
		if back != len(p)-2 {
			t.Fatalf("the signed string holds %d parameters of %d", back, len(p)-2)
		}
	})
}
