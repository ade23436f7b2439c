package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"cardshop/application"
)

// TestSaleWindowOverHTTP: before the start 409 sale_not_started with Retry-After (the seconds
// left, rounded up); inside the window 201; from the end 409 sale_ended. The admin API shows
// the window; the catalogue says upcoming, on_sale, ended, and the list drops an ended product.
func TestSaleWindowOverHTTP(t *testing.T) {
	h := newHarness(t)
	starts := start.Add(90 * time.Second).Add(500 * time.Millisecond)
	ends := starts.Add(time.Hour)
	r := h.admin("POST", "/admin/products", fmt.Sprintf(`{"id":1,"name":"Flash","price":100,"max_per_order":5,`+
		`"starts_at":%q,"ends_at":%q,"buyer_limit":3,"refund_releases_limit":true,"low_stock_threshold":7}`,
		starts.Format(time.RFC3339Nano), ends.Format(time.RFC3339Nano)))
	wantStatus(t, r, 201)
	var p productJSON
	r.decode(t, &p)
	if p.StartsAt == nil || !p.StartsAt.Equal(starts) || p.EndsAt == nil || !p.EndsAt.Equal(ends) || p.BuyerLimit != 3 ||
		!p.RefundFrees || p.LowStock != 7 {
		t.Fatalf("created %+v", p)
	}
	h.importCodes(1, codes("F", 10)...)
	tok := h.token("buyer-1")

	c, _ := h.catalogue()
	if len(c.Products) != 1 || c.Products[0].Status != "upcoming" || c.Products[0].BuyerLimit != 3 ||
		!c.Products[0].StartsAt.Equal(starts) {
		t.Fatalf("catalogue before the start: %+v", c.Products)
	}
	early := h.order(tok, "key-window-0001", `{"product_id":1,"qty":1}`)
	wantError(t, early, 409, "sale_not_started")
	if got := early.header.Get("Retry-After"); got != "91" {
		t.Fatalf("Retry-After %q, want 91 (90.5 s rounded up)", got)
	}

	h.clock.Set(starts)
	h.placeOrder(tok, "key-window-0001", 1, 1) // the refused key was not used
	h.clock.Advance(application.DefaultConfig().CatalogueLevelsEvery)
	if c, _ = h.catalogue(); c.Products[0].Status != "on_sale" {
		t.Fatalf("catalogue in the window: %+v", c.Products)
	}

	h.clock.Set(ends)
	tok = h.token("buyer-1") // a buyer token lives less than the hour that passed
	wantError(t, h.order(tok, "key-window-0002", `{"product_id":1,"qty":1}`), 409, "sale_ended")
	if c, _ = h.catalogue(); len(c.Products) != 0 {
		t.Fatalf("the list still shows an ended product: %+v", c.Products)
	}
	one := h.do("GET", "/api/products/1", nil)
	wantStatus(t, one, 200)
	if !strings.Contains(string(one.body), `"status":"ended"`) {
		t.Fatalf("GET /api/products/1 after the end: %s", one.body)
	}
}

// TestBuyerLimitOverHTTP: a buyer over the product's limit gets 429 buyer_limit and nothing is
// reserved; another buyer is not affected.
func TestBuyerLimitOverHTTP(t *testing.T) {
	h := newHarness(t)
	wantStatus(t, h.admin("POST", "/admin/products", `{"id":1,"name":"One each","price":100,"max_per_order":5,"buyer_limit":1}`), 201)
	h.importCodes(1, codes("L", 5)...)
	alice := h.token("alice")
	h.placeOrder(alice, "key-limit-0001", 1, 1)
	over := h.order(alice, "key-limit-0002", `{"product_id":1,"qty":1}`)
	e := wantError(t, over, 429, "buyer_limit")
	if !strings.Contains(e.Message, "buyer_limit") || over.header.Get("Retry-After") != "" {
		t.Fatalf("over the limit: %+v, Retry-After %q", e, over.header.Get("Retry-After"))
	}
	h.placeOrder(h.token("bob"), "key-limit-0003", 1, 1)
	if l := h.levels(1); l.Stock != 3 || l.Sold != 2 {
		t.Fatalf("levels %+v, want 3 left, 2 sold", l)
	}
}

// TestPatchSaleRules: PATCH sets and clears (null) the bounds and sets the limit; bad rules are
// 400 and change nothing.
func TestPatchSaleRules(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.importCodes(1, codes("P", 5)...)
	later := start.Add(time.Hour).Format(time.RFC3339)
	r := h.admin("PATCH", "/admin/products/1", fmt.Sprintf(`{"starts_at":%q,"buyer_limit":2}`, later))
	wantStatus(t, r, 200)
	var p productJSON
	r.decode(t, &p)
	if p.StartsAt == nil || p.BuyerLimit != 2 || p.EndsAt != nil {
		t.Fatalf("patched %+v", p)
	}
	tok := h.token("buyer-1")
	wantError(t, h.order(tok, "key-patch-0001", `{"product_id":1,"qty":1}`), 409, "sale_not_started")
	for _, bad := range []string{`{"ends_at":"2000-01-01T00:00:00Z"}`, `{"buyer_limit":-1}`, `{"starts_at":"tomorrow"}`,
		`{"low_stock_threshold":-5}`} {
		wantStatus(t, h.admin("PATCH", "/admin/products/1", bad), 400)
	}
	r = h.admin("PATCH", "/admin/products/1", `{"starts_at":null}`)
	wantStatus(t, r, 200)
	r.decode(t, &p)
	if p.StartsAt != nil || p.BuyerLimit != 2 {
		t.Fatalf("after clearing the start: %+v", p)
	}
	h.placeOrder(tok, "key-patch-0001", 1, 2)
	wantError(t, h.order(tok, "key-patch-0002", `{"product_id":1,"qty":1}`), 429, "buyer_limit")
}
