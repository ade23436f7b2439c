package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The coupon storm (scenario 20): the 2,000 buyers of the tokens file order one product at once
// through two instances, each key sent twice at once, giving a coupon of 100 uses on the product
// and 1 use per buyer. The gate claims the coupon's use in the same script as the stock, so
// exactly 100 orders may carry it, however many ask at once. After the storm, the success path
// is measured with and without a coupon in alternating rounds on the same product (a coupon
// without limits, so that every order with it succeeds; the stock lasts them all): the claim's
// cost is the difference.
// After the payments and the expiry the checks read MariaDB and Redis directly: the amounts,
// the discount of every order, and the gate's counts of each coupon against the orders.

// Scenario 20's coupons: percent 10 with 100 uses per product and 1 per buyer (the storm), and
// fixed 1.00 with no limit (the success path's measure). The product's price is 10.00.
const (
	stormUses     = 100
	stormPercent  = 10
	openCouponOff = 100
	couponRounds  = 2   // alternating rounds of each of the two measures
	couponShare   = 0.9 // the target: orders/s with a coupon ≥ 0.9 of those without
)

// couponRun is what the coupon storm measured.
type couponRun struct {
	storm, open string  // the two coupons' codes
	plainRate   float64 // successful orders/s without a coupon
	couponRate  float64 // successful orders/s with the open coupon
	stormLoad   WrkResult
	stormOrders int64 // orders carrying the storm coupon right after the storm
	// The full-price probe: signed "paid" callbacks of the undiscounted amount for PENDING orders
	// with a coupon, sent before the payments. Each must be refused and leave the order PENDING.
	probed, probeRefused, probeStillPending int
}

// couponStorm creates the two coupons, runs the storm, then measures the success path without
// and with a coupon, and returns the merged load of every run.
func (e *env) couponStorm(ctx context.Context, sc scenario, insts []*instance, pid int64, res *scenarioResult) (WrkResult, error) {
	cr := &couponRun{storm: fmt.Sprintf("LC%d-STORM", pid), open: fmt.Sprintf("LC%d-OPEN", pid)}
	res.coupons = cr
	for _, c := range []string{
		fmt.Sprintf(`{"code":%q,"kind":"percent","value":%d,"products":[%d],"uses_per_product":%d,"uses_per_buyer":1}`,
			cr.storm, stormPercent, pid, stormUses),
		fmt.Sprintf(`{"code":%q,"kind":"fixed","value":%d,"products":[%d]}`, cr.open, openCouponOff, pid),
	} {
		if st, b, err := e.instances[0].admin(ctx, e.secrets.admin, "POST", "/admin/coupons", strings.NewReader(c)); err != nil || st != 201 {
			return WrkResult{}, fmt.Errorf("create coupon: %d %s %v", st, b, err)
		}
	}
	storm := sc
	storm.coupon, storm.dup, storm.tally = cr.storm, 2, true
	r, err := e.load(ctx, storm, insts, pid, max(min(e.o.duration/2, 3*time.Second).Round(time.Second), time.Second), "storm")
	if err != nil {
		return WrkResult{}, err
	}
	cr.stormLoad = r
	if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE product_id = ? AND coupon = ?", pid, cr.storm).Scan(&cr.stormOrders); err != nil {
		return WrkResult{}, err
	}
	fmt.Printf("   storm     %s requests with coupon %s (100 uses, 1 per buyer), each key twice at once: %d orders carry it · %s\n",
		num(float64(r.Requests)), cr.storm, cr.stormOrders, refusalMix(r.Counts))
	runs := []WrkResult{r}
	// wrk takes whole seconds.
	round := max((e.o.duration / (2 * couponRounds)).Round(time.Second), time.Second)
	var plain, with float64
	for i := 0; i < couponRounds; i++ {
		for _, code := range []string{"", cr.open} {
			run := sc
			run.coupon = code
			r, err := e.load(ctx, run, insts, pid, round, fmt.Sprintf("cp%d%s", i, code))
			if err != nil {
				return WrkResult{}, err
			}
			if code == "" {
				plain += float64(r.Status[201])
			} else {
				with += float64(r.Status[201])
			}
			runs = append(runs, r)
		}
	}
	total := round.Seconds() * couponRounds
	cr.plainRate, cr.couponRate = plain/total, with/total
	fmt.Printf("   coupon    successful orders without a coupon %s/s · with one (claimed at the gate) %s/s · %.2f (%d alternating rounds of %s each)\n",
		num(cr.plainRate), num(cr.couponRate), cr.couponRate/max(cr.plainRate, 1), couponRounds, round)

	res.loadRuns = len(runs)
	if err := e.fullPriceProbe(ctx, pid, cr); err != nil {
		return WrkResult{}, err
	}
	merged := mergeRuns(runs)
	return merged, nil
}

