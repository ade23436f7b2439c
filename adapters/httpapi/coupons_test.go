package httpapi_test

import (
	"strings"
	"testing"
	"time"
)

type couponJSON struct {
	Code           string     `json:"code"`
	Kind           string     `json:"kind"`
	Value          int64      `json:"value"`
	MinAmount      int64      `json:"min_amount"`
	Products       []int64    `json:"products"`
	ValidFrom      *time.Time `json:"valid_from"`
	ValidUntil     *time.Time `json:"valid_until"`
	UsesPerProduct int64      `json:"uses_per_product"`
	UsesPerBuyer   int64      `json:"uses_per_buyer"`
	Disabled       bool       `json:"disabled"`
	CreatedAt      time.Time  `json:"created_at"`
	Uses           []struct {
		ProductID int64  `json:"product_id"`
		Uses      *int64 `json:"uses"`
	} `json:"uses"`
}

func (h *harness) coupons(token string) []couponJSON {
	h.t.Helper()
	r := h.as(token, "GET", "/admin/coupons", "")
	wantStatus(h.t, r, 200)
	var l struct {
		Coupons []couponJSON `json:"coupons"`
	}
	r.decode(h.t, &l)
	return l.Coupons
}

// TestCouponAdminAPI: an operator creates coupons (the code upper-cased, the products in
// order, the bounds kept), a viewer lists them with their uses per product (none yet: 0; null
// when the gate cannot be asked) but may not change them (403, audited), an operator
// disables and enables one; every write is in the audit log with its operator and the coupon.
func TestCouponAdminAPI(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 5000, 5)
	h.createProduct(2, 9000, 5)
	otto, vic := h.newOperator("otto", "operator"), h.newOperator("vic", "viewer")

	r := h.as(otto, "POST", "/admin/coupons", `{"code":" spring-10 ","kind":"percent","value":10,"min_amount":1000,
		"products":[2,1,2],"valid_from":"2025-03-01T00:00:00Z","valid_until":"2025-04-01T08:00:00+08:00",
		"uses_per_product":100,"uses_per_buyer":1}`)
	wantStatus(t, r, 201)
	var spring couponJSON
	r.decode(t, &spring)
	if spring.Code != "SPRING-10" || spring.Kind != "percent" || spring.Value != 10 || spring.MinAmount != 1000 ||
		len(spring.Products) != 2 || spring.Products[0] != 1 || spring.Products[1] != 2 || spring.Disabled ||
		spring.ValidFrom == nil || !spring.ValidFrom.Equal(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)) ||
		spring.ValidUntil == nil || !spring.ValidUntil.Equal(time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)) ||
		spring.UsesPerProduct != 100 || spring.UsesPerBuyer != 1 || !spring.CreatedAt.Equal(start) || spring.Uses != nil {
		t.Fatalf("created %+v", spring)
	}
	h.clock.Advance(time.Minute)
	r = h.as(otto, "POST", "/admin/coupons", `{"code":"FIVE-OFF","kind":"fixed","value":500,"products":[1]}`)
	wantStatus(t, r, 201)

	list := h.coupons(vic)
	if len(list) != 2 || list[0].Code != "FIVE-OFF" || list[1].Code != "SPRING-10" {
		t.Fatalf("viewer's list = %+v, want FIVE-OFF then SPRING-10", list)
	}
	if u := list[1].Uses; len(u) != 2 || u[0].ProductID != 1 || u[0].Uses == nil || *u[0].Uses != 0 || u[1].ProductID != 2 ||
		u[1].Uses == nil || *u[1].Uses != 0 {
		t.Fatalf("SPRING-10's uses = %+v, want products 1 and 2, none used", u)
	}
	if list[0].ValidFrom != nil || list[0].ValidUntil != nil || list[0].MinAmount != 0 {
		t.Fatalf("FIVE-OFF without bounds = %+v", list[0])
	}

	wantError(t, h.as(vic, "POST", "/admin/coupons", `{"code":"NOPE","kind":"fixed","value":1,"products":[1]}`), 403, "forbidden")
	wantError(t, h.as(vic, "POST", "/admin/coupons/SPRING-10/disable", ""), 403, "forbidden")
	wantStatus(t, h.as(otto, "POST", "/admin/coupons/spring-10/disable", ""), 204)
	wantStatus(t, h.as(otto, "POST", "/admin/coupons/SPRING-10/disable", ""), 204) // again: no change, no error
	if got := h.coupons(vic); !got[1].Disabled || got[0].Disabled {
		t.Fatalf("after a disable: %+v", got)
	}
	wantStatus(t, h.as(otto, "POST", "/admin/coupons/SPRING-10/enable", ""), 204)
	if got := h.coupons(vic); got[1].Disabled {
		t.Fatalf("after an enable: %+v", got)
	}

	creates := h.auditOf("coupon.create").Entries
	if len(creates) != 3 {
		t.Fatalf("%d coupon.create entries, want 3 (2 created, 1 refused): %+v", len(creates), creates)
	}
	if e := creates[0]; e.Operator != "vic" || e.Result != "403 forbidden" || strings.Contains(e.Params, `"coupon"`) {
		t.Fatalf("the refused create is recorded as %+v", e)
	}
	if e := creates[2]; e.Operator != "otto" || e.Result != "201" || !strings.Contains(e.Params, `"coupon":"SPRING-10"`) ||
		!strings.Contains(e.Params, `"uses_per_product":100`) {
		t.Fatalf("the first create is recorded as %+v", e)
	}
	disables := h.auditOf("coupon.disable").Entries
	if len(disables) != 3 || disables[0].Target != "coupon SPRING-10" || disables[0].Operator != "otto" ||
		disables[1].Target != "coupon SPRING-10" || disables[2].Result != "403 forbidden" {
		t.Fatalf("coupon.disable entries: %+v", disables)
	}
	if enables := h.auditOf("coupon.enable").Entries; len(enables) != 1 || enables[0].Result != "204" {
		t.Fatalf("coupon.enable entries: %+v", enables)
	}
}

