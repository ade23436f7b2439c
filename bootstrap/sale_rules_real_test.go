package bootstrap_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/porttest"
	"cardshop/bootstrap"
)

// TestRealAdaptersSaleWindowAndBuyerLimit: on Redis and MariaDB, an instance whose clock runs
// 5 s ahead (and that leaves every decision to Redis: no local margin) still cannot sell before
// the start by Redis's clock; after it, one buyer's 12 concurrent orders get exactly the limit;
// a gate that loses the product's keys is rebuilt with the rules and the buyer's count; an
// ended window refuses.
func TestRealAdaptersSaleWindowAndBuyerLimit(t *testing.T) {
	c, rdb, db := realService(t, time.Minute, func(cfg *bootstrap.Config) {
		cfg.ClockOffset, cfg.SaleStartMargin = 5*time.Second, 0
	})
	ctx := context.Background()
	pid := int64(porttest.NewProductID())
	starts := time.Now().Add(1500 * time.Millisecond).UTC()
	c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Real flash","price":100,"max_per_order":5,`+
		`"starts_at":%q,"buyer_limit":2}`, pid, starts.Format(time.RFC3339Nano)), nil)
	codes := make([]string, 30)
	for i := range codes {
		codes[i] = fmt.Sprintf("FLASH-%d-%04d", pid, i)
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, strings.Join(codes, "\n"), nil)
	token := func(buyer string) string {
		var tok struct {
			Token string `json:"token"`
		}
		c.want(201, "POST", "/admin/tokens", adminToken, fmt.Sprintf(`{"buyer_id":%q}`, buyer), &tok)
		return tok.Token
	}
	alice := token("alice")
	order := func(tok, key string) (int, string) {
		status, body := c.do("POST", "/api/order", tok, fmt.Sprintf(`{"product_id":%d,"qty":1}`, pid),
			"Idempotency-Key", key, "Content-Type", "application/json")
		return status, string(body)
	}

	if status, body := order(alice, fmt.Sprintf("early-%d", pid)); status != 409 || !strings.Contains(body, "sale_not_started") {
		t.Fatalf("before the start by Redis's clock (the instance's says 3.5 s after): %d %s", status, body)
	}
	time.Sleep(time.Until(starts) + 100*time.Millisecond)

	var wg sync.WaitGroup
	statuses := make([]int, 12)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = order(alice, fmt.Sprintf("a-%d-%02d", pid, i))
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[201] != 2 || count[429] != 10 {
		t.Fatalf("12 concurrent orders of one buyer with a limit of 2: %v, want 2 × 201 and 10 × 429", count)
	}
	var held int
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(qty), 0) FROM orders WHERE product_id = ? AND buyer_id = 'alice' "+
		"AND status IN ('PENDING','PAID')", pid).Scan(&held); err != nil || held != 2 {
		t.Fatalf("alice holds %d in MariaDB (%v), want 2", held, err)
	}

	// Redis loses the product's keys (a restart without persistence): the rebuild from the
	// ledger brings back the window, the limit and alice's count.
	iter := rdb.Scan(ctx, 0, fmt.Sprintf("*{%d}*", pid), 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/reconcile?repair=true", pid), adminToken, "", nil)
	if status, body := order(alice, fmt.Sprintf("after-loss-%d", pid)); status != 429 || !strings.Contains(body, "buyer_limit") {
		t.Fatalf("alice after the gate was rebuilt: %d %s, want 429 buyer_limit", status, body)
	}
	if status, body := order(token("bob"), fmt.Sprintf("bob-%d", pid)); status != 201 {
		t.Fatalf("bob after the rebuild: %d %s", status, body)
	}

	c.want(200, "PATCH", fmt.Sprintf("/admin/products/%d", pid), adminToken,
		fmt.Sprintf(`{"ends_at":%q}`, time.Now().UTC().Format(time.RFC3339Nano)), nil)
	if status, body := order(token("carol"), fmt.Sprintf("carol-%d", pid)); status != 409 || !strings.Contains(body, "sale_ended") {
		t.Fatalf("after the end: %d %s", status, body)
	}
}
