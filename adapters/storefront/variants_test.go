package storefront_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// TestMinPerOrderOnTheStorefront: the quantity input starts at the minimum and is bounded by
// it; the limits say it; an order below it is a page in the buyer's language from the review
// and from the checkout, and reserves nothing.
func TestMinPerOrderOnTheStorefront(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Bulk keys", Price: 100, MinPerOrder: 3, MaxPerOrder: 8}, 20)
	en := h.browser("en")
	r := en.get(path(p))
	wantStatus(t, r, 200)
	wantContains(t, r, `name="qty" value="3" min="3" max="8"`, "At least 3 per order.")
	wantContains(t, h.browser("zh-CN").get(path(p)), "每单至少 3 件。")

	before := h.stock(p.ID())
	zh := h.browser("zh-CN")
	r = zh.post("/checkout/review", map[string][]string{"product": {strings.TrimPrefix(path(p), "/p/")}, "qty": {"2"},
		"email": {"a@example.com"}, "provider": {"dev"}})
	wantStatus(t, r, 422)
	wantContains(t, r, "该商品每单至少购买 3 件", `lang="zh-CN"`, `href="`+path(p)+`"`)
	r = en.post("/checkout", orderFormRaw(t, en, p, "2", "a@example.com"))
	wantStatus(t, r, 422)
	wantContains(t, r, "This quantity cannot be ordered", `href="`+path(p)+`"`)
	if n := len(h.orders()); n != 0 {
		t.Fatalf("%d orders after refused ones, want 0", n)
	}
	if got := h.stock(p.ID()); got != before {
		t.Fatalf("gate %+v after refused orders, was %+v", got, before)
	}
	placed(t, en.post("/checkout", orderForm(t, en, p, "3", "a@example.com")))
	if got := h.stock(p.ID()); got.Stock != before.Stock-3 {
		t.Fatalf("gate %+v after an order of 3, was %+v", got, before)
	}
}

// TestVariantsOnTheStorefront: a group is one card of the catalogue (its name, its lowest
// price, how many options); each variant's page is the group's page with a picker that lists
// every variant with its own price and status, links to each, and marks this one; buying a
// variant reserves its own stock only, from many buyers at once.
func TestVariantsOnTheStorefront(t *testing.T) {
	h := newHarness(t)
	group := func(name string, price domain.Money, label string, n int, sale domain.SaleRules) domain.Product {
		return h.product(application.NewProduct{Name: name, Price: price, Group: "Steam card", Variant: label, Sale: sale}, n)
	}
	v50 := group("Steam 50", 5000, "50", 0, domain.SaleRules{})
	v100 := group("Steam 100", 10000, "100", 40, domain.SaleRules{})
	v200 := group("Steam 200", 20000, "200", 3, domain.SaleRules{StartsAt: start.Add(time.Hour)})
	alone := h.product(application.NewProduct{Name: "Apple 100", Price: 10000}, 2)

	en := h.browser("en")
	r := en.get("/")
	wantStatus(t, r, 200)
	wantContains(t, r, "Steam card", "from 50.00 CNY", "3 options", `href="`+path(v100)+`"`, "Apple 100", `href="`+path(alone)+`"`)
	if got := len(regexp.MustCompile(`class="item"`).FindAllString(r.body, -1)); got != 2 {
		t.Fatalf("%d catalogue cards, want 2 (the group and the product on its own)", got)
	}
	for _, p := range []domain.Product{v50, v200} {
		if strings.Contains(r.body, `href="`+path(p)+`"`) || strings.Contains(r.body, p.Name()) {
			t.Errorf("the catalogue shows variant %q on its own card", p.Name())
		}
	}
	wantContains(t, h.browser("zh-CN").get("/"), "50.00 CNY 起", "3 种规格可选")

	page := en.get(path(v200))
	wantStatus(t, page, 200)
	wantContains(t, page, "<h1>Steam card</h1>", "Choose an option", "Steam 200",
		`href="`+path(v50)+`"`, `href="`+path(v100)+`"`, `href="`+path(v200)+`" aria-current="page"`,
		"50.00 CNY", "100.00 CNY", "200.00 CNY", "Sold out", "40 left", "Coming soon", `id="countdown"`)
	if n := strings.Count(page.body, `aria-current="page"`); n != 1 {
		t.Fatalf("%d variants marked current, want 1", n)
	}
	wantContains(t, en.get(path(v100)), `href="`+path(v100)+`" aria-current="page"`, `name="product" value="`+
		strings.TrimPrefix(path(v100), "/p/")+`"`)
	if body := en.get(path(alone)).body; strings.Contains(body, "Choose an option") {
		t.Error("a product on its own shows a picker")
	}

	before := map[domain.ProductID]domain.GateLevels{v50.ID(): h.stock(v50.ID()), v200.ID(): h.stock(v200.ID()), alone.ID(): h.stock(alone.ID())}
	const buyers = 12
	var wg sync.WaitGroup
	forms := make(chan error, buyers)
	for i := range buyers {
		b := h.browser("en")
		f := orderForm(t, b, v100, "2", "buyer"+string(rune('a'+i))+"@example.com")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := b.post("/checkout", f); r.status != 200 {
				forms <- &statusError{r.String()}
			}
		}()
	}
	wg.Wait()
	close(forms)
	for err := range forms {
		t.Fatal(err)
	}
	if got := h.stock(v100.ID()); got.Stock != 40-2*buyers || got.Sold != 2*buyers {
		t.Fatalf("variant 100's gate %+v after %d orders of 2", got, buyers)
	}
	for id, l := range before {
		if got := h.stock(id); got != l {
			t.Errorf("product %d's gate changed by orders of another variant: %+v, was %+v", id, got, l)
		}
	}
	for _, o := range h.orders() {
		if o.Product() != v100.ID() {
			t.Errorf("order %s of product %d, want %d", o.No(), o.Product(), v100.ID())
		}
	}
}

type statusError struct{ s string }

func (e *statusError) Error() string { return "checkout: " + e.s }

// stock reads a product's gate.
func (h *harness) stock(id domain.ProductID) domain.GateLevels {
	h.t.Helper()
	l, err := h.shop.Catalogue.StockLevels(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return l[id]
}
