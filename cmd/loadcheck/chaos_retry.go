package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// unanswered is an order the ledger holds whose number no 201 answer named: its request was
// answered 5xx (the outcome unknown to the service: its deadline passed around the COMMIT, or
// the fault swallowed the COMMIT's reply), or not at all (dropped at wrk's stop, or given up on
// by the load balancer). The buyer was told to retry, or got nothing: a retry with the same key
// must find the order.
type unanswered struct {
	no, buyer, key string
	qty            int
}

// against201s reads product pid's orders once and holds them against the order numbers its
// 201 answers named (created): missing are the numbers the product's orders do not hold,
// without201 the orders no 201 named.
func (e *env) against201s(ctx context.Context, pid int64, created []string) (missing []string, without201 []unanswered, err error) {
	rows, err := e.db.QueryContext(ctx, "SELECT order_no, buyer_id, idem_key, qty FROM orders WHERE product_id = ?", pid)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	stored := map[string]unanswered{}
	for rows.Next() {
		var u unanswered
		if err := rows.Scan(&u.no, &u.buyer, &u.key, &u.qty); err != nil {
			return nil, nil, err
		}
		stored[u.no] = u
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	missing, without201 = split201s(stored, created)
	return missing, without201, nil
}

// split201s holds the stored orders (by number) against the numbers 201 answers named.
func split201s(stored map[string]unanswered, created []string) (missing []string, without201 []unanswered) {
	named := make(map[string]bool, len(created))
	for _, no := range created {
		named[no] = true
		if _, ok := stored[no]; !ok {
			missing = append(missing, no)
		}
	}
	for no, u := range stored {
		if !named[no] {
			without201 = append(without201, u)
		}
	}
	return missing, without201
}

// retryUnanswered sends each order's request again, as its buyer with its key, to base, and
// reports those not answered 200 with that order (a 5xx is tried again a few times: the
// service may still be recovering from the fault).
func (e *env) retryUnanswered(ctx context.Context, base string, pid int64, us []unanswered) (bad []string) {
	client := &http.Client{Timeout: 10 * time.Second}
	for _, u := range us {
		status, no, err := 0, "", error(nil)
		for attempt := 0; attempt < 5; attempt++ {
			if attempt > 0 {
				sleepCtx(ctx, 500*time.Millisecond)
			}
			status, no, err = e.placeAgain(ctx, client, base, pid, u)
			if err == nil && status < 500 {
				break
			}
		}
		if err != nil || status != http.StatusOK || no != u.no {
			bad = append(bad, fmt.Sprintf("%s: %d %q %v", u.no, status, no, err))
		}
	}
	return bad
}

// placeAgain sends u's order request again, as its buyer with its key, and returns the
// answer's status and the order number it names.
func (e *env) placeAgain(ctx context.Context, client *http.Client, base string, pid int64, u unanswered) (int, string, error) {
	status, b, err := e.asBuyer(ctx, client, u.buyer, http.MethodPost, base+"/api/order",
		fmt.Sprintf(`{"product_id":%d,"qty":%d}`, pid, u.qty), "Idempotency-Key", u.key)
	if err != nil {
		return status, "", err
	}
	var o struct {
		OrderNo string `json:"order_no"`
	}
	_ = json.Unmarshal(b, &o)
	return status, o.OrderNo, nil
}
