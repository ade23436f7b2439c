package bootstrap_test

import (
	"fmt"
	"io"
	"testing"
	"time"

	"cardshop/adapters/porttest"
)

// TestRealAdaptersBlocklistReachesEveryInstance: two instances on one MariaDB ledger (a
// database of this test's own). An IP range added through one instance refuses that
// instance's orders at once, and the other's once its copy is read again (within
// CARDSHOP_BLOCKLIST_EVERY; the wait is bounded, not timed); the removal travels alike.
func TestRealAdaptersBlocklistReachesEveryInstance(t *testing.T) {
	cfg, _, _ := realConfigIn(t, time.Minute, "cardshop_test_guard")
	cfg.AMQPPrefix = "cardshop-guard-e2e"
	cfg.BlocklistEvery = 500 * time.Millisecond
	a := runService(t, cfg, io.Discard)
	cfgB := cfg
	cfgB.HTTPAddr, cfgB.Migrate = freeAddr(t), false
	b := runService(t, cfgB, io.Discard)

	// The database is this test's own and kept between runs: a run that failed half-way may
	// have left its entry behind.
	var left struct {
		Entries []struct {
			ID int64 `json:"id"`
		} `json:"entries"`
	}
	a.want(200, "GET", "/admin/blocklist", adminToken, "", &left)
	for _, e := range left.Entries {
		a.want(204, "DELETE", fmt.Sprintf("/admin/blocklist/%d", e.ID), adminToken, "", nil)
	}
	// A product nobody created: an order the blocklist lets through answers 404 and takes no
	// stock, however often the wait below asks.
	pid := int64(porttest.NewProductID())
	var tok struct {
		Token string `json:"token"`
	}
	a.want(201, "POST", "/admin/tokens", adminToken, fmt.Sprintf(`{"buyer_id":"guard-%d"}`, pid), &tok)
	n := 0
	order := func(c client) int {
		n++
		status, body := c.do("POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":1}`, pid),
			"Idempotency-Key", fmt.Sprintf("guard-%d-%d", pid, n))
		if status != 404 && status != 403 {
			t.Logf("order %d: %d %s", n, status, body)
		}
		return status
	}
	// eventually waits, bounded, for c to answer want (the other instance's reload).
	eventually := func(c client, want int) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for got := order(c); got != want; got = order(c) {
			if time.Now().After(deadline) {
				t.Fatalf("the other instance still answers %d, want %d", got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if got := order(b); got != 404 {
		t.Fatalf("an order before any entry: %d, want 404 (not blocked, no such product)", got)
	}
	var e struct {
		ID int64 `json:"id"`
	}
	a.want(201, "POST", "/admin/blocklist", adminToken, `{"kind":"ip","value":"127.0.0.0/8","note":"the test's own address"}`, &e)
	if got := order(a); got != 403 {
		t.Fatalf("the instance that added the entry: %d, want 403 at once", got)
	}
	eventually(b, 403)

	b.want(204, "DELETE", fmt.Sprintf("/admin/blocklist/%d", e.ID), adminToken, "", nil)
	if got := order(b); got != 404 {
		t.Fatalf("the instance that removed the entry: %d, want 404 (not blocked) at once", got)
	}
	eventually(a, 404)
}
