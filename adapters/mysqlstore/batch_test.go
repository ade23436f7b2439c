package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"cardshop/adapters/mysqlstore"
	"cardshop/domain"
)

// batchCounts is a BatchObserver that keeps what it is told.
type batchCounts struct {
	mu        sync.Mutex
	sizes     []int
	waits     int
	fallbacks map[string]int
}

func (c *batchCounts) LedgerBatchSize(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sizes = append(c.sizes, n)
}

func (c *batchCounts) LedgerBatchWait(time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits++
}

func (c *batchCounts) LedgerBatchFallback(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fallbacks == nil {
		c.fallbacks = map[string]int{}
	}
	c.fallbacks[reason]++
}

func (c *batchCounts) snapshot() (sizes []int, waits int, fallbacks map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fallbacks = map[string]int{}
	for r, n := range c.fallbacks {
		fallbacks[r] = n
	}
	return slices.Clone(c.sizes), c.waits, fallbacks
}

// batching is a group-committing ledger on db with one lane per lanes, and what it observed.
func batching(t *testing.T, db *bun.DB, lanes int) (*mysqlstore.BatchingLedger, *batchCounts) {
	t.Helper()
	obs := &batchCounts{}
	return mysqlstore.NewBatching(mysqlstore.New(db, keyring(t, testKeyOld)),
		mysqlstore.BatchConfig{Max: 128, Lanes: lanes, Observer: obs}), obs
}

// newOrders returns n PENDING orders of product p, each of its own buyer and key.
func newOrders(t *testing.T, l domain.Store, p domain.ProductID, n int) []domain.Order {
	t.Helper()
	prod, err := l.Products().Product(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]domain.Order, n)
	for i := range out {
		out[i], err = domain.NewOrder(orderNo(), domain.BuyerID(fmt.Sprintf("batch-%d-%d", time.Now().UnixNano(), i)), prod, 1,
			domain.IdempotencyKey("key-"+orderNo()), time.Now().UTC(), 15*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// place is what placing an order writes: the order and its reserve flow row.
func place(ctx context.Context, l domain.Ledger, o domain.Order) error {
	return l.Atomically(ctx, func(tx domain.Store) error {
		if err := tx.Orders().Insert(ctx, o); err != nil {
			return err
		}
		return tx.Flows().Append(ctx, domain.FlowEntry{ProductID: o.Product(), Ref: string(o.No()),
			Type: domain.FlowReserve, Qty: int64(o.Qty()), At: o.CreatedAt()})
	})
}

// stored counts the rows of o in orders and in stock_flow.
func stored(t *testing.T, o domain.Order) (orders, flows int) {
	t.Helper()
	db := rawDB(t)
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM orders WHERE order_no = ?", string(o.No())).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM stock_flow WHERE order_no = ?", string(o.No())).Scan(&flows); err != nil {
		t.Fatal(err)
	}
	return orders, flows
}

// holdFirstBatch makes the ledger's first batch wait, once taken, until the returned release
// is called; held is closed when it waits. Members arriving meanwhile queue in its lane.
func holdFirstBatch(b *mysqlstore.BatchingLedger, beforeCommit func()) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	mysqlstore.SetBatchHooks(b, func(int) { once.Do(func() { close(h); <-r }) }, beforeCommit)
	var releaseOnce sync.Once
	return h, func() { releaseOnce.Do(func() { close(r) }) }
}