// TestCouponBadInputChangesNothing: every refused create is 400 invalid_request naming the
// field (a product that does not exist too) or 409 coupon_exists, an unknown or malformed code
// 404 coupon_not_found; the list stays as it was.
func TestCouponBadInputChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 5000, 5)
	otto := h.newOperator("otto", "operator")
	wantStatus(t, h.as(otto, "POST", "/admin/coupons", `{"code":"KEPT","kind":"fixed","value":100,"products":[1]}`), 201)
	kept := h.coupons(otto)
	for _, c := range []struct {
		body         string
		status       int
		code, field  string
		messageHolds string
	}{
		{`{"code":"AB","kind":"fixed","value":100,"products":[1]}`, 400, "invalid_request", "code", ""},
		{`{"code":"HAS SPACE","kind":"fixed","value":100,"products":[1]}`, 400, "invalid_request", "code", ""},
		{`{"code":"NEW","kind":"half","value":100,"products":[1]}`, 400, "invalid_request", "kind", ""},
		{`{"code":"NEW","kind":"percent","value":100,"products":[1]}`, 400, "invalid_request", "value", ""},
		{`{"code":"NEW","kind":"fixed","value":0,"products":[1]}`, 400, "invalid_request", "value", ""},
		{`{"code":"NEW","kind":"fixed","value":100,"products":[]}`, 400, "invalid_request", "products", ""},
		{`{"code":"NEW","kind":"fixed","value":100,"products":[1,7]}`, 400, "invalid_request", "products", "product 7 does not exist"},
		{`{"code":"NEW","kind":"fixed","value":100,"products":[1],"min_amount":-1}`, 400, "invalid_request", "min_amount", ""},
		{`{"code":"NEW","kind":"fixed","value":100,"products":[1],"uses_per_buyer":-1}`, 400, "invalid_request", "uses_per_buyer", ""},
		{`{"code":"NEW","kind":"fixed","value":100,"products":[1],"valid_from":"2025-03-02T00:00:00Z","valid_until":"2025-03-01T00:00:00Z"}`, 400, "invalid_request", "valid_until", ""},
		{`{"code":"NEW","kind":"fixed","value":100,"products":[1],"valid_until":"tomorrow"}`, 400, "invalid_request", "", ""},
		{`{"code":"NEW","kind":"fixed","value":100,"products":[1],"extra":1}`, 400, "invalid_request", "", ""},
		{`{"code":"NEW","kind":"fixed","value":"100","products":[1]}`, 400, "invalid_request", "", ""},
		{``, 400, "invalid_request", "", ""},
		{`{"code":"kept","kind":"percent","value":5,"products":[1]}`, 409, "coupon_exists", "", ""},
	} {
		e := wantError(t, h.as(otto, "POST", "/admin/coupons", c.body), c.status, c.code)
		if c.field != "" && e.Field != c.field {
			t.Errorf("%s: field %q, want %q (%+v)", c.body, e.Field, c.field, e)
		}
		if !strings.Contains(e.Message, c.messageHolds) {
			t.Errorf("%s: message %q, want it to say %q", c.body, e.Message, c.messageHolds)
		}
	}
	if e := h.auditOf("coupon.create").Entries[0]; e.Result != "409 coupon_exists" || !strings.Contains(e.Params, `"coupon":"KEPT"`) {
		t.Fatalf("the refused create is recorded as %+v, want its coupon and result", e)
	}
	wantError(t, h.as(otto, "POST", "/admin/coupons/NOPE/disable", ""), 404, "coupon_not_found")
	wantError(t, h.as(otto, "POST", "/admin/coupons/N%20P/enable", ""), 404, "coupon_not_found")
	got := h.coupons(otto)
	if len(got) != 1 || got[0].Code != "KEPT" || got[0].Disabled || !got[0].CreatedAt.Equal(kept[0].CreatedAt) || got[0].Value != 100 {
		t.Fatalf("after bad input the list is %+v, want only %+v", got, kept)
	}
}