// couponProbes is how many orders with a coupon the full-price probe tries to pay undiscounted.
const couponProbes = 40

// fullPriceProbe sends, for PENDING orders with a coupon, a signed "paid" callback of the amount
// before the discount (unit price × qty): the payment must match the order's amount exactly,
// so each is refused and the order stays PENDING, for the payments that follow to pay it.
func (e *env) fullPriceProbe(ctx context.Context, pid int64, cr *couponRun) error {
	var probes []due
	err := query(ctx, e.db, "SELECT order_no, unit_price * qty, buyer_id FROM orders WHERE product_id = ? AND status = 'PENDING' AND coupon <> '' "+
		"AND discount > 0 ORDER BY created_at DESC LIMIT ?", []any{pid, couponProbes}, func(rows *sql.Rows) error {
		var d due
		if err := rows.Scan(&d.no, &d.amount, &d.buyer); err != nil {
			return err
		}
		probes = append(probes, d)
		return nil
	})
	if err != nil {
		return err
	}
	cb, err := e.newCallbacks(4)
	if err != nil {
		return err
	}
	for i, d := range probes {
		if st := cb.send(ctx, d, e.instances[i%len(e.instances)]); st != 200 && st != 0 {
			cr.probeRefused++
		}
		var status string
		if err := e.db.QueryRowContext(ctx, "SELECT status FROM orders WHERE order_no = ?", d.no).Scan(&status); err != nil {
			return err
		}
		if status == "PENDING" {
			cr.probeStillPending++
		}
	}
	cr.probed = len(probes)
	return nil
}

