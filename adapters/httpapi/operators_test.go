package httpapi_test

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

// as sends a request with an operator's token (or any bearer token) and a JSON body.
func (h *harness) as(token, method, target, body string) resp {
	h.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return h.do(method, target, r, "Authorization", bearer(token), "Content-Type", "application/json")
}

type operatorJSON struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	RotatedAt time.Time `json:"rotated_at"`
	Token     string    `json:"token"`
}

// newOperator creates an operator with the shared admin token and returns its token.
func (h *harness) newOperator(name, role string) string {
	h.t.Helper()
	r := h.admin("POST", "/admin/operators", fmt.Sprintf(`{"name":%q,"role":%q}`, name, role))
	wantStatus(h.t, r, 201)
	var o operatorJSON
	r.decode(h.t, &o)
	if o.Name != name || o.Role != role || !strings.HasPrefix(o.Token, name+".") {
		h.t.Fatalf("created operator %+v", o)
	}
	return o.Token
}

func (h *harness) whoami(token string) identityJSON {
	h.t.Helper()
	r := h.as(token, "GET", "/admin/whoami", "")
	wantStatus(h.t, r, 200)
	var id identityJSON
	r.decode(h.t, &id)
	return id
}

type identityJSON struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// TestOperatorLifecycle: an operator's token works as soon as it is made, a rotation ends the
// old one at once, a role change applies to the next request, a removal ends the token; the
// token is shown only in the answer that made it.
func TestOperatorLifecycle(t *testing.T) {
	h := newHarness(t)
	if id := h.whoami(adminToken); id.Name != "admin-token" || id.Role != "admin" {
		t.Fatalf("the shared admin token is %+v", id)
	}
	vera := h.newOperator("vera", "viewer")
	if id := h.whoami(vera); id.Name != "vera" || id.Role != "viewer" {
		t.Fatalf("whoami = %+v", id)
	}
	list := h.admin("GET", "/admin/operators", "")
	wantStatus(t, list, 200)
	if strings.Contains(string(list.body), vera[len("vera."):]) || !strings.Contains(string(list.body), `"vera"`) {
		t.Fatalf("the list shows a token or misses vera: %s", list.body)
	}

	rot := h.admin("POST", "/admin/operators/vera/rotate", "")
	wantStatus(t, rot, 200)
	var rotated operatorJSON
	rot.decode(t, &rotated)
	if rotated.Token == "" || rotated.Token == vera {
		t.Fatalf("rotation answered %+v", rotated)
	}
	wantError(t, h.as(vera, "GET", "/admin/whoami", ""), 401, "unauthorized")
	vera = rotated.Token

	wantStatus(t, h.admin("PATCH", "/admin/operators/vera", `{"role":"operator"}`), 200)
	if id := h.whoami(vera); id.Role != "operator" {
		t.Fatalf("after the role change: %+v", id)
	}
	wantStatus(t, h.admin("DELETE", "/admin/operators/vera", ""), 204)
	wantError(t, h.as(vera, "GET", "/admin/whoami", ""), 401, "unauthorized")
	wantError(t, h.admin("DELETE", "/admin/operators/vera", ""), 404, "operator_not_found")

	h.newOperator("olga", "operator")
	wantError(t, h.admin("POST", "/admin/operators", `{"name":"olga","role":"admin"}`), 409, "operator_exists")
	for _, bad := range []string{`{"name":"admin-token","role":"admin"}`, `{"name":"Olga","role":"admin"}`,
		`{"name":"ok","role":"root"}`, `{"name":"","role":"viewer"}`} {
		wantStatus(t, h.admin("POST", "/admin/operators", bad), 400)
	}
	for _, forged := range []string{"olga", "olga.", "olga.AAAA", "nobody.AAAA", ".x", adminToken + "x"} {
		wantError(t, h.as(forged, "GET", "/admin/whoami", ""), 401, "unauthorized")
	}
}

