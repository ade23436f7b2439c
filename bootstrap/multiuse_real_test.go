package bootstrap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/porttest"
	"cardshop/bootstrap"
)

// TestRealAdaptersMultiUseCodes sells a product of multi-use codes on Redis and MariaDB:
// buyers place and pay orders at once, some are refunded (read first: their uses voided), and
// at rest the gate holds the uses, no order holds a code twice, no code is sold more often than
// its uses, SOLD uses = Σ qty of PAID orders, and reconcile finds no difference.
func TestRealAdaptersMultiUseCodes(t *testing.T) {
	c, rdb, db := realService(t, time.Minute)
	ctx := context.Background()
	pid := int64(porttest.NewProductID())
	const uses, codesN, buyers = 3, 5, 12
	c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Team licence","price":100,"max_per_order":2,"code_uses":%d}`,
		pid, uses), nil)
	codes := make([]string, codesN)
	for i := range codes {
		codes[i] = fmt.Sprintf("MULTI-%d-%04d", pid, i)
	}
	var rep struct {
		Added int `json:"added"`
		Uses  int `json:"uses"`
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, strings.Join(codes, "\n"), &rep)
	if rep.Added != codesN || rep.Uses != codesN*uses {
		t.Fatalf("import %+v, want %d codes and %d uses", rep, codesN, codesN*uses)
	}
	if s, err := rdb.Get(ctx, fmt.Sprintf("stock:product:{%d}", pid)).Int64(); err != nil || s != codesN*uses {
		t.Fatalf("gate stock %d, %v; want %d", s, err, codesN*uses)
	}

	tokens := make([]string, buyers)
	for i := range tokens {
		var tok struct {
			Token string `json:"token"`
		}
		c.want(201, "POST", "/admin/tokens", adminToken, fmt.Sprintf(`{"buyer_id":"multi-%d"}`, i), &tok)
		tokens[i] = tok.Token
	}
	// Every buyer places an order of 1 or 2 and pays it, all at once.
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	orders := make([]orderBody, buyers)
	placed := make([]int, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			status, body := c.do("POST", "/api/order", tokens[i], fmt.Sprintf(`{"product_id":%d,"qty":%d}`, pid, 1+i%2),
				"Idempotency-Key", fmt.Sprintf("multi-%d-%d", pid, i), "Content-Type", "application/json")
			placed[i] = status
			if status != 201 || json.Unmarshal(body, &orders[i]) != nil {
				return // sold out (409): the gate refused it
			}
			if code := bootstrap.Main([]string{"pay", "-url", c.base, "-order", orders[i].OrderNo,
				"-amount", fmt.Sprint(orders[i].Amount), "-ref", "multi-ref-" + orders[i].OrderNo}, &strings.Builder{}, &strings.Builder{}); code != 0 {
				orders[i].Status = fmt.Sprintf("pay exited %d", code)
			}
		})
	}
	wg.Wait()
	for i, status := range placed {
		if status != 201 && status != 409 {
			t.Fatalf("order of buyer %d: %d, want 201 or 409 (sold out)", i, status)
		}
	}
	// Every other paid order is refunded; half of those were read by the buyer first.
	refunded := 0
	for i, o := range orders {
		if o.OrderNo == "" || strings.HasPrefix(o.Status, "pay exited") {
			if o.Status != "" {
				t.Fatalf("order %d: %s", i, o.Status)
			}
			continue
		}
		var now orderBody
		c.want(200, "GET", "/api/orders/"+o.OrderNo, tokens[i], "", &now) // a read: reveals a PAID order's codes
		if now.Status != "PAID" || i%2 != 0 {
			continue
		}
		seen := map[string]bool{}
		for _, code := range now.Codes {
			if seen[code] {
				t.Fatalf("order %s got code %s twice", o.OrderNo, code)
			}
			seen[code] = true
		}
		c.want(200, "POST", "/admin/orders/"+o.OrderNo+"/refund", adminToken, `{}`, nil)
		refunded++
	}
	if refunded == 0 {
		t.Fatal("no order was paid and refunded")
	}

	var repeats, overUsed, sold, paidQty int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT order_no FROM card_stock WHERE product_id = ? AND status = 'SOLD' "+
		"GROUP BY order_no, code_hash HAVING COUNT(*) > 1) AS r", pid).Scan(&repeats); err != nil || repeats != 0 {
		t.Fatalf("orders holding a code twice: %d, %v", repeats, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT code_hash FROM card_stock WHERE product_id = ? AND status = 'SOLD' "+
		"GROUP BY code_hash HAVING COUNT(*) > ?) AS r", pid, uses).Scan(&overUsed); err != nil || overUsed != 0 {
		t.Fatalf("codes sold more than %d times: %d, %v", uses, overUsed, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM card_stock WHERE product_id = ? AND status = 'SOLD'", pid).Scan(&sold); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(qty), 0) FROM orders WHERE product_id = ? AND status = 'PAID'", pid).Scan(&paidQty); err != nil ||
		sold != paidQty {
		t.Fatalf("SOLD uses %d, Σ qty PAID %d (%v)", sold, paidQty, err)
	}
	var rec struct {
		OK          bool `json:"ok"`
		Differences int  `json:"differences"`
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/reconcile?repair=false", pid), adminToken, "", &rec)
	if !rec.OK || rec.Differences != 0 {
		t.Fatalf("reconcile %+v", rec)
	}
}
