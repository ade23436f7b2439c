package httpapi_test

import (
	"strings"
	"testing"
)

// TestManualPaymentRoute: the dev provider does not know the reference (pending), so an
// operator is refused with provider_unpaid, an operator's override is forbidden, an admin's
// override pays the order, and the reference is then refused for another order; every
// attempt is audited.
func TestManualPaymentRoute(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 500, 2)
	h.importCodes(1, codes("MP", 4)...)
	clerk := h.newOperator("clerk", "operator")
	boss := h.newOperator("boss", "admin")
	viewer := h.newOperator("vera", "viewer")
	a := h.placeOrder(h.token("alice"), "key-alice-1", 1, 1)
	b := h.placeOrder(h.token("bob"), "key-bob-01", 1, 1)
	path := "/admin/orders/" + a.OrderNo + "/manual-payment"
	body := `{"provider":"dev","reference":"BANK-1","note":"screenshot"}`

	wantError(t, h.as(viewer, "POST", path, body), 403, "forbidden")
	wantError(t, h.as(clerk, "POST", path, body), 409, "provider_unpaid")
	wantError(t, h.as(clerk, "POST", path, `{"provider":"dev","reference":"BANK-1","override":"trust me"}`), 403, "forbidden")
	wantError(t, h.as(clerk, "POST", path, `{"provider":"dev","reference":""}`), 400, "invalid_request")
	r := h.as(boss, "POST", path, `{"provider":"dev","reference":"BANK-1","note":"screenshot","override":"seen on the bank statement"}`)
	wantStatus(t, r, 200)
	var got struct {
		Order      orderJSON `json:"order"`
		Provider   string    `json:"provider"`
		Reference  string    `json:"reference"`
		Queried    string    `json:"queried"`
		Overridden bool      `json:"overridden"`
	}
	r.decode(t, &got)
	if got.Order.Status != "PAID" || got.Reference != "BANK-1" || got.Provider != "dev" || got.Queried != "pending" || !got.Overridden {
		t.Fatalf("confirmed: %+v", got)
	}
	wantError(t, h.as(boss, "POST", "/admin/orders/"+b.OrderNo+"/manual-payment",
		`{"provider":"dev","reference":"BANK-1","override":"again"}`), 409, "reference_used")
	if h.adminOrder(b.OrderNo).Status != "PENDING" {
		t.Fatal("a refused confirmation paid the order")
	}
	audit := h.admin("GET", "/admin/audit?action=order.confirm_payment", "")
	wantStatus(t, audit, 200)
	if n := strings.Count(string(audit.body), `"action":"order.confirm_payment"`); n != 6 {
		t.Fatalf("%d audited confirmations, want 6 (the viewer's refusal too): %s", n, audit.body)
	}
}

// TestDisableOperatorRoute: a disabled operator's token is refused until it is enabled; the
// last admin cannot be disabled, demoted or removed.
func TestDisableOperatorRoute(t *testing.T) {
	h := newHarness(t)
	boss := h.newOperator("boss", "admin")
	clerk := h.newOperator("clerk", "operator")
	wantStatus(t, h.as(boss, "POST", "/admin/operators/clerk/disable", ""), 200)
	wantError(t, h.as(clerk, "GET", "/admin/whoami", ""), 401, "unauthorized")
	wantStatus(t, h.as(boss, "POST", "/admin/operators/clerk/enable", ""), 200)
	if h.whoami(clerk).Name != "clerk" {
		t.Fatal("enabled operator refused")
	}
	wantError(t, h.as(boss, "POST", "/admin/operators/boss/disable", ""), 409, "last_admin")
	wantError(t, h.as(boss, "PATCH", "/admin/operators/boss", `{"role":"viewer"}`), 409, "last_admin")
	wantError(t, h.as(boss, "DELETE", "/admin/operators/boss", ""), 409, "last_admin")
	wantError(t, h.as(boss, "POST", "/admin/operators/nobody/disable", ""), 404, "operator_not_found")
}

// TestOrderSearchSupportFilters: the admin search finds an order by the start of its number
// and by a manual confirmation's reference; a malformed prefix is refused.
func TestOrderSearchSupportFilters(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 500, 2)
	h.importCodes(1, codes("SF", 2)...)
	a := h.placeOrder(h.token("alice"), "key-alice-1", 1, 1)
	wantStatus(t, h.admin("POST", "/admin/orders/"+a.OrderNo+"/manual-payment",
		`{"provider":"dev","reference":"SF-REF-1","override":"seen"}`), 200)
	for _, q := range []string{"no_prefix=" + a.OrderNo[:10], "provider_ref=SF-REF-1"} {
		r := h.admin("GET", "/admin/orders?"+q, "")
		wantStatus(t, r, 200)
		if !strings.Contains(string(r.body), a.OrderNo) {
			t.Fatalf("%s does not find %s: %s", q, a.OrderNo, r.body)
		}
	}
	r := h.admin("GET", "/admin/orders?provider_ref=SF-REF-2", "")
	wantStatus(t, r, 200)
	if strings.Contains(string(r.body), a.OrderNo) {
		t.Fatal("an unknown reference finds the order")
	}
	wantError(t, h.admin("GET", "/admin/orders?no_prefix=a%20b", ""), 400, "invalid_request")
}