// waitQueued waits until n members wait in b's lanes.
func waitQueued(t *testing.T, b *mysqlstore.BatchingLedger, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for mysqlstore.Queued(b) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d members queued, want %d", mysqlstore.Queued(b), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Many orders placed at once share transactions, and each is stored exactly once with its
// flow row.
func TestBatchesFormAndStoreEachOrderOnce(t *testing.T) {
	b, obs := batching(t, openDB(t), 2)
	orders := newOrders(t, b, createProduct(t, b), 100)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, len(orders))
	for i, o := range orders {
		wg.Go(func() {
			<-start
			errs[i] = place(t.Context(), b, o)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("order %d: %v", i, err)
		}
	}
	for i, o := range orders {
		if n, f := stored(t, o); n != 1 || f != 1 {
			t.Errorf("order %d: %d order rows and %d flow rows, want 1 and 1", i, n, f)
		}
	}
	sizes, waits, fallbacks := obs.snapshot()
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total != len(orders) || waits != len(orders) || len(fallbacks) != 0 {
		t.Errorf("batches %v (%d members), %d waits, fallbacks %v; want %d members, no fallback", sizes, total, waits, fallbacks, len(orders))
	}
	if slices.Max(sizes) < 2 {
		t.Errorf("batch sizes %v: no batch of more than one order", sizes)
	}
}

// startHeld places blocker on b in the background and waits until its batch is held (see
// holdFirstBatch); the returned channel gives its outcome.
func startHeld(t *testing.T, b *mysqlstore.BatchingLedger, held <-chan struct{}, blocker domain.Order) <-chan error {
	t.Helper()
	out := make(chan error, 1)
	go func() { out <- place(context.Background(), b, blocker) }()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the first batch never started")
	}
	return out
}

// placeAll places each order in its own goroutine; the returned function waits for them and
// returns their errors.
func placeAll(ctx context.Context, l domain.Ledger, orders []domain.Order) func() []error {
	errs := make([]error, len(orders))
	var wg sync.WaitGroup
	for i, o := range orders {
		wg.Go(func() { errs[i] = place(ctx, l, o) })
	}
	return func() []error { wg.Wait(); return errs }
}

