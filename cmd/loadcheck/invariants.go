package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/domain"
)

// Check is one invariant with its numbers.
type Check struct {
	Name, Detail string
	OK           bool
}

// Expect is what the harness knows from outside the service.
type Expect struct {
	ProductID int64
	Created   int64 // 201 answers wrk (and the harness) counted for this product
	// InFlight bounds the orders created by requests still in flight when wrk stopped (wrk
	// drops their answers uncounted): at most one per connection.
	InFlight int64
	// CommitUnknown bounds the orders stored whose buyer was not answered 201 because of the
	// fault: answered 5xx (MariaDB died or stalled under their COMMIT, or the COMMIT landed
	// after the request's deadline: ErrCommitUnknown, read back in vain) or not at all, so the
	// 5xx answers and the requests wrk gave up on; or, behind the retrying load balancer,
	// answered with a replay (200) or not at all while another try placed the order. The chaos
	// check "found by a retry with its key" holds each such order to the buyer's retry. 0
	// outside the chaos mode.
	CommitUnknown    int64
	AcceptedPayments map[string]bool // order numbers whose "paid" callback was answered 200 success
	ExpiryGrace      time.Duration   // how long past expires_at a PENDING order may still be open
	// Provider is the payment provider the scenario pays every order through ("stripe"), or
	// "" when it pays through the signed callback, which records no provider payment.
	Provider string
}

// The checks' names, grouped by the invariant they prove (the part before the colon; the list
// is in docs/PRODUCT.md).
const (
	chkSoldOwned      = "no oversell: every SOLD code belongs to a PAID order of the product"
	chkOrderCodes     = "no oversell: every PAID order holds exactly qty SOLD codes"
	chkSoldPaid       = "no oversell: SOLD = Σ qty PAID"
	chkPool           = "no oversell: SOLD + UNSOLD + RECYCLED = imported − voided"
	chkOversold       = "no oversell: oversold = 0"
	chkGateTotal      = "gate conservation: gate stock + gate sold = imported − voided"
	chkGateSold       = "gate conservation: gate sold = Σ qty PENDING + PAID"
	chkLedgerImported = "ledger: flow imported = code rows"
	chkLedgerVoided   = "ledger: flow voided = VOID codes"
	chkLedgerSold     = "ledger: flow sold = SOLD codes"
	chkLedgerSellable = "ledger: flow sellable = UNSOLD + RECYCLED codes"
	chkLedgerHeld     = "ledger: flow held = Σ qty PENDING + PAID"
	chkLedgerPending  = "ledger: flow pending = Σ qty PENDING"
	chkLedgerGateFree = "ledger: flow gate free = gate stock"
	chkFlowUnique     = "ledger: one flow row per (ref, change type)"
	chkIdemKey        = "idempotency: one order per (buyer, key)"
	chkIdemCreated    = "idempotency: 201 answers ≤ orders ≤ 201 answers + requests in flight at wrk's stop"
	chkAccepted       = "no lost order: every accepted payment is PAID or UNFULFILLED"
	chkDelivered      = "no lost order: every PAID order's delivery event is published"
	chkExpired        = "no leak: no PENDING order past expiry + grace"
	chkClosedRestore  = "no leak: every CLOSED order has one timeout-restore flow row"
	chkFailedRestore  = "no leak: every FAILED order has one payment-failed-restore flow row"
	chkGateReturns    = "no leak: every stock return reached the gate (no unsent gate.change)"
	chkProviderPaid   = "provider payments: every PAID order has a PAID payment at the scenario's provider, for the order's amount"
	chkPaymentOrphan  = "provider payments: no PAID payment of an order that is not PAID, UNFULFILLED or REFUNDED"
	chkNoticeOrphan   = "provider payments: no accepted paid notification for an order that is not PAID, UNFULFILLED or REFUNDED"
)

// paidStates are the order states a payment taken at a provider may leave an order in: paid,
// paid without codes to deliver (sold out by a late payment), paid and then refunded.
var paidStates = map[string]bool{"PAID": true, "UNFULFILLED": true, "REFUNDED": true}

// exampleMax bounds the order numbers quoted in a failing check's detail.
const exampleMax = 3

