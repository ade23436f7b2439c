package storefront_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

var couponField = regexp.MustCompile(`name="coupon" value="([^"]+)"`)

// coupon creates a coupon on the products through the shop's admin use case.
func (h *harness) coupon(t *testing.T, c domain.Coupon) {
	t.Helper()
	if _, err := h.shop.Coupons.CreateCoupon(context.Background(), c); err != nil {
		t.Fatalf("create coupon: %v", err)
	}
}

// TestCheckoutWithACoupon: the product page's form has a coupon field; the review page shows the
// coupon, its discount and the amount to pay (the server's, whatever the form says), and carries
// the coupon to the checkout; the order is placed with it, the confirmation and the order page
// show it, and the order's amount is discounted. A code that does not apply, an unknown one and
// one used up are refusal pages in the buyer's language that place nothing.
func TestCheckoutWithACoupon(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Steam 100", Price: 10000}, 5)
	other := h.product(application.NewProduct{Name: "Other", Price: 10000}, 5)
	h.coupon(t, domain.Coupon{Code: "spring-10", Kind: domain.CouponPercent, Value: 10, Products: []domain.ProductID{p.ID()},
		UsesPerProduct: 1})
	b := h.browser("zh-CN")
	page := b.get(path(p))
	wantContains(t, page, `name="coupon"`, "优惠码（可选）")
	review := b.post("/checkout/review", url.Values{"product": {strings.TrimPrefix(path(p), "/p/")}, "qty": {"2"},
		"email": {"coupon@example.com"}, "provider": {"dev"}, "coupon": {" spring-10 "}})
	wantStatus(t, review, 200)
	wantContains(t, review, "优惠券", "<code>SPRING-10</code> −20.00 CNY", "180.00 CNY")
	form := url.Values{"csrf": {field(t, csrfField, review.body)}, "key": {field(t, keyField, review.body)},
		"product": {field(t, productField, review.body)}, "qty": {field(t, qtyField, review.body)},
		"email": {field(t, emailField, review.body)}, "provider": {field(t, providerField, review.body)},
		"coupon": {field(t, couponField, review.body)}}
	r := b.post("/checkout", form)
	no, _ := placed(t, r)
	wantContains(t, r, "<code>SPRING-10</code> −20.00 CNY", "180.00 CNY")
	os := h.orders()
	if len(os) != 1 || os[0].No() != no || os[0].Coupon() != "SPRING-10" || os[0].Discount() != 2000 || os[0].Amount() != 18000 {
		t.Fatalf("orders: %+v", os)
	}
	wantContains(t, b.get("/orders/"+string(no)), "<code>SPRING-10</code> −20.00 CNY")

	for _, tc := range []struct {
		name, product, coupon string
		status                int
		text                  string
	}{
		{"used up", strings.TrimPrefix(path(p), "/p/"), "SPRING-10", 409, "使用次数已用完"},
		{"another product", strings.TrimPrefix(path(other), "/p/"), "SPRING-10", 422, "不适用于本订单"},
		{"unknown", strings.TrimPrefix(path(p), "/p/"), "NO-SUCH", 404, "没有这个优惠码"},
		{"malformed", strings.TrimPrefix(path(p), "/p/"), "a b", 422, "没有这个优惠码"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The review page tells at once (nothing is claimed there) ...
			r := b.post("/checkout/review", url.Values{"product": {tc.product}, "qty": {"1"}, "email": {"again@example.com"},
				"provider": {"dev"}, "coupon": {tc.coupon}})
			if tc.name == "used up" {
				// ... except a use taken at the checkout: the review shows the discount, the
				// checkout refuses it.
				wantStatus(t, r, 200)
				f := url.Values{"csrf": {field(t, csrfField, r.body)}, "key": {field(t, keyField, r.body)},
					"product": {tc.product}, "qty": {"1"}, "email": {"again@example.com"}, "provider": {"dev"}, "coupon": {tc.coupon}}
				r = b.post("/checkout", f)
			}
			wantStatus(t, r, tc.status)
			wantContains(t, r, tc.text)
			if n := len(h.orders()); n != 1 {
				t.Fatalf("a refused coupon placed an order: %d orders", n)
			}
		})
	}
}
