package httpapi_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

type paymentJSON struct {
	OrderNo     string    `json:"order_no"`
	Provider    string    `json:"provider"`
	Status      string    `json:"status"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	PayURL      string    `json:"pay_url"`
	QRCode      string    `json:"qr_code"`
	ProviderRef string    `json:"provider_ref"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func (h *harness) createPayment(tok, no, body string) resp {
	h.t.Helper()
	return h.do("POST", "/api/orders/"+no+"/payment", strings.NewReader(body),
		"Authorization", bearer(tok), "Content-Type", "application/json")
}

// devLink splits a dev provider's pay URL into the path the harness serves and its query.
func devLink(t *testing.T, payURL string) (string, url.Values) {
	t.Helper()
	u, err := url.Parse(payURL)
	if err != nil || !strings.HasPrefix(payURL, shopURL+"/dev/pay/") {
		t.Fatalf("pay_url %q is not a dev pay link of %s", payURL, shopURL)
	}
	return u.Path + "?" + u.RawQuery, u.Query()
}

// A buyer pays an order in a browser with the dev provider: create the payment, open its page,
// press Pay; the order is PAID with its codes and the notification is in the log.
func TestPayWithTheDevProvider(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 250, 5)
	h.importCodes(1, codes("DEV", 5)...)
	tok := h.token("alice")
	o := h.placeOrder(tok, "key-dev00001", 1, 2)

	r := h.createPayment(tok, o.OrderNo, `{"provider":"dev"}`)
	wantStatus(t, r, 201)
	var p paymentJSON
	r.decode(t, &p)
	if p.Status != "OPEN" || p.Amount != o.Amount || p.Currency != "CNY" || p.Provider != "dev" || p.PayURL == "" {
		t.Fatalf("payment %+v", p)
	}
	again := h.createPayment(tok, o.OrderNo, `{"provider":"dev"}`)
	wantStatus(t, again, 200)
	var p2 paymentJSON
	again.decode(t, &p2)
	if p2.PayURL != p.PayURL || p2.ProviderRef != p.ProviderRef {
		t.Fatalf("the second create answered %+v, want the first payment %+v", p2, p)
	}

	path, link := devLink(t, p.PayURL)
	page := h.do("GET", path, nil)
	wantStatus(t, page, 200)
	if body := string(page.body); !strings.Contains(body, "5.00") || !strings.Contains(body, o.OrderNo) {
		t.Fatalf("pay page shows neither the amount 5.00 nor the order:\n%.800s", body)
	}
	form := url.Values{}
	for k, v := range link {
		form[k] = v
	}
	form.Set("choice", "pay")
	paid := h.do("POST", "/dev/pay/"+o.OrderNo+"/confirm", strings.NewReader(form.Encode()),
		"Content-Type", "application/x-www-form-urlencoded")
	wantStatus(t, paid, 200)

	got := h.getOrder(tok, o.OrderNo)
	wantStatus(t, got, 200)
	var view orderJSON
	got.decode(t, &view)
	if view.Status != "PAID" || len(view.Codes) != 2 {
		t.Fatalf("order after Pay: %s with %d codes, want PAID with 2", view.Status, len(view.Codes))
	}
	log := h.admin("GET", "/admin/payments/notifications?order_no="+o.OrderNo, "")
	wantStatus(t, log, 200)
	if b := string(log.body); !strings.Contains(b, `"result":"paid"`) || !strings.Contains(b, `"verified":true`) {
		t.Fatalf("notification log: %s", b)
	}
	ps := h.admin("GET", "/admin/orders/"+o.OrderNo+"/payments", "")
	wantStatus(t, ps, 200)
	if !strings.Contains(string(ps.body), `"status":"PAID"`) {
		t.Fatalf("payments: %s", ps.body)
	}
	// Pressing Pay again sends the same notification: a duplicate, nothing changes.
	wantStatus(t, h.do("POST", "/dev/pay/"+o.OrderNo+"/confirm", strings.NewReader(form.Encode()),
		"Content-Type", "application/x-www-form-urlencoded"), 200)
	if c := h.cardCounts(1); c[2] != 2 { // SOLD
		t.Fatalf("codes by status %v after a duplicate, want 2 SOLD", c)
	}
}