// orderInfo is what the checks need of one order.
type orderInfo struct {
	status string
	qty    int64
	amount int64
}

// paymentInfo is one payments row of an order.
type paymentInfo struct {
	provider, status string
	amount           int64
}

// snapshot is one product's numbers as read from MariaDB and Redis.
type snapshot struct {
	cards     map[string]int64 // code rows by status
	imported  int64            // all code rows
	orders    map[string]orderInfo
	orderQty  map[string]int64 // Σ qty by order status
	orderN    map[string]int64 // orders by status
	soldBy    map[string]int64 // SOLD codes by order number ("" = NULL)
	flow      domain.FlowTotals
	flowDups  int64
	restores  map[string]map[int]int64 // flow rows of types 3 and 5 by order number
	idemDups  int64
	expired   int64
	delivered map[string]bool // order number -> some order.delivered row was sent
	unsentGC  []string        // msg_key of unsent gate.change rows of this product's orders
	payments  map[string][]paymentInfo
	paidNotes map[string]int64 // order number -> accepted notifications with the outcome "paid"

	gateStock, gateSold     int64
	hasGateStock, hasGateSd bool
	gateErr                 string // a gate value that is not an integer
}

// checkInvariants checks every invariant of docs/PRODUCT.md for one product directly against
// MariaDB (db: a *sql.DB on the service's database) and Redis (rdb), never through the
// service's API.
// It reads each table of the product a bounded number of times (GROUP BY on the product's
// indexes, one stream of its orders), so it stays cheap for ~100k orders. Run it when no
// request is in flight. An error means the stores could not be read; a broken invariant is a
// Check with OK false.
func checkInvariants(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, e Expect) ([]Check, error) {
	s, err := readSnapshot(ctx, db, rdb, e)
	if err != nil {
		return nil, fmt.Errorf("invariants of product %d: %w", e.ProductID, err)
	}
	return s.checks(e), nil
}

