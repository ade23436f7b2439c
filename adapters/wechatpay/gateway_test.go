package wechatpay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/wechatsim"
	"cardshop/adapters/wechatpay"
	"cardshop/domain"
)

var ctx = context.Background()

func TestCreatePlacesTheNativeOrderSignedAndReturnsItsCodeURL(t *testing.T) {
	r := newRig(t)
	req := r.request(orderNo, 1998)
	c, err := r.gw.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.QRCode, "weixin://wxpay/bizpayurl?pr=") || c.ProviderRef != "" || c.PayURL != "" {
		t.Fatalf("%+v", c)
	}
	o, ok := r.sim.OrderOf(string(orderNo))
	if !ok || o.Total != 1998 || o.NotifyURL != r.notify || o.Description != "Gift card x2" || o.AppID != r.cfg.AppID ||
		o.MchID != r.cfg.MchID || !o.TimeExpire.Equal(req.ExpiresAt) || o.TradeState != "NOTPAY" {
		t.Fatalf("%+v", o)
	}
	reqs := r.sim.Requests()
	if len(reqs) != 1 || !reqs[0].AuthOK || reqs[0].Status != 200 {
		t.Fatalf("%+v", reqs)
	}
	var body map[string]any
	_ = json.Unmarshal(reqs[0].Body, &body)
	if body["time_expire"] != "2025-03-01T20:15:00+08:00" {
		t.Fatalf("time_expire %v", body["time_expire"])
	}
	// A retry after a lost answer is the same order: same code_url, no second order.
	again, err := r.gw.Create(ctx, req)
	if err != nil || again.QRCode != c.QRCode {
		t.Fatalf("retry: %+v %v", again, err)
	}
}

