package epay_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"cardshop/adapters/epay"
	"cardshop/domain"
)

const fuzzKey = epay.Key("fuzz0123456789abcdef0123456789ab")

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
	f.Add("", false)
	f.Fuzz(func(t *testing.T, raw string, post bool) {
		in := domain.InboundRequest{Method: http.MethodGet}
		if post {
			in = domain.InboundRequest{Method: http.MethodPost, Body: []byte(raw),
				Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}
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
