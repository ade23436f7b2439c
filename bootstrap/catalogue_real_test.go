package bootstrap_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/porttest"
)

type catalogueItem struct {
	ID    int64 `json:"id"`
	Price int64 `json:"price"`
	Tiers []struct {
		MinQty    int   `json:"min_qty"`
		UnitPrice int64 `json:"unit_price"`
	} `json:"tiers"`
	Status     string `json:"status"`
	Stock      *int64 `json:"stock"`
	StockLevel string `json:"stock_level"`
}

// TestRealAdaptersCatalogueAndTiers: on Redis and MariaDB, a product with quantity prices is in
// the public catalogue (no token) with its stock level; an order pays its tier; a price change
// is stored (price_tiers in MariaDB) and shown, and the placed order keeps its amount.
func TestRealAdaptersCatalogueAndTiers(t *testing.T) {
	c, _, db := realService(t, time.Minute)
	ctx := context.Background()
	pid := int64(porttest.NewProductID())
	c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Real tiers","price":1000,"max_per_order":20,`+
		`"tiers":[{"min_qty":5,"unit_price":900}],"stock_display":"level"}`, pid), nil)
	codes := make([]string, 12)
	for i := range codes {
		codes[i] = fmt.Sprintf("TIER-%d-%04d", pid, i)
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, strings.Join(codes, "\n"), nil)

	item := func() catalogueItem {
		t.Helper()
		var it catalogueItem
		c.want(200, "GET", fmt.Sprintf("/api/products/%d", pid), "", "", &it)
		return it
	}
	// The import landed in the gate after the snapshot may have been taken: wait for a refresh.
	deadline := time.Now().Add(10 * time.Second)
	it := item()
	for it.StockLevel != "plenty" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		it = item()
	}
	if it.Status != "on_sale" || it.StockLevel != "plenty" || it.Stock != nil || len(it.Tiers) != 1 || it.Tiers[0].UnitPrice != 900 {
		t.Fatalf("catalogue item %+v", it)
	}

	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"tier-buyer"}`, &tok)
	var o orderBody
	c.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":5}`, pid), &o, "Idempotency-Key", fmt.Sprintf("tier-%d-1", pid))
	if o.Amount != 4500 {
		t.Fatalf("order of 5 at the tier: amount %d, want 4500", o.Amount)
	}

	c.want(200, "PATCH", fmt.Sprintf("/admin/products/%d", pid), adminToken, `{"price":2000,"tiers":[{"min_qty":5,"unit_price":1800}]}`, nil)
	var tiers string
	if err := db.QueryRowContext(ctx, "SELECT price_tiers FROM products WHERE id = ?", pid).Scan(&tiers); err != nil ||
		tiers != `[{"min_qty":5,"unit_price":1800}]` {
		t.Fatalf("price_tiers in MariaDB = %q, %v", tiers, err)
	}
	if it := item(); it.Price != 2000 || it.Tiers[0].UnitPrice != 1800 || it.StockLevel != "few" {
		t.Fatalf("catalogue after the change: %+v, want the new prices and 7 units (few)", it)
	}
	var amount int64
	if err := db.QueryRowContext(ctx, "SELECT amount FROM orders WHERE order_no = ?", o.OrderNo).Scan(&amount); err != nil || amount != 4500 {
		t.Fatalf("stored order amount %d, %v; want 4500 after the price change", amount, err)
	}
	var next orderBody
	c.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":5}`, pid), &next, "Idempotency-Key", fmt.Sprintf("tier-%d-2", pid))
	if next.Amount != 9000 {
		t.Fatalf("order after the change: amount %d, want 9000", next.Amount)
	}
}