func TestCreateRefusesWhatWeChatPayWouldRefuseBeforeSending(t *testing.T) {
	r := newRig(t)
	for name, edit := range map[string]func(*domain.PaymentRequest){
		"http notify":      func(p *domain.PaymentRequest) { p.NotifyURL = "http://shop.example/notify" },
		"notify query":     func(p *domain.PaymentRequest) { p.NotifyURL = "https://shop.example/notify?x=1" },
		"empty query":      func(p *domain.PaymentRequest) { p.NotifyURL = "https://shop.example/notify?" },
		"notify fragment":  func(p *domain.PaymentRequest) { p.NotifyURL = "https://shop.example/notify#a" },
		"relative notify":  func(p *domain.PaymentRequest) { p.NotifyURL = "/notify" },
		"usd":              func(p *domain.PaymentRequest) { p.Currency = domain.Currency{Code: "USD", Exponent: 2} },
		"zero amount":      func(p *domain.PaymentRequest) { p.Amount = 0 },
		"bad order number": func(p *domain.PaymentRequest) { p.OrderNo = "x" },
	} {
		req := r.request(orderNo, 100)
		edit(&req)
		if _, err := r.gw.Create(ctx, req); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	req := r.request(orderNo, 100)
	req.ExpiresAt = start
	if _, err := r.gw.Create(ctx, req); !errors.Is(err, domain.ErrOrderNotPayable) {
		t.Errorf("expired: %v", err)
	}
	if n := len(r.sim.Requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}

func TestOutageIsUnavailable(t *testing.T) {
	r := newRig(t)
	r.sim.Outage(true)
	if _, err := r.gw.Create(ctx, r.request(orderNo, 100)); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatal(err)
	}
	r.sim.Outage(false)
	r.create(orderNo, 100)
}

func TestAPaidNotificationIsVerifiedDecryptedAndMapped(t *testing.T) {
	r := newRig(t)
	r.create(orderNo, 1998)
	ds, err := r.sim.Pay(ctx, string(orderNo))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Status != 204 || len(ds[0].Reply) != 0 {
		t.Fatalf("%+v", ds)
	}
	ns, refused := r.received()
	o, _ := r.sim.OrderOf(string(orderNo))
	if len(refused) != 0 || len(ns) != 1 {
		t.Fatalf("%v %v", ns, refused)
	}
	n := ns[0]
	if n.OrderNo != orderNo || n.Outcome != domain.OutcomePaid || n.Amount != 1998 || n.Currency != cny ||
		n.ProviderRef != o.TransactionID || n.EventID != ds[0].Note.ID || n.RefundNo != "" {
		t.Fatalf("%+v", n)
	}
}

func TestForgedNotificationsAreRefusedAndResentBounded(t *testing.T) {
	for _, tc := range []struct {
		f       wechatsim.Forgery
		invalid bool // a ValidationError rather than a bad signature
	}{
		{wechatsim.WrongKey, false}, {wechatsim.UnknownSerial, false}, {wechatsim.StaleTimestamp, false},
		{wechatsim.FutureTimestamp, false}, {wechatsim.Unsigned, false}, {wechatsim.OtherMerchant, false},
		{wechatsim.OtherApp, false}, {wechatsim.TamperedAmount, false}, {wechatsim.BadCiphertext, true},
	} {
		t.Run(fmt.Sprint(tc.f), func(t *testing.T) {
			r := newRig(t)
			r.create(orderNo, 1998)
			n, err := r.sim.PayNotification(string(orderNo))
			if err != nil {
				t.Fatal(err)
			}
			ds := r.sim.Deliver(ctx, n, tc.f)
			if len(ds) != 3 {
				t.Fatalf("%d attempts, want the bounded 3", len(ds))
			}
			for _, d := range ds {
				if d.Status != 400 || !strings.Contains(string(d.Reply), `"code":"FAIL"`) {
					t.Fatalf("%+v", d)
				}
			}
			ns, refused := r.received()
			if len(ns) != 0 || len(refused) != 3 {
				t.Fatalf("%v %v", ns, refused)
			}
			var ve *domain.ValidationError
			if tc.invalid != errors.As(refused[0], &ve) || tc.invalid == errors.Is(refused[0], domain.ErrBadSignature) {
				t.Fatalf("%v", refused[0])
			}
			// The genuine one still goes through.
			if ds := r.sim.Deliver(ctx, n, wechatsim.Genuine); len(ds) != 1 || !ds[0].Accepted() {
				t.Fatalf("%+v", ds)
			}
		})
	}
}

func TestFreshnessIsJudgedAtTheArrival(t *testing.T) {
	r := newRig(t)
	r.create(orderNo, 1998)
	n, _ := r.sim.PayNotification(string(orderNo))
	// The same bytes arriving 5 minutes after signing are stale.
	h, body := signedAt(r, start, n.Body)
	_, err := r.gw.Verify(ctx, domain.InboundRequest{Method: "POST", Header: domain.Header(h), Body: body, At: start.Add(5 * time.Minute)})
	if !errors.Is(err, domain.ErrBadSignature) {
		t.Fatal(err)
	}
	if _, err := r.gw.Verify(ctx, domain.InboundRequest{Method: "POST", Header: domain.Header(h), Body: body, At: start.Add(5*time.Minute - time.Second)}); err != nil {
		t.Fatal(err)
	}
}

func TestResendReorderDropAndDelay(t *testing.T) {
	r := newRig(t)
	a, b := domain.OrderNo("2503011200001234123456789001"), domain.OrderNo("2503011200001234123456789002")
	r.create(a, 100)
	r.create(b, 200)
	r.sim.Hold(true)
	if _, err := r.sim.Pay(ctx, string(a)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.sim.Pay(ctx, string(b)); err != nil {
		t.Fatal(err)
	}
	r.sim.Hold(false)
	r.sim.SetDelay(time.Millisecond)
	r.sim.Release(ctx, 1, 0)
	if _, err := r.sim.Resend(ctx, 2); err != nil {
		t.Fatal(err)
	}
	ns, refused := r.received()
	if len(refused) != 0 || len(ns) != 4 || ns[0].OrderNo != b || ns[1].OrderNo != a || ns[2] != ns[1] || ns[3] != ns[1] {
		t.Fatalf("%+v %v", ns, refused)
	}
	c := domain.OrderNo("2503011200001234123456789003")
	p := r.create(c, 300)
	r.sim.Retry(false) // one attempt, lost: no retry brings it
	r.sim.Drop(1)
	ds, _ := r.sim.Pay(ctx, string(c))
	r.sim.Retry(true)
	if len(ds) != 1 || !ds[0].Dropped {
		t.Fatalf("%+v", ds)
	}
	if ns, _ := r.received(); len(ns) != 4 {
		t.Fatalf("a dropped notification arrived: %+v", ns)
	}
	st, err := r.gw.Query(ctx, p)
	if err != nil || st.Outcome != domain.OutcomePaid || st.Amount != 300 || st.ProviderRef == "" {
		t.Fatalf("the query tells what the dropped notification would have: %+v %v", st, err)
	}
}

func TestKeyMigrationSelectsTheKeyByWechatpaySerial(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opt      rigOption
		cert, pk bool // which signer the gateway accepts
	}{
		{"both", func(*wechatsim.Options, *wechatpay.Config, *wechatsim.Server) {}, true, true},
		{"certificate only", certificateOnly, true, false},
		{"public key only", publicKeyOnly, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.opt)
			for i, kind := range []wechatsim.KeyKind{wechatsim.SignCertificate, wechatsim.SignPublicKey} {
				want := []bool{tc.cert, tc.pk}[i]
				r.sim.SignWith(kind)
				no := domain.OrderNo(fmt.Sprintf("250301120000123412345678900%d", i))
				_, err := r.gw.Create(ctx, r.request(no, 100))
				if (err == nil) != want || (err != nil && !errors.Is(err, domain.ErrBadSignature)) {
					t.Fatalf("create signed by %d: %v", kind, err)
				}
				if !want {
					r.sim.SignWith(1 - kind)
					r.create(no, 100)
					r.sim.SignWith(kind)
				}
				ds, err := r.sim.Pay(ctx, string(no))
				if err != nil || ds[len(ds)-1].Accepted() != want {
					t.Fatalf("notification signed by %d: %+v %v", kind, ds, err)
				}
			}
		})
	}
}

