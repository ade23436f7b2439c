package httpapi_test

import (
	"strings"
	"testing"
)

// TestDescriptionOverHTTP: a product's description is created, changed and removed through
// the admin API and shown by the public catalogue as plain text, markup as written; one that
// is too long or holds a control character is refused with invalid_request on the field
// description and changes nothing.
func TestDescriptionOverHTTP(t *testing.T) {
	h := newHarness(t)
	const markup = `<script>alert(1)</script> "><img src=x onerror=alert(1)>`
	r := h.admin("POST", "/admin/products", `{"id":1,"name":"Steam 50","price":5000,"max_per_order":5,`+
		`"description":"  充值卡\r\nline two\n`+strings.ReplaceAll(strings.ReplaceAll(markup, `\`, `\\`), `"`, `\"`)+`  "}`)
	wantStatus(t, r, 201)
	var p productJSON
	r.decode(t, &p)
	want := "充值卡\nline two\n" + markup
	if p.Description != want {
		t.Fatalf("created description %q, want %q", p.Description, want)
	}
	h.createProduct(2, 500, 5)
	c, _ := h.catalogue()
	for _, it := range c.Products {
		if w := map[int64]string{1: want, 2: ""}[it.ID]; it.Description != w {
			t.Errorf("catalogue product %d: description %q, want %q", it.ID, it.Description, w)
		}
	}

	for _, body := range []string{
		`{"description":"` + strings.Repeat("卡", 2001) + `"}`,
		`{"description":"bell\u0007"}`,
		`{"description":"esc\u001b[31m"}`,
	} {
		if e := wantError(t, h.admin("PATCH", "/admin/products/1", body), 400, "invalid_request"); e.Field != "description" {
			t.Fatalf("PATCH %.40s: field %q, want description", body, e.Field)
		}
	}
	if e := wantError(t, h.admin("POST", "/admin/products", `{"id":3,"name":"x","price":1,"max_per_order":1,"description":"nul\u0000"}`),
		400, "invalid_request"); e.Field != "description" {
		t.Fatalf("create with a control character: field %q, want description", e.Field)
	}
	wantError(t, h.admin("GET", "/admin/products/3", ""), 404, "product_not_found")
	r = h.admin("GET", "/admin/products/1", "")
	wantStatus(t, r, 200)
	r.decode(t, &p)
	if p.Description != want {
		t.Fatalf("after refused patches: description %q, want %q", p.Description, want)
	}

	r = h.admin("PATCH", "/admin/products/1", `{"description":"`+strings.Repeat("卡", 2000)+`"}`)
	wantStatus(t, r, 200)
	r.decode(t, &p)
	if p.Description != strings.Repeat("卡", 2000) {
		t.Fatalf("the longest description came back %d bytes", len(p.Description))
	}
	r = h.admin("PATCH", "/admin/products/1", `{"name":"Steam 50"}`) // absent: left as it is
	wantStatus(t, r, 200)
	r.decode(t, &p)
	if p.Description != strings.Repeat("卡", 2000) {
		t.Fatal("a patch without description changed it")
	}
	r = h.admin("PATCH", "/admin/products/1", `{"description":""}`)
	wantStatus(t, r, 200)
	r.decode(t, &p)
	if p.Description != "" {
		t.Fatalf("after removing it: description %q", p.Description)
	}
}
