package wechatpay_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/wechatsim"
	"cardshop/adapters/wechatpay"
	"cardshop/domain"
)

// FuzzVerifyHeaders: any values of the four signature headers over the Python-computed
// notification are refused with ErrBadSignature unless they are the genuine ones (the
// signature binds timestamp and nonce; the serial selects the only key); it never panics.
func FuzzVerifyHeaders(f *testing.F) {
	v, h, at := readVector(f, "vector.json")
	gw := vectorGateway(f, v)
	ts, nonce, serial, sig := h.Get(wechatpay.HeaderTimestamp), h.Get(wechatpay.HeaderNonce), h.Get(wechatpay.HeaderSerial), h.Get(wechatpay.HeaderSignature)
	f.Add(ts, nonce, serial, sig)
	f.Add(ts, nonce, "D7CE59D1F522D701", sig)
	f.Add("1740830100", nonce, serial, sig)
	f.Add(ts+" ", nonce, serial, sig)
	f.Add("+"+ts, nonce, serial, sig)
	f.Add(ts, nonce, serial, sig[:len(sig)-4])
	f.Add(ts, nonce, serial, "")
	f.Add("", "", "", "")
	f.Add("99999999999999999999", nonce, serial, sig)
	want, _ := base64.StdEncoding.DecodeString(sig)
	f.Fuzz(func(t *testing.T, fts, fnonce, fserial, fsig string) {
		hh := http.Header{}
		hh.Set(wechatpay.HeaderTimestamp, fts)
		hh.Set(wechatpay.HeaderNonce, fnonce)
		hh.Set(wechatpay.HeaderSerial, fserial)
		hh.Set(wechatpay.HeaderSignature, fsig)
		n, err := gw.Verify(ctx, domain.InboundRequest{Method: "POST", Header: domain.Header(hh), Body: []byte(v.Body), At: at})
		if err != nil {
			if !errors.Is(err, domain.ErrBadSignature) {
				t.Fatalf("%v", err)
			}
			return
		}
		got, _ := base64.StdEncoding.DecodeString(fsig)
		if fts != ts || fnonce != nonce || fserial != serial || string(got) != string(want) || n.Outcome != domain.OutcomePaid {
			t.Fatalf("accepted %q %q %q %q: %+v", fts, fnonce, fserial, fsig, n)
		}
	})
}

// fuzzKeyID is the public key id of the resource fuzz target's gateway.
const fuzzKeyID = "PUB_KEY_ID_0000000000000000000000000000000001"

// FuzzVerifyResource: any decrypted resource, sealed and signed as WeChat Pay does, under any
// event type, is a notice that holds together, a ValidationError, or (another merchant or
// app) ErrBadSignature; never a panic.
func FuzzVerifyResource(f *testing.F) {
	v, _, at := readVector(f, "vector.json")
	k := testKeys(f)
	der, _ := x509.MarshalPKIXPublicKey(&k.platform.PublicKey)
	v.PublicKeyID, v.PublicKeyPEM = fuzzKeyID, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	gw := vectorGateway(f, v)
	refund := `{"mchid":"1900000109","out_trade_no":"2503011200001234123456789012","transaction_id":"42","out_refund_no":"R1","refund_id":"50","refund_status":"SUCCESS","amount":{"total":10,"refund":10,"payer_total":10,"payer_refund":10}}`
	f.Add(wechatsim.EventTransactionSuccess, []byte(v.Plaintext))
	f.Add(wechatsim.EventRefundSuccess, []byte(refund))
	f.Add(wechatsim.EventRefundClosed, []byte(refund))
	f.Add(wechatsim.EventTransactionSuccess, []byte(`{"mchid":"1900000109","appid":"wxd678efh567hg6787","out_trade_no":"2503011200001234123456789012","trade_state":"SUCCESS","amount":{"total":1.5,"currency":"CNY"}}`))
	f.Add(wechatsim.EventTransactionSuccess, []byte(`{"mchid":"1900000109","appid":"wxd678efh567hg6787","out_trade_no":"2503011200001234123456789012","trade_state":"CLOSED"}`))
	f.Add("PAYSCORE.USER_OPEN_SERVICE", []byte(`{}`))
	f.Add("REFUND.", []byte(`null`))
	f.Add("", []byte(``))
	f.Fuzz(func(t *testing.T, event string, plain []byte) {
		body, err := wechatsim.Seal(v.APIv3Key, "EV-1", event, "", "transaction", at, plain)
		if err != nil {
			t.Fatal(err)
		}
		ts, nonce := strconv.FormatInt(at.Unix(), 10), "abc"
		h := http.Header{}
		h.Set(wechatpay.HeaderTimestamp, ts)
		h.Set(wechatpay.HeaderNonce, nonce)
		h.Set(wechatpay.HeaderSerial, fuzzKeyID)
		h.Set(wechatpay.HeaderSignature, wechatsim.Sign(k.platform, ts, nonce, body))
		n, err := gw.Verify(ctx, domain.InboundRequest{Method: "POST", Header: domain.Header(h), Body: body, At: at.Add(time.Second)})
		if err != nil {
			var ve *domain.ValidationError
			if !errors.As(err, &ve) && !errors.Is(err, domain.ErrBadSignature) {
				t.Fatalf("%v", err)
			}
			return
		}
		if n.EventID != "EV-1" || n.Amount < 0 || n.Outcome.String() == "unknown" {
			t.Fatalf("%+v", n)
		}
		if n.RefundNo != "" && n.RefundOutcome.String() == "unknown" {
			t.Fatalf("%+v", n)
		}
		if n.OrderNo == "" && (n.Outcome != domain.OutcomePending || n.RefundNo != "") {
			t.Fatalf("a notice without an order must change nothing: %+v", n)
		}
		if n.Outcome == domain.OutcomePaid && (n.Currency != cny || n.ProviderRef == "") {
			t.Fatalf("paid without currency or transaction: %+v", n)
		}
	})
}

// FuzzDecrypt: any nonce, associated data and ciphertext either decrypt (then the ciphertext
// is the sealing of the plaintext) or are refused; never a panic (GCM panics on a nonce that is
// not 12 bytes).
func FuzzDecrypt(f *testing.F) {
	const key = "Vq8kD3pL0tZr7NcYx2mWb5HsJ4eFgA6u"
	ct, _ := wechatsim.Encrypt(key, "fdasflkja484", "transaction", []byte(`{"a":1}`))
	f.Add("fdasflkja484", "transaction", ct)
	f.Add("short", "transaction", ct)
	f.Add("fdasflkja484fdasflkja484", "", ct)
	f.Add("fdasflkja484", "transaction", "!!!")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, nonce, ad, ciphertext string) {
		plain, err := wechatpay.Decrypt(key, nonce, ad, ciphertext)
		if err != nil {
			return
		}
		again, err := wechatsim.Encrypt(key, nonce, ad, plain)
		if err != nil || again != base64.StdEncoding.EncodeToString(mustDecode(t, ciphertext)) {
			t.Fatalf("%q %q %q decrypted to %q", nonce, ad, ciphertext, plain)
		}
	})
}

func mustDecode(t *testing.T, s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
