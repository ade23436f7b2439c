package httpapi_test

import (
	"testing"
)

// TestMinPerOrderOverHTTP: the minimum defaults to 1, must lie between 1 and the maximum (a
// refused create or patch changes nothing), and an order below it is refused with
// qty_out_of_range before the gate: nothing is reserved.
func TestMinPerOrderOverHTTP(t *testing.T) {
	h := newHarness(t)
	if p := h.createProduct(1, 500, 5); p.MinPerOrder != 1 {
		t.Fatalf("default min_per_order = %d, want 1", p.MinPerOrder)
	}
	for _, body := range []string{
		`{"id":2,"name":"Bulk","price":500,"min_per_order":6,"max_per_order":5}`,
		`{"id":2,"name":"Bulk","price":500,"min_per_order":-1,"max_per_order":5}`,
	} {
		if e := wantError(t, h.admin("POST", "/admin/products", body), 400, "invalid_request"); e.Field != "min_per_order" {
			t.Fatalf("%s: field %q, want min_per_order", body, e.Field)
		}
	}
	wantError(t, h.admin("GET", "/admin/products/2", ""), 404, "product_not_found")

	r := h.admin("POST", "/admin/products", `{"id":2,"name":"Bulk","price":500,"min_per_order":3,"max_per_order":5}`)
	wantStatus(t, r, 201)
	var p productJSON
	r.decode(t, &p)
	if p.MinPerOrder != 3 || p.MaxPerOrder != 5 {
		t.Fatalf("created %+v", p)
	}
	for _, body := range []string{`{"min_per_order":0}`, `{"min_per_order":6}`, `{"max_per_order":2}`} {
		if e := wantError(t, h.admin("PATCH", "/admin/products/2", body), 400, "invalid_request"); e.Field != "min_per_order" {
			t.Fatalf("PATCH %s: field %q, want min_per_order", body, e.Field)
		}
	}
	r = h.admin("GET", "/admin/products/2", "")
	wantStatus(t, r, 200)
	var got productJSON
	r.decode(t, &got)
	if got.MinPerOrder != 3 || got.MaxPerOrder != 5 {
		t.Fatalf("after refused patches: %+v, want min 3 max 5", got)
	}

	h.importCodes(2, codes("M", 10)...)
	before := h.levels(2)
	alice := h.token("alice")
	for i, body := range []string{`{"product_id":2,"qty":1}`, `{"product_id":2,"qty":2}`, `{"product_id":2,"qty":6}`} {
		wantError(t, h.order(alice, "key-min0000"+string(rune('a'+i)), body), 400, "qty_out_of_range")
	}
	if got := h.levels(2); got != before {
		t.Fatalf("gate %+v after refused orders, was %+v", got, before)
	}
	o := h.placeOrder(alice, "key-min0000z", 2, 3)
	if o.Qty != 3 || h.levels(2).Stock != before.Stock-3 {
		t.Fatalf("order %+v, gate %+v", o, h.levels(2))
	}
	// Lowering the minimum takes effect for the next order.
	wantStatus(t, h.admin("PATCH", "/admin/products/2", `{"min_per_order":1}`), 200)
	h.placeOrder(alice, "key-min0000y", 2, 1)
}

// TestVariantsOverHTTP: a product joins a group with a label (both or neither), the admin API
// and the public catalogue show them, and each variant keeps its own stock.
func TestVariantsOverHTTP(t *testing.T) {
	h := newHarness(t)
	for _, body := range []string{
		`{"id":1,"name":"Steam 50","price":5000,"max_per_order":5,"group":"Steam card"}`,
		`{"id":1,"name":"Steam 50","price":5000,"max_per_order":5,"variant":"50"}`,
	} {
		if e := wantError(t, h.admin("POST", "/admin/products", body), 400, "invalid_request"); e.Field != "variant" {
			t.Fatalf("%s: field %q, want variant", body, e.Field)
		}
	}
	r := h.admin("POST", "/admin/products", `{"id":1,"name":"Steam 50","price":5000,"max_per_order":5,"group":" Steam card ","variant":"50"}`)
	wantStatus(t, r, 201)
	var p productJSON
	r.decode(t, &p)
	if p.Group != "Steam card" || p.Variant != "50" {
		t.Fatalf("created %+v", p)
	}
	wantStatus(t, h.admin("POST", "/admin/products", `{"id":2,"name":"Steam 100","price":10000,"max_per_order":5,"group":"Steam card","variant":"100"}`), 201)
	h.createProduct(3, 500, 5)
	wantError(t, h.admin("PATCH", "/admin/products/3", `{"group":"Steam card"}`), 400, "invalid_request")
	h.importCodes(1, codes("A", 4)...)
	h.importCodes(2, codes("B", 4)...)
	h.placeOrder(h.token("alice"), "key-variant01", 2, 2)
	if l1, l2 := h.levels(1), h.levels(2); l1.Stock != 4 || l1.Sold != 0 || l2.Stock != 2 || l2.Sold != 2 {
		t.Fatalf("gates after an order of variant 2: %+v %+v", l1, l2)
	}
	c, _ := h.catalogue()
	want := map[int64][2]string{1: {"Steam card", "50"}, 2: {"Steam card", "100"}, 3: {"", ""}}
	for _, it := range c.Products {
		if w := want[it.ID]; it.Group != w[0] || it.Variant != w[1] || it.MinPerOrder != 1 {
			t.Errorf("catalogue product %d: group %q variant %q min %d, want %q %q 1", it.ID, it.Group, it.Variant, it.MinPerOrder, w[0], w[1])
		}
	}
	// Out of the group: both emptied together.
	r = h.admin("PATCH", "/admin/products/2", `{"group":"","variant":""}`)
	wantStatus(t, r, 200)
	r.decode(t, &p)
	if p.Group != "" || p.Variant != "" {
		t.Fatalf("after leaving the group: %+v", p)
	}
}
