package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
	"cardshop/domain"
)

var tokenShown = regexp.MustCompile(`id="new-token">([^<]+)<`)

// TestOperatorsScreen: an admin creates an operator and sees its token on that answer only
// (never on the list, never in the audit log), changes its role, rotates its token (the old
// one stops working), disables it (its session ends) and enables it; the last enabled admin
// cannot demote or disable itself; a non-admin cannot open the screen.
func TestOperatorsScreen(t *testing.T) {
	h := newHarness(t, 0)
	boss := h.login(h.operator("boss", domain.RoleAdmin))
	clerk := h.login(h.operator("clerk", domain.RoleOperator))
	wantStatus(t, clerk.get("/console/operators"), 403)

	r := boss.post("/console/operators", url.Values{"name": {"otto"}, "role": {"viewer"}})
	wantStatus(t, r, 200)
	m := tokenShown.FindStringSubmatch(r.body)
	if m == nil || !strings.HasPrefix(m[1], "otto.") {
		t.Fatalf("the creation's answer shows no token: %s", r.body)
	}
	token := m[1]
	list := boss.get("/console/operators")
	wantStatus(t, list, 200)
	if strings.Contains(list.body, token) || !strings.Contains(list.body, `id="op-otto"`) {
		t.Fatal("the list shows the token, or not the operator")
	}
	otto := h.login(token)
	wantStatus(t, otto.get("/console/orders"), 200)

	wantStatus(t, boss.post("/console/operators/otto/role", url.Values{"role": {"operator"}}), 200)
	if o, err := h.shop.Admin.Operator(context.Background(), "otto"); err != nil || o.Role != domain.RoleOperator {
		t.Fatalf("role not changed: %+v, %v", o, err)
	}
	h.clock.Advance(time.Second) // a session issued before the rotation, on the shop's clock
	r = boss.post("/console/operators/otto/rotate", nil)
	wantStatus(t, r, 200)
	m = tokenShown.FindStringSubmatch(r.body)
	if m == nil || m[1] == token {
		t.Fatal("the rotation's answer shows no new token")
	}
	wantLoginRedirect(t, otto.get("/console/orders")) // the old session ended with the old token
	otto = h.login(m[1])

	wantStatus(t, boss.post("/console/operators/otto/disable", nil), 200)
	wantLoginRedirect(t, otto.get("/console/orders"))
	if r := h.postForm("/console/login", url.Values{"token": {m[1]}}, ""); r.status == 303 {
		t.Fatal("a disabled operator logged in")
	}
	wantStatus(t, boss.post("/console/operators/otto/enable", nil), 200)
	h.login(m[1])

	r = boss.post("/console/operators/boss/disable", nil)
	wantStatus(t, r, 409)
	if !strings.Contains(r.body, "The last enabled admin cannot be demoted") {
		t.Fatalf("no last-admin message: %s", r.body)
	}
	wantStatus(t, boss.post("/console/operators/boss/role", url.Values{"role": {"viewer"}}), 409)
	wantStatus(t, boss.post("/console/operators", url.Values{"name": {"Bad Name"}, "role": {"viewer"}}), 400)

	for _, e := range h.audit() {
		if strings.Contains(e.Params, token) || strings.Contains(e.Params, m[1]) {
			t.Fatalf("a token in the audit log: %+v", e)
		}
	}
	zh := boss.h.do("GET", "/console/operators", nil, "Cookie", boss.cookie, "Accept-Language", "zh-CN")
	if !strings.Contains(zh.body, "新建操作员") {
		t.Fatal("the Chinese page is not in Chinese")
	}
}