func TestQueryMapsTradeStates(t *testing.T) {
	r := newRig(t)
	p := r.create(orderNo, 1998)
	if st, err := r.gw.Query(ctx, p); err != nil || st.Outcome != domain.OutcomePending || st.Amount != 1998 || st.Currency != cny {
		t.Fatalf("%+v %v", st, err)
	}
	failed := r.create("2503011200001234123456789099", 100)
	if err := r.sim.FailPayment(string(failed.OrderNo)); err != nil {
		t.Fatal(err)
	}
	if st, err := r.gw.Query(ctx, failed); err != nil || st.Outcome != domain.OutcomeFailed {
		t.Fatalf("%+v %v", st, err)
	}
	r.clock.Advance(16 * time.Minute)
	if st, err := r.gw.Query(ctx, p); err != nil || st.Outcome != domain.OutcomeExpired {
		t.Fatalf("past time_expire: %+v %v", st, err)
	}
	unknown := p
	unknown.OrderNo = "2503011200001234123456789098"
	var e *wechatpay.APIError
	if _, err := r.gw.Query(ctx, unknown); !errors.As(err, &e) || e.Code != "ORDER_NOT_EXIST" || !e.Verified {
		t.Fatalf("%v", err)
	}
	if reqs := r.sim.Requests(); !strings.HasSuffix(reqs[len(reqs)-1].URI, "?mchid="+r.cfg.MchID) {
		t.Fatalf("%s", reqs[len(reqs)-1].URI)
	}
}

func TestCloseClosesAndReportsAPaidOrder(t *testing.T) {
	r := newRig(t)
	p := r.create(orderNo, 1998)
	if err := r.gw.Close(ctx, p); err != nil {
		t.Fatal(err)
	}
	if st, err := r.gw.Query(ctx, p); err != nil || st.Outcome != domain.OutcomeExpired {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := r.sim.Pay(ctx, string(orderNo)); !errors.Is(err, wechatsim.ErrState) {
		t.Fatalf("a closed order was paid: %v", err)
	}
	paid := r.paid("2503011200001234123456789011", 500)
	if err := r.gw.Close(ctx, paid); !errors.Is(err, domain.ErrAlreadyPaid) {
		t.Fatalf("%v", err)
	}
	r.sim.Outage(true)
	if err := r.gw.Close(ctx, p); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("%v", err)
	}
}

