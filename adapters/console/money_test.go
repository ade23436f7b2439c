package console_test

import (
	"encoding/csv"
	"net/url"
	"strings"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// The dashboard's money: the paid order's amount to the cent in each period, the chart an
// image of the console's own SVG route (no script, no style attribute), the products at or
// under their low-stock threshold listed.
func TestDashboardShowsTheMoney(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("money card", 1999)
	h.paidOrder(p, []string{"CODE-M1", "CODE-M2"}, 2)
	b := h.login(h.operator("viewer-m", domain.RoleViewer))
	r := b.get("/console/dashboard")
	wantStatus(t, r, 200)
	for _, want := range []string{`data-period="today"`, `data-money="paid">1<`, `data-money="revenue">39.98<`,
		`data-money="refunded">0.00<`, `data-money="net">39.98<`, `src="/console/dashboard/revenue.svg?period=today"`,
		`id="money-products"`, "money card", `id="low-stock"`} {
		if !strings.Contains(r.body, want) {
			t.Fatalf("dashboard lacks %s:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, "style=") {
		t.Fatal("the dashboard carries a style attribute, which the CSP forbids")
	}
	svg := b.get("/console/dashboard/revenue.svg?period=7d")
	wantStatus(t, svg, 200)
	if ct := svg.header.Get("Content-Type"); !strings.HasPrefix(ct, "image/svg+xml") {
		t.Fatalf("chart content type %q", ct)
	}
	if !strings.HasPrefix(svg.body, "<svg") || strings.Count(svg.body, `class="revenue"`) != 1 ||
		!strings.Contains(svg.body, "39.98") || strings.Contains(svg.body, "style") || strings.Contains(svg.body, "<script") {
		t.Fatalf("chart: %s", svg.body)
	}
	wantStatus(t, b.get("/console/dashboard?period=year"), 400)
	wantStatus(t, b.get("/console/dashboard/revenue.svg?period=year"), 400)
}

func TestDashboardListsLowStock(t *testing.T) {
	h := newHarness(t, 0)
	p, err := h.shop.Catalogue.CreateProduct(t.Context(), application.NewProduct{Name: "scarce card", Price: 100,
		MaxPerOrder: 5, LowStockThreshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	plenty, err := h.shop.Catalogue.CreateProduct(t.Context(), application.NewProduct{Name: "plenty card", Price: 100,
		MaxPerOrder: 5, LowStockThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.shop.Catalogue.ImportCodes(t.Context(), p.ID(), strings.NewReader("CODE-A1\nCODE-A2\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.shop.Catalogue.ImportCodes(t.Context(), plenty.ID(), strings.NewReader("CODE-B1\nCODE-B2\nCODE-B3\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.shop.Relay.RelayOutbox(t.Context()); err != nil { // the imports reach the gate
		t.Fatal(err)
	}
	b := h.login(h.operator("viewer-l", domain.RoleViewer))
	r := b.get("/console/dashboard")
	wantStatus(t, r, 200)
	low := r.body[strings.Index(r.body, `id="low-stock"`):strings.Index(r.body, `id="dashboard"`)]
	if !strings.Contains(low, "scarce card") || !strings.Contains(low, "2 left (threshold 3)") || strings.Contains(low, "plenty card") {
		t.Fatalf("low-stock list:\n%s", low)
	}
}

// The export: an operator's form answers a CSV attachment (BOM, header, the order, no code),
// recorded in the audit log with its filter; a viewer is refused (and recorded); a bad form is
// refused with nothing exported.
func TestExportOrdersFromTheConsole(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("=cmd card", 1999)
	no := h.paidOrder(p, []string{"SECRET-CODE-1"}, 1)
	b := h.login(h.operator("exporter", domain.RoleOperator))
	page := b.get("/console/exports")
	wantStatus(t, page, 200)
	if !strings.Contains(page.body, `action="/console/exports/orders"`) {
		t.Fatalf("no export form for an operator:\n%s", page.body)
	}
	today := h.clock.Now().Format("2006-01-02")
	r := b.post("/console/exports/orders", url.Values{"from": {today}, "to": {today}, "status": {"PAID"}})
	wantStatus(t, r, 200)
	if ct := r.header.Get("Content-Type"); ct != "text/csv; charset=utf-8" || !strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment;") {
		t.Fatalf("export headers %v", r.header)
	}
	if !strings.HasPrefix(r.body, "\ufeff") || strings.Contains(r.body, "SECRET-CODE-1") {
		t.Fatalf("export body %q", r.body)
	}
	rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(r.body, "\ufeff"))).ReadAll()
	if err != nil || len(rows) != 2 || rows[1][0] != no || rows[1][6] != "'=cmd card" || rows[1][9] != "19.99" {
		t.Fatalf("export rows %v, %v", rows, err)
	}
	// The day before has no order.
	yesterday := h.clock.Now().Add(-24 * time.Hour).Format("2006-01-02")
	r = b.post("/console/exports/orders", url.Values{"from": {yesterday}, "to": {yesterday}})
	wantStatus(t, r, 200)
	if rows, _ := csv.NewReader(strings.NewReader(strings.TrimPrefix(r.body, "\ufeff"))).ReadAll(); len(rows) != 1 {
		t.Fatalf("export of the day before: %v", rows)
	}
	wantStatus(t, b.post("/console/exports/orders", url.Values{"status": {"LOST"}}), 400)
	entries := h.audit()
	if len(entries) < 3 || entries[0].Action != application.ActionOrdersExport || !strings.HasPrefix(entries[0].Result, "400") ||
		entries[2].Action != application.ActionOrdersExport || entries[2].Result != "200" ||
		!strings.Contains(entries[2].Params, `"status":"PAID"`) || entries[2].Operator != "exporter" {
		t.Fatalf("audit %+v", entries[:min(3, len(entries))])
	}
	v := h.login(h.operator("viewer-x", domain.RoleViewer))
	page = v.get("/console/exports")
	wantStatus(t, page, 200)
	if strings.Contains(page.body, `action="/console/exports/orders"`) {
		t.Fatal("a viewer is shown the export form")
	}
	wantStatus(t, v.post("/console/exports/orders", nil), 403)
	if e := h.audit()[0]; e.Action != application.ActionOrdersExport || e.Operator != "viewer-x" || !strings.HasPrefix(e.Result, "403") {
		t.Fatalf("refused export recorded as %+v", e)
	}
}