// TestOrderWithACoupon: a buyer's order names a coupon in any case; the answer carries it, its
// discount and the discounted amount (checked against the OpenAPI document like every answer);
// the same key and body replays the order; the coupon's single use is then spent (409
// coupon_used_up), an unknown code is 404 coupon_not_found, a product it is not for 422
// coupon_not_applicable, a malformed one 400; and none of the refusals reserves anything.
func TestOrderWithACoupon(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 1000, 5)
	h.createProduct(2, 1000, 5)
	h.importCodes(1, codes("CPN-A", 4)...)
	h.importCodes(2, codes("CPN-B", 1)...)
	otto := h.newOperator("otto", "operator")
	wantStatus(t, h.as(otto, "POST", "/admin/coupons", `{"code":"ONCE","kind":"percent","value":15,"products":[1],"uses_per_product":1}`), 201)
	alice, bob := h.token("alice"), h.token("bob")
	body := `{"product_id":1,"qty":3,"coupon":"once"}`
	r := h.order(alice, "key-one-1", body)
	wantStatus(t, r, 201)
	var o orderJSON
	r.decode(t, &o)
	if o.Coupon != "ONCE" || o.Discount != 450 || o.Amount != 2550 || o.UnitPrice != 1000 {
		t.Fatalf("order with 15%% off 3 × 10.00: %+v", o)
	}
	r = h.order(alice, "key-one-1", body)
	wantStatus(t, r, 200)
	var again orderJSON
	r.decode(t, &again)
	if again.OrderNo != o.OrderNo || again.Amount != 2550 {
		t.Fatalf("replay: %+v, want %s", again, o.OrderNo)
	}
	wantError(t, h.order(alice, "key-one-1", `{"product_id":1,"qty":3}`), 422, "idempotency_key_reused")
	before := h.levels(1)
	wantError(t, h.order(bob, "key-two-2", `{"product_id":1,"qty":1,"coupon":"ONCE"}`), 409, "coupon_used_up")
	wantError(t, h.order(bob, "key-three-3", `{"product_id":1,"qty":1,"coupon":"NOPE-NOPE"}`), 404, "coupon_not_found")
	wantError(t, h.order(bob, "key-four-4", `{"product_id":2,"qty":1,"coupon":"ONCE"}`), 422, "coupon_not_applicable")
	wantError(t, h.order(bob, "key-five-5", `{"product_id":1,"qty":1,"coupon":"a b"}`), 400, "invalid_request")
	if after := h.levels(1); after != before {
		t.Fatalf("refused coupon orders moved the gate: %+v → %+v", before, after)
	}
	if lv := h.levels(2); lv.Stock != 1 {
		t.Fatalf("product 2 after a refused coupon: %+v", lv)
	}
}
