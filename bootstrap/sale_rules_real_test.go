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

// TestRealAdaptersLatePaymentsKeepTheSaleRules: on Redis and MariaDB, a buyer with a limit of 2
// who lets three orders of 2 expire and then pays them all gets 2 codes, the other payments
// accepted as UNFULFILLED with a paid_unfulfilled alert (the operator's fulfil is refused while
// the buyer holds the limit); an order placed inside the window and paid after its end gets no
// code either, and cannot be fulfilled.
func TestRealAdaptersLatePaymentsKeepTheSaleRules(t *testing.T) {
	c, _, db := realService(t, 2*time.Second)
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	ctx := context.Background()
	type adminOrder struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	newProduct := func(rules string) int64 {
		pid := int64(porttest.NewProductID())
		c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Late rules","price":100,"max_per_order":5%s}`,
			pid, rules), nil)
		codes := make([]string, 20)
		for i := range codes {
			codes[i] = fmt.Sprintf("LATE-%d-%04d", pid, i)
		}
		c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, strings.Join(codes, "\n"), nil)
		return pid
	}
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"late-alice"}`, &tok)
	place := func(pid int64, key string) string {
		var o orderBody
		c.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":2}`, pid), &o, "Idempotency-Key", key)
		return o.OrderNo
	}
	waitClosed := func(no string) {
		deadline := time.Now().Add(15 * time.Second)
		for {
			var o adminOrder
			c.want(200, "GET", "/admin/orders/"+no, adminToken, "", &o)
			if o.Status == "CLOSED" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("order %s still %s 15 s after a 2 s timeout", no, o.Status)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	payLate := func(no string) adminOrder {
		var out, errOut strings.Builder
		if code := bootstrap.Main([]string{"pay", "-url", c.base, "-order", no, "-amount", "200", "-ref", "late-" + no}, &out, &errOut); code != 0 {
			t.Fatalf("pay %s exited %d: %s %s", no, code, out.String(), errOut.String())
		}
		var o adminOrder
		c.want(200, "GET", "/admin/orders/"+no, adminToken, "", &o)
		return o
	}
	soldTo := func(no string) int {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM card_stock WHERE order_no = ? AND status = 'SOLD'", no).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	wantRefused := func(no, reason string) {
		t.Helper()
		o := payLate(no)
		if o.Status != "UNFULFILLED" || o.Reason != reason {
			t.Fatalf("late payment of %s: %s %q, want UNFULFILLED %q", no, o.Status, o.Reason, reason)
		}
		if n := soldTo(no); n != 0 {
			t.Fatalf("%s refused by the sale rules holds %d codes", no, n)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			var msg string
			err := db.QueryRowContext(ctx, "SELECT message FROM alerts WHERE kind = 'paid_unfulfilled' AND order_no = ?", no).Scan(&msg)
			if err == nil && strings.HasPrefix(msg, reason+": refund") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("paid_unfulfilled alert of %s: %q, %v; want one saying %q", no, msg, err, reason)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	limited := newProduct(`,"buyer_limit":2`)
	var orders []string
	for i := range 3 {
		no := place(limited, fmt.Sprintf("late-limit-%d-%d", limited, i))
		waitClosed(no)
		orders = append(orders, no)
	}
	if o := payLate(orders[0]); o.Status != "PAID" || soldTo(orders[0]) != 2 {
		t.Fatalf("the first late payment: %s with %d codes, want PAID with 2", o.Status, soldTo(orders[0]))
	}
	for _, no := range orders[1:] {
		wantRefused(no, "late payment: over the buyer's limit")
	}
	var sold int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM card_stock WHERE product_id = ? AND status = 'SOLD'", limited).Scan(&sold); err != nil || sold != 2 {
		t.Fatalf("codes SOLD with a limit of 2: %d (%v)", sold, err)
	}
	if status, body := c.do("POST", "/admin/orders/"+orders[1]+"/fulfil", adminToken, ""); status != 429 || !strings.Contains(string(body), `"code":"buyer_limit"`) || !strings.Contains(string(body), "fulfilling this order") {
		t.Fatalf("fulfil while the buyer holds the limit: %d %s, want 429 buyer_limit", status, body)
	}

	ending := newProduct("")
	no := place(ending, fmt.Sprintf("late-end-%d", ending))
	waitClosed(no)
	c.want(200, "PATCH", fmt.Sprintf("/admin/products/%d", ending), adminToken,
		fmt.Sprintf(`{"ends_at":%q}`, time.Now().UTC().Format(time.RFC3339Nano)), nil)
	wantRefused(no, "late payment: after the sale ended")
	if status, body := c.do("POST", "/admin/orders/"+no+"/fulfil", adminToken, ""); status != 409 || !strings.Contains(string(body), `"code":"sale_ended"`) || !strings.Contains(string(body), "paid after") {
		t.Fatalf("fulfil of an order paid after the end: %d %s, want 409 sale_ended", status, body)
	}
	var rec struct {
		OK   bool `json:"ok"`
		Gate struct {
			Sold int64 `json:"sold"`
		} `json:"gate"`
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/reconcile?repair=false", limited), adminToken, "", &rec)
	if !rec.OK || rec.Gate.Sold != 2 {
		t.Fatalf("reconcile of the limited product: %+v, want ok with 2 sold at the gate", rec)
	}
}