// TestEveryAdminRouteChecksTheRole: each admin route refuses a role below its own with 403
// forbidden (changing nothing) and lets its own role and the ones above through.
func TestEveryAdminRouteChecksTheRole(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.importCodes(1, codes("R", 5)...)
	o := h.placeOrder(h.token("buyer-1"), "key-roles-0001", 1, 1)
	h.pay(o)
	tokens := map[string]string{"viewer": h.newOperator("vic", "viewer"), "operator": h.newOperator("otto", "operator"),
		"admin": h.newOperator("ada", "admin")}
	rank := map[string]int{"viewer": 1, "operator": 2, "admin": 3}
	alert, err := h.ledger.Alerts().Raise(t.Context(), domain.Alert{Kind: "roles"}, start)
	if err != nil {
		t.Fatal(err)
	}
	routes := []struct {
		method, path, body, least string
	}{
		{"GET", "/admin/products", "", "viewer"},
		{"GET", "/admin/products/1", "", "viewer"},
		{"GET", "/admin/products/1/reconcile", "", "viewer"},
		{"GET", "/admin/orders?status=PAID", "", "viewer"},
		{"GET", "/admin/orders/" + o.OrderNo + "?codes=false", "", "viewer"},
		{"GET", "/admin/orders/" + o.OrderNo, "", "operator"}, // the codes
		{"GET", "/admin/orders/" + o.OrderNo + "/payments", "", "viewer"},
		{"GET", "/admin/payments/notifications", "", "viewer"},
		{"GET", "/admin/audit", "", "viewer"},
		{"GET", "/admin/whoami", "", "viewer"},
		{"GET", "/admin/alerts", "", "viewer"},
		{"POST", fmt.Sprintf("/admin/alerts/%d/ack", alert), "", "operator"},
		{"POST", "/admin/products", `{"name":"x","price":1,"max_per_order":1}`, "operator"},
		{"PATCH", "/admin/products/1", `{"name":"renamed"}`, "operator"},
		{"POST", "/admin/products/1/codes", "ROLE-CODE-0001", "operator"},
		{"POST", "/admin/products/1/freeze", `{"reason":"r"}`, "operator"},
		{"POST", "/admin/products/1/unfreeze", "", "operator"},
		{"POST", "/admin/orders/" + o.OrderNo + "/fulfil", "", "operator"},
		{"POST", "/admin/orders/" + o.OrderNo + "/mail", "", "operator"},
		{"POST", "/admin/tokens", `{"buyer_id":"b-roles"}`, "operator"},
		{"POST", "/admin/products/1/reconcile?repair=true", "", "admin"},
		{"POST", "/admin/orders/" + o.OrderNo + "/refund", `{"reason":"test"}`, "admin"},
		{"POST", "/admin/products/1/codes/void", `{"codes":["R-000004"],"reason":"leak"}`, "admin"},
		{"GET", "/admin/operators", "", "admin"},
		{"POST", "/admin/operators", `{"name":"newbie","role":"viewer"}`, "admin"},
		{"PATCH", "/admin/operators/vic", `{"role":"viewer"}`, "admin"},
		{"POST", "/admin/operators/newbie/rotate", "", "admin"},
		{"DELETE", "/admin/operators/newbie", "", "admin"},
	}
	for _, r := range routes {
		for _, role := range []string{"viewer", "operator", "admin"} {
			res := h.as(tokens[role], r.method, r.path, r.body)
			allowed := rank[role] >= rank[r.least]
			switch {
			case !allowed && res.status != 403:
				t.Errorf("%s %s as %s: %d %s, want 403", r.method, r.path, role, res.status, res.body)
			case !allowed && !strings.Contains(string(res.body), `"forbidden"`):
				t.Errorf("%s %s as %s: %s, want code forbidden", r.method, r.path, role, res.body)
			case allowed && (res.status == 403 || res.status == 401):
				t.Errorf("%s %s as %s: %d %s, want it let through", r.method, r.path, role, res.status, res.body)
			}
		}
	}
	// Nothing a refused role asked for happened: the product kept the name the operator gave it.
	if p := h.admin("GET", "/admin/products/1", ""); !strings.Contains(string(p.body), `"renamed"`) {
		t.Fatalf("product 1: %s", p.body)
	}
}

type auditPageJSON struct {
	Entries []struct {
		ID         int64     `json:"id"`
		At         time.Time `json:"at"`
		Operator   string    `json:"operator"`
		Role       string    `json:"role"`
		Action     string    `json:"action"`
		Target     string    `json:"target"`
		Params     string    `json:"params"`
		Result     string    `json:"result"`
		ClientAddr string    `json:"client_addr"`
	} `json:"entries"`
	NextBeforeID int64 `json:"next_before_id"`
}