// Fail on the dev page fails the order and returns its stock.
func TestFailWithTheDevProvider(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 250, 5)
	h.importCodes(1, codes("DEV", 5)...)
	tok := h.token("alice")
	o := h.placeOrder(tok, "key-dev00002", 1, 1)
	r := h.createPayment(tok, o.OrderNo, `{"provider":"dev"}`)
	wantStatus(t, r, 201)
	var p paymentJSON
	r.decode(t, &p)
	_, link := devLink(t, p.PayURL)
	link.Set("choice", "fail")
	wantStatus(t, h.do("POST", "/dev/pay/"+o.OrderNo+"/confirm", strings.NewReader(link.Encode()),
		"Content-Type", "application/x-www-form-urlencoded"), 200)
	if got := h.adminOrder(o.OrderNo); got.Status != "FAILED" {
		t.Fatalf("order after Fail: %s, want FAILED", got.Status)
	}
	if lv := h.levels(1); lv.Stock != 5 || lv.Sold != 0 {
		t.Fatalf("gate %+v after a failed payment, want the stock back", lv)
	}
}

func TestCreatePaymentRefusals(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 250, 5)
	h.importCodes(1, codes("DEV", 5)...)
	alice, bob := h.token("alice"), h.token("bob")
	o := h.placeOrder(alice, "key-dev00003", 1, 1)

	wantError(t, h.createPayment(alice, o.OrderNo, `{"provider":"nope"}`), 404, "provider_not_found")
	wantError(t, h.createPayment(alice, o.OrderNo, `{"provider":"Not A Name"}`), 400, "invalid_request")
	wantError(t, h.createPayment(alice, o.OrderNo, `{"provider":"dev","provider":"dev"}`), 400, "invalid_request")
	wantError(t, h.createPayment(bob, o.OrderNo, `{"provider":"dev"}`), 404, "order_not_found")
	wantError(t, h.createPayment(alice, "2503011200000000000000000009", `{"provider":"dev"}`), 404, "order_not_found")
	wantError(t, h.do("POST", "/api/orders/"+o.OrderNo+"/payment", strings.NewReader(`{"provider":"dev"}`)), 401, "unauthorized")

	h.clock.Advance(16 * time.Minute)
	if err := h.shop.Sales.CloseExpired(t.Context(), domainOrderNo(o.OrderNo)); err != nil {
		t.Fatal(err)
	}
	wantError(t, h.createPayment(alice, o.OrderNo, `{"provider":"dev"}`), 409, "order_not_payable")
}

// The notify route answers in the provider's own format: forged dev notifications are refused
// with the dev provider's refusal, and logged as one unverified record counting them, which
// ?verified=true leaves out; an unknown provider is 404.
func TestProviderNotifyRoute(t *testing.T) {
	h := newHarness(t)
	wantError(t, h.do("POST", "/api/payments/nope/notify", strings.NewReader(`{}`)), 404, "provider_not_found")
	for range 3 {
		r := h.do("POST", "/api/payments/dev/notify", strings.NewReader(`{"order_no":"2503011200000000000000000009"}`),
			"Content-Type", "application/json", "Devpay-Timestamp", "1740830400", "Devpay-Signature", "v1=00")
		wantStatus(t, r, 400)
	}
	if _, err := h.shop.Payments.PruneNotifications(t.Context()); err != nil { // adds the counts held in memory
		t.Fatal(err)
	}
	list := func(query string) []map[string]any {
		t.Helper()
		r := h.admin("GET", "/admin/payments/notifications"+query, "")
		wantStatus(t, r, 200)
		var out struct {
			Notifications []map[string]any `json:"notifications"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Notifications
	}
	for _, q := range []string{"", "?verified=false"} {
		got := list(q)
		if len(got) != 1 || got[0]["verified"] != false || got[0]["accepted"] != false || got[0]["count"] != 3.0 ||
			got[0]["refused_window"] == nil {
			t.Fatalf("notification log%s after three forgeries: %v, want one unverified record counting 3", q, got)
		}
	}
	if got := list("?verified=true"); len(got) != 0 {
		t.Fatalf("verified notifications after forgeries only: %v", got)
	}
	wantError(t, h.admin("GET", "/admin/payments/notifications?limit=0", ""), 400, "invalid_request")
	wantError(t, h.admin("GET", "/admin/payments/notifications?verified=maybe", ""), 400, "invalid_request")
}

func domainOrderNo(s string) domain.OrderNo { return domain.OrderNo(s) }

// A flood of forged notifications is answered one by one but logged at a limited pace: one
// line for a hundred within the use case's logging period, none per request.
func TestForgedNotificationsAreNotLoggedOneByOne(t *testing.T) {
	h := newHarness(t)
	const sent = 100
	for range sent {
		r := h.do("POST", "/api/payments/dev/notify", strings.NewReader(`{"order_no":"2503011200000000000000000009"}`),
			"Content-Type", "application/json", "Devpay-Timestamp", "1740830400", "Devpay-Signature", "v1=00")
		wantStatus(t, r, 400)
	}
	lines := 0
	for _, line := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(line, "payment notification") {
			lines++
		}
	}
	if lines != 1 {
		t.Fatalf("%d log lines about %d forged notifications, want 1:\n%s", lines, sent, h.logs.String())
	}
}
