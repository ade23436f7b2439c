package main

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
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

// heldMatch checks that the gate's holding counts (held:{pid}, buyer -> units, a buyer at 0
// removed) equal the ledger's: Σ qty of each buyer's PENDING and PAID orders (the load check
// refunds nothing, so refunded orders never count). Run once settled: every order paid or
// closed, every stock return relayed to the gate, each of them giving its units back to its
// buyer.
func (e *env) heldMatch(ctx context.Context, pid int64) (Check, error) {
	gate, err := e.rdb.HGetAll(ctx, fmt.Sprintf("held:{%d}", pid)).Result()
	if err != nil {
		return Check{}, fmt.Errorf("gate holdings: %w", err)
	}
	ledger := map[string]int64{}
	err = query(ctx, e.db, "SELECT buyer_id, SUM(qty) FROM orders WHERE product_id = ? AND status IN ('PENDING', 'PAID') GROUP BY buyer_id",
		[]any{pid}, func(r *sql.Rows) error {
			var buyer string
			var n int64
			if err := r.Scan(&buyer, &n); err != nil {
				return err
			}
			ledger[buyer] = n
			return nil
		})
	if err != nil {
		return Check{}, fmt.Errorf("ledger holdings: %w", err)
	}
	var differ []string
	for buyer, v := range gate {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n != ledger[buyer] {
			differ = append(differ, fmt.Sprintf("%s gate %s ledger %d", buyer, v, ledger[buyer]))
		}
	}
	for buyer, n := range ledger {
		if _, ok := gate[buyer]; !ok {
			differ = append(differ, fmt.Sprintf("%s gate none ledger %d", buyer, n))
		}
	}
	return Check{Name: "buyer limit: the gate's holding count of every buyer = Σ qty of the buyer's PENDING + PAID orders",
		OK:     len(differ) == 0,
		Detail: fmt.Sprintf("buyers in the gate %d, in the ledger %d, differing %d%s", len(gate), len(ledger), len(differ), examples(differ))}, nil
}

// holdingRefusal is the answer to an order over the product's buyer_limit: 429 buyer_limit, the
// status and code of the buyer cap (CARDSHOP_BUYER_CAP), so that one code keeps one status. The load check
// sets the cap far out of reach (1,000,000 units per window), so every buyer_limit here is the
// holding limit's.
const holdingRefusal = "429:buyer_limit"

// buyerLimitRefusals: the buyers reach their limit, and then their orders are refused with
// holdingRefusal; the only other refusal is 409 request_in_progress, the second and third
// copies of a key racing the first.
func buyerLimitRefusals(r WrkResult) Check {
	limited := r.Counts[holdingRefusal]
	var other []string
	for name, n := range r.Counts {
		if strings.Contains(name, "retry-after") || name == holdingRefusal || name == "409:request_in_progress" {
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
	return Check{Name: fmt.Sprintf("buyer limit: refused with %s (and 409 request_in_progress for a key's concurrent copies), nothing else",
		strings.Replace(holdingRefusal, ":", " ", 1)),
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
