package alipaysim_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/alipaysim"
)

var (
	once              sync.Once
	merchant, alipayK *rsa.PrivateKey
)

func keys() (*rsa.PrivateKey, *rsa.PrivateKey) {
	once.Do(func() {
		merchant, _ = rsa.GenerateKey(rand.Reader, 2048)
		alipayK, _ = rsa.GenerateKey(rand.Reader, 2048)
	})
	return merchant, alipayK
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func newSim(t *testing.T, mutate func(*alipaysim.Config)) *alipaysim.Sim {
	t.Helper()
	mk, ak := keys()
	cfg := alipaysim.Config{MerchantKey: &mk.PublicKey, AlipayKey: ak, MaxAttempts: 3}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := alipaysim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// call sends a signed API request and returns the response object, its raw bytes and sign.
func call(t *testing.T, s *alipaysim.Sim, method string, biz map[string]string, change func(url.Values)) (map[string]any, string, string) {
	t.Helper()
	mk, _ := keys()
	bc, _ := json.Marshal(biz)
	p := url.Values{"app_id": {s.AppID()}, "method": {method}, "format": {"JSON"}, "charset": {"utf-8"}, "sign_type": {"RSA2"},
		"timestamp": {time.Now().In(alipaysim.ChinaTime).Format(alipaysim.TimeLayout)}, "version": {"1.0"},
		"notify_url": {"https://shop.example/notify"}, "biz_content": {string(bc)}}
	p.Set("sign", alipaysim.Sign(mk, []byte(alipaysim.SigningString(p, false))))
	if change != nil {
		change(p)
	}
	resp, err := http.PostForm(s.URL(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("%s: %s", err, body)
	}
	var raw json.RawMessage
	for k, v := range top {
		if strings.HasSuffix(k, "_response") {
			raw = v
		}
	}
	var sig string
	_ = json.Unmarshal(top["sign"], &sig)
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	return obj, string(raw), sig
}

func alipayPublic(t *testing.T, s *alipaysim.Sim) *rsa.PublicKey {
	t.Helper()
	b, _ := pem.Decode([]byte(s.PublicKeyPEM()))
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(*rsa.PublicKey)
}

func verified(t *testing.T, s *alipaysim.Sim, raw, sig string) bool {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || sig == "" {
		return false
	}
	sum := sha256.Sum256([]byte(raw))
	return rsa.VerifyPKCS1v15(alipayPublic(t, s), crypto.SHA256, sum[:], b) == nil
}

func TestNewNeedsTheMerchantKey(t *testing.T) {
	if _, err := alipaysim.New(alipaysim.Config{}); err == nil {
		t.Fatal("started without the merchant's key")
	}
}

func TestRequestsAreCheckedAndAnswersSigned(t *testing.T) {
	s := newSim(t, nil)
	biz := map[string]string{"out_trade_no": "A1", "total_amount": "1.5", "subject": "卡", "time_expire": time.Now().Add(time.Hour).In(alipaysim.ChinaTime).Format(alipaysim.TimeLayout)}
	obj, raw, sig := call(t, s, "alipay.trade.precreate", biz, nil)
	if obj["code"] != "10000" || obj["out_trade_no"] != "A1" || !strings.HasPrefix(obj["qr_code"].(string), "https://qr.alipay.com/") || !verified(t, s, raw, sig) {
		t.Fatalf("precreate %v %s", obj, sig)
	}
	if tr, _ := s.Trade("A1"); tr.Total != 150 || tr.Exists {
		t.Fatalf("trade %+v", tr)
	}
	for name, change := range map[string]func(url.Values){
		"tampered":    func(p url.Values) { p.Set("biz_content", strings.Replace(p.Get("biz_content"), "1.5", "0.1", 1)) },
		"other app":   func(p url.Values) { p.Set("app_id", "9021000199990009") },
		"RSA":         func(p url.Values) { p.Set("sign_type", "RSA") },
		"no sign":     func(p url.Values) { p.Del("sign") },
		"bad method":  func(p url.Values) { p.Set("method", "alipay.trade.pay") },
		"duplicated":  func(p url.Values) { p.Add("app_id", s.AppID()) },
		"bad version": func(p url.Values) { p.Set("version", "2.0") },
	} {
		obj, _, sig := call(t, s, "alipay.trade.precreate", biz, change)
		if obj["code"] == "10000" || sig != "" || !strings.HasPrefix(obj["sub_code"].(string), "isv.") {
			t.Errorf("%s: %v (sign %q)", name, obj, sig)
		}
	}
	// Not scanned: the trade does not exist for query; signed business refusal.
	obj, raw, sig = call(t, s, "alipay.trade.query", map[string]string{"out_trade_no": "A1"}, nil)
	if obj["sub_code"] != "ACQ.TRADE_NOT_EXIST" || !verified(t, s, raw, sig) {
		t.Fatalf("query %v", obj)
	}
}

func TestPayRetriesBoundedWithOneNotifyID(t *testing.T) {
	s := newSim(t, nil)
	var body atomic.Value
	var hits atomic.Int64
	body.Store("fail")
	var got []url.Values
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_ = r.ParseForm()
		mu.Lock()
		got = append(got, r.PostForm)
		mu.Unlock()
		if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			t.Errorf("notification %s %s", r.Method, r.Header.Get("Content-Type"))
		}
		_, _ = io.WriteString(w, body.Load().(string))
	}))
	t.Cleanup(srv.Close)
	keys()
	bc := map[string]string{"out_trade_no": "B1", "total_amount": "2.00", "subject": "x"}
	call(t, s, "alipay.trade.precreate", bc, func(p url.Values) {
		p.Set("notify_url", srv.URL+"/n")
		p.Set("sign", alipaysim.Sign(merchant, []byte(alipaysim.SigningString(p, false))))
	})
	if err := s.Pay(context.Background(), "B1"); !errors.Is(err, alipaysim.ErrNotAcknowledged) || hits.Load() != 3 {
		t.Fatalf("Pay = %v after %d hits", err, hits.Load())
	}
	body.Store("success")
	if err := s.Pay(context.Background(), "B1"); err != nil || hits.Load() != 4 {
		t.Fatalf("Pay = %v after %d hits", err, hits.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range got {
		sig := p.Get("sign")
		if p.Get("notify_id") != got[0].Get("notify_id") || p.Get("trade_status") != "TRADE_SUCCESS" || p.Get("total_amount") != "2.00" ||
			sig != alipaysim.Sign(alipayK, []byte(alipaysim.SigningString(p, true))) {
			t.Fatalf("notification %v", p)
		}
	}
	if _, err := s.Renotify(context.Background(), "nope"); !errors.Is(err, alipaysim.ErrUnknownTrade) {
		t.Fatal(err)
	}
}

func TestTimeExpireAndRefunds(t *testing.T) {
	c := &clock{now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	s := newSim(t, func(cfg *alipaysim.Config) { cfg.Now = c.Now })
	s.Retry(false)
	s.Drop(10) // no shop: notifications are lost
	expire := c.Now().Add(time.Minute).In(alipaysim.ChinaTime).Format(alipaysim.TimeLayout)
	for _, no := range []string{"C1", "C2"} {
		call(t, s, "alipay.trade.precreate", map[string]string{"out_trade_no": no, "total_amount": "3.00", "subject": "x", "time_expire": expire}, nil)
	}
	_ = s.Pay(context.Background(), "C1")
	c.Add(time.Minute)
	if err := s.Pay(context.Background(), "C2"); !errors.Is(err, alipaysim.ErrExpired) {
		t.Fatalf("pay after time_expire: %v", err)
	}
	refund := func(reqNo, amount string) map[string]any {
		obj, _, _ := call(t, s, "alipay.trade.refund", map[string]string{"out_trade_no": "C1", "refund_amount": amount, "out_request_no": reqNo}, nil)
		return obj
	}
	if o := refund("R1", "1.00"); o["fund_change"] != "Y" || o["refund_fee"] != "1.00" || s.Payouts() != 1 {
		t.Fatalf("first %v", o)
	}
	if o := refund("R1", "1.00"); o["code"] != "10000" || o["fund_change"] != "N" || o["refund_fee"] != "1.00" || s.Payouts() != 1 {
		t.Fatalf("same number %v", o)
	}
	if o := refund("R1", "2.00"); o["sub_code"] != "ACQ.DISCORDANT_REPEAT_REQUEST" {
		t.Fatalf("same number, other amount %v", o)
	}
	if o := refund("R2", "2.50"); o["sub_code"] != "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL" {
		t.Fatalf("too much %v", o)
	}
	if o := refund("R2", "2.00"); o["fund_change"] != "Y" || o["refund_fee"] != "3.00" || s.Payouts() != 2 {
		t.Fatalf("the rest %v", o)
	}
	if o := refund("R3", "0.01"); o["sub_code"] != "ACQ.TRADE_STATUS_ERROR" {
		t.Fatalf("refunded trade %v", o)
	}
	obj, _, _ := call(t, s, "alipay.trade.fastpay.refund.query", map[string]string{"out_trade_no": "C1", "out_request_no": "R2"}, nil)
	if obj["refund_status"] != "REFUND_SUCCESS" || obj["refund_amount"] != "2.00" {
		t.Fatalf("refund query %v", obj)
	}
	obj, _, _ = call(t, s, "alipay.trade.query", map[string]string{"out_trade_no": "C1"}, nil)
	if obj["trade_status"] != "TRADE_CLOSED" {
		t.Fatalf("fully refunded %v", obj)
	}
}

func TestOutage(t *testing.T) {
	s := newSim(t, nil)
	s.Outage(true)
	resp, err := http.PostForm(s.URL(), url.Values{"method": {"alipay.trade.query"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || s.Requests()[0].Refused != "outage" {
		t.Fatalf("outage: %d", resp.StatusCode)
	}
}
