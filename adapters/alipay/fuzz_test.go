package alipay_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"cardshop/adapters/alipay"
	"cardshop/domain"
)

const fuzzAppID = "9021000122680001"

func fuzzGateway(f *testing.F) *alipay.Gateway {
	mk, ak := keys(f)
	g, err := alipay.New(alipay.Config{GatewayURL: "https://openapi.alipay.com/gateway.do", AppID: fuzzAppID, SellerID: "2088721000000001",
		PrivateKey: domain.Secret(pkcs1PEM(mk)), AlipayPublicKey: publicPEM(&ak.PublicKey)})
	if err != nil {
		f.Fatal(err)
	}
	return g
}

// signedForm signs p as Alipay signs a notification and encodes it as a form.
func signedForm(f *testing.F, p map[string]string) string {
	_, ak := keys(f)
	sig, err := alipay.SignBytes(ak, []byte(alipay.SigningString(p, "sign", "sign_type")))
	if err != nil {
		f.Fatal(err)
	}
	v := url.Values{"sign": {sig}, "sign_type": {"RSA2"}}
	for k, val := range p {
		v.Set(k, val)
	}
	return v.Encode()
}

// FuzzVerify feeds raw form bodies (POST) and query strings (GET) to Verify: it never panics,
// refuses with ErrBadSignature or a ValidationError, and what it accepts is signed with
// Alipay's key, for the configured application and seller, and says exactly what was signed.
func FuzzVerify(f *testing.F) {
	g := fuzzGateway(f)
	_, ak := keys(f)
	no := string(orderNo(40))
	good := map[string]string{"app_id": fuzzAppID, "seller_id": "2088721000000001", "notify_id": "n1", "notify_type": "trade_status_sync",
		"trade_no": "2025030122001000000000001", "out_trade_no": no, "trade_status": "TRADE_SUCCESS", "total_amount": "10.00",
		"subject": "卡 x2", "notify_time": "2025-03-01 20:00:01"}
	f.Add(signedForm(f, good), true)
	f.Add(signedForm(f, good), false)
	refund := map[string]string{"app_id": fuzzAppID, "seller_id": "2088721000000001", "notify_id": "n2", "trade_no": "T1", "out_trade_no": no,
		"trade_status": "TRADE_CLOSED", "total_amount": "10.00", "refund_fee": "10.00", "out_biz_no": no + "R1", "gmt_refund": "2025-03-01 20:00:01.000"}
	f.Add(signedForm(f, refund), true)
	f.Add("app_id="+fuzzAppID+"&sign=AAAA&sign_type=RSA2", true)
	f.Add("a=%zz;b=1", true)
	f.Add("", false)
	f.Fuzz(func(t *testing.T, raw string, post bool) {
		in := domain.InboundRequest{Method: http.MethodPost, Body: []byte(raw),
			Header: domain.Header{"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}}}
		if !post {
			q, err := url.ParseQuery(raw)
			if err != nil {
				return // the HTTP server would not get this far
			}
			in = domain.InboundRequest{Method: http.MethodGet, Query: q}
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
		p := map[string]string{}
		for k := range v {
			p[k] = v.Get(k)
		}
		if !alipay.VerifyBytes(&ak.PublicKey, []byte(alipay.SigningString(p, "sign", "sign_type")), p["sign"]) ||
			p["app_id"] != fuzzAppID || p["seller_id"] != "2088721000000001" || p["sign_type"] != "RSA2" {
			t.Fatalf("accepted an unsigned or foreign notification: %q", raw)
		}
		want, _ := alipay.ParseAmount(p["total_amount"])
		if string(n.OrderNo) != p["out_trade_no"] || n.ProviderRef != p["trade_no"] || n.EventID != p["notify_id"] ||
			n.Currency.Code != "CNY" || n.Amount <= 0 || n.Amount != want {
			t.Fatalf("notice %+v does not say what was signed: %q", n, raw)
		}
		if n.RefundNo != "" && n.RefundNo != p["out_biz_no"] {
			t.Fatalf("refund number %q, signed %q", n.RefundNo, p["out_biz_no"])
		}
	})
}

// FuzzParseAmount: an accepted amount is not negative, has at most 2 decimals and is exactly
// the value written.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"1.00", "0.01", "19.99", "1", "1.0", "1.001", "-1.00", " 1.00", "01.00", "0.00", "1e2", "９.00", "999999999999999.99", ".5", "5."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := alipay.ParseAmount(s)
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		whole, frac, _ := strings.Cut(s, ".")
		if m < 0 || len(frac) > 2 || strings.Trim(whole+frac, "0123456789") != "" {
			t.Fatalf("%q accepted as %d", s, m)
		}
		back, err := alipay.ParseAmount(cny.Format(m))
		if err != nil || back != m {
			t.Fatalf("%q: %d does not round-trip (%v)", s, m, err)
		}
	})
}

// FuzzDecodeAnswer feeds raw answer bodies to DecodeAnswer: it never panics, and what it
// accepts carries a signature by Alipay's key over the exact bytes of the response object.
func FuzzDecodeAnswer(f *testing.F) {
	_, ak := keys(f)
	obj := `{"code":"10000","msg":"Success","trade_no":"2025030122001","out_trade_no":"1","trade_status":"TRADE_SUCCESS","total_amount":"88.88"}`
	sig, err := alipay.SignBytes(ak, []byte(obj))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"alipay_trade_query_response":` + obj + `,"sign":"` + sig + `"}`))
	f.Add([]byte("\xef\xbb\xbf" + `{"alipay_trade_query_response":` + obj + `,"sign":"` + sig + `"}`))
	f.Add([]byte(`{"alipay_trade_query_response":{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST"}}`))
	f.Add([]byte(`{"error_response":{"code":"20000"}}`))
	f.Add([]byte(`{"alipay_trade_query_response":` + obj + `,"alipay_trade_query_response":{},"sign":"` + sig + `"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var a struct {
			alipay.Answer
			TotalAmount string `json:"total_amount"`
		}
		if err := alipay.DecodeAnswer(&ak.PublicKey, "alipay.trade.query", body, &a); err != nil {
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(strings.TrimPrefix(string(body), "\xef\xbb\xbf")), &top); err != nil {
			t.Fatalf("accepted a body that is not JSON: %q", body)
		}
		var s string
		_ = json.Unmarshal(top["sign"], &s)
		if !alipay.VerifyBytes(&ak.PublicKey, top["alipay_trade_query_response"], s) {
			t.Fatalf("accepted an answer not signed over its object: %q", body)
		}
	})
}
