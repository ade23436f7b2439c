package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"cardshop/domain"
)

type voidJSON struct {
	Voided      int    `json:"voided"`
	NotFound    int    `json:"not_found"`
	NotVoidable int    `json:"not_voidable"`
	Ref         string `json:"ref"`
}

func voidBody(reason string, codes ...string) string {
	b, _ := json.Marshal(map[string]any{"codes": codes, "reason": reason})
	return string(b)
}

// TestAdminVoidCodes: an admin voids codes of a frozen product and hears counts only; a
// product on sale, a void over the free stock, bad input and a lower role are refused and
// change nothing; the audit entry holds the reason and the counts, never a code.
func TestAdminVoidCodes(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.createProduct(2, 100, 5)
	mine := codes("LEAK", 6)
	h.importCodes(1, mine...)
	h.importCodes(2, "OTHER-000001")
	pending := h.placeOrder(h.token("buyer-1"), "key-void-0001", 1, 2) // 4 free
	target := "/admin/products/1/codes/void"

	wantError(t, h.admin("POST", target, voidBody("leak", mine[0])), 409, "product_not_frozen")
	wantStatus(t, h.admin("POST", "/admin/products/1/freeze", `{"reason":"leaked batch"}`), 200)

	otto := h.newOperator("otto", "operator")
	wantError(t, h.as(otto, "POST", target, voidBody("leak", mine[0])), 403, "forbidden")

	for _, tc := range []struct{ name, body, field string }{
		{"no reason", voidBody("", mine[0]), "reason"},
		{"a reason too long", voidBody(strings.Repeat("x", 501), mine[0]), "reason"},
		{"no codes", voidBody("leak"), "codes"},
		{"an empty code", voidBody("leak", mine[0], " "), "codes[1]"},
		{"a code with a space", voidBody("leak", "SECRET CODE"), "codes[0]"},
		{"too many codes", voidBody("leak", codes("X", 10001)...), "codes"},
		{"an unknown field", `{"codes":["A"],"reason":"r","force":true}`, ""},
		{"not JSON", `codes`, ""},
	} {
		r := h.admin("POST", target, tc.body)
		e := wantError(t, r, 400, "invalid_request")
		if tc.field != "" && e.Field != tc.field {
			t.Errorf("%s: field %q, want %q (%s)", tc.name, e.Field, tc.field, r.body)
		}
		if strings.Contains(string(r.body), "SECRET") {
			t.Errorf("%s: the answer echoes a code: %s", tc.name, r.body)
		}
	}
	r := h.admin("POST", target, voidBody("leak", mine...))
	e := wantError(t, r, 409, "void_exceeds_free_stock")
	if !strings.Contains(e.Message, "6 of the codes are voidable, 4 units are free") {
		t.Fatalf("the refusal does not say the numbers: %s", r.body)
	}
	if c := h.cardCounts(1); c[domain.CardUnsold] != 6 || h.levels(1).Stock != 4 {
		t.Fatalf("refused voids changed the pool %v or the gate %+v", c, h.levels(1))
	}

	r = h.admin("POST", target, voidBody("leaked on a forum", mine[2], mine[3], "OTHER-000001", "NEVER-SEEN", mine[2]))
	wantStatus(t, r, 200)
	var res voidJSON
	r.decode(t, &res)
	if res.Voided != 2 || res.NotFound != 1 || res.NotVoidable != 2 || !strings.HasPrefix(res.Ref, "void:") {
		t.Fatalf("void answered %+v", res)
	}
	if strings.Contains(string(r.body), "LEAK") || strings.Contains(string(r.body), "OTHER") {
		t.Fatalf("the answer holds a code: %s", r.body)
	}
	if c := h.cardCounts(1); c[domain.CardVoid] != 2 || c[domain.CardUnsold] != 4 || h.levels(1).Stock != 2 {
		t.Fatalf("after the void: pool %v, gate %+v", c, h.levels(1))
	}
	// The order placed before the freeze is still paid with codes.
	h.pay(pending)
	if o := h.adminOrder(pending.OrderNo); o.Status != "PAID" {
		t.Fatalf("the pending order is %s", o.Status)
	}
	rec := h.admin("GET", "/admin/products/1/reconcile", "")
	wantStatus(t, rec, 200)
	if !strings.Contains(string(rec.body), `"differences":0`) {
		t.Fatalf("reconcile after the void: %s", rec.body)
	}

	audit := h.admin("GET", "/admin/audit?action=codes.void", "")
	wantStatus(t, audit, 200)
	for _, c := range append(mine, "OTHER-000001", "NEVER-SEEN", "SECRET") {
		if strings.Contains(string(audit.body), c) {
			t.Fatalf("the audit log holds a code: %s", audit.body)
		}
	}
	var page auditPageJSON
	audit.decode(t, &page)
	if len(page.Entries) == 0 {
		t.Fatal("no codes.void entry")
	}
	last := page.Entries[0]
	if last.Result != "200" || !strings.Contains(last.Params, `"reason":"leaked on a forum"`) ||
		!strings.Contains(last.Params, `"voided":2`) || !strings.Contains(last.Params, `"not_found":1`) {
		t.Fatalf("the audit entry of the void: %+v", last)
	}
}