// A batch with one member whose buyer key is taken is rolled back and its members run alone:
// that member gets ErrDuplicateIdempotencyKey, the others are stored.
func TestBatchWithDuplicateKeyFallsBackToSingleWrites(t *testing.T) {
	b, obs := batching(t, openDB(t), 1)
	held, release := holdFirstBatch(b, nil)
	defer release()
	p := createProduct(t, b)
	orders := newOrders(t, b, p, 6)
	first := orders[0]
	if err := place(t.Context(), b.Ledger, first); err != nil {
		t.Fatal(err)
	}
	prod, err := b.Products().Product(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := domain.NewOrder(orderNo(), first.Buyer(), prod, 1, first.IdempotencyKey(), time.Now().UTC(), 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	blocker := startHeld(t, b, held, orders[1])
	members := append(slices.Clone(orders[2:]), dup)
	wait := placeAll(t.Context(), b, members)
	waitQueued(t, b, len(members))
	release()
	if err := <-blocker; err != nil {
		t.Fatalf("the first batch: %v", err)
	}
	errs := wait()
	for i, o := range members {
		n, f := stored(t, o)
		if o.No() == dup.No() {
			if !errors.Is(errs[i], domain.ErrDuplicateIdempotencyKey) || n != 0 || f != 0 {
				t.Errorf("the duplicate: %v, %d order rows, %d flow rows; want ErrDuplicateIdempotencyKey and nothing stored", errs[i], n, f)
			}
			continue
		}
		if errs[i] != nil || n != 1 || f != 1 {
			t.Errorf("member %d: %v, %d order rows, %d flow rows; want stored once", i, errs[i], n, f)
		}
	}
	sizes, _, fallbacks := obs.snapshot()
	if !slices.Equal(sizes, []int{1, len(members)}) || fallbacks[mysqlstore.FallbackDuplicateKey] != 1 || len(fallbacks) != 1 {
		t.Errorf("batches %v, fallbacks %v; want [1 %d] and one duplicate_key fallback", sizes, fallbacks, len(members))
	}
}

// A member whose context ends while it is queued leaves the queue, returns the context's
// error and stores nothing; its batch's other members are not affected.
func TestBatchMemberCancelledWhileQueuedStoresNothing(t *testing.T) {
	b, obs := batching(t, openDB(t), 1)
	held, release := holdFirstBatch(b, nil)
	defer release()
	orders := newOrders(t, b, createProduct(t, b), 3)
	blocker := startHeld(t, b, held, orders[0])
	ctx, cancel := context.WithCancel(t.Context())
	cancelled := placeAll(ctx, b, orders[1:2])
	other := placeAll(t.Context(), b, orders[2:])
	waitQueued(t, b, 2)
	cancel()
	if err := cancelled()[0]; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled member: %v, want context.Canceled", err)
	}
	waitQueued(t, b, 1)
	release()
	if err := <-blocker; err != nil {
		t.Fatalf("the first batch: %v", err)
	}
	if err := other()[0]; err != nil {
		t.Fatalf("the other member: %v", err)
	}
	if n, f := stored(t, orders[1]); n != 0 || f != 0 {
		t.Errorf("the cancelled member: %d order rows, %d flow rows; want none", n, f)
	}
	if n, f := stored(t, orders[2]); n != 1 || f != 1 {
		t.Errorf("the other member: %d order rows, %d flow rows; want 1 and 1", n, f)
	}
	if sizes, _, _ := obs.snapshot(); !slices.Equal(sizes, []int{1, 1}) {
		t.Errorf("batches %v, want [1 1]", sizes)
	}
}

// A member whose context ends after its batch took it waits for the batch and gets its
// outcome: its order is stored, and it says so.
func TestBatchMemberCancelledAfterBeingTakenGetsTheOutcome(t *testing.T) {
	b, _ := batching(t, openDB(t), 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The batch, once it has taken its member, cancels it and gives the member time to see it.
	mysqlstore.SetBatchHooks(b, func(int) { cancel(); time.Sleep(20 * time.Millisecond) }, nil)
	o := newOrders(t, b, createProduct(t, b), 1)[0]
	if err := place(ctx, b, o); err != nil {
		t.Fatalf("a member cancelled after its batch took it: %v, want the batch's outcome (nil)", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the hook did not cancel the member")
	}
	if n, f := stored(t, o); n != 1 || f != 1 {
		t.Errorf("%d order rows and %d flow rows, want 1 and 1", n, f)
	}
}

// The reply to a batch's COMMIT is lost (a TCP proxy swallows it): every member gets
// ErrCommitUnknown with ErrUnavailable, and every order is in fact stored — so each caller
// reads back before giving its reservation back.
func TestBatchLostCommitReplyIsCommitUnknownForEveryMember(t *testing.T) {
	db, proxy := proxiedDB(t)
	b, obs := batching(t, db, 1)
	var size atomic.Int64
	h, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	mysqlstore.SetBatchHooks(b, func(n int) {
		size.Store(int64(n))
		once.Do(func() { close(h); <-r })
	}, func() {
		if size.Load() > 1 {
			proxy.DropReplies(1) // the next reply is COMMIT's
		}
	})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(r) }) }
	defer release()
	orders := newOrders(t, newLedger(t), createProduct(t, newLedger(t)), 4)
	blocker := startHeld(t, b, h, orders[0])
	wait := placeAll(t.Context(), b, orders[1:])
	waitQueued(t, b, 3)
	release()
	if err := <-blocker; err != nil {
		t.Fatalf("the first batch: %v", err)
	}
	for i, err := range wait() {
		if !errors.Is(err, domain.ErrCommitUnknown) || !errors.Is(err, domain.ErrUnavailable) {
			t.Errorf("member %d with a lost COMMIT reply: %v, want ErrCommitUnknown and ErrUnavailable", i, err)
		}
		if n, f := stored(t, orders[i+1]); n != 1 || f != 1 {
			t.Errorf("member %d: %d order rows and %d flow rows, want 1 and 1", i, n, f)
		}
	}
	if sizes, _, fallbacks := obs.snapshot(); !slices.Equal(sizes, []int{1, 3}) || len(fallbacks) != 0 {
		t.Errorf("batches %v, fallbacks %v; want [1 3] and none", sizes, fallbacks)
	}
}

