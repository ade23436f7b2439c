package storefront_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// TestCatalogueShowsEveryStateWithETag: the catalogue lists each product with its price, its
// stock as the product chose and its state, in the visitor's language; the same snapshot in
// the same language answers 304 to its ETag, another language has another ETag.
func TestCatalogueShowsEveryStateWithETag(t *testing.T) {
	h := newHarness(t)
	h.product(application.NewProduct{Name: "Steam 100", Price: 10000,
		Tiers: []domain.PriceTier{{MinQty: 3, UnitPrice: 9000}}}, 3)
	h.product(application.NewProduct{Name: "Empty shelf", Price: 500}, 0)
	h.product(application.NewProduct{Name: "Last year", Price: 500,
		Sale: domain.SaleRules{StartsAt: start.Add(-48 * time.Hour), EndsAt: start.Add(-time.Hour)}}, 2)
	h.product(application.NewProduct{Name: "Tomorrow", Price: 500, Sale: domain.SaleRules{StartsAt: start.Add(24 * time.Hour)}}, 2)
	h.product(application.NewProduct{Name: "Hidden count", Price: 700, StockDisplay: domain.StockLevel}, 20)

	en := h.browser("en-GB,en;q=0.9")
	r := en.get("/")
	wantStatus(t, r, 200)
	wantContains(t, r, "Steam 100", "100.00 CNY", "less when you buy more", "3 left", "Empty shelf", "Sold out",
		"Last year", "Sale ended", "Tomorrow", "Coming soon", "Hidden count", "In stock", `lang="en"`)
	if strings.Contains(r.body, "20 left") {
		t.Error("the catalogue shows the count of a product that shows a level")
	}
	etag := r.header.Get("ETag")
	if etag == "" || r.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, r.header.Get("Cache-Control"))
	}
	again := en.do("GET", "/", nil, "If-None-Match", etag)
	if again.status != 304 || again.body != "" {
		t.Fatalf("the same snapshot again: %s", again)
	}
	zh := h.browser("zh-CN,zh;q=0.9")
	rz := zh.do("GET", "/", nil, "If-None-Match", etag)
	wantStatus(t, rz, 200)
	wantContains(t, rz, "在售", "已售罄", "已结束", "即将开售", "库存 3 件", `lang="zh-CN"`)
	if rz.header.Get("ETag") == etag {
		t.Error("both languages have the same ETag")
	}

	// A sale changes the snapshot: the old ETag no longer matches.
	h.product(application.NewProduct{Name: "New arrival", Price: 100}, 1)
	h.clock.Advance(time.Minute)
	changed := en.do("GET", "/", nil, "If-None-Match", etag)
	wantStatus(t, changed, 200)
	wantContains(t, changed, "New arrival")
}

// TestProductPageStates: the product page shows tiers and limits and the order form while on
// sale; no form once sold out or ended; a countdown by the gate's clock with the form hidden
// (the script reveals it) before the start, and the form itself once the start has passed.
func TestProductPageStates(t *testing.T) {
	h := newHarness(t)
	onSale := h.product(application.NewProduct{Name: "Gift card", Price: 2500, MaxPerOrder: 4,
		Tiers: []domain.PriceTier{{MinQty: 2, UnitPrice: 2400}}, Sale: domain.SaleRules{BuyerLimit: 6}}, 5)
	soldOut := h.product(application.NewProduct{Name: "Gone", Price: 100}, 0)
	ended := h.product(application.NewProduct{Name: "Over", Price: 100,
		Sale: domain.SaleRules{StartsAt: start.Add(-2 * time.Hour), EndsAt: start.Add(-time.Hour)}}, 1)
	upcoming := h.product(application.NewProduct{Name: "Drop", Price: 100,
		Sale: domain.SaleRules{StartsAt: start.Add(90 * time.Second)}}, 3)
	b := h.browser("en")

	r := b.get(path(onSale))
	wantStatus(t, r, 200)
	wantContains(t, r, "Gift card", "25.00 CNY", "2 or more", "24.00 CNY", "Up to 4 per order.",
		"Up to 6 per e-mail address in all.", `action="/checkout/review"`, `name="email"`, `value="dev"`, `max="4"`)
	if strings.Contains(r.body, `id="checkout" method="post" action="/checkout/review" hidden`) {
		t.Error("the form of a product on sale is hidden")
	}

	for _, p := range []domain.Product{soldOut, ended} {
		r := b.get(path(p))
		wantStatus(t, r, 200)
		if strings.Contains(r.body, `action="/checkout/review"`) {
			t.Errorf("%s: an order form: %s", p.Name(), r.body)
		}
	}
	wantContains(t, b.get(path(soldOut)), "Sold out")
	wantContains(t, b.get(path(ended)), "Sale ended")

	r = b.get(path(upcoming))
	wantContains(t, r, "The sale starts in", `data-remaining="90"`, "0:01:30", `src="/static/shop/countdown.js"`,
		`action="/checkout/review" hidden`)
	h.clock.Advance(91 * time.Second)
	r = b.get(path(upcoming))
	if strings.Contains(r.body, "data-remaining") || strings.Contains(r.body, `action="/checkout/review" hidden`) {
		t.Fatalf("after the start, still a countdown: %s", r.body)
	}
	wantContains(t, r, `action="/checkout/review"`)

	wantStatus(t, b.get("/p/99999"), 404)
	wantStatus(t, b.get("/p/abc"), 404)
}

// TestEveryIdempotencyKeyIsFresh: every rendered form carries its own key, so two tabs never
// share one (and a reload is a new order).
func TestEveryIdempotencyKeyIsFresh(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Key", Price: 100}, 1)
	b := h.browser("en")
	seen := map[string]bool{}
	for range 20 {
		k := orderForm(t, b, p, "1", "key@example.com").Get("key")
		if seen[k] {
			t.Fatalf("key %s rendered twice", k)
		}
		seen[k] = true
	}
}

func path(p domain.Product) string { return "/p/" + strconv.FormatInt(int64(p.ID()), 10) }

// TestProductPageIsTheSameForEveryone: the product page holds no token, no key and sets no
// cookie (its form only asks for the review page), so it is rendered once per snapshot and
// language and answered 304 to a browser that has it; the review page is where the CSRF token
// and the order's fresh key are.
func TestProductPageIsTheSameForEveryone(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Cached", Price: 100}, 3)
	r := h.browser("en").get(path(p))
	wantStatus(t, r, 200)
	for _, leak := range []string{`name="csrf"`, `name="key"`} {
		if strings.Contains(r.body, leak) {
			t.Errorf("the product page holds %s", leak)
		}
	}
	if c := r.header.Get("Set-Cookie"); c != "" {
		t.Errorf("the product page sets a cookie: %s", c)
	}
	tag := r.header.Get("ETag")
	if tag == "" || r.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", tag, r.header.Get("Cache-Control"))
	}
	other := h.browser("en").get(path(p))
	if other.body != r.body || other.header.Get("ETag") != tag {
		t.Error("two visitors got different product pages")
	}
	again := h.browser("en").do("GET", path(p), nil, "If-None-Match", tag)
	if again.status != 304 || again.body != "" {
		t.Fatalf("revalidation: %d %q", again.status, again.body)
	}
	if zh := h.browser("zh-CN").get(path(p)); zh.header.Get("ETag") == tag {
		t.Error("the Chinese page has the English page's ETag")
	}
	form := orderForm(t, h.browser("en"), p, "2", "cached@example.com")
	if form.Get("csrf") == "" || form.Get("key") == "" || form.Get("qty") != "2" {
		t.Fatalf("the review page's form: %v", form)
	}
}
