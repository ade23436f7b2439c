package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/domain"
)

// testDatabase is this package's own database, so packages tested in parallel never see each
// other's rows.
const testDatabase = "cardshop_test_loadcheck"

var testStores struct {
	once sync.Once
	db   *sql.DB
	err  error
}

// testDB returns the migrated test database, or stops the test as porttest.RequireService says
// when MariaDB cannot be reached (skip locally, fail with CI=true).
func testDB(t testing.TB) *sql.DB {
	t.Helper()
	testStores.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, testDatabase)
		if err != nil {
			testStores.err = err
			return
		}
		bdb, err := mysqlstore.Open(dsn)
		if err != nil {
			testStores.err = err
			return
		}
		if err := bdb.PingContext(ctx); err != nil {
			testStores.err = err
			return
		}
		if _, err := mysqlstore.Migrate(ctx, bdb); err != nil {
			testStores.err = err
			return
		}
		testStores.db = bdb.DB
	})
	porttest.RequireService(t, "MariaDB", testStores.err)
	return testStores.db
}

// testRedis returns a client of the standalone Redis, closed when the test ends.
func testRedis(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: porttest.RedisAddr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.Ping(ctx).Err()
	if err != nil {
		_ = c.Close()
	}
	porttest.RequireService(t, "Redis "+porttest.RedisAddr, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fixture is one product with a small consistent ledger: 20 codes imported, orders in every
// state, their flow rows and outbox rows, and the gate's counters.
//
//	A PAID 2 · B PAID 3 · C PAID 1 (closed, then paid late) · D PENDING 2 · E PENDING 1
//	F CLOSED 2 · G FAILED 1 · H REFUNDED 2 (recycled) · I REFUNDED 1 (voided) · J UNFULFILLED 1
//
// Codes: SOLD 6, RECYCLED 2, VOID 1, UNSOLD 11; gate stock 10, sold 9. Every order has a
// Stripe payment in the state its order implies (see fxPayment), A also an expired epay one;
// the paid ones have an accepted paid notification, D a refused one, F an accepted expired one.
type fixture struct {
	t   *testing.T
	db  *sql.DB
	rdb *redis.Client
	pid int64
	e   Expect
}

type fxOrder struct {
	letter, status string
	qty            int
	flows          []domain.FlowType
	cards          string // status of the order's codes, "" for none
}

var fxOrders = []fxOrder{
	{"A", "PAID", 2, []domain.FlowType{1, 2}, "SOLD"},
	{"B", "PAID", 3, []domain.FlowType{1, 2}, "SOLD"},
	{"C", "PAID", 1, []domain.FlowType{1, 3, 8, 2}, "SOLD"},
	{"D", "PENDING", 2, []domain.FlowType{1}, ""},
	{"E", "PENDING", 1, []domain.FlowType{1}, ""},
	{"F", "CLOSED", 2, []domain.FlowType{1, 3}, ""},
	{"G", "FAILED", 1, []domain.FlowType{1, 5}, ""},
	{"H", "REFUNDED", 2, []domain.FlowType{1, 2, 4}, "RECYCLED"},
	{"I", "REFUNDED", 1, []domain.FlowType{1, 2, 9}, "VOID"},
	{"J", "UNFULFILLED", 1, []domain.FlowType{1, 10}, ""},
}

const fxImported = 20

// fxPayment is the status of an order's Stripe payment by the order's status.
var fxPayment = map[string]string{"PAID": "PAID", "REFUNDED": "PAID", "UNFULFILLED": "PAID", "PENDING": "OPEN",
	"CLOSED": "EXPIRED", "FAILED": "FAILED"}

// returnsStock are the flow types that give units back to the gate through a gate.change row.
var returnsStock = map[domain.FlowType]bool{domain.FlowTimeoutRestore: true, domain.FlowRefundRestore: true,
	domain.FlowFailedRestore: true, domain.FlowRefundVoid: true, domain.FlowUnfulfilled: true}

func (f *fixture) no(letter string) string { return fmt.Sprintf("lc%d-%s", f.pid, letter) }
func (f *fixture) tag() string             { return "{" + strconv.FormatInt(f.pid, 10) + "}" }

func (f *fixture) exec(q string, args ...any) {
	f.t.Helper()
	if _, err := f.db.ExecContext(context.Background(), q, args...); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, db: testDB(t), rdb: testRedis(t), pid: int64(porttest.NewProductID())}
	ctx := context.Background()
	t.Cleanup(func() {
		for _, q := range []string{"DELETE FROM card_stock WHERE product_id = ?", "DELETE FROM orders WHERE product_id = ?",
			"DELETE FROM stock_flow WHERE product_id = ?", "DELETE FROM products WHERE id = ?"} {
			_, _ = f.db.ExecContext(ctx, q, f.pid)
		}
		_, _ = f.db.ExecContext(ctx, "DELETE FROM outbox WHERE msg_key LIKE ? OR msg_key = ?",
			fmt.Sprintf("lc%d-%%", f.pid), fmt.Sprintf("batch-%d", f.pid))
		for _, q := range []string{"DELETE FROM payments WHERE order_no LIKE ?", "DELETE FROM payment_notifications WHERE order_no LIKE ?"} {
			_, _ = f.db.ExecContext(ctx, q, fmt.Sprintf("lc%d-%%", f.pid))
		}
		_ = f.rdb.Del(ctx, "stock:product:"+f.tag(), "sold:product:"+f.tag()).Err()
	})

	f.exec("INSERT INTO products (id, name, price, max_per_order, frozen, frozen_reason, created_at) "+
		"VALUES (?, 'loadcheck invariants test', 100, 10, FALSE, '', UTC_TIMESTAMP(6))", f.pid)
	batch := fmt.Sprintf("batch-%d", f.pid)
	f.exec("INSERT INTO stock_flow (product_id, order_no, change_type, qty, created_at) VALUES (?, ?, 6, ?, UTC_TIMESTAMP(6))",
		f.pid, batch, fxImported)
	f.exec("INSERT INTO outbox (topic, msg_key, payload, created_at, sent_at) VALUES ('gate.change', ?, '{}', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", batch)

	card := 0
	addCard := func(status string, orderNo any) {
		card++
		h := sha256.Sum256(fmt.Appendf(nil, "%d/%d", f.pid, card))
		f.exec("INSERT INTO card_stock (product_id, code_cipher, key_id, code_hash, status, order_no, created_at, updated_at) "+
			"VALUES (?, ?, 'k1', ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", f.pid, h[:16], h[:], status, orderNo)
	}
	f.e = Expect{ProductID: f.pid, Created: int64(len(fxOrders)), AcceptedPayments: map[string]bool{}, ExpiryGrace: time.Minute,
		Provider: "stripe"}
	for _, o := range fxOrders {
		no := f.no(o.letter)
		expires := 15 * 60 // PENDING orders are not due yet
		if o.status != "PENDING" {
			expires = -60 // the others are past expiry, which only matters for PENDING ones
		}
		f.exec("INSERT INTO orders (order_no, buyer_id, product_id, qty, unit_price, amount, idem_key, status, reason, "+
			"created_at, expires_at, updated_at) VALUES (?, ?, ?, ?, 100, ?, ?, ?, '', UTC_TIMESTAMP(6) - INTERVAL 20 MINUTE, "+
			"UTC_TIMESTAMP(6) + INTERVAL ? SECOND, UTC_TIMESTAMP(6))",
			no, "lc-buyer-"+o.letter, f.pid, o.qty, 100*o.qty, fmt.Sprintf("key-%d-%s", f.pid, o.letter), o.status, expires)
		for _, ft := range o.flows {
			f.exec("INSERT INTO stock_flow (product_id, order_no, change_type, qty, created_at) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))",
				f.pid, no, int(ft), o.qty)
			if returnsStock[ft] {
				f.exec("INSERT INTO outbox (topic, msg_key, payload, created_at, sent_at) VALUES ('gate.change', ?, '{}', "+
					"UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", fmt.Sprintf("%s:%d", no, int(ft)))
			}
			if ft == domain.FlowPay {
				f.exec("INSERT INTO outbox (topic, msg_key, payload, created_at, sent_at) VALUES ('order.delivered', ?, '{}', "+
					"UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", no)
			}
		}
		for range o.qty {
			if o.cards != "" {
				addCard(o.cards, no)
			}
		}
		if o.status == "PAID" || o.status == "UNFULFILLED" {
			f.e.AcceptedPayments[no] = true
		}
		f.payment(no, "stripe", fxPayment[o.status], 100*o.qty)
		switch fxPayment[o.status] {
		case "PAID":
			f.notice(no, "paid", true)
		case "OPEN":
			f.notice(no, "paid", false) // verified, then refused (say, another amount)
		case "EXPIRED":
			f.notice(no, "expired", true)
		}
	}
	for card < fxImported {
		addCard("UNSOLD", nil)
	}
	f.payment(f.no("A"), "epay", "EXPIRED", 200) // the buyer tried epay first
	for k, v := range map[string]int{"stock:product:" + f.tag(): 10, "sold:product:" + f.tag(): 9} {
		if err := f.rdb.Set(ctx, k, v, 10*time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) payment(no, provider, status string, amount int) {
	f.t.Helper()
	f.exec("INSERT INTO payments (order_no, provider, provider_ref, amount, currency, status, pay_url, qr_code, created_at, updated_at) "+
		"VALUES (?, ?, ?, ?, 'CNY', ?, '', '', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", no, provider, "ref-"+no, amount, status)
}

func (f *fixture) notice(no, outcome string, accepted bool) {
	f.t.Helper()
	f.exec("INSERT INTO payment_notifications (provider, received_at, method, verified, accepted, result, order_no, outcome) "+
		"VALUES ('stripe', UTC_TIMESTAMP(6), 'POST', TRUE, ?, 'fixture', ?, ?)", accepted, no, outcome)
}

func (f *fixture) check() []Check {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := checkInvariants(ctx, f.db, f.rdb, f.e)
	if err != nil {
		f.t.Fatal(err)
	}
	return cs
}

func failing(cs []Check) []string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}

func logChecks(t *testing.T, cs []Check) {
	t.Helper()
	for _, c := range cs {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		t.Logf("%s %s — %s", mark, c.Name, c.Detail)
	}
}

// allCheckNames are the names checkInvariants reports, in its order.
var allCheckNames = []string{chkSoldOwned, chkOrderCodes, chkSoldPaid, chkPool, chkOversold, chkGateTotal, chkGateSold,
	chkLedgerImported, chkLedgerVoided, chkLedgerSold, chkLedgerSellable, chkLedgerHeld, chkLedgerPending,
	chkLedgerGateFree, chkFlowUnique, chkIdemKey, chkIdemCreated, chkAccepted, chkDelivered, chkExpired,
	chkClosedRestore, chkFailedRestore, chkGateReturns, chkProviderPaid, chkPaymentOrphan, chkNoticeOrphan}

func TestInvariantsHoldOnAConsistentLedger(t *testing.T) {
	f := newFixture(t)
	cs := f.check()
	logChecks(t, cs)
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	if !slices.Equal(names, allCheckNames) {
		t.Fatalf("checks %q, want %q", names, allCheckNames)
	}
	if bad := failing(cs); len(bad) > 0 {
		t.Fatalf("failing checks on a consistent ledger: %q", bad)
	}
	want := map[string]string{
		chkSoldPaid:      "SOLD 6 = Σ qty PAID 6",
		chkPool:          "SOLD 6 + UNSOLD 11 + RECYCLED 2 = 19 = imported 20 − voided 1 = 19",
		chkGateTotal:     "gate stock 10 + gate sold 9 = 19 = imported − voided 19",
		chkGateSold:      "gate sold 9 = Σ qty PENDING 3 + PAID 6 = 9",
		chkLedgerHeld:    "flow 9 = Σ qty PENDING + PAID 9",
		chkAccepted:      "accepted payments 4: PAID 3 (their codes: see the PAID-orders check), UNFULFILLED 1, other 0",
		chkProviderPaid:  "PAID orders 3, without a PAID stripe payment of their amount: 0",
		chkPaymentOrphan: "PAID payments 6, of an order in another state: 0",
		chkNoticeOrphan:  "accepted paid notifications 6, for an order in another state: 0",
	}
	for _, c := range cs {
		if w, ok := want[c.Name]; ok && c.Detail != w {
			t.Errorf("%s: detail %q, want %q", c.Name, c.Detail, w)
		}
	}
}

func TestInvariantsCatchEachBreak(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		brk   func(f *fixture)
		fails []string
	}{
		{"an extra SOLD code for a PAID order", func(f *fixture) {
			f.exec("UPDATE card_stock SET status = 'SOLD', order_no = ? WHERE product_id = ? AND status = 'UNSOLD' LIMIT 1",
				f.no("A"), f.pid)
		}, []string{chkOrderCodes, chkSoldPaid, chkLedgerSold, chkLedgerSellable}},
		{"a SOLD code without an order", func(f *fixture) {
			f.exec("UPDATE card_stock SET status = 'SOLD' WHERE product_id = ? AND status = 'UNSOLD' LIMIT 1", f.pid)
		}, []string{chkSoldOwned, chkSoldPaid, chkLedgerSold, chkLedgerSellable}},
		{"Redis stock off by one", func(f *fixture) {
			if err := f.rdb.Incr(ctx, "stock:product:"+f.tag()).Err(); err != nil {
				f.t.Fatal(err)
			}
		}, []string{chkGateTotal, chkLedgerGateFree}},
		{"the gate's sold key missing", func(f *fixture) {
			if err := f.rdb.Del(ctx, "sold:product:"+f.tag()).Err(); err != nil {
				f.t.Fatal(err)
			}
		}, []string{chkGateTotal, chkGateSold}},
		{"a missing timeout-restore flow row", func(f *fixture) {
			f.exec("DELETE FROM stock_flow WHERE order_no = ? AND change_type = 3", f.no("F"))
		}, []string{chkLedgerHeld, chkLedgerPending, chkLedgerGateFree, chkClosedRestore}},
		{"a PENDING order long expired", func(f *fixture) {
			f.exec("UPDATE orders SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE order_no = ?", f.no("D"))
		}, []string{chkExpired}},
		{"an accepted payment left PENDING", func(f *fixture) {
			f.e.AcceptedPayments[f.no("D")] = true
		}, []string{chkAccepted}},
		{"an accepted payment with no order", func(f *fixture) {
			f.e.AcceptedPayments[f.no("Z")] = true
		}, []string{chkAccepted}},
		{"an unsent delivery event", func(f *fixture) {
			f.exec("UPDATE outbox SET sent_at = NULL WHERE topic = 'order.delivered' AND msg_key = ?", f.no("A"))
		}, []string{chkDelivered}},
		{"a missing delivery event", func(f *fixture) {
			f.exec("DELETE FROM outbox WHERE topic = 'order.delivered' AND msg_key = ?", f.no("B"))
		}, []string{chkDelivered}},
		{"an unsent gate change", func(f *fixture) {
			f.exec("UPDATE outbox SET sent_at = NULL WHERE topic = 'gate.change' AND msg_key = ?", f.no("F")+":3")
		}, []string{chkGateReturns}},
		{"Created off by one", func(f *fixture) {
			f.e.Created++
		}, []string{chkIdemCreated}},
		{"more orders without a 201 than requests in flight and commits in doubt", func(f *fixture) {
			f.e.Created -= 3
			f.e.InFlight, f.e.CommitUnknown = 1, 1
		}, []string{chkIdemCreated}},
		{"a PAID order without its provider payment", func(f *fixture) {
			f.exec("DELETE FROM payments WHERE order_no = ? AND provider = 'stripe'", f.no("A"))
		}, []string{chkProviderPaid}},
		{"a PAID order whose payment is still open", func(f *fixture) {
			f.exec("UPDATE payments SET status = 'OPEN' WHERE order_no = ?", f.no("B"))
		}, []string{chkProviderPaid}},
		{"a provider payment of another amount", func(f *fixture) {
			f.exec("UPDATE payments SET amount = amount + 1 WHERE order_no = ?", f.no("C"))
		}, []string{chkProviderPaid}},
		{"a PAID payment of a CLOSED order", func(f *fixture) {
			f.exec("UPDATE payments SET status = 'PAID' WHERE order_no = ?", f.no("F"))
		}, []string{chkPaymentOrphan}},
		{"a PAID payment of a PENDING order", func(f *fixture) {
			f.exec("UPDATE payments SET status = 'PAID' WHERE order_no = ?", f.no("D"))
		}, []string{chkPaymentOrphan}},
		{"an accepted paid notification for a PENDING order", func(f *fixture) {
			f.exec("UPDATE payment_notifications SET accepted = TRUE WHERE order_no = ?", f.no("D"))
		}, []string{chkNoticeOrphan}},
		{"an accepted paid notification for a CLOSED order", func(f *fixture) {
			f.notice(f.no("F"), "paid", true)
		}, []string{chkNoticeOrphan}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.brk(f)
			cs := f.check()
			want := slices.Sorted(slices.Values(tc.fails))
			if got := failing(cs); !slices.Equal(got, want) {
				logChecks(t, cs)
				t.Fatalf("failing checks %q, want exactly %q", got, want)
			}
		})
	}
}

