package console_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

func (h *harness) couponList() []application.CouponListing {
	h.t.Helper()
	all, err := h.shop.Coupons.Coupons(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return all
}

// An operator creates a coupon from the form (amounts in the shop's currency, times in the
// page's zone), the page lists it with its products, uses (none yet: "0 / limit"), validity
// and status, and disables and enables it; every write is audited as
// the API's are, with the operator.
func TestCouponsCreateListDisableEnable(t *testing.T) {
	h := newHarness(t, 0)
	p1, p2 := h.product("Steam 50", 5000), h.product("<b>Xbox</b>", 9000)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	page := oper.get("/console/coupons")
	wantStatus(t, page, 200)
	if !strings.Contains(page.body, `action="/console/coupons"`) || !strings.Contains(page.body, "No coupons yet.") ||
		!strings.Contains(page.body, `href="/console/coupons"`) {
		t.Fatalf("the empty page: %s", page.body)
	}
	ids := []string{strconv.FormatInt(int64(p2.ID()), 10), strconv.FormatInt(int64(p1.ID()), 10)}
	r := oper.post("/console/coupons", url.Values{"code": {"spring-10"}, "kind": {"fixed"}, "value": {"5.00"},
		"min_amount": {"20"}, "products": ids, "valid_from": {"2025-03-01T08:00"}, "valid_until": {"2025-04-01T00:00"},
		"uses_per_product": {"100"}, "uses_per_buyer": {"1"}})
	wantStatus(t, r, 200)
	for _, want := range []string{"Coupon SPRING-10 created.", `id="coupon-SPRING-10"`, "5.00 CNY off", "orders from 20.00 CNY",
		"Steam 50", "&lt;b&gt;Xbox&lt;/b&gt;", "0 / 100", "2025-03-01 08:00:00 UTC to 2025-04-01 00:00:00 UTC", "enabled",
		`action="/console/coupons/SPRING-10/disable"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("after creating, the page lacks %q", want)
		}
	}
	all := h.couponList()
	if len(all) != 1 || all[0].Code != "SPRING-10" || all[0].Kind != domain.CouponFixed || all[0].Value != 500 ||
		all[0].MinAmount != 2000 || len(all[0].Products) != 2 || all[0].UsesPerProduct != 100 || all[0].UsesPerBuyer != 1 {
		t.Fatalf("stored %+v", all)
	}
	e := h.audit()[0]
	if e.Operator != "otto" || e.Action != "coupon.create" || e.Result != "200" || !strings.Contains(e.Params, `"coupon":"SPRING-10"`) ||
		strings.Contains(e.Params, "csrf") {
		t.Fatalf("the create's audit entry: %+v", e)
	}

	r = oper.post("/console/coupons/SPRING-10/disable", nil)
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, "Coupon SPRING-10 disabled.") || !strings.Contains(r.body, `action="/console/coupons/SPRING-10/enable"`) {
		t.Fatalf("after disabling: %s", r.body)
	}
	if !h.couponList()[0].Disabled {
		t.Fatal("the coupon is not disabled")
	}
	if e := h.audit()[0]; e.Action != "coupon.disable" || e.Target != "coupon SPRING-10" || e.Result != "200" {
		t.Fatalf("the disable's audit entry: %+v", e)
	}
	wantStatus(t, oper.post("/console/coupons/SPRING-10/enable", nil), 200)
	if h.couponList()[0].Disabled {
		t.Fatal("the coupon is not enabled again")
	}
	// A percentage, no bounds: "10%", any time, no limits.
	r = oper.post("/console/coupons", url.Values{"code": {"TEN"}, "kind": {"percent"}, "value": {"10"}, "products": ids[:1]})
	wantStatus(t, r, 200)
	for _, want := range []string{"10% off", "any time", "0 / no limit"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the percentage coupon's row lacks %q", want)
		}
	}
}

// Bad input is said on the page, in the page's language, with the form as typed, and stores
// nothing; an unknown coupon is the not-found page.
func TestCouponsBadInputChangesNothing(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Steam 50", 5000)
	id := strconv.FormatInt(int64(p.ID()), 10)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	wantStatus(t, oper.post("/console/coupons", url.Values{"code": {"KEPT"}, "kind": {"percent"}, "value": {"5"}, "products": {id}}), 200)
	for _, c := range []struct {
		form   url.Values
		status int
		says   string
	}{
		{url.Values{"code": {"AB"}, "kind": {"percent"}, "value": {"5"}, "products": {id}}, 400, "code: must be 3 to 32 of A-Z"},
		{url.Values{"code": {"NEW-1"}, "kind": {"percent"}, "value": {"100"}, "products": {id}}, 400, "a percentage must be a whole number from 1 to 99"},
		{url.Values{"code": {"NEW-1"}, "kind": {"percent"}, "value": {"ten"}, "products": {id}}, 400, "a percentage must be a whole number"},
		{url.Values{"code": {"NEW-1"}, "kind": {"fixed"}, "value": {"abc"}, "products": {id}}, 400, "must be an amount in CNY"},
		{url.Values{"code": {"NEW-1"}, "kind": {"percent"}, "value": {"5"}}, 400, "choose at least one product"},
		{url.Values{"code": {"NEW-1"}, "kind": {"percent"}, "value": {"5"}, "products": {id, "99999"}}, 400, "product 99999 does not exist"},
		{url.Values{"code": {"NEW-1"}, "kind": {"percent"}, "value": {"5"}, "products": {id}, "valid_from": {"2025-03-02T00:00"}, "valid_until": {"2025-03-01T00:00"}}, 400, "must be after the start"},
		{url.Values{"code": {"NEW-1"}, "kind": {"percent"}, "value": {"5"}, "products": {id}, "uses_per_buyer": {"-1"}}, 400, "must be empty, 0 (no limit) or a positive whole number"},
		{url.Values{"code": {"NEW-1"}, "kind": {"percent"}, "value": {"5"}, "products": {id}, "valid_until": {"soon"}}, 400, "valid until"},
		{url.Values{"code": {"kept"}, "kind": {"percent"}, "value": {"5"}, "products": {id}}, 409, "a coupon with that code already exists"},
	} {
		r := oper.post("/console/coupons", c.form)
		wantStatus(t, r, c.status)
		if !strings.Contains(r.body, `class="error"`) || !strings.Contains(r.body, c.says) ||
			!strings.Contains(r.body, `value="`+c.form.Get("code")+`"`) {
			t.Errorf("%v: the page does not say %q with the form as typed: %s", c.form, c.says, r.body)
		}
	}
	if all := h.couponList(); len(all) != 1 || all[0].Code != "KEPT" {
		t.Fatalf("bad input stored coupons: %+v", all)
	}
	wantStatus(t, oper.post("/console/coupons/NOPE/disable", nil), 404)
	if e := h.audit()[0]; e.Action != "coupon.disable" || e.Result != "404 coupon_not_found" {
		t.Fatalf("the unknown coupon's audit entry: %+v", e)
	}
}

// A viewer reads the list without the forms and may not write (403, audited); a post without
// the session's CSRF token is refused before anything runs.
func TestCouponsNeedTheRoleAndTheCSRFToken(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Steam 50", 5000)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	viewer := h.login(h.operator("vera", domain.RoleViewer))
	wantStatus(t, oper.post("/console/coupons", url.Values{"code": {"KEPT"}, "kind": {"percent"}, "value": {"5"},
		"products": {strconv.FormatInt(int64(p.ID()), 10)}}), 200)
	list := viewer.get("/console/coupons")
	wantStatus(t, list, 200)
	if !strings.Contains(list.body, "KEPT") || strings.Contains(list.body, `method="post" action="/console/coupons`) {
		t.Fatalf("a viewer's page lacks the coupon or offers a form: %s", list.body)
	}
	wantStatus(t, viewer.post("/console/coupons", url.Values{"code": {"MINE"}, "kind": {"percent"}, "value": {"5"}}), 403)
	wantStatus(t, viewer.post("/console/coupons/KEPT/disable", nil), 403)
	if e := h.audit()[0]; e.Operator != "vera" || e.Action != "coupon.disable" || e.Result != "403 forbidden" {
		t.Fatalf("the viewer's refusal is audited as %+v", e)
	}
	for name, tok := range map[string]string{"no": "", "forged": "forged-token", "another session's": viewer.csrf} {
		f := url.Values{}
		if tok != "" {
			f.Set("csrf", tok)
		}
		if r := h.postForm("/console/coupons/KEPT/disable", f, oper.cookie); r.status != fiber.StatusForbidden {
			t.Errorf("a disable with %s token: status %d, want 403", name, r.status)
		}
	}
	if all := h.couponList(); len(all) != 1 || all[0].Disabled {
		t.Fatalf("refused posts changed the coupons: %+v", all)
	}
}

// The page in Chinese: its words from the zh-CN catalogue, a refusal's reason too.
func TestCouponsPageInChinese(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Steam 50", 5000)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	f := url.Values{"code": {"TEN"}, "kind": {"percent"}, "value": {"100"}, "products": {strconv.FormatInt(int64(p.ID()), 10)},
		"csrf": {oper.csrf}}
	r := h.postForm("/console/coupons", f, oper.cookie, "Accept-Language", "zh-CN")
	wantStatus(t, r, 400)
	for _, want := range []string{"新建优惠券", "值：百分比须为 1 到 99 的整数", "还没有优惠券。"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the Chinese page lacks %q: %s", want, r.body)
		}
	}
}

// An order placed with a coupon shows it on its console page: the code and what it took off,
// above the amount the buyer pays.
func TestOrderPageShowsItsCoupon(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Steam 50", 5000)
	if _, err := h.shop.Catalogue.ImportCodes(context.Background(), p.ID(), strings.NewReader("CPN-CONSOLE-1\nCPN-CONSOLE-2\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.shop.Coupons.CreateCoupon(context.Background(), domain.Coupon{Code: "TENOFF", Kind: domain.CouponPercent, Value: 10,
		Products: []domain.ProductID{p.ID()}}); err != nil {
		t.Fatal(err)
	}
	placed, err := h.shop.Sales.PlaceOrder(context.Background(), application.PlaceOrder{Buyer: "buyer-1", Product: p.ID(), Qty: 2,
		IdempotencyKey: "key-coupon-1", Coupon: "tenoff"})
	if err != nil {
		t.Fatal(err)
	}
	page := h.login(h.operator("sam", domain.RoleViewer)).get("/console/orders/" + string(placed.Order.No()))
	wantStatus(t, page, 200)
	for _, want := range []string{"<dt>Coupon</dt><dd><code>TENOFF</code> −10.00 CNY</dd>", "90.00 CNY"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the order page lacks %q", want)
		}
	}
}
