package httpapi_test

import (
	"testing"
)

// code_uses is set on create (absent: 1; 0: a shared key), answered on every read, and fixed:
// a PATCH may repeat it but not change it. An import reports the uses it added, and the gate's
// stock counts uses.
func TestProductCodeUses(t *testing.T) {
	h := newHarness(t)
	if p := h.createProduct(1, 100, 5); p.CodeUses != 1 {
		t.Fatalf("default code_uses %d, want 1", p.CodeUses)
	}
	r := h.admin("POST", "/admin/products", `{"id":2,"name":"Team licence","price":100,"max_per_order":3,"code_uses":4}`)
	wantStatus(t, r, 201)
	var p productJSON
	r.decode(t, &p)
	if p.CodeUses != 4 {
		t.Fatalf("code_uses %d, want 4", p.CodeUses)
	}
	rep := h.importCodes(2, codes("TEAM", 3)...)
	if rep.Added != 3 || rep.Uses != 12 {
		t.Fatalf("import: added %d, uses %d; want 3 and 12", rep.Added, rep.Uses)
	}
	if lv := h.levels(2); lv.Stock != 12 {
		t.Fatalf("gate stock %d, want 12", lv.Stock)
	}
	wantStatus(t, h.admin("PATCH", "/admin/products/2", `{"code_uses":4,"price":120}`), 200)
	e := wantError(t, h.admin("PATCH", "/admin/products/2", `{"code_uses":2}`), 400, "invalid_request")
	if e.Field != "code_uses" {
		t.Fatalf("refusal names %q, want code_uses", e.Field)
	}
	e = wantError(t, h.admin("POST", "/admin/products", `{"id":3,"name":"x","price":100,"max_per_order":1,"code_uses":-1}`), 400, "invalid_request")
	if e.Field != "code_uses" {
		t.Fatalf("refusal names %q, want code_uses", e.Field)
	}
	r = h.admin("POST", "/admin/products", `{"id":4,"name":"Shared key","price":100,"max_per_order":1,"code_uses":0}`)
	wantStatus(t, r, 201)
	r.decode(t, &p)
	if p.CodeUses != 0 {
		t.Fatalf("shared key code_uses %d, want 0", p.CodeUses)
	}
	if rep := h.importCodes(4, "SHARED-KEY-1"); rep.Added != 1 || rep.Uses != 1000 {
		t.Fatalf("shared key import: %+v", rep)
	}
	r = h.admin("GET", "/admin/products/2", "")
	wantStatus(t, r, 200)
	r.decode(t, &p)
	if p.CodeUses != 4 || p.Price != 120 {
		t.Fatalf("read back: code_uses %d, price %d", p.CodeUses, p.Price)
	}
}
