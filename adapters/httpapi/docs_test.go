package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
)

// GET /docs lists every operation with its answers, and loads nothing from elsewhere.
func TestDocsPage(t *testing.T) {
	s := mustSpec(t)
	h := newHarness(t)
	r := h.do("GET", "/docs", nil)
	wantStatus(t, r, 200)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	page := string(r.body)
	for path, item := range s.doc.Paths.Map() {
		for method, op := range item.Operations() {
			i := strings.Index(page, fmt.Sprintf(`<section id="%s">`, op.OperationID))
			if i < 0 {
				t.Errorf("the page has no section for %s %s", method, path)
				continue
			}
			sec := page[i:]
			sec = sec[:strings.Index(sec, "</section>")]
			if !strings.Contains(sec, fmt.Sprintf(`<span class="method">%s</span> <code>%s</code>`, method, path)) {
				t.Errorf("%s: section does not show %s %s: %s", op.OperationID, method, path, sec)
			}
			for status := range op.Responses.Map() {
				if !strings.Contains(sec, "<td>"+status+"</td>") {
					t.Errorf("%s %s: section does not show %s", method, path, status)
				}
			}
		}
	}
	for _, want := range []string{"Authentication: buyer token", "Authentication: admin token",
		"Authentication: payment signature", "Authentication: none", "<code>sold_out</code>", `<a href="/openapi.json">`,
		"<li><code>Idempotency-Key</code> (header, required)", "Body: <code>application/json</code> (PlaceOrderRequest in /openapi.json)",
		"Body: <code>text/csv</code> or <code>text/plain</code>, optional"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %q", want)
		}
	}
	for _, bad := range []string{"src=", "http://", "https://", "<script", "`"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
}