func refundReq(p domain.Payment) domain.RefundRequest {
	return domain.RefundRequest{RefundNo: domain.RefundNoOf(p.OrderNo), Amount: p.Amount, Currency: cny, Reason: "buyer asked"}
}

func TestRefundSucceedsAtOnceAndNotifies(t *testing.T) {
	r := newRig(t)
	p := r.paid(orderNo, 1998)
	r.sim.RefundAtOnce(true)
	st, err := r.gw.Refund(ctx, p, refundReq(p))
	if err != nil || st.Outcome != domain.RefundSucceeded || st.ProviderRef == "" {
		t.Fatalf("%+v %v", st, err)
	}
	refs := r.sim.Refunds()
	if len(refs) != 1 || refs[0].NotifyURL != r.notify || refs[0].Reason != "buyer asked" || refs[0].Total != 1998 {
		t.Fatalf("%+v", refs)
	}
	r.sim.Flush(ctx)
	ns, _ := r.received()
	n := ns[len(ns)-1]
	if n.RefundNo != refundReq(p).RefundNo || n.RefundOutcome != domain.RefundSucceeded || n.OrderNo != orderNo || n.Amount != 1998 {
		t.Fatalf("%+v", n)
	}
	if r.sim.PaidOut(string(orderNo)) != 1998 {
		t.Fatal(r.sim.PaidOut(string(orderNo)))
	}
}

func TestRefundPendingThenNotified(t *testing.T) {
	for _, status := range []string{"SUCCESS", "ABNORMAL", "CLOSED"} {
		t.Run(status, func(t *testing.T) {
			r := newRig(t)
			p := r.paid(orderNo, 1998)
			st, err := r.gw.Refund(ctx, p, refundReq(p))
			if err != nil || st.Outcome != domain.RefundPending {
				t.Fatalf("%+v %v", st, err)
			}
			ds, err := r.sim.CompleteRefund(ctx, refundReq(p).RefundNo, status)
			if err != nil || len(ds) != 1 || !ds[0].Accepted() {
				t.Fatalf("%+v %v", ds, err)
			}
			ns, _ := r.received()
			n := ns[len(ns)-1]
			want := map[string]domain.RefundOutcome{"SUCCESS": domain.RefundSucceeded, "ABNORMAL": domain.RefundRefused, "CLOSED": domain.RefundRefused}[status]
			if n.RefundNo != refundReq(p).RefundNo || n.RefundOutcome != want || n.EventID != ds[0].Note.ID {
				t.Fatalf("%+v", n)
			}
			// Asking again with the same number answers how the refund stands.
			again, err := r.gw.Refund(ctx, p, refundReq(p))
			if err != nil || again.Outcome != want || again.ProviderRef != st.ProviderRef {
				t.Fatalf("%+v %v", again, err)
			}
		})
	}
}

func TestRefundRefusedWithWeChatPaysWords(t *testing.T) {
	r := newRig(t)
	p := r.paid(orderNo, 1998)
	r.sim.RefundRefuse("NOT_ENOUGH", "基本账户余额不足，请充值后重新发起")
	st, err := r.gw.Refund(ctx, p, refundReq(p))
	if err != nil || st.Outcome != domain.RefundRefused || !strings.Contains(st.Reason, "NOT_ENOUGH: 基本账户余额不足") {
		t.Fatalf("%+v %v", st, err)
	}
	unpaid := r.create("2503011200001234123456789021", 100)
	r.sim.RefundRefuse("", "")
	if st, err := r.gw.Refund(ctx, unpaid, refundReq(unpaid)); err != nil || st.Outcome != domain.RefundRefused {
		t.Fatalf("%+v %v", st, err)
	}
	if r.sim.PaidOut(string(orderNo)) != 0 {
		t.Fatal("paid out")
	}
}

