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