// A scenario that pays through the signed callback records no provider payment: the check of
// every PAID order's payment is left out, the other two still run.
func TestInvariantsWithoutAProvider(t *testing.T) {
	f := newFixture(t)
	f.e.Provider = ""
	f.exec("DELETE FROM payments WHERE order_no LIKE ?", fmt.Sprintf("lc%d-%%", f.pid))
	cs := f.check()
	if bad := failing(cs); len(bad) > 0 {
		logChecks(t, cs)
		t.Fatalf("failing checks without provider payments: %q", bad)
	}
	for _, c := range cs {
		if c.Name == chkProviderPaid {
			t.Fatalf("%q reported for a scenario without a provider: %s", c.Name, c.Detail)
		}
	}
	if len(cs) != len(allCheckNames)-1 {
		t.Fatalf("%d checks, want %d", len(cs), len(allCheckNames)-1)
	}
}

// The breaks the schema makes impossible to stage (a second order for one (buyer, key), more
// PAID units than codes) are checked on a snapshot directly.
func TestInvariantsOnImpossibleSnapshots(t *testing.T) {
	base := func() *snapshot {
		return &snapshot{
			cards:    map[string]int64{"SOLD": 5},
			imported: 5,
			orders:   map[string]orderInfo{"o1": {"PAID", 5, 500}},
			orderQty: map[string]int64{"PAID": 5}, orderN: map[string]int64{"PAID": 1},
			soldBy:   map[string]int64{"o1": 5},
			flow:     domain.FlowTotals{domain.FlowStockIn: 5, domain.FlowReserve: 5, domain.FlowPay: 5},
			restores: map[string]map[int]int64{}, delivered: map[string]bool{"o1": true},
			gateStock: 0, gateSold: 5, hasGateStock: true, hasGateSd: true,
		}
	}
	e := Expect{Created: 1, AcceptedPayments: map[string]bool{"o1": true}}
	if bad := failing(base().checks(e)); len(bad) > 0 {
		t.Fatalf("base snapshot fails %q", bad)
	}

	s := base()
	s.idemDups = 1
	if got := failing(s.checks(e)); !slices.Equal(got, []string{chkIdemKey}) {
		t.Errorf("duplicate (buyer, key): failing %q, want only %q", got, chkIdemKey)
	}

	s = base() // a second PAID order of 2 units that got no codes: 7 sold of 5 codes
	s.orders["o2"] = orderInfo{"PAID", 2, 200}
	s.orderQty["PAID"], s.orderN["PAID"] = 7, 2
	s.delivered["o2"] = true
	cs := s.checks(Expect{Created: 2})
	var oversold Check
	for _, c := range cs {
		if c.Name == chkOversold {
			oversold = c
		}
	}
	if oversold.OK || oversold.Detail != "oversold = max(0, Σ qty PAID 7 − (imported − voided) 5) = 2" {
		t.Errorf("oversold check %+v, want a failure of 2", oversold)
	}

	s = base()
	s.hasGateStock, s.gateErr = false, `gate stock "x" is not an integer`
	got := failing(s.checks(e))
	if want := slices.Sorted(slices.Values([]string{chkGateTotal, chkLedgerGateFree})); !slices.Equal(got, want) {
		t.Errorf("garbled gate stock: failing %q, want %q", got, want)
	}
}

func TestExamplesAreBounded(t *testing.T) {
	xs := make([]string, 10)
	for i := range xs {
		xs[i] = strconv.Itoa(9 - i)
	}
	if got, want := examples(xs), " (e.g. 0, 1, 2, …)"; got != want {
		t.Fatalf("examples = %q, want %q", got, want)
	}
	if got := examples(nil); got != "" {
		t.Fatalf("examples(nil) = %q", got)
	}
}

// Under a MariaDB kill, orders whose COMMIT reply was lost exist although their requests were
// answered 503: CommitUnknown widens the bound by as many (and no more, see the break above).
func TestInvariantsAllowCommitsInDoubt(t *testing.T) {
	f := newFixture(t)
	f.e.Created -= 2
	f.e.InFlight, f.e.CommitUnknown = 1, 1
	if bad := failing(f.check()); len(bad) > 0 {
		t.Fatalf("two orders without a 201, one in flight and one in doubt: failing %q", bad)
	}
}
