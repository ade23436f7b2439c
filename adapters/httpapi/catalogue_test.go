package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

type catalogueProductJSON struct {
	ID           int64      `json:"id"`
	Name         string     `json:"name"`
	Description  string     `json:"description"`
	Price        int64      `json:"price"`
	Currency     string     `json:"currency"`
	Tiers        []tierJSON `json:"tiers"`
	MinPerOrder  int        `json:"min_per_order"`
	MaxPerOrder  int        `json:"max_per_order"`
	Group        string     `json:"group"`
	Variant      string     `json:"variant"`
	BuyerLimit   int        `json:"buyer_limit"`
	StartsAt     *time.Time `json:"starts_at"`
	EndsAt       *time.Time `json:"ends_at"`
	Status       string     `json:"status"`
	StockDisplay string     `json:"stock_display"`
	Stock        *int64     `json:"stock"`
	StockLevel   string     `json:"stock_level"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

type catalogueJSON struct {
	Products  []catalogueProductJSON `json:"products"`
	UpdatedAt time.Time              `json:"updated_at"`
}

func (h *harness) catalogue() (catalogueJSON, resp) {
	h.t.Helper()
	r := h.do("GET", "/api/products", nil)
	wantStatus(h.t, r, 200)
	var c catalogueJSON
	r.decode(h.t, &c)
	return c, r
}

// TestCatalogueOverHTTP: no token; statuses, tiers and stock as the product's display says;
// never a frozen reason or anything else the catalogue does not name (strict decoding).
func TestCatalogueOverHTTP(t *testing.T) {
	h := newHarness(t)
	r := h.admin("POST", "/admin/products", `{"id":1,"name":"Wholesale","price":1000,"max_per_order":50,`+
		`"tiers":[{"min_qty":10,"unit_price":900},{"min_qty":20,"unit_price":800}],"stock_display":"level"}`)
	wantStatus(t, r, 201)
	var created productJSON
	r.decode(t, &created)
	if len(created.Tiers) != 2 || created.StockDisplay != "level" {
		t.Fatalf("created %+v", created)
	}
	h.importCodes(1, codes("W", 30)...)
	h.createProduct(2, 500, 5)
	h.createProduct(3, 500, 5)
	h.importCodes(3, codes("P", 4)...)
	wantStatus(t, h.admin("POST", "/admin/products/3/freeze", `{"reason":"secret reason"}`), 200)

	c, res := h.catalogue()
	if res.header.Get("Cache-Control") != "public, max-age=1" || res.header.Get("ETag") == "" {
		t.Fatalf("headers %v", res.header)
	}
	if strings.Contains(string(res.body), "secret reason") {
		t.Fatal("the catalogue shows a frozen reason")
	}
	if len(c.Products) != 3 {
		t.Fatalf("%d products, want 3", len(c.Products))
	}
	w, sold, paused := c.Products[0], c.Products[1], c.Products[2]
	if w.Status != "on_sale" || w.StockLevel != "plenty" || w.Stock != nil || w.Currency != "CNY" || len(w.Tiers) != 2 ||
		w.Tiers[1] != (tierJSON{MinQty: 20, UnitPrice: 800}) || w.MaxPerOrder != 50 || w.Price != 1000 {
		t.Errorf("wholesale product: %+v", w)
	}
	if sold.Status != "sold_out" || sold.Stock == nil || *sold.Stock != 0 || sold.StockLevel != "" || sold.Tiers == nil {
		t.Errorf("product without codes: %+v", sold)
	}
	if paused.Status != "paused" || paused.Stock == nil || *paused.Stock != 4 {
		t.Errorf("frozen product: %+v", paused)
	}
	one := h.do("GET", "/api/products/1", nil)
	wantStatus(t, one, 200)
	var p catalogueProductJSON
	one.decode(t, &p)
	if p.ID != 1 || p.Status != "on_sale" || !p.UpdatedAt.Equal(c.UpdatedAt) {
		t.Errorf("GET /api/products/1 = %+v", p)
	}
	for _, target := range []string{"/api/products/99", "/api/products/x", "/api/products/0"} {
		r := h.do("GET", target, nil)
		wantStatus(t, r, 404)
		if !strings.Contains(string(r.body), "product_not_found") {
			t.Errorf("%s: %s", target, r.body)
		}
	}
}

// TestCatalogueETag: If-None-Match with the current tag answers 304 without a body; a change
// of stock (after the refresh interval) changes the tag.
func TestCatalogueETag(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 1000, 5)
	h.importCodes(1, codes("E", 5)...)
	_, first := h.catalogue()
	tag := first.header.Get("ETag")
	for _, inm := range []string{tag, "W/" + tag, `"other", ` + tag, "*"} {
		r := h.do("GET", "/api/products", nil, "If-None-Match", inm)
		wantStatus(t, r, 304)
		if len(r.body) != 0 || r.header.Get("ETag") != tag || r.header.Get("Cache-Control") != "public, max-age=1" {
			t.Fatalf("If-None-Match %s: body %q, headers %v", inm, r.body, r.header)
		}
	}
	r := h.do("GET", "/api/products", nil, "If-None-Match", `"other"`)
	wantStatus(t, r, 200)
	item := h.do("GET", "/api/products/1", nil)
	itemTag := item.header.Get("ETag")
	if itemTag == "" || itemTag == tag {
		t.Fatalf("product tag %q, list tag %q: want a tag of its own", itemTag, tag)
	}
	wantStatus(t, h.do("GET", "/api/products/1", nil, "If-None-Match", itemTag), 304)

	h.placeOrder(h.token("buyer-1"), "key-etag-0001", 1, 2)
	h.clock.Advance(application.DefaultConfig().CatalogueLevelsEvery)
	c, changed := h.catalogue()
	if changed.header.Get("ETag") == tag || *c.Products[0].Stock != 3 {
		t.Fatalf("after an order: tag %q (was %q), stock %d; want a new tag and stock 3", changed.header.Get("ETag"), tag, *c.Products[0].Stock)
	}
	wantStatus(t, h.do("GET", "/api/products", nil, "If-None-Match", tag), 200)
}

// TestUpdateProductOverHTTP: PATCH changes the given fields only; the next order pays the new
// tier while an existing order keeps its amount; bad changes are 400 and change nothing.
func TestUpdateProductOverHTTP(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 1000, 20)
	h.importCodes(1, codes("U", 20)...)
	tok := h.token("buyer-1")
	before := h.placeOrder(tok, "key-patch-0001", 1, 10)
	if before.UnitPrice != 1000 || before.Amount != 10000 {
		t.Fatalf("order before the change: %+v", before)
	}
	r := h.admin("PATCH", "/admin/products/1", `{"tiers":[{"min_qty":5,"unit_price":700}],"stock_display":"level"}`)
	wantStatus(t, r, 200)
	var p productJSON
	r.decode(t, &p)
	if p.Name != "Gift card 1" || p.Price != 1000 || p.MaxPerOrder != 20 || len(p.Tiers) != 1 || p.StockDisplay != "level" {
		t.Fatalf("after PATCH: %+v", p)
	}
	if after := h.placeOrder(h.token("buyer-2"), "key-patch-0002", 1, 5); after.UnitPrice != 700 || after.Amount != 3500 {
		t.Fatalf("order after the change: %+v, want 700 a unit", after)
	}
	if again := h.adminOrder(before.OrderNo); again.UnitPrice != 1000 || again.Amount != 10000 {
		t.Fatalf("the change changed an existing order: %+v", again)
	}
	replay := h.order(tok, "key-patch-0001", `{"product_id":1,"qty":10}`)
	wantStatus(t, replay, 200)
	var o orderJSON
	replay.decode(t, &o)
	if o.OrderNo != before.OrderNo || o.Amount != 10000 {
		t.Fatalf("replay after the change: %+v, want the original order at 10000", o)
	}
	for _, body := range []string{`{"price":600}`, `{"tiers":[{"min_qty":1,"unit_price":700}]}`, `{"stock_display":""}`,
		`{"stock_display":"lots"}`, `{"max_per_order":4}`, `{"price":"cheap"}`, `{"colour":"red"}`} {
		r := h.admin("PATCH", "/admin/products/1", body)
		wantStatus(t, r, 400)
	}
	r = h.admin("GET", "/admin/products/1", "")
	r.decode(t, &p)
	if p.Price != 1000 || len(p.Tiers) != 1 || p.MaxPerOrder != 20 || p.StockDisplay != "level" {
		t.Fatalf("a refused PATCH changed the product: %+v", p)
	}
	wantStatus(t, h.admin("PATCH", "/admin/products/1", `{"tiers":[]}`), 200)
	wantStatus(t, h.admin("PATCH", "/admin/products/42", `{"price":5}`), 404)
	wantStatus(t, h.do("PATCH", "/admin/products/1", strings.NewReader(`{"price":5}`)), 401)
}

// countingLedger counts every product read that reaches the ledger.
type countingLedger struct {
	*memory.Ledger
	reads atomic.Int64
}

func (l *countingLedger) Products() domain.ProductCatalog {
	return countingCatalog{l.Ledger.Products(), l}
}

type countingCatalog struct {
	domain.ProductCatalog
	l *countingLedger
}

func (c countingCatalog) Products(ctx context.Context) ([]domain.Product, error) {
	c.l.reads.Add(1)
	return c.ProductCatalog.Products(ctx)
}

func (c countingCatalog) Product(ctx context.Context, id domain.ProductID) (domain.Product, error) {
	c.l.reads.Add(1)
	return c.ProductCatalog.Product(ctx, id)
}

// countingGate counts the gate's catalogue reads.
type countingGate struct {
	domain.StockGate
	many atomic.Int64
}

func (g *countingGate) LevelsMany(ctx context.Context, ids []domain.ProductID) (map[domain.ProductID]domain.GateLevels, error) {
	g.many.Add(1)
	return g.StockGate.LevelsMany(ctx, ids)
}

// TestCatalogueRequestsReadNoLedger: within one refresh interval any number of catalogue
// requests make one gate call and no ledger read; the next interval one more gate call.
func TestCatalogueRequestsReadNoLedger(t *testing.T) {
	var ledger *countingLedger
	var gate *countingGate
	h := newHarnessWith(t, func(d *application.Deps) {
		ledger = &countingLedger{Ledger: d.Ledger.(*memory.Ledger)}
		gate = &countingGate{StockGate: d.Gate}
		d.Ledger, d.Gate = ledger, gate
	})
	h.createProduct(1, 1000, 5)
	h.createProduct(2, 1000, 5)
	h.catalogue()
	reads, calls := ledger.reads.Load(), gate.many.Load()
	for i := range 200 {
		wantStatus(t, h.do("GET", fmt.Sprintf("/api/products/%d", i%2+1), nil), 200)
		h.catalogue()
	}
	if got := ledger.reads.Load() - reads; got != 0 {
		t.Fatalf("%d ledger reads for 400 catalogue requests, want 0", got)
	}
	if got := gate.many.Load() - calls; got != 0 {
		t.Fatalf("%d gate calls within the interval, want 0", got)
	}
	h.clock.Advance(application.DefaultConfig().CatalogueLevelsEvery)
	for range 50 {
		h.catalogue()
	}
	if got := gate.many.Load() - calls; got != 1 {
		t.Fatalf("%d gate calls in the next interval, want 1", got)
	}
	if got := ledger.reads.Load() - reads; got != 0 {
		t.Fatalf("%d ledger reads before the product interval, want 0", got)
	}
}

// BenchmarkCatalogue measures the catalogue handler on a warm snapshot of 50 products, through
// the app's fasthttp handler (no network), for the list, one product, and a 304.
func BenchmarkCatalogue(b *testing.B) {
	h := newHarness(b)
	for id := int64(1); id <= 50; id++ {
		h.createProduct(id, 1000+id, 10)
	}
	h.importCodes(7, codes("B", 20)...)
	_, first := h.catalogue()
	tag := first.header.Get("ETag")
	handler := h.app.Handler()
	for _, bc := range []struct{ name, path, inm string }{
		{"list", "/api/products", ""},
		{"product", "/api/products/7", ""},
		{"list_304", "/api/products", tag},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			b.ReportAllocs()
			for b.Loop() {
				ctx.Request.Reset()
				ctx.Response.Reset()
				ctx.Request.Header.SetMethod("GET")
				ctx.Request.SetRequestURI(bc.path)
				if bc.inm != "" {
					ctx.Request.Header.Set("If-None-Match", bc.inm)
				}
				handler(&ctx)
				if code := ctx.Response.StatusCode(); code != 200 && code != 304 {
					b.Fatalf("status %d", code)
				}
			}
		})
	}
}