func TestRefundTimeoutThenRetryPaysOutOnce(t *testing.T) {
	r := newRig(t)
	p := r.paid(orderNo, 1998)
	r.sim.RefundAtOnce(true)
	r.sim.LoseReplies(1)
	if _, err := r.gw.Refund(ctx, p, refundReq(p)); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("%v", err)
	}
	r.sim.RefundOutage(true)
	if _, err := r.gw.Refund(ctx, p, refundReq(p)); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("%v", err)
	}
	r.sim.RefundOutage(false)
	st, err := r.gw.Refund(ctx, p, refundReq(p))
	if err != nil || st.Outcome != domain.RefundSucceeded {
		t.Fatalf("%+v %v", st, err)
	}
	if n := len(r.sim.Refunds()); n != 1 || r.sim.PaidOut(string(orderNo)) != 1998 {
		t.Fatalf("%d refunds, %d paid out", n, r.sim.PaidOut(string(orderNo)))
	}
}

func TestNewRefusesMissingAndWeakKeys(t *testing.T) {
	r := newRig(t)
	for name, edit := range map[string]func(*wechatpay.Config){
		"no mchid":       func(c *wechatpay.Config) { c.MchID = "" },
		"no appid":       func(c *wechatpay.Config) { c.AppID = "" },
		"no serial":      func(c *wechatpay.Config) { c.MerchantSerial = "" },
		"no private key": func(c *wechatpay.Config) { c.MerchantPrivateKeyPEM = "" },
		"garbage key": func(c *wechatpay.Config) {
			c.MerchantPrivateKeyPEM = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"
		},
		"no v3 key":          func(c *wechatpay.Config) { c.APIv3Key = "" },
		"short v3 key":       func(c *wechatpay.Config) { c.APIv3Key = "abc" },
		"repeated v3 key":    func(c *wechatpay.Config) { c.APIv3Key = strings.Repeat("a", 32) },
		"placeholder v3 key": func(c *wechatpay.Config) { c.APIv3Key = "YourAPIv3Key0123456789abcdefghij" },
		"no platform key":    func(c *wechatpay.Config) { c.PlatformCertificatesPEM, c.PublicKeyID, c.PublicKeyPEM = nil, "", "" },
		"bad key id":         func(c *wechatpay.Config) { c.PublicKeyID = "F5765756002FDD77" },
		"key id without key": func(c *wechatpay.Config) { c.PublicKeyPEM = "" },
		"bad certificate":    func(c *wechatpay.Config) { c.PlatformCertificatesPEM = []string{"nope"} },
		"refund notify http": func(c *wechatpay.Config) { c.RefundNotifyURL = "http://shop.example/n" },
		"clear base URL":     func(c *wechatpay.Config) { c.BaseURL = "http://api.mch.weixin.qq.com" },
	} {
		c := r.cfg
		edit(&c)
		if _, err := wechatpay.New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSecretsArePrintedRedacted(t *testing.T) {
	r := newRig(t)
	var sb strings.Builder
	logger := slog.New(slog.NewTextHandler(&sb, nil))
	logger.Info("cfg", "cfg", r.cfg, "gw", r.gw)
	out := sb.String() + fmt.Sprintf("%v %+v %#v %s %v", r.cfg, r.cfg, r.cfg, r.gw, *r.gw)
	if strings.Contains(out, r.cfg.APIv3Key) || strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, "MII") {
		t.Fatalf("a secret leaked: %s", out)
	}
	if !strings.Contains(out, "[REDACTED]") {
		t.Fatal(out)
	}
}

// signedAt signs body with the platform certificate's key at t, as WeChat Pay does.
func signedAt(r *rig, t time.Time, body []byte) (http.Header, []byte) {
	ts, nonce := strconv.FormatInt(t.Unix(), 10), "n0nce0123456789abcdefghijklmnopq"
	h := http.Header{}
	h.Set(wechatpay.HeaderTimestamp, ts)
	h.Set(wechatpay.HeaderNonce, nonce)
	h.Set(wechatpay.HeaderSerial, r.sim.CertificateSerial())
	h.Set(wechatpay.HeaderSignature, wechatsim.Sign(testKeys(r.t).platform, ts, nonce, body))
	return h, body
}
