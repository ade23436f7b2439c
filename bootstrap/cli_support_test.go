package bootstrap_test

import (
	"strings"
	"testing"

	"cardshop/bootstrap"
)

// TestSupportCommands: confirm-payment is refused when the dev provider does not know the
// reference, goes through with an admin's override, and refuses the reference for another
// order; operator-disable refuses the operator's token until operator-enable; the last admin
// cannot be disabled.
func TestSupportCommands(t *testing.T) {
	c := startService(t, func(cfg *bootstrap.Config) { cfg.DevPayments = true })
	url := c.base
	c.want(201, "POST", "/admin/products", adminToken, `{"id":41,"name":"CLI 41","price":700,"max_per_order":1}`, nil)
	c.want(200, "POST", "/admin/products/41/codes", adminToken, "CLI-41-1\nCLI-41-2\n", nil)
	var buyer struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"cli-buyer"}`, &buyer)
	var a, b struct {
		OrderNo string `json:"order_no"`
	}
	c.want(201, "POST", "/api/order", buyer.Token, `{"product_id":41,"qty":1}`, &a, "Idempotency-Key", "cli-sup-a1")
	c.want(201, "POST", "/api/order", buyer.Token, `{"product_id":41,"qty":1}`, &b, "Idempotency-Key", "cli-sup-b1")

	code, out, errOut := as(t, adminToken, "operator-add", "-url", url, "-name", "olivia", "-role", "operator")
	olivia := wantOperatorToken(t, "operator-add olivia", code, out, errOut, "olivia", "operator")
	code, _, errOut = as(t, olivia, "confirm-payment", "-url", url, "-order", a.OrderNo, "-provider", "dev", "-reference", "CLI-REF-1")
	if code != 1 || !strings.Contains(errOut, "409 provider_unpaid") {
		t.Fatalf("an unconfirmed payment: exit %d, %q", code, errOut)
	}
	code, out, errOut = as(t, adminToken, "confirm-payment", "-url", url, "-order", a.OrderNo, "-provider", "dev",
		"-reference", "CLI-REF-1", "-override", "the money is on the statement")
	if code != 0 || !strings.Contains(out, a.OrderNo+" PAID") || !strings.Contains(out, "overridden") {
		t.Fatalf("an admin's override: exit %d, %q %q", code, out, errOut)
	}
	code, _, errOut = as(t, adminToken, "confirm-payment", "-url", url, "-order", b.OrderNo, "-provider", "dev",
		"-reference", "CLI-REF-1", "-override", "again")
	if code != 1 || !strings.Contains(errOut, "409 reference_used") {
		t.Fatalf("a used reference: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCtl("confirm-payment", "-url", url, "-order", a.OrderNo); code != 2 {
		t.Fatalf("missing flags: exit %d, want 2", code)
	}

	code, _, errOut = as(t, adminToken, "operator-disable", "-url", url, "-name", "olivia")
	if code != 0 {
		t.Fatalf("operator-disable: exit %d, %q", code, errOut)
	}
	if code, _, errOut := as(t, olivia, "whoami", "-url", url); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("a disabled operator's whoami: exit %d, %q", code, errOut)
	}
	if code, _, errOut := as(t, adminToken, "operator-enable", "-url", url, "-name", "olivia"); code != 0 {
		t.Fatalf("operator-enable: exit %d, %q", code, errOut)
	}
	if code, out, _ := as(t, olivia, "whoami", "-url", url); code != 0 || !strings.Contains(out, "olivia") {
		t.Fatalf("an enabled operator's whoami: exit %d, %q", code, out)
	}
	code, out, errOut = as(t, adminToken, "operator-add", "-url", url, "-name", "ada", "-role", "admin")
	wantOperatorToken(t, "operator-add ada", code, out, errOut, "ada", "admin")
	if code, _, errOut := as(t, adminToken, "operator-disable", "-url", url, "-name", "ada"); code != 1 || !strings.Contains(errOut, "409 last_admin") {
		t.Fatalf("disable the last admin: exit %d, %q", code, errOut)
	}
}
