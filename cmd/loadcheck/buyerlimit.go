package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// One per customer (scenario 9): a product with a buyer_limit, ordered by the 2,000 buyers of
// the tokens file through two instances, each idempotency key sent three times at once. The
// gate keeps each buyer's holding; the ledger is the truth the checks read.

// holdingCheck checks, with SQL on the orders, that no buyer holds more than limit units of
// the product in PENDING and PAID orders.
func (e *env) holdingCheck(ctx context.Context, pid int64, limit int, when string) (Check, error) {
	var buyers, atLimit, over, most int64
	err := e.db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(held = ?), 0), COALESCE(SUM(held > ?), 0), COALESCE(MAX(held), 0) "+
		"FROM (SELECT buyer_id, SUM(qty) AS held FROM orders WHERE product_id = ? AND status IN ('PENDING', 'PAID') GROUP BY buyer_id) h",
		limit, limit, pid).Scan(&buyers, &atLimit, &over, &most)
	if err != nil {
		return Check{}, fmt.Errorf("holdings: %w", err)
	}
	return Check{Name: fmt.Sprintf("buyer limit: no buyer holds more than %d units in PENDING + PAID orders, %s", limit, when),
		OK: buyers > 0 && over == 0,
		Detail: fmt.Sprintf("buyers holding units %d: at the limit %d, over it %d (most held by one buyer: %d)",
			buyers, atLimit, over, most)}, nil
}

// buyerLimitRefusals: the buyers reach their limit, and then their orders are refused with
// 409 buyer_limit; the only other refusal is 409 request_in_progress, the second and third
// copies of a key racing the first.
func buyerLimitRefusals(r WrkResult) Check {
	limited := r.Counts["409:buyer_limit"]
	var other []string
	for name, n := range r.Counts {
		if strings.Contains(name, "retry-after") || name == "409:buyer_limit" || name == "409:request_in_progress" {
			continue
		}
		other = append(other, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(other)
	// Every refusal (status >= 400) is tallied by code, so the 2xx and the tallies add up to
	// every answer.
	var tallied int64
	for name, n := range r.Counts {
		if !strings.Contains(name, "retry-after") {
			tallied += n
		}
	}
	ok2xx := answered(r)-r.Status[200]-r.Status[201] == tallied
	return Check{Name: "buyer limit: refused with 409 buyer_limit (and 409 request_in_progress for a key's concurrent copies), nothing else",
		OK: limited > 0 && len(other) == 0 && ok2xx,
		Detail: fmt.Sprintf("201 %s · 200 (replays) %s · %s; other refusals: %d%s",
			num(float64(r.Status[201])), num(float64(r.Status[200])), refusalMix(r.Counts), len(other), examples(other))}
}

// answered is how many answers wrk counted by status.
func answered(r WrkResult) int64 {
	var n int64
	for _, c := range r.Status {
		n += c
	}
	return n
}
