package mysqlstore_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"cardshop/adapters/lab/netfault"
	"cardshop/adapters/porttest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"

	"cardshop/adapters/mysqlstore"
	"cardshop/domain"
)

func newPendingOrder(t testing.TB, l domain.Store, p domain.ProductID, qty int) domain.Order {
	t.Helper()
	prod, err := l.Products().Product(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	o, err := domain.NewOrder(orderNo(), domain.BuyerID(fmt.Sprintf("b-%d", time.Now().UnixNano())), prod, qty,
		domain.IdempotencyKey(fmt.Sprintf("key-%s", orderNo())), time.Now().UTC(), 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Orders().Insert(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	return o
}

func importN(t testing.TB, l domain.Store, p domain.ProductID, n int) {
	t.Helper()
	codes := make([]domain.CardCode, n)
	for i := range codes {
		codes[i] = newCode(t, fmt.Sprintf("C%05d", i))
	}
	if res, err := l.Cards().Import(t.Context(), p, codes, 1); err != nil || res.Added != n {
		t.Fatalf("Import %d = %+v, %v", n, res, err)
	}
}

// errLostRace is what a payment transaction returns when its order was paid by another.
var errLostRace = errors.New("order no longer PENDING")

// pay is the payment transaction: the conditional PENDING -> PAID, the codes, the pay flow row
// and the delivery message, all or nothing.
func pay(ctx context.Context, l domain.Ledger, o domain.Order, withLog bool) ([]domain.Card, error) {
	var cards []domain.Card
	err := l.Atomically(ctx, func(tx domain.Store) error {
		paid := o
		now := time.Now().UTC()
		if err := paid.MarkPaid(now, o.Amount(), "pay-"+string(o.No())); err != nil {
			return err
		}
		won, err := tx.Orders().Transition(ctx, paid, domain.StatusPending)
		if err != nil {
			return err
		}
		if !won {
			return errLostRace
		}
		cards, err = tx.Cards().Allocate(ctx, o.Product(), o.No(), o.Qty())
		if err != nil || !withLog {
			return err
		}
		if err := tx.Flows().Append(ctx, domain.FlowEntry{ProductID: o.Product(), Ref: string(o.No()), Type: domain.FlowPay,
			Qty: int64(o.Qty()), At: now}); err != nil {
			return err
		}
		return tx.Outbox().Add(ctx, domain.OutboxMessage{Topic: "test.delivered", Key: string(o.No()), Payload: []byte("{}"), At: now})
	})
	return cards, err
}

// markTestMessagesSent keeps this package's outbox backlog from growing across runs.
func markTestMessagesSent(t testing.TB) {
	t.Helper()
	if _, err := rawDB(t).ExecContext(context.Background(),
		"UPDATE outbox SET sent_at = UTC_TIMESTAMP(6) WHERE sent_at IS NULL AND topic = 'test.delivered'"); err != nil {
		t.Error(err)
	}
}

// TestConcurrentPayments: 32 workers pay 128 orders (1 to 3 codes each, about 256 codes) on
// one product with 200 codes. No code is sold twice, every paid order has its codes, every
// refused one was refused for a real shortage, and no deadlock escapes.
func TestConcurrentPayments(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	const pool, workers, perWorker = 200, 32, 4
	p := createProduct(t, l)
	importN(t, l, p, pool)
	orders := make([][]domain.Order, workers)
	for w := range orders {
		for i := range perWorker {
			orders[w] = append(orders[w], newPendingOrder(t, l, p, 1+(w+i)%3))
		}
	}

	var (
		mu       sync.Mutex
		soldTo   = map[int64]domain.OrderNo{}
		codes    = map[string]bool{}
		paidQty  int64
		refusals []int // qty of orders refused for a short pool
	)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for _, o := range orders[w] {
				cards, err := pay(ctx, l, o, true)
				mu.Lock()
				switch {
				case errors.Is(err, domain.ErrInsufficientCards):
					refusals = append(refusals, o.Qty())
				case err != nil:
					t.Errorf("pay %s: %v", o.No(), err)
				case len(cards) != o.Qty():
					t.Errorf("pay %s: %d cards for qty %d", o.No(), len(cards), o.Qty())
				default:
					paidQty += int64(o.Qty())
					for _, c := range cards {
						if prev, dup := soldTo[c.ID]; dup {
							t.Errorf("card %d sold to %s and %s", c.ID, prev, o.No())
						}
						if codes[c.Code.Reveal()] {
							t.Errorf("code of card %d sold twice", c.ID)
						}
						soldTo[c.ID], codes[c.Code.Reveal()] = o.No(), true
					}
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d codes sold, %d orders refused for a short pool, retries: %+v", paidQty, len(refusals), l.Stats())

	left := pool - paidQty
	for _, q := range refusals {
		// The pool only shrinks here, so a refusal is honest only if even now fewer than q are left.
		if int64(q) <= left {
			t.Errorf("an order of %d was refused while %d codes are still sellable", q, left)
		}
	}
	counts, err := l.Cards().Counts(ctx, p)
	if err != nil || counts[domain.CardSold] != paidQty || counts[domain.CardUnsold] != left {
		t.Fatalf("Counts = %v, %v; want %d SOLD and %d UNSOLD", counts, err, paidQty, left)
	}
	totals, err := l.Orders().Totals(ctx, p)
	if err != nil || totals[domain.StatusPaid].Qty != paidQty || totals[domain.StatusPending].Orders != int64(len(refusals)) {
		t.Fatalf("order Totals = %v, %v; want %d paid codes and %d orders still PENDING", totals, err, paidQty, len(refusals))
	}
	flows, err := l.Flows().Totals(ctx, p)
	if err != nil || flows[domain.FlowPay] != paidQty {
		t.Fatalf("flow Totals = %v, %v; want pay = %d", flows, err, paidQty)
	}
	for _, batch := range orders {
		for _, o := range batch {
			stored, err := l.Orders().Order(ctx, o.No())
			if err != nil {
				t.Fatal(err)
			}
			cards, err := l.Cards().Cards(ctx, o.No())
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: o.Qty(), false: 0}[stored.Status() == domain.StatusPaid]; len(cards) != want {
				t.Fatalf("order %s (%s) holds %d codes, want %d", o.No(), stored.Status(), len(cards), want)
			}
		}
	}
}

// TestDeadlockIsRetried provokes a real deadlock: two transactions each transition one order,
// wait for each other, then transition the other's order. The server kills one; the victim
// swallows every error and returns nil, yet Atomically runs it again (MySQL had already rolled
// it back, so committing what followed would have been a partial transaction).
func TestDeadlockIsRetried(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	p := createProduct(t, l)
	a, b := newPendingOrder(t, l, p, 1), newPendingOrder(t, l, p, 1)

	var (
		arrived  sync.WaitGroup
		deadlock atomic.Int32
		wg       sync.WaitGroup
	)
	arrived.Add(2)
	for i, pair := range [][2]domain.Order{{a, b}, {b, a}} {
		wg.Go(func() {
			attempt := 0
			err := l.Atomically(ctx, func(tx domain.Store) error {
				attempt++
				for j, o := range pair {
					paid := o
					_ = paid.MarkPaid(time.Now().UTC(), o.Amount(), fmt.Sprintf("worker-%d", i))
					_, err := tx.Orders().Transition(ctx, paid, domain.StatusPending)
					var me *mysql.MySQLError
					if errors.As(err, &me) && me.Number == 1213 {
						deadlock.Add(1)
					}
					if j == 0 && attempt == 1 {
						arrived.Done()
						arrived.Wait()
					}
				}
				// Swallowed: whatever happened above, write and "succeed".
				_ = tx.Flows().Append(ctx, domain.FlowEntry{ProductID: p, Ref: fmt.Sprintf("%s-w%d", a.No(), i),
					Type: domain.FlowAdjust, Qty: 1, At: time.Now().UTC()})
				return nil
			})
			if err != nil {
				t.Errorf("worker %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if deadlock.Load() == 0 {
		t.Fatal("no deadlock happened")
	}
	if st := l.Stats(); st.Deadlocks < 1 || st.Retries < 1 {
		t.Fatalf("Stats = %+v after a swallowed deadlock, want a retry for a deadlock", st)
	}
	sa, _ := l.Orders().Order(ctx, a.No())
	sb, _ := l.Orders().Order(ctx, b.No())
	if sa.Status() != domain.StatusPaid || sb.Status() != domain.StatusPaid || sa.PaymentRef() != sb.PaymentRef() {
		t.Fatalf("orders = %s by %q and %s by %q; want both PAID by the one winner", sa.Status(), sa.PaymentRef(),
			sb.Status(), sb.PaymentRef())
	}
	for i := range 2 {
		if got, err := l.Flows().Entries(ctx, fmt.Sprintf("%s-w%d", a.No(), i)); err != nil || len(got) != 1 {
			t.Fatalf("worker %d's flow rows = %v, %v; want exactly 1", i, got, err)
		}
	}
	t.Logf("%d deadlock(s) seen by fn; %+v", deadlock.Load(), l.Stats())
}

func TestErrorClassification(t *testing.T) {
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
	timeout := &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}
	dup := &mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'x' for key 'PRIMARY'"}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	tests := []struct {
		name        string
		err         error
		retryable   bool
		unavailable bool
	}{
		{"deadlock", deadlock, true, true},
		{"wrapped deadlock", fmt.Errorf("allocate: %w", deadlock), true, true},
		{"lock wait timeout", timeout, true, true},
		{"duplicate key", dup, false, false},
		{"too many connections", &mysql.MySQLError{Number: 1040}, false, true},
		{"read-only server", &mysql.MySQLError{Number: 1290}, false, true},
		{"connection refused", refused, false, true},
		{"bad connection", driver.ErrBadConn, false, true},
		{"invalid connection", mysql.ErrInvalidConn, false, true},
		{"deadline", context.DeadlineExceeded, false, true},
		{"cancelled", context.Canceled, false, false},
		{"domain error", domain.ErrOrderNotFound, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mysqlstore.Retryable(tt.err); got != tt.retryable {
				t.Errorf("retryable = %v, want %v", got, tt.retryable)
			}
			wrapped := mysqlstore.WrapErr("op", tt.err)
			if got := errors.Is(wrapped, domain.ErrUnavailable); got != tt.unavailable {
				t.Errorf("wrapped %v: Is(ErrUnavailable) = %v, want %v", wrapped, got, tt.unavailable)
			}
			if !errors.Is(wrapped, tt.err) {
				t.Errorf("wrapped %v lost its cause", wrapped)
			}
		})
	}
	tooLong := mysqlstore.WrapErr("op", &mysql.MySQLError{Number: 1406, Message: "Data too long for column 'order_no' at row 1"})
	var ve *domain.ValidationError
	if !errors.As(tooLong, &ve) || ve.Field != "order_no" {
		t.Errorf("data too long = %v, want a ValidationError for order_no", tooLong)
	}
}

// TestUnavailable points the store at a port where nothing listens.
func TestUnavailable(t *testing.T) {
	const dsn = "root@tcp(127.0.0.1:1)/cardshop_nowhere?timeout=1s"
	ctx := t.Context()
	db, err := mysqlstore.Open(dsn)
	if err != nil {
		t.Fatalf("Open must not need the server: %v", err)
	}
	defer db.Close()
	l := mysqlstore.New(db, keyring(t, testKeyOld))
	check := func(what string, err error) {
		t.Helper()
		var ne net.Error
		if !errors.Is(err, domain.ErrUnavailable) || !errors.As(err, &ne) {
			t.Errorf("%s: err = %v, want ErrUnavailable with the network error kept", what, err)
		}
	}
	_, err = l.Products().Product(ctx, 1)
	check("Product", err)
	_, err = l.Orders().Expired(ctx, time.Now(), 10)
	check("Expired", err)
	_, err = l.Cards().Import(ctx, 1, []domain.CardCode{newCode(t, "X")}, 1)
	check("Import", err)
	check("Atomically", l.Atomically(ctx, func(tx domain.Store) error {
		t.Error("fn ran without a database")
		return nil
	}))
	_, err = mysqlstore.Migrate(ctx, db)
	check("Migrate", err)
	_, err = mysqlstore.Pending(ctx, db)
	check("Pending", err)
	_, err = mysqlstore.CreateDatabase(ctx, dsn, "cardshop_nowhere")
	check("CreateDatabase", err)
}

// TestAtomicallyRollsBackOnce: fn's own error rolls back and is not retried.
func TestAtomicallyRollsBackOnce(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	p := createProduct(t, l)
	importN(t, l, p, 2)
	boom := errors.New("boom")
	calls := 0
	var o domain.Order
	err := l.Atomically(ctx, func(tx domain.Store) error {
		calls++
		o = newPendingOrder(t, tx, p, 2)
		if _, err := tx.Cards().Allocate(ctx, p, o.No(), 2); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("Atomically = %v after %d calls; want fn's error after 1", err, calls)
	}
	if _, err := l.Orders().Order(ctx, o.No()); !errors.Is(err, domain.ErrOrderNotFound) {
		t.Fatalf("rolled-back order: err = %v, want ErrOrderNotFound", err)
	}
	if counts, _ := l.Cards().Counts(ctx, p); counts[domain.CardUnsold] != 2 || counts[domain.CardSold] != 0 {
		t.Fatalf("Counts after rollback = %v, want 2 UNSOLD", counts)
	}
	// A transaction's store refuses work once Atomically has returned.
	var kept domain.Store
	_ = l.Atomically(ctx, func(tx domain.Store) error { kept = tx; return nil })
	if _, err := kept.Orders().Order(ctx, o.No()); err == nil || errors.Is(err, domain.ErrOrderNotFound) {
		t.Fatalf("use of an ended transaction: err = %v, want a refusal", err)
	}
}

// TestStorageDetails covers what the contract cannot see: microsecond times, a transition
// that changes nothing, and one that tries to change the order's identity.
func TestStorageDetails(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	p := createProduct(t, l)
	prod, _ := l.Products().Product(ctx, p)
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	o, err := domain.NewOrder(orderNo(), "buyer-times", prod, 1, domain.IdempotencyKey("key-"+orderNo()), at, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Orders().Insert(ctx, o); err != nil {
		t.Fatal(err)
	}
	got, err := l.Orders().Order(ctx, o.No())
	if err != nil || !got.CreatedAt().Equal(at.Truncate(time.Microsecond)) || !got.PaidAt().IsZero() {
		t.Fatalf("stored times: created %v, paid %v (%v); want %v and zero", got.CreatedAt(), got.PaidAt(), err, at.Truncate(time.Microsecond))
	}
	if won, err := l.Orders().Transition(ctx, got, domain.StatusPending); err != nil || !won {
		t.Fatalf("Transition that changes nothing = %v, %v; want true (the row matched)", won, err)
	}
	other, _ := domain.NewOrder(o.No(), "someone-else", prod, 1, o.IdempotencyKey(), at, time.Minute)
	if _, err := l.Orders().Transition(ctx, other, domain.StatusPending); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("Transition changing the buyer: err = %v, want ErrInvalidInput", err)
	}
	if err := l.Flows().Append(ctx, domain.FlowEntry{ProductID: p, Ref: strings.Repeat("x", 66), Type: domain.FlowAdjust,
		Qty: 1, At: at}); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("Append with a 66-byte ref: err = %v, want ErrInvalidInput (too long)", err)
	}
}

// TestImportLargeBatch crosses the 1,000-row statement chunks with duplicates inside the batch
// and already in the pool.
func TestImportLargeBatch(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	p := createProduct(t, l)
	first := make([]domain.CardCode, 300)
	for i := range first {
		first[i] = newCode(t, "BIG")
	}
	if res, err := l.Cards().Import(ctx, p, first, 1); err != nil || res.Added != 300 {
		t.Fatalf("first Import = %+v, %v", res, err)
	}
	batch := slices.Clone(first) // 300 already in the pool
	for range 2200 {
		batch = append(batch, newCode(t, "BIG"))
	}
	batch = append(batch, batch[400:410]...) // 10 repeated within the batch
	res, err := l.Cards().Import(ctx, p, batch, 1)
	if err != nil || res.Added != 2200 || res.Duplicates != 310 || res.InPool != 0 || len(res.Outcomes) != len(batch) {
		t.Fatalf("Import of 2,510 = %+v, %v; want 2200 added, 310 duplicates", res, err)
	}
	if counts, err := l.Cards().Counts(ctx, p); err != nil || counts[domain.CardUnsold] != 2500 {
		t.Fatalf("Counts = %v, %v; want 2500 UNSOLD", counts, err)
	}
}

// Every pooled session runs at READ COMMITTED even when the DSN asks otherwise: the payment
// transaction deadlocks at REPEATABLE READ, and BEGIN carries no isolation of its own.
func TestSessionsRunAtReadCommitted(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		var level string
		if err := db.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&level); err != nil {
			t.Fatal(err)
		}
		if level != "READ-COMMITTED" {
			t.Fatalf("session isolation %s, want READ-COMMITTED", level)
		}
	}
	other, err := mysqlstore.Open(strings.Replace(porttest.MySQLDSN, "/", "/?tx_isolation=%27REPEATABLE-READ%27&", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var level string
	if err := other.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "READ-COMMITTED" {
		t.Fatalf("a DSN asking for REPEATABLE READ got %s, want READ-COMMITTED", level)
	}
}

// The reply to COMMIT is lost in the network (a TCP proxy swallows it): Atomically reports
// ErrCommitUnknown with ErrUnavailable, not a plain failure, and the order is in fact stored —
// the case in which placing an order must read back before giving its reservation back.
func TestLostCommitReplyIsCommitUnknown(t *testing.T) {
	db, proxy := proxiedDB(t)
	l := mysqlstore.New(db, keyring(t, testKeyOld))
	ctx := context.Background()
	p := createProduct(t, l)
	prod, err := l.Products().Product(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	o, err := domain.NewOrder(orderNo(), "lost-commit", prod, 1, domain.IdempotencyKey("key-"+orderNo()), time.Now().UTC(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	err = l.Atomically(ctx, func(tx domain.Store) error {
		if err := tx.Orders().Insert(ctx, o); err != nil {
			return err
		}
		proxy.DropReplies(1) // the next reply is COMMIT's
		return nil
	})
	if !errors.Is(err, domain.ErrCommitUnknown) || !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("Atomically with a lost COMMIT reply: %v, want ErrCommitUnknown and ErrUnavailable", err)
	}
	if _, err := newLedger(t).Orders().Order(ctx, o.No()); err != nil {
		t.Fatalf("the order whose COMMIT reply was lost: %v, want it stored", err)
	}
}

// closeExpired is the expiry's transaction: the conditional PENDING -> CLOSED, the
// timeout-restore flow row and a message for the gate, all or nothing. It takes no codes.
func closeExpired(ctx context.Context, l domain.Ledger, o domain.Order) error {
	return l.Atomically(ctx, func(tx domain.Store) error {
		closed := o
		now := time.Now().UTC()
		if err := closed.Close(o.ExpiresAt().Add(time.Second)); err != nil {
			return err
		}
		won, err := tx.Orders().Transition(ctx, closed, domain.StatusPending)
		if err != nil {
			return err
		}
		if !won {
			return errLostRace
		}
		if err := tx.Flows().Append(ctx, domain.FlowEntry{ProductID: o.Product(), Ref: string(o.No()), Type: domain.FlowTimeoutRestore,
			Qty: int64(o.Qty()), At: now}); err != nil {
			return err
		}
		return tx.Outbox().Add(ctx, domain.OutboxMessage{Topic: "test.delivered", Key: string(o.No()), Payload: []byte("{}"), At: now})
	})
}

// proxiedDB opens the test database on one connection through a TCP proxy, which the test can
// tell to swallow replies.
func proxiedDB(t *testing.T) (*bun.DB, *netfault.Proxy) {
	t.Helper()
	openDB(t)
	cfg, err := mysql.ParseDSN(shared.dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := netfault.NewProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	db, err := mysqlstore.Open(cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	return db, proxy
}
