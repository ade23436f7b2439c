package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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

// ordersWithout201 lists the orders of product pid whose numbers are not among created.
func (e *env) ordersWithout201(ctx context.Context, pid int64, created []string) ([]unanswered, error) {
	named := make(map[string]bool, len(created))
	for _, no := range created {
		named[no] = true
	}
	rows, err := e.db.QueryContext(ctx, "SELECT order_no, buyer_id, idem_key, qty FROM orders WHERE product_id = ?", pid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []unanswered
	for rows.Next() {
		var u unanswered
		if err := rows.Scan(&u.no, &u.buyer, &u.key, &u.qty); err != nil {
			return nil, err
		}
		if !named[u.no] {
			out = append(out, u)
		}
	}
	return out, rows.Err()
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

func (e *env) placeAgain(ctx context.Context, client *http.Client, base string, pid int64, u unanswered) (int, string, error) {
	tok, ok := e.buyerTokens[u.buyer]
	if !ok {
		return 0, "", fmt.Errorf("no token of buyer %s", u.buyer)
	}
	body := fmt.Sprintf(`{"product_id":%d,"qty":%d}`, pid, u.qty)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/order", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", u.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return resp.StatusCode, "", err
	}
	var o struct {
		OrderNo string `json:"order_no"`
	}
	_ = json.NewDecoder(bytes.NewReader(b)).Decode(&o)
	return resp.StatusCode, o.OrderNo, nil
}