// couponChecks are the coupon storm's checks, once the sale has settled (every order paid or
// closed, every return relayed).
func (e *env) couponChecks(ctx context.Context, pid int64, cr *couponRun) ([]Check, error) {
	var out []Check
	r := cr.stormLoad
	used, buyerLimited := r.Counts["409:coupon_used_up"], r.Counts["409:coupon_buyer_limit"]+r.Counts["429:coupon_buyer_limit"]
	var other []string
	for name, n := range r.Counts {
		if strings.Contains(name, "retry-after") || strings.HasSuffix(name, ":coupon_used_up") ||
			strings.HasSuffix(name, ":coupon_buyer_limit") || name == "409:request_in_progress" {
			continue
		}
		other = append(other, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(other)
	out = append(out, Check{Name: fmt.Sprintf("coupon storm: exactly %d orders carry the coupon of %d uses", stormUses, stormUses),
		OK: cr.stormOrders == stormUses,
		Detail: fmt.Sprintf("orders with %s right after the storm: %d; refused used up %s, over the buyer's 1 use %s, other refusals %d%s",
			cr.storm, cr.stormOrders, num(float64(used)), num(float64(buyerLimited)), len(other), examples(other))})

	// Every order's amount is its price less its coupon's discount, as the coupon says.
	var bad []string
	var withStorm, withOpen, plain int64
	err := query(ctx, e.db, "SELECT order_no, coupon, unit_price, qty, discount, amount FROM orders WHERE product_id = ?",
		[]any{pid}, func(rows *sql.Rows) error {
			var no, coupon string
			var unit, qty, discount, amount int64
			if err := rows.Scan(&no, &coupon, &unit, &qty, &discount, &amount); err != nil {
				return err
			}
			full := unit * qty
			want := int64(0)
			switch coupon {
			case "":
				plain++
			case cr.storm:
				withStorm++
				want = full * stormPercent / 100
			case cr.open:
				withOpen++
				want = min(int64(openCouponOff), full-1)
			default:
				bad = append(bad, no+" carries an unknown coupon "+coupon)
				return nil
			}
			if discount != want || amount != full-discount {
				bad = append(bad, fmt.Sprintf("%s: %s, %d×%d, discount %d (want %d), amount %d", no, coupon, qty, unit, discount, want, amount))
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	out = append(out, Check{Name: "coupon: every order's amount = unit price × qty − its coupon's discount (10% rounded down, or 1.00)",
		OK: len(bad) == 0 && withStorm > 0 && withOpen > 0 && plain > 0,
		Detail: fmt.Sprintf("orders without a coupon %d, with %s %d, with %s %d; wrong %d%s",
			plain, cr.open, withOpen, cr.storm, withStorm, len(bad), examples(bad))})

	// The payment must be the discounted amount: the full price was refused, and the orders
	// with a coupon were paid (by callbacks of their amount, read from the ledger).
	var paidCoupon int64
	if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE product_id = ? AND status = 'PAID' AND coupon <> ''", pid).Scan(&paidCoupon); err != nil {
		return nil, err
	}
	out = append(out, Check{Name: "coupon: a payment of the undiscounted amount is refused; orders with a coupon are paid their discounted amount",
		OK: cr.probed > 0 && cr.probeRefused == cr.probed && cr.probeStillPending == cr.probed && paidCoupon > 0,
		Detail: fmt.Sprintf("full-price callbacks %d: refused %d, order still PENDING after it %d; PAID orders with a coupon afterwards %d",
			cr.probed, cr.probeRefused, cr.probeStillPending, paidCoupon)})

	// The gate's count of each coupon, and each buyer's, = the orders whose use stands.
	for _, code := range []string{cr.storm, cr.open} {
		c, err := e.couponCountsMatch(ctx, pid, code)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// couponCountsMatch compares the gate's count of code on the product (couponuse:{pid}) and each
// buyer's (couponbuyer:{pid}, "<code>|<buyer>") with the orders carrying it that are PENDING or
// PAID (the load check refunds nothing).
func (e *env) couponCountsMatch(ctx context.Context, pid int64, code string) (Check, error) {
	gateUses, err := e.rdb.HGet(ctx, fmt.Sprintf("couponuse:{%d}", pid), code).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Check{}, fmt.Errorf("gate coupon uses: %w", err)
	}
	perBuyer, err := e.rdb.HGetAll(ctx, fmt.Sprintf("couponbuyer:{%d}", pid)).Result()
	if err != nil {
		return Check{}, fmt.Errorf("gate coupon buyers: %w", err)
	}
	ledger := map[string]int64{}
	var ledgerUses int64
	err = query(ctx, e.db, "SELECT buyer_id, COUNT(*) FROM orders WHERE product_id = ? AND coupon = ? AND status IN ('PENDING', 'PAID') GROUP BY buyer_id",
		[]any{pid, code}, func(rows *sql.Rows) error {
			var buyer string
			var n int64
			if err := rows.Scan(&buyer, &n); err != nil {
				return err
			}
			ledger[buyer], ledgerUses = n, ledgerUses+n
			return nil
		})
	if err != nil {
		return Check{}, err
	}
	var differ []string
	gateBuyers := 0
	for field, v := range perBuyer {
		c, buyer, ok := strings.Cut(field, "|")
		if !ok || c != code {
			continue
		}
		gateBuyers++
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n != ledger[buyer] {
			differ = append(differ, fmt.Sprintf("%s gate %s ledger %d", buyer, v, ledger[buyer]))
		}
	}
	for buyer, n := range ledger {
		if _, ok := perBuyer[code+"|"+buyer]; !ok {
			differ = append(differ, fmt.Sprintf("%s gate none ledger %d", buyer, n))
		}
	}
	return Check{Name: fmt.Sprintf("coupon %s: the gate's uses = its PENDING + PAID orders, in all and per buyer", code),
		OK: gateUses == ledgerUses && len(differ) == 0,
		Detail: fmt.Sprintf("gate %d, orders %d; buyers in the gate %d, in the ledger %d, differing %d%s",
			gateUses, ledgerUses, gateBuyers, len(ledger), len(differ), examples(differ))}, nil
}
