package console_test

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"strings"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

// checkRows reads the reconcile page's checks: name → "want got OK|differs", as shown.
func checkRows(t *testing.T, body string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	for _, tr := range strings.Split(body, "<tr>")[1:] {
		if !strings.Contains(tr, `data-label="Check"`) {
			continue
		}
		var cells []string
		for _, td := range strings.Split(tr, "<td")[1:] {
			v := td[strings.Index(td, ">")+1 : strings.Index(td, "</td>")]
			v = strings.TrimSuffix(strings.TrimPrefix(v, `<strong class="differs">`), "</strong>")
			cells = append(cells, html.UnescapeString(v))
		}
		if len(cells) != 4 {
			t.Fatalf("check row with %d cells: %s", len(cells), tr)
		}
		rows[cells[0]] = strings.Join(cells[1:], " ")
	}
	return rows
}

// wantReport checks the page shows every check of the use case's report, with its numbers.
func wantReport(t *testing.T, body string, rep application.Reconciliation) {
	t.Helper()
	rows := checkRows(t, body)
	if len(rows) != len(rep.Checks) || len(rows) == 0 {
		t.Fatalf("page shows %d checks, the report has %d: %s", len(rows), len(rep.Checks), body)
	}
	for _, c := range rep.Checks {
		res := "OK"
		if !c.OK {
			res = "differs"
		}
		if want := fmt.Sprintf("%d %d %s", c.Want, c.Got, res); rows[c.Name] != want {
			t.Errorf("check %q shows %q, the report %q", c.Name, rows[c.Name], want)
		}
	}
	if rep.GateKnown && !strings.Contains(body, fmt.Sprintf("<dt>Stock left</dt><dd>%d</dd>", rep.Gate.Stock)) {
		t.Errorf("gate stock %d not shown", rep.Gate.Stock)
	}
	for s, n := range rep.Cards {
		if !strings.Contains(body, fmt.Sprintf(`<td data-label="Status">%s</td><td class="num" data-label="Cards">%d</td>`, s, n)) {
			t.Errorf("cards %s=%d not shown", s, n)
		}
	}
}

func TestReconcileShowsTheReportAndAnAdminRepairsTheGate(t *testing.T) {
	h := newHarness(t, 0)
	ctx := context.Background()
	p := h.product("Gift card", 1999)
	h.paidOrder(p, []string{"CODE-A", "CODE-B", "CODE-C"}, 2)
	path := "/console/products/" + itoa(int64(p.ID()))
	viewer := h.login(h.operator("vera", domain.RoleViewer))
	oper := h.login(h.operator("otto", domain.RoleOperator))
	admin := h.login(h.operator("ada", domain.RoleAdmin))

	// The product page links the screen for every role; a viewer sees the report, no repair.
	if r := viewer.get(path); !strings.Contains(r.body, `href="`+path+`/reconcile"`) {
		t.Fatalf("product page has no reconcile link: %s", r.body)
	}
	r := viewer.get(path + "/reconcile")
	wantStatus(t, r, 200)
	rep, err := h.shop.Catalogue.Reconcile(ctx, p.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("fresh product differs: %+v", rep.Checks)
	}
	wantReport(t, r.body, rep)
	if strings.Contains(r.body, "differs") || strings.Contains(r.body, path+"/repair") {
		t.Fatalf("viewer page: a difference or a repair link: %s", r.body)
	}

	// A difference in the gate shows as "differs".
	if _, err := h.gate.Apply(ctx, domain.GateChange{Product: p.ID(), Ref: "bogus-1", Stock: 5, Sold: -1}); err != nil {
		t.Fatal(err)
	}
	bad, err := h.shop.Catalogue.Reconcile(ctx, p.ID(), false)
	if err != nil || bad.OK() {
		t.Fatalf("bogus change: %v, report ok %v", err, bad.OK())
	}
	r = admin.get(path + "/reconcile")
	wantStatus(t, r, 200)
	wantReport(t, r.body, bad)
	if !strings.Contains(r.body, "differs") || !strings.Contains(r.body, `href="`+path+`/repair"`) {
		t.Fatalf("admin page: no difference or no repair link: %s", r.body)
	}

	// A viewer or an operator may neither open the confirmation nor repair; nothing changes,
	// and the refusals are recorded.
	for _, b := range []*browser{viewer, oper} {
		wantStatus(t, b.get(path+"/repair"), 403)
		wantStatus(t, b.post(path+"/repair", nil), 403)
	}
	if e := h.audit()[0]; e.Operator != "otto" || e.Action != "product.repair" || e.Result != "403 forbidden" {
		t.Fatalf("refusal entry: %+v", e)
	}
	// A post without the session's CSRF token changes nothing and records nothing.
	before := len(h.audit())
	wantStatus(t, h.postForm(path+"/repair", url.Values{"csrf": {"forged"}}, admin.cookie), 403)
	if n := len(h.audit()); n != before {
		t.Fatalf("forged post recorded: %d entries, had %d", n, before)
	}
	if still, _ := h.shop.Catalogue.Reconcile(ctx, p.ID(), false); still.OK() {
		t.Fatal("a refused repair repaired")
	}

	// The admin confirms, and the repair fixes the gate.
	r = admin.get(path + "/repair")
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, `action="`+path+`/repair"`) || !strings.Contains(r.body, "Repair the gate") {
		t.Fatalf("confirmation page: %s", r.body)
	}
	r = admin.post(path+"/repair", nil)
	wantStatus(t, r, 200)
	fixed, err := h.shop.Catalogue.Reconcile(ctx, p.ID(), false)
	if err != nil || !fixed.OK() {
		t.Fatalf("after repair: %v %+v", err, fixed.Checks)
	}
	fixed.Repaired = true
	wantReport(t, r.body, fixed)
	if strings.Contains(r.body, "differs") || !strings.Contains(r.body, "Repaired") {
		t.Fatalf("repair page: %s", r.body)
	}
	e := h.audit()[0]
	if e.Operator != "ada" || e.Role != "admin" || e.Action != "product.repair" || e.Target != "product "+itoa(int64(p.ID())) ||
		e.Params != `{"repair":"true"}` || e.Result != "200" {
		t.Fatalf("repair entry: %+v", e)
	}

	// An unknown product is a 404 page.
	wantStatus(t, viewer.get("/console/products/999/reconcile"), 404)
}