// A transaction that does anything but insert orders and append flow rows runs as the
// Ledger's own: fn never sees the recording store's refusal.
func TestBatchingLedgerRunsOtherTransactionsAsItself(t *testing.T) {
	b, obs := batching(t, openDB(t), 1)
	o := newOrders(t, b, createProduct(t, b), 1)[0]
	runs := 0
	err := b.Atomically(t.Context(), func(tx domain.Store) error {
		runs++
		if err := tx.Orders().Insert(t.Context(), o); err != nil {
			return err
		}
		got, err := tx.Orders().Order(t.Context(), o.No())
		if err != nil {
			t.Errorf("read in the transaction: %v", err)
		}
		if got.No() != o.No() {
			t.Errorf("read %q in the transaction, want %q", got.No(), o.No())
		}
		return nil
	})
	if err != nil || runs != 2 {
		t.Fatalf("Atomically: %v after %d runs of fn, want nil after 2 (recording, then the transaction)", err, runs)
	}
	if n, _ := stored(t, o); n != 1 {
		t.Errorf("%d order rows, want 1", n)
	}
	if sizes, _, _ := obs.snapshot(); len(sizes) != 0 {
		t.Errorf("batches %v, want none", sizes)
	}
}

// A transaction that returns an error, or that recovers the recording store's stop and
// returns nil, is not batched either: it runs as the Ledger's own and gets its own outcome.
func TestBatchingLedgerDoesNotBatchFailingOrRecoveringTransactions(t *testing.T) {
	b, obs := batching(t, openDB(t), 1)
	orders := newOrders(t, b, createProduct(t, b), 2)
	errOwn := errors.New("fn's own error")
	err := b.Atomically(t.Context(), func(tx domain.Store) error {
		if err := tx.Orders().Insert(t.Context(), orders[0]); err != nil {
			return err
		}
		return errOwn
	})
	if !errors.Is(err, errOwn) {
		t.Fatalf("Atomically of a failing transaction: %v, want fn's error", err)
	}
	if n, _ := stored(t, orders[0]); n != 0 {
		t.Errorf("the failing transaction stored %d order rows, want none", n)
	}
	runs := 0
	err = b.Atomically(t.Context(), func(tx domain.Store) error {
		runs++
		if err := tx.Orders().Insert(t.Context(), orders[1]); err != nil {
			return err
		}
		func() {
			defer func() { _ = recover() }()
			_, _ = tx.Orders().Existing(t.Context(), []domain.OrderNo{orders[1].No()})
		}()
		return nil
	})
	if err != nil || runs != 2 {
		t.Fatalf("Atomically of a recovering transaction: %v after %d runs, want nil after 2", err, runs)
	}
	if n, _ := stored(t, orders[1]); n != 1 {
		t.Errorf("the recovering transaction stored %d order rows, want 1", n)
	}
	if sizes, _, _ := obs.snapshot(); len(sizes) != 0 {
		t.Errorf("batches %v, want none", sizes)
	}
}

