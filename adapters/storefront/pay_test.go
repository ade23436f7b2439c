package storefront_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"image/png"
	"net/url"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/alipay"
	"cardshop/adapters/lab/paysim/alipaysim"
	"cardshop/adapters/paysig"
	"cardshop/application"
	"cardshop/domain"
)

// withAlipay adds Alipay in precreate mode (a QR code to scan) against its simulator.
func withAlipay(t *testing.T) (option, *alipaysim.Sim) {
	t.Helper()
	mk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var clock domain.Clock // the harness's, once it is made
	sim, err := alipaysim.New(alipaysim.Config{MerchantKey: &mk.PublicKey, Now: func() time.Time { return clock.Now() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	der, err := x509.MarshalPKCS8PrivateKey(mk)
	if err != nil {
		t.Fatal(err)
	}
	cfg := alipay.Config{GatewayURL: sim.URL(), AppID: sim.AppID(), SellerID: sim.SellerID(),
		PrivateKey:      domain.Secret(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		AlipayPublicKey: sim.PublicKeyPEM(), Method: alipay.MethodPrecreate}
	return option{deps: func(d *application.Deps) {
		cfg.Clock, clock = d.Clock, d.Clock
		g, err := alipay.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		d.Gateways = append(d.Gateways, g)
	}}, sim
}

// TestPayByRedirect: the dev provider's pay URL is a 303 from the pay form.
func TestPayByRedirect(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Redirect", Price: 100}, 2)
	b, no, _ := buy(t, h, p, 1, "redirect@example.com")
	tok := field(t, csrfField, b.get("/orders/"+string(no)).body)
	r := b.post("/orders/"+string(no)+"/pay", url.Values{"csrf": {tok}, "provider": {"dev"}})
	wantStatus(t, r, 303)
	if loc := r.header.Get("Location"); !strings.HasPrefix(loc, shopURL+"/dev/pay/") {
		t.Fatalf("Location %q", loc)
	}
	unknown := b.post("/orders/"+string(no)+"/pay", url.Values{"csrf": {tok}, "provider": {"nope"}})
	wantStatus(t, unknown, 422)
	wantContains(t, unknown, "Choose one of the ways to pay shown.")
}

// TestPayByQRCode: a QR provider's payment is a page with the code drawn here (a PNG only the
// order's browser gets, never stored), the amount and the time left; its status endpoint
// answers with an ETag and 304 while nothing changes, and once paid the page moves on to the
// order page.
func TestPayByQRCode(t *testing.T) {
	opt, sim := withAlipay(t)
	h := newHarness(t, opt)
	p := h.product(application.NewProduct{Name: "扫码商品", Price: 1234}, 2)
	b, no, _ := buy(t, h, p, 1, "qr@example.com")
	base := "/orders/" + string(no)
	tok := field(t, csrfField, b.get(base).body)
	r := b.post(base+"/pay", url.Values{"csrf": {tok}, "provider": {"alipay"}})
	wantStatus(t, r, 303)
	if loc := r.header.Get("Location"); loc != base+"/pay/alipay" {
		t.Fatalf("Location %q", loc)
	}
	page := b.get(base + "/pay/alipay")
	wantStatus(t, page, 200)
	wantContains(t, page, "12.34 CNY", `src="`+base+`/qr.png?provider=alipay"`, `http-equiv="refresh"`,
		`src="/static/shop/follow.js"`, `data-status="`+base+`/status.json"`, "Alipay", "0:15:00")

	img := b.get(base + "/qr.png?provider=alipay")
	wantStatus(t, img, 200)
	if img.header.Get("Content-Type") != "image/png" || img.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("qr.png headers %v", img.header)
	}
	if _, err := png.Decode(bytes.NewReader([]byte(img.body))); err != nil {
		t.Fatalf("qr.png is no PNG: %v", err)
	}
	tr, ok := sim.Trade(string(no))
	if !ok || tr.QRCode == "" {
		t.Fatalf("no precreated trade at the simulator: %+v", tr)
	}
	wantStatus(t, h.browser("en").get(base+"/qr.png?provider=alipay"), 404)

	st := b.get(base + "/status.json")
	wantStatus(t, st, 200)
	var body struct{ Status string }
	if err := json.Unmarshal([]byte(st.body), &body); err != nil || body.Status != "PENDING" {
		t.Fatalf("status.json %s", st)
	}
	etag := st.header.Get("ETag")
	same := b.do("GET", base+"/status.json", nil, "If-None-Match", etag)
	wantStatus(t, same, 304)

	h.pay(no)
	paid := b.do("GET", base+"/status.json", nil, "If-None-Match", etag)
	wantStatus(t, paid, 200)
	if !strings.Contains(paid.body, `"PAID"`) {
		t.Fatalf("status.json after payment %s", paid)
	}
	moved := b.get(base + "/pay/alipay")
	wantStatus(t, moved, 303)
	if loc := moved.header.Get("Location"); loc != base {
		t.Fatalf("Location %q", loc)
	}
	wantStatus(t, b.get(base+"/qr.png?provider=alipay"), 404)
	wantStatus(t, h.browser("en").get(base+"/status.json"), 404)
}

// TestQRPageMovesOnWhenClosedOrFailed: the QR page's status endpoint reports an order that
// expired (CLOSED, closed by the sweeper) or whose payment failed (FAILED, the provider's
// signed notice) as a fresh 200 under the old ETag — not a 304 — so follow.js, which moves on
// to the page's data-next on any status but PENDING, leaves; the QR page itself (its meta
// refresh, without the script) is then a 303 to the order page, which shows the state.
func TestQRPageMovesOnWhenClosedOrFailed(t *testing.T) {
	for _, tc := range []struct {
		state, shown string
		move         func(h *harness, no domain.OrderNo)
	}{
		{"CLOSED", "Closed (not paid in time)", func(h *harness, no domain.OrderNo) {
			h.clock.Advance(application.DefaultConfig().OrderTimeout + time.Minute)
			if _, err := h.shop.Sales.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
		{"FAILED", "Payment failed", func(h *harness, no domain.OrderNo) {
			v, err := h.shop.Sales.AdminOrder(context.Background(), no)
			if err != nil {
				t.Fatal(err)
			}
			body, ts, sig, err := h.signer.SignedBody(paysig.Notice{OrderNo: string(no), Status: "failed",
				Amount: int64(v.Order.Amount()), PaymentRef: "pay-" + string(no)}, h.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, h.do("POST", "/api/payments/callback", bytes.NewReader(body), "Content-Type", "application/json",
				paysig.HeaderTimestamp, ts, paysig.HeaderSignature, sig), 200)
		}},
	} {
		t.Run(tc.state, func(t *testing.T) {
			opt, _ := withAlipay(t)
			h := newHarness(t, opt)
			p := h.product(application.NewProduct{Name: "QR " + tc.state, Price: 500}, 2)
			b, no, _ := buy(t, h, p, 1, strings.ToLower(tc.state)+"@example.com")
			base := "/orders/" + string(no)
			tok := field(t, csrfField, b.get(base).body)
			wantStatus(t, b.post(base+"/pay", url.Values{"csrf": {tok}, "provider": {"alipay"}}), 303)
			page := b.get(base + "/pay/alipay")
			wantStatus(t, page, 200)
			// What follow.js reads: where to ask, and where to go once the order moved on.
			wantContains(t, page, `data-status="`+base+`/status.json"`, `data-next="`+base+`"`, `http-equiv="refresh"`)
			st := b.get(base + "/status.json")
			wantStatus(t, st, 200)
			etag := st.header.Get("ETag")
			wantStatus(t, b.do("GET", base+"/status.json", nil, "If-None-Match", etag), 304)

			tc.move(h, no)
			moved := b.do("GET", base+"/status.json", nil, "If-None-Match", etag)
			wantStatus(t, moved, 200)
			var body struct{ Status string }
			if err := json.Unmarshal([]byte(moved.body), &body); err != nil || body.Status != tc.state {
				t.Fatalf("status.json once %s: %s", tc.state, moved)
			}
			if got := moved.header.Get("ETag"); got == etag || got == "" {
				t.Fatalf("status.json once %s: ETag %q, want a new one (was %q)", tc.state, got, etag)
			}
			wantStatus(t, b.do("GET", base+"/status.json", nil, "If-None-Match", moved.header.Get("ETag")), 304)
			again := b.get(base + "/pay/alipay")
			wantStatus(t, again, 303)
			if loc := again.header.Get("Location"); loc != base {
				t.Fatalf("the QR page once %s sends to %q, want %s", tc.state, loc, base)
			}
			order := b.get(base)
			wantStatus(t, order, 200)
			wantContains(t, order, tc.shown)
			if strings.Contains(order.body, `class="pay"`) {
				t.Errorf("the order page once %s still offers to pay", tc.state)
			}
			wantStatus(t, b.get(base+"/qr.png?provider=alipay"), 404)
		})
	}
}