func readSnapshot(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, e Expect) (*snapshot, error) {
	pid := e.ProductID
	s := &snapshot{
		cards: map[string]int64{}, orders: map[string]orderInfo{}, orderQty: map[string]int64{},
		orderN: map[string]int64{}, soldBy: map[string]int64{}, flow: domain.FlowTotals{},
		restores: map[string]map[int]int64{}, delivered: map[string]bool{},
		payments: map[string][]paymentInfo{}, paidNotes: map[string]int64{},
	}

	// The card pool by status (idx_alloc).
	err := query(ctx, db, "SELECT status, COUNT(*) FROM card_stock WHERE product_id = ? GROUP BY status",
		[]any{pid}, func(r *sql.Rows) error {
			var st string
			var n int64
			if err := r.Scan(&st, &n); err != nil {
				return err
			}
			s.cards[st] += n
			s.imported += n
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("card pool: %w", err)
	}

	// SOLD codes by order number (idx_alloc, then one group per order).
	err = query(ctx, db, "SELECT order_no, COUNT(*) FROM card_stock WHERE product_id = ? AND status = 'SOLD' GROUP BY order_no",
		[]any{pid}, func(r *sql.Rows) error {
			var no sql.NullString
			var n int64
			if err := r.Scan(&no, &n); err != nil {
				return err
			}
			s.soldBy[no.String] += n // NULL and '' both mean "no order": neither is an order number
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("SOLD codes: %w", err)
	}

	// Every order of the product, streamed once (idx_product_status).
	err = query(ctx, db, "SELECT order_no, status, qty, amount FROM orders WHERE product_id = ?",
		[]any{pid}, func(r *sql.Rows) error {
			var no, st string
			var qty, amount int64
			if err := r.Scan(&no, &st, &qty, &amount); err != nil {
				return err
			}
			s.orders[no] = orderInfo{status: st, qty: qty, amount: amount}
			s.orderQty[st] += qty
			s.orderN[st]++
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}

	// The stock flow summed by type (idx_product).
	err = query(ctx, db, "SELECT change_type, COALESCE(SUM(qty), 0) FROM stock_flow WHERE product_id = ? GROUP BY change_type",
		[]any{pid}, func(r *sql.Rows) error {
			var t int
			var q int64
			if err := r.Scan(&t, &q); err != nil {
				return err
			}
			s.flow[domain.FlowType(t)] += q
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("stock flow totals: %w", err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT order_no, change_type FROM stock_flow "+
		"WHERE product_id = ? GROUP BY order_no, change_type HAVING COUNT(*) > 1) d", pid).Scan(&s.flowDups); err != nil {
		return nil, fmt.Errorf("duplicate flow rows: %w", err)
	}
	err = query(ctx, db, "SELECT order_no, change_type, COUNT(*) FROM stock_flow WHERE product_id = ? AND change_type IN (?, ?) "+
		"GROUP BY order_no, change_type", []any{pid, int(domain.FlowTimeoutRestore), int(domain.FlowFailedRestore)},
		func(r *sql.Rows) error {
			var no string
			var t int
			var n int64
			if err := r.Scan(&no, &t, &n); err != nil {
				return err
			}
			if s.restores[no] == nil {
				s.restores[no] = map[int]int64{}
			}
			s.restores[no][t] += n
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("restore flow rows: %w", err)
	}

	// (buyer, key) pairs of this product's orders that name more than one order, whatever the
	// other order's product (uk_buyer_idem lookups).
	if err := db.QueryRowContext(ctx, "SELECT COUNT(DISTINCT o.buyer_id, o.idem_key) FROM orders o "+
		"JOIN orders o2 ON o2.buyer_id = o.buyer_id AND o2.idem_key = o.idem_key AND o2.order_no <> o.order_no "+
		"WHERE o.product_id = ? AND o.idem_key IS NOT NULL", pid).Scan(&s.idemDups); err != nil {
		return nil, fmt.Errorf("idempotency keys: %w", err)
	}

	// PENDING orders past expiry + grace (times compared in SQL: the service writes UTC).
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE product_id = ? AND status = 'PENDING' "+
		"AND expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND", pid, e.ExpiryGrace.Microseconds()).Scan(&s.expired); err != nil {
		return nil, fmt.Errorf("expired orders: %w", err)
	}

	// Delivery events. The outbox has no index on msg_key, so it is read once (only rows written
	// since the product's first order) and matched here, instead of one lookup per order.
	if s.orderN["PAID"] > 0 {
		err = query(ctx, db, "SELECT msg_key, MAX(sent_at IS NOT NULL) FROM outbox WHERE topic = ? "+
			"AND created_at >= (SELECT MIN(created_at) FROM orders WHERE product_id = ?) - INTERVAL 1 DAY GROUP BY msg_key",
			[]any{domain.TopicDelivered, pid}, func(r *sql.Rows) error {
				var key string
				var sent int64
				if err := r.Scan(&key, &sent); err != nil {
					return err
				}
				if o, ok := s.orders[key]; ok && o.status == "PAID" {
					s.delivered[key] = sent == 1
				}
				return nil
			})
		if err != nil {
			return nil, fmt.Errorf("delivery events: %w", err)
		}
	}

	// Unsent gate changes (idx_due); their keys are "<order no>:<flow type>".
	err = query(ctx, db, "SELECT msg_key FROM outbox WHERE sent_at IS NULL AND topic = ?",
		[]any{domain.TopicGateChange}, func(r *sql.Rows) error {
			var key string
			if err := r.Scan(&key); err != nil {
				return err
			}
			no := key
			if i := strings.LastIndexByte(key, ':'); i >= 0 {
				no = key[:i]
			}
			if _, ok := s.orders[no]; ok {
				s.unsentGC = append(s.unsentGC, key)
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("unsent gate changes: %w", err)
	}

	// The payments of the product's orders, and their accepted "paid" notifications: the
	// orders through idx_product_status, each order's rows through the payments' primary key
	// and the log's idx_order.
	err = query(ctx, db, "SELECT p.order_no, p.provider, p.status, p.amount FROM orders o "+
		"JOIN payments p ON p.order_no = o.order_no WHERE o.product_id = ?", []any{pid}, func(r *sql.Rows) error {
		var no string
		var p paymentInfo
		if err := r.Scan(&no, &p.provider, &p.status, &p.amount); err != nil {
			return err
		}
		s.payments[no] = append(s.payments[no], p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("payments: %w", err)
	}
	err = query(ctx, db, "SELECT n.order_no, COUNT(*) FROM orders o JOIN payment_notifications n ON n.order_no = o.order_no "+
		"WHERE o.product_id = ? AND n.accepted AND n.outcome = 'paid' GROUP BY n.order_no", []any{pid}, func(r *sql.Rows) error {
		var no string
		var n int64
		if err := r.Scan(&no, &n); err != nil {
			return err
		}
		s.paidNotes[no] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("payment notifications: %w", err)
	}

	// The gate, read in one MGET (one slot: the keys share the product's hash tag).
	tag := "{" + strconv.FormatInt(pid, 10) + "}"
	vals, err := rdb.MGet(ctx, "stock:product:"+tag, "sold:product:"+tag).Result()
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	var bad []string
	s.gateStock, s.hasGateStock, bad = gateValue(vals[0], "stock", bad)
	s.gateSold, s.hasGateSd, bad = gateValue(vals[1], "sold", bad)
	s.gateErr = strings.Join(bad, "; ")
	return s, nil
}

// gateValue reads one gate counter: ok is false for a missing key (never 0) or a value that
// is not an integer (then reported in bad).
func gateValue(v any, name string, bad []string) (int64, bool, []string) {
	if v == nil {
		return 0, false, bad
	}
	str, _ := v.(string)
	n, err := strconv.ParseInt(str, 10, 64)
	if err != nil {
		return 0, false, append(bad, fmt.Sprintf("gate %s %q is not an integer", name, str))
	}
	return n, true, bad
}

// query runs q and calls each for every row.
func query(ctx context.Context, db *sql.DB, q string, args []any, each func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// checks evaluates every invariant on the snapshot.
func (s *snapshot) checks(e Expect) []Check {
	var out []Check
	add := func(name string, ok bool, format string, args ...any) {
		out = append(out, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	sold, unsold, recycled, void := s.cards["SOLD"], s.cards["UNSOLD"], s.cards["RECYCLED"], s.cards["VOID"]
	live := s.imported - void
	paidQty, pendQty := s.orderQty["PAID"], s.orderQty["PENDING"]
	held := paidQty + pendQty

	// 1. no oversell.
	var orphan int64
	var orphanEx []string
	for no, n := range s.soldBy {
		if o, ok := s.orders[no]; !ok || o.status != "PAID" {
			orphan += n
			label := no
			if no == "" {
				label = "(no order)"
			}
			orphanEx = append(orphanEx, label)
		}
	}
	add(chkSoldOwned, orphan == 0, "SOLD codes without a PAID order of this product: %d of %d%s",
		orphan, sold, examples(orphanEx))
	var differ []string
	for no, o := range s.orders {
		if o.status == "PAID" && s.soldBy[no] != o.qty {
			differ = append(differ, fmt.Sprintf("%s qty %d codes %d", no, o.qty, s.soldBy[no]))
		}
	}
	add(chkOrderCodes, len(differ) == 0, "PAID orders whose SOLD codes ≠ qty: %d of %d%s",
		len(differ), s.orderN["PAID"], examples(differ))
	add(chkSoldPaid, sold == paidQty, "SOLD %d %s Σ qty PAID %d", sold, rel(sold == paidQty), paidQty)
	pool := sold + unsold + recycled
	add(chkPool, pool == live, "SOLD %d + UNSOLD %d + RECYCLED %d = %d %s imported %d − voided %d = %d",
		sold, unsold, recycled, pool, rel(pool == live), s.imported, void, live)
	oversold := max(0, paidQty-live)
	add(chkOversold, oversold == 0, "oversold = max(0, Σ qty PAID %d − (imported − voided) %d) = %d",
		paidQty, live, oversold)

	// 2. gate conservation; a missing key fails, it is never read as 0.
	gateNote := ""
	if s.gateErr != "" {
		gateNote = " (" + s.gateErr + ")"
	}
	switch {
	case !s.hasGateStock || !s.hasGateSd:
		add(chkGateTotal, false, "gate %s%s; imported − voided %d", missing(s), gateNote, live)
	default:
		t := s.gateStock + s.gateSold
		add(chkGateTotal, t == live, "gate stock %d + gate sold %d = %d %s imported − voided %d",
			s.gateStock, s.gateSold, t, rel(t == live), live)
	}
	if !s.hasGateSd {
		add(chkGateSold, false, "gate %s%s; Σ qty PENDING %d + PAID %d = %d", missing(s), gateNote, pendQty, paidQty, held)
	} else {
		add(chkGateSold, s.gateSold == held, "gate sold %d %s Σ qty PENDING %d + PAID %d = %d",
			s.gateSold, rel(s.gateSold == held), pendQty, paidQty, held)
	}

	// 3. ledger: the flow alone reproduces every number.
	d := s.flow.Derive()
	cmp := func(name, what string, derived, actual int64) {
		add(name, derived == actual, "flow %d %s %s %d", derived, rel(derived == actual), what, actual)
	}
	cmp(chkLedgerImported, "code rows", d.Imported, s.imported)
	cmp(chkLedgerVoided, "VOID codes", d.Voided, void)
	cmp(chkLedgerSold, "SOLD codes", d.Sold, sold)
	cmp(chkLedgerSellable, "UNSOLD + RECYCLED codes", d.Sellable, unsold+recycled)
	cmp(chkLedgerHeld, "Σ qty PENDING + PAID", d.Held, held)
	cmp(chkLedgerPending, "Σ qty PENDING", d.Pending, pendQty)
	if s.hasGateStock {
		cmp(chkLedgerGateFree, "gate stock", d.GateFree, s.gateStock)
	} else {
		add(chkLedgerGateFree, false, "flow %d; gate stock key missing%s", d.GateFree, gateNote)
	}
	add(chkFlowUnique, s.flowDups == 0, "(ref, change type) pairs with more than one row: %d (flow totals %s)",
		s.flowDups, flowString(s.flow))

	// 4. idempotency.
	add(chkIdemKey, s.idemDups == 0, "(buyer, key) pairs with more than one order: %d", s.idemDups)
	nOrders := int64(len(s.orders))
	okCreated := nOrders >= e.Created && nOrders <= e.Created+e.InFlight+e.CommitUnknown
	detail := fmt.Sprintf("orders of the product %d, 201 answers %d, in flight at most %d (%d orders whose answer wrk dropped at its stop)",
		nOrders, e.Created, e.InFlight, nOrders-e.Created)
	if e.CommitUnknown > 0 {
		detail = fmt.Sprintf("orders of the product %d, 201 answers %d, in flight at most %d at wrk's stop and %d whose 201 the fault took (%d orders without a 201)",
			nOrders, e.Created, e.InFlight, e.CommitUnknown, nOrders-e.Created)
	}
	add(chkIdemCreated, okCreated, "%s", detail)

	// 5. no lost order.
	var accPaid, accUnf int64
	other := map[string]int64{}
	var otherEx []string
	for no := range e.AcceptedPayments {
		o, ok := s.orders[no]
		switch {
		case !ok:
			other["missing"]++
			otherEx = append(otherEx, no+" missing")
		case o.status == "PAID":
			accPaid++
		case o.status == "UNFULFILLED":
			accUnf++
		default:
			other[o.status]++
			otherEx = append(otherEx, no+" "+o.status)
		}
	}
	var nOther int64
	for _, n := range other {
		nOther += n
	}
	add(chkAccepted, nOther == 0, "accepted payments %d: PAID %d (their codes: see the PAID-orders check), UNFULFILLED %d, other %d%s%s",
		len(e.AcceptedPayments), accPaid, accUnf, nOther,
		countsString(other), examples(otherEx))
	var undelivered, unsent int64
	var undEx []string
	for no, o := range s.orders {
		if o.status != "PAID" {
			continue
		}
		sent, ok := s.delivered[no]
		switch {
		case !ok:
			undelivered++
			undEx = append(undEx, no+" no row")
		case !sent:
			unsent++
			undEx = append(undEx, no+" unsent")
		}
	}
	add(chkDelivered, undelivered+unsent == 0, "PAID orders %d: order.delivered missing %d, unsent %d%s",
		s.orderN["PAID"], undelivered, unsent, examples(undEx))

	// 6. no leak.
	add(chkExpired, s.expired == 0, "PENDING orders %d, past expiry + %s: %d", s.orderN["PENDING"], e.ExpiryGrace, s.expired)
	restored := func(name, status string, t domain.FlowType) {
		var bad int64
		var ex []string
		for no, o := range s.orders {
			if o.status != status {
				continue
			}
			if n := s.restores[no][int(t)]; n != 1 {
				bad++
				ex = append(ex, fmt.Sprintf("%s has %d", no, n))
			}
		}
		add(name, bad == 0, "%s orders %d, without exactly one %s (type %d) row: %d%s",
			status, s.orderN[status], t, int(t), bad, examples(ex))
	}
	restored(chkClosedRestore, "CLOSED", domain.FlowTimeoutRestore)
	restored(chkFailedRestore, "FAILED", domain.FlowFailedRestore)
	add(chkGateReturns, len(s.unsentGC) == 0, "unsent gate.change rows of this product's orders: %d%s",
		len(s.unsentGC), examples(s.unsentGC))

	// 7. provider payments: money taken at a provider and the order's state agree. Only a
	// scenario that pays through a provider expects a payment of every PAID order.
	if e.Provider != "" {
		var bad []string
		for no, o := range s.orders {
			if o.status != "PAID" {
				continue
			}
			if why := s.paymentOf(no, e.Provider, o.amount); why != "" {
				bad = append(bad, no+" "+why)
			}
		}
		add(chkProviderPaid, len(bad) == 0, "PAID orders %d, without a PAID %s payment of their amount: %d%s",
			s.orderN["PAID"], e.Provider, len(bad), examples(bad))
	}
	var orphanPay, nPaidPay []string
	for no, ps := range s.payments {
		for _, p := range ps {
			if p.status != "PAID" {
				continue
			}
			nPaidPay = append(nPaidPay, no)
			if st := s.orders[no].status; !paidStates[st] {
				orphanPay = append(orphanPay, fmt.Sprintf("%s %s at %s", no, st, p.provider))
			}
		}
	}
	add(chkPaymentOrphan, len(orphanPay) == 0, "PAID payments %d, of an order in another state: %d%s",
		len(nPaidPay), len(orphanPay), examples(orphanPay))
	var orphanNote []string
	var nNotes int64
	for no, n := range s.paidNotes {
		nNotes += n
		if st := s.orders[no].status; !paidStates[st] {
			orphanNote = append(orphanNote, fmt.Sprintf("%s %s (%d)", no, st, n))
		}
	}
	add(chkNoticeOrphan, len(orphanNote) == 0, "accepted paid notifications %d, for an order in another state: %d%s",
		nNotes, len(orphanNote), examples(orphanNote))
	return out
}

// paymentOf says what is wrong with order no's payment at provider for amount, or "".
func (s *snapshot) paymentOf(no, provider string, amount int64) string {
	for _, p := range s.payments[no] {
		switch {
		case p.provider != provider:
		case p.status != "PAID":
			return "payment " + p.status
		case p.amount != amount:
			return fmt.Sprintf("payment amount %d ≠ order amount %d", p.amount, amount)
		default:
			return ""
		}
	}
	return "no payment"
}

// rel is "=" or "≠".
func rel(eq bool) string {
	if eq {
		return "="
	}
	return "≠"
}

func missing(s *snapshot) string {
	var m []string
	if !s.hasGateStock {
		m = append(m, "stock")
	}
	if !s.hasGateSd {
		m = append(m, "sold")
	}
	return strings.Join(m, " and ") + " key missing (a missing key is a failure, never 0)"
}

// examples quotes up to exampleMax of xs, sorted, as " (e.g. a, b, c)".
func examples(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	more := ""
	if len(xs) > exampleMax {
		xs, more = xs[:exampleMax], ", …"
	}
	return " (e.g. " + strings.Join(xs, ", ") + more + ")"
}

func countsString(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return " [" + strings.Join(parts, ", ") + "]"
}

func flowString(t domain.FlowTotals) string {
	types := make([]int, 0, len(t))
	for k := range t {
		types = append(types, int(k))
	}
	slices.Sort(types)
	parts := make([]string, len(types))
	for i, k := range types {
		parts[i] = fmt.Sprintf("%s %d", domain.FlowType(k), t[domain.FlowType(k)])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