// Payments through the batching ledger: 24 workers pay 96 orders (1 to 3 codes each, about
// 190 codes) on one product with 150 codes, every order by two workers at once (a provider's
// duplicate callback). Payments are batched (PayBatch), and still: each order is paid once
// (the other payment loses the race), no code is sold twice, every paid order holds its codes,
// and an order is refused only when the pool is really short.
func TestBatchedPaymentsDecideEachOrderOnce(t *testing.T) {
	b, obs := batching(t, openDB(t), 1)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	const pool, orders, workers = 150, 96, 24
	p := createProduct(t, b)
	importN(t, b, p, pool)
	var os []domain.Order
	for i := range orders {
		os = append(os, newPendingOrder(t, b, p, 1+i%3))
	}
	type result struct {
		cards []domain.Card
		err   error
	}
	results := make([][]result, orders)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := w % (workers / 2); i < orders; i += workers / 2 { // two workers per order
				cards, err := pay(ctx, b, os[i], true)
				mu.Lock()
				results[i] = append(results[i], result{cards, err})
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()

	seen := map[string]bool{}
	sold, refusedQty := 0, 0
	for i, o := range os {
		won, lost, short := 0, 0, 0
		for _, r := range results[i] {
			switch {
			case r.err == nil:
				won++
			case errors.Is(r.err, errLostRace):
				lost++
			case errors.Is(r.err, domain.ErrInsufficientCards):
				short++
			default:
				t.Fatalf("pay %s: %v", o.No(), r.err)
			}
		}
		got, err := b.Orders().Order(ctx, o.No())
		if err != nil {
			t.Fatal(err)
		}
		cards, err := b.Cards().Cards(ctx, o.No())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case won == 1 && lost+short == 1:
			if got.Status() != domain.StatusPaid || len(cards) != o.Qty() {
				t.Fatalf("%s won once but is %s with %d of %d codes", o.No(), got.Status(), len(cards), o.Qty())
			}
		case won == 0 && short >= 1:
			if got.Status() != domain.StatusPending || len(cards) != 0 {
				t.Fatalf("%s refused but is %s with %d codes", o.No(), got.Status(), len(cards))
			}
			refusedQty = max(refusedQty, o.Qty())
		default:
			t.Fatalf("%s: %d won, %d lost, %d short", o.No(), won, lost, short)
		}
		for _, c := range cards {
			if seen[c.Code.Reveal()] {
				t.Fatalf("code sold twice: %s", c.Code.Reveal())
			}
			seen[c.Code.Reveal()] = true
		}
		sold += len(cards)
	}
	counts, err := b.Cards().Counts(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if int(counts[domain.CardSold]) != sold || sold+int(counts[domain.CardUnsold]) != pool {
		t.Fatalf("counts %v, %d codes held by paid orders", counts, sold)
	}
	// A refusal means a real shortage: fewer codes left than the largest refused order wanted.
	if left := pool - sold; refusedQty > 0 && left >= refusedQty {
		t.Fatalf("%d codes left, yet an order of %d was refused", left, refusedQty)
	}
	sizes, _, _ := obs.snapshot()
	if slices.Max(sizes) < 2 {
		t.Fatalf("batch sizes %v: the payments were never batched", sizes)
	}
}

// Closes and payments through the batching ledger: 64 expired orders, each paid and closed at
// once by two workers (a late callback racing the expiry), on a product with codes for all.
// Both kinds are batched, and still each order ends exactly one way: PAID with its codes and
// one pay row, or CLOSED with no code and one timeout-restore row; the other side lost.
func TestBatchedClosesAndPaymentsDecideEachOrderOnce(t *testing.T) {
	b, obs := batching(t, openDB(t), 1)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	const orders = 64
	p := createProduct(t, b)
	importN(t, b, p, 3*orders)
	var os []domain.Order
	for i := range orders {
		os = append(os, newPendingOrder(t, b, p, 1+i%3))
	}
	payErr, closeErr := make([]error, orders), make([]error, orders)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range 16 {
		wg.Go(func() {
			<-start
			for i := w % 8; i < orders; i += 8 {
				if w < 8 {
					_, payErr[i] = pay(ctx, b, os[i], true)
				} else {
					closeErr[i] = closeExpired(ctx, b, os[i])
				}
			}
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]bool{}
	paid, closed := 0, 0
	for i, o := range os {
		got, err := b.Orders().Order(ctx, o.No())
		if err != nil {
			t.Fatal(err)
		}
		cards, _ := b.Cards().Cards(ctx, o.No())
		flows, _ := b.Flows().Entries(ctx, string(o.No()))
		switch {
		case payErr[i] == nil && errors.Is(closeErr[i], errLostRace):
			if got.Status() != domain.StatusPaid || len(cards) != o.Qty() || len(flows) != 1 || flows[0].Type != domain.FlowPay {
				t.Fatalf("%s paid: %s, %d codes, flows %v", o.No(), got.Status(), len(cards), flows)
			}
			paid++
		case closeErr[i] == nil && errors.Is(payErr[i], errLostRace):
			if got.Status() != domain.StatusClosed || len(cards) != 0 || len(flows) != 1 || flows[0].Type != domain.FlowTimeoutRestore {
				t.Fatalf("%s closed: %s, %d codes, flows %v", o.No(), got.Status(), len(cards), flows)
			}
			closed++
		default:
			t.Fatalf("%s: pay %v, close %v", o.No(), payErr[i], closeErr[i])
		}
		for _, c := range cards {
			if seen[c.Code.Reveal()] {
				t.Fatalf("code sold twice: %s", c.Code.Reveal())
			}
			seen[c.Code.Reveal()] = true
		}
	}
	counts, err := b.Cards().Counts(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if int(counts[domain.CardSold]) != len(seen) {
		t.Fatalf("counts %v, %d codes held by paid orders", counts, len(seen))
	}
	sizes, _, _ := obs.snapshot()
	if slices.Max(sizes) < 2 {
		t.Fatalf("batch sizes %v: nothing was batched", sizes)
	}
	t.Logf("%d paid, %d closed, batch sizes up to %d", paid, closed, slices.Max(sizes))

	// Closes alone are batched too.
	var more []domain.Order
	for range 32 {
		more = append(more, newPendingOrder(t, b, p, 1))
	}
	before := len(sizes)
	for _, o := range more {
		wg.Go(func() {
			if err := closeExpired(ctx, b, o); err != nil {
				t.Errorf("close %s: %v", o.No(), err)
			}
		})
	}
	wg.Wait()
	sizes, _, _ = obs.snapshot()
	if slices.Max(sizes[before:]) < 2 {
		t.Fatalf("batch sizes of the closes %v: never batched", sizes[before:])
	}
	for _, o := range more {
		if got, _ := b.Orders().Order(ctx, o.No()); got.Status() != domain.StatusClosed {
			t.Fatalf("%s is %s", o.No(), got.Status())
		}
	}
}

// A payment whose order moved before its batch (paid already), and the second of one
// callback's two copies in the same batch, get the lost race from the batch itself, as their own
// transactions would answer, without running one; the first copy is stored.
func TestBatchAnswersLostPaymentsWithoutTheirOwnTransaction(t *testing.T) {
	b, _ := batching(t, openDB(t), 1)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	alone := countAlone(b)
	p := createProduct(t, b)
	importN(t, b, p, 4)
	first, paidBefore, twice := newPendingOrder(t, b, p, 1), newPendingOrder(t, b, p, 1), newPendingOrder(t, b, p, 1)
	if _, err := pay(ctx, b, paidBefore, true); err != nil {
		t.Fatal(err)
	}
	held, release := holdFirstBatch(b, nil)
	defer release()
	errs := make(chan error, 4)
	go func() { _, err := pay(ctx, b, first, true); errs <- err }()
	<-held
	for _, o := range []domain.Order{paidBefore, twice, twice} {
		go func() { _, err := pay(ctx, b, o, true); errs <- err }()
	}
	waitQueued(t, b, 3)
	release()
	won, lost := 0, 0
	for range 4 {
		switch err := <-errs; {
		case err == nil:
			won++
		case errors.Is(err, errLostRace):
			lost++
		default:
			t.Fatal(err)
		}
	}
	if won != 2 || lost != 2 {
		t.Fatalf("%d won, %d lost; want 2 and 2", won, lost)
	}
	if n := alone.Load(); n != 0 {
		t.Fatalf("%d members ran their own transaction, want none", n)
	}
	for _, o := range []domain.Order{first, paidBefore, twice} {
		got, _ := b.Orders().Order(ctx, o.No())
		cards, _ := b.Cards().Cards(ctx, o.No())
		flows, _ := b.Flows().Entries(ctx, string(o.No()))
		if got.Status() != domain.StatusPaid || len(cards) != 1 || len(flows) != 1 {
			t.Fatalf("%s: %s with %d codes and %d flow rows", o.No(), got.Status(), len(cards), len(flows))
		}
	}
}

// A lost member whose transaction does more than answer the lost race (here: it writes a flow
// row before its transition) runs alone, and gets the outcome its own transaction gives.
func TestBatchRunsALostMemberThatWritesFirstAlone(t *testing.T) {
	b, _ := batching(t, openDB(t), 1)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	alone := countAlone(b)
	p := createProduct(t, b)
	importN(t, b, p, 2)
	o := newPendingOrder(t, b, p, 1)
	if _, err := pay(ctx, b, o, true); err != nil {
		t.Fatal(err)
	}
	closed := o
	if err := closed.Close(o.ExpiresAt().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	err := b.Atomically(ctx, func(tx domain.Store) error {
		if err := tx.Flows().Append(ctx, domain.FlowEntry{ProductID: p, Ref: string(o.No()), Type: domain.FlowTimeoutRestore,
			Qty: 1, At: time.Now()}); err != nil {
			return err
		}
		won, err := tx.Orders().Transition(ctx, closed, domain.StatusPending)
		if err != nil {
			return err
		}
		if !won {
			return errLostRace
		}
		return nil
	})
	if !errors.Is(err, errLostRace) || alone.Load() != 1 {
		t.Fatalf("lost member writing first: %v, %d alone runs; want the lost race from one alone run", err, alone.Load())
	}
	if flows, _ := b.Flows().Entries(ctx, string(o.No())); len(flows) != 1 {
		t.Fatalf("flow rows %+v, want only the pay row", flows)
	}
}

// The same callback sent twice at once, for many orders, through four lanes: the two copies
// of an order meet in its lane, so the second is decided on the row the first left and loses
// there; no copy finds its row locked by another lane's batch and runs alone behind the lock.
func TestBothCopiesOfAPaymentMeetInOneLane(t *testing.T) {
	b, _ := batching(t, openDB(t), 4)
	ctx := t.Context()
	t.Cleanup(func() { markTestMessagesSent(t) })
	alone := countAlone(b)
	const orders = 48
	p := createProduct(t, b)
	importN(t, b, p, orders)
	var os []domain.Order
	for range orders {
		os = append(os, newPendingOrder(t, b, p, 1))
	}
	errs := make([][2]error, orders)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, o := range os {
		for c := range 2 {
			wg.Go(func() {
				<-start
				_, errs[i][c] = pay(ctx, b, o, true)
			})
		}
	}
	close(start)
	wg.Wait()
	for i, o := range os {
		won, lost := 0, 0
		for _, err := range errs[i] {
			switch {
			case err == nil:
				won++
			case errors.Is(err, errLostRace):
				lost++
			default:
				t.Fatalf("pay %s: %v", o.No(), err)
			}
		}
		cards, _ := b.Cards().Cards(ctx, o.No())
		if won != 1 || lost != 1 || len(cards) != 1 {
			t.Fatalf("%s: %d won, %d lost, %d codes", o.No(), won, lost, len(cards))
		}
	}
	if n := alone.Load(); n != 0 {
		t.Fatalf("%d copies ran their own transaction, want none", n)
	}
}

// A member whose deadline passes while its batch runs (the database stalled) is answered at
// its deadline with ErrCommitUnknown, not when the batch ends; the batch goes on and commits
// it, which is why the answer must be "unknown" (the caller gives nothing back on it).
func TestBatchMemberPastItsDeadlineIsAnsweredCommitUnknown(t *testing.T) {
	b, _ := batching(t, openDB(t), 1)
	var commits atomic.Int32
	held, release := holdFirstBatch(b, func() {
		if commits.Add(1) == 2 { // the second batch stalls a second before its COMMIT
			time.Sleep(time.Second)
		}
	})
	defer release()
	orders := newOrders(t, b, createProduct(t, b), 3)
	blocker := startHeld(t, b, held, orders[0])
	withoutDeadline := placeAll(t.Context(), b, orders[1:2])
	ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	began := time.Now()
	late := make(chan error, 1)
	go func() { late <- place(ctx, b, orders[2]) }()
	waitQueued(t, b, 2)
	release()
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	err := <-late
	took := time.Since(began)
	if !errors.Is(err, domain.ErrCommitUnknown) || !errors.Is(err, domain.ErrUnavailable) || took > 900*time.Millisecond {
		t.Fatalf("the member past its deadline: %v after %s; want ErrCommitUnknown at its 400ms deadline", err, took)
	}
	if err := withoutDeadline()[0]; err != nil {
		t.Fatalf("the member without a deadline: %v, want its batch's outcome", err)
	}
	for _, o := range orders[1:] {
		if n, f := stored(t, o); n != 1 || f != 1 {
			t.Errorf("%s: %d order rows, %d flow rows; want both stored by the batch", o.No(), n, f)
		}
	}
}

// countAlone counts the members of b that run their own transaction after being batched.
func countAlone(b *mysqlstore.BatchingLedger) *atomic.Int32 {
	var n atomic.Int32
	mysqlstore.SetAloneHook(b, func() { n.Add(1) })
	return &n
}