// TestAuditRecordsEveryWrite: each write is recorded with who, the role, the action, the
// target, the parameters (never a code or a token) and the result, refusals included; the log
// filters by operator and action and pages newest first.
func TestAuditRecordsEveryWrite(t *testing.T) {
	h := newHarness(t)
	olga := h.newOperator("olga", "operator")
	vic := h.newOperator("vic", "viewer")
	wantStatus(t, h.as(olga, "POST", "/admin/products", `{"id":7,"name":"Audited","price":100,"max_per_order":5,"buyer_limit":2}`), 201)
	wantStatus(t, h.as(olga, "POST", "/admin/products/7/codes", "SECRET-CODE-0001\nSECRET-CODE-0002"), 200)
	wantStatus(t, h.as(olga, "POST", "/admin/products/7/freeze", `{"reason":"audit check"}`), 200)
	tok := h.as(olga, "POST", "/admin/tokens", `{"buyer_id":"b-audit"}`)
	wantStatus(t, tok, 201)
	wantError(t, h.as(vic, "PATCH", "/admin/products/7", `{"price":1}`), 403, "forbidden")
	wantError(t, h.as(olga, "POST", "/admin/products/99/freeze", `{"reason":"x"}`), 404, "product_not_found")

	r := h.admin("GET", "/admin/audit", "")
	wantStatus(t, r, 200)
	if strings.Contains(string(r.body), "SECRET-CODE") || strings.Contains(string(r.body), olga[len("olga."):]) {
		t.Fatalf("the audit log shows a code or a token: %s", r.body)
	}
	var page auditPageJSON
	r.decode(t, &page)
	type row struct{ operator, role, action, target, result string }
	want := []row{
		{"olga", "operator", "product.freeze", "product 99", "404 product_not_found"},
		{"vic", "viewer", "product.update", "product 7", "403 forbidden"},
		{"olga", "operator", "buyer_token.issue", "", "201"},
		{"olga", "operator", "product.freeze", "product 7", "200"},
		{"olga", "operator", "product.import", "product 7", "200"},
		{"olga", "operator", "product.create", "", "201"},
		{"admin-token", "admin", "operator.create", "", "201"},
		{"admin-token", "admin", "operator.create", "", "201"},
	}
	if len(page.Entries) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(page.Entries), len(want), page.Entries)
	}
	for i, w := range want {
		e := page.Entries[i]
		if (row{e.Operator, e.Role, e.Action, e.Target, e.Result}) != w || e.ClientAddr == "" {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
		if i > 0 && e.ID >= page.Entries[i-1].ID {
			t.Errorf("entries not newest first: %d after %d", e.ID, page.Entries[i-1].ID)
		}
	}
	if p := page.Entries[3].Params; !strings.Contains(p, `"reason":"audit check"`) {
		t.Errorf("freeze params %q", p)
	}
	// The import records its counts (never a code): the console's import history reads them.
	if p := page.Entries[4].Params; p != `{"added":2,"bytes":33,"comments":0,"duplicates":0,"headers":0,"in_pool":0,"invalid":0,"through":2,"unterminated":0}` {
		t.Errorf("import params %q", p)
	}
	if p := page.Entries[5].Params; !strings.Contains(p, `"buyer_limit":2`) || !strings.Contains(p, `"name":"Audited"`) {
		t.Errorf("create params %q", p)
	}
	if p := page.Entries[6].Params; !strings.Contains(p, `"role":"viewer"`) {
		t.Errorf("operator.create params %q", p)
	}

	r = h.admin("GET", "/admin/audit?operator=olga&action=product.freeze", "")
	r.decode(t, &page)
	if len(page.Entries) != 2 || page.NextBeforeID != 0 {
		t.Fatalf("olga's freezes: %+v", page)
	}
	// Pages of 3 cover the 8 entries once, newest first.
	seen := map[int64]bool{}
	next := ""
	for range 3 {
		r = h.admin("GET", "/admin/audit?limit=3"+next, "")
		r.decode(t, &page)
		for _, e := range page.Entries {
			if seen[e.ID] {
				t.Fatalf("entry %d on two pages", e.ID)
			}
			seen[e.ID] = true
		}
		next = fmt.Sprintf("&before_id=%d", page.NextBeforeID)
	}
	if len(seen) != 8 || page.NextBeforeID != 0 {
		t.Fatalf("pages saw %d entries (last next_before_id %d), want 8", len(seen), page.NextBeforeID)
	}
	for _, bad := range []string{"?limit=0", "?limit=1001", "?before_id=0", "?from=yesterday"} {
		wantStatus(t, h.admin("GET", "/admin/audit"+bad, ""), 400)
	}
}