// pendingOrder places an order through the API and leaves it unpaid.
func (h *harness) pendingOrder(p domain.Product, buyer domain.BuyerID, key string) string {
	h.t.Helper()
	tok, _, err := h.tokens.Issue(buyer, h.clock.Now(), time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	r := h.do("POST", "/api/order", strings.NewReader(fmt.Sprintf(`{"product_id":%d,"qty":1}`, p.ID())),
		"Content-Type", "application/json", "Authorization", "Bearer "+tok, httpapi.HeaderIdempotencyKey, key)
	wantStatus(h.t, r, 201)
	var o struct {
		OrderNo string `json:"order_no"`
	}
	if err := json.Unmarshal([]byte(r.body), &o); err != nil {
		h.t.Fatal(err)
	}
	return o.OrderNo
}

// TestManualPaymentPage: the provider (not configured here) cannot confirm, so an operator is
// refused and an admin's override pays the order; the reference is then refused for another
// order; the order's page lists the confirmation and offers no second one.
func TestManualPaymentPage(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1000)
	if _, err := h.shop.Catalogue.ImportCodes(context.Background(), p.ID(), strings.NewReader("MC-1\nMC-2\nMC-3\n")); err != nil {
		t.Fatal(err)
	}
	a := h.pendingOrder(p, "alice", "key-alice-01")
	b := h.pendingOrder(p, "bob", "key-bob-0001")
	clerk := h.login(h.operator("clerk", domain.RoleOperator))
	boss := h.login(h.operator("boss", domain.RoleAdmin))

	page := clerk.get("/console/orders/" + a)
	wantStatus(t, page, 200)
	if !strings.Contains(page.body, "/confirm-payment") || strings.Contains(page.body, "/fulfil\"") {
		t.Fatal("a PENDING order's page lacks the confirmation's link, or offers a fulfil")
	}
	form := clerk.get("/console/orders/" + a + "/confirm-payment")
	wantStatus(t, form, 200)
	if strings.Contains(form.body, `name="override"`) {
		t.Fatal("an operator is offered the override")
	}
	send := url.Values{"provider": {"epay"}, "reference": {"BANK-77"}, "note": {"screenshot"}}
	r := clerk.post("/console/orders/"+a+"/confirm-payment", send)
	wantStatus(t, r, 409)
	if !strings.Contains(r.body, "The provider does not confirm this payment") {
		t.Fatalf("no refusal: %s", r.body)
	}
	send.Set("override", "seen on the bank statement")
	wantStatus(t, clerk.post("/console/orders/"+a+"/confirm-payment", send), 403)
	r = boss.post("/console/orders/"+a+"/confirm-payment", send)
	wantStatus(t, r, 200)
	if h.orderStatus(a) != domain.StatusPaid || !strings.Contains(r.body, "BANK-77") || strings.Contains(r.body, "/confirm-payment\"") {
		t.Fatalf("after the override: %s", h.orderStatus(a))
	}
	// The PAID order's page: the buyer, the product's name, the payment at the provider with its
	// reference; a refund offered, no fulfil. The PENDING order's page offers no refund.
	paid := boss.get("/console/orders/" + a)
	wantStatus(t, paid, 200)
	for _, want := range []string{`<dd class="ref">alice</dd>`, "<dd>Gift card</dd>", "Payments at providers",
		`<td class="ref" data-label="Reference">BANK-77</td>`, "/console/orders/" + a + `/refund"`} {
		if !strings.Contains(paid.body, want) {
			t.Errorf("the PAID order's page lacks %q", want)
		}
	}
	if strings.Contains(paid.body, `/fulfil"`) {
		t.Error("a PAID order's page offers a fulfil")
	}
	if pending := boss.get("/console/orders/" + b); strings.Contains(pending.body, `/refund"`) || !strings.Contains(pending.body, "<dd>Gift card</dd>") {
		t.Error("a PENDING order's page offers a refund, or lacks its product's name")
	}
	r = boss.post("/console/orders/"+b+"/confirm-payment", send)
	wantStatus(t, r, 409)
	if !strings.Contains(r.body, "already paid another order") || h.orderStatus(b) != domain.StatusPending {
		t.Fatalf("the duplicate reference: %s", r.body)
	}
	// The search finds the order by its reference, and both by the start of their numbers.
	found := boss.get("/console/orders?ref=BANK-77")
	wantStatus(t, found, 200)
	if !strings.Contains(found.body, "/console/orders/"+a+`"`) || strings.Contains(found.body, "/console/orders/"+b+`"`) {
		t.Fatal("the search by reference does not list exactly the confirmed order")
	}
	common := 0
	for common < len(a) && common < len(b) && a[common] == b[common] {
		common++
	}
	found = boss.get("/console/orders?no=" + a[:common])
	wantStatus(t, found, 200)
	if !strings.Contains(found.body, "/console/orders/"+a+`"`) || !strings.Contains(found.body, "/console/orders/"+b+`"`) {
		t.Fatalf("the search by the numbers' common start %q lists not both", a[:common])
	}
	if r := boss.get("/console/orders?no=" + a); r.status != 303 {
		t.Fatalf("a whole number: %d, want a redirect to its order", r.status)
	}
	// The refund's confirmation says where the code and the money would go.
	rc := boss.get("/console/orders/" + a + "/refund")
	wantStatus(t, rc, 200)
	for _, want := range []string{"its 1 code was never shown, so it will be recycled", "With “Void”: 1 code voided.",
		"cardshop asks no provider for money"} {
		if !strings.Contains(rc.body, want) {
			t.Errorf("the refund's confirmation lacks %q", want)
		}
	}
	n := 0
	for _, e := range h.audit() {
		if e.Action == "order.confirm_payment" {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d confirmations audited, want 4", n)
	}
}
