package porttest

import (
	"errors"
	"testing"
	"time"

	"cardshop/domain"
)

// runAtomically checks the transaction boundary: inside Atomically a write to every
// repository is seen by the transaction; an error, a repository's error or a panic rolls all
// of them back (the panic is thrown again), and success commits them all.
func runAtomically(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	// writeAll writes to every repository inside tx and checks the transaction sees its writes.
	type world struct {
		pool    domain.ProductID // product whose codes the transaction allocates
		created domain.Product   // product the transaction creates
		order   domain.Order
		key     string // outbox key
	}
	setup := func(t *testing.T, l domain.Ledger) world {
		w := world{pool: createProduct(t, l).ID(), key: string(newOrderNo())}
		importCodes(t, l, w.pool, newCodes(t, 3), domain.ImportResult{Added: 3})
		w.created, _ = domain.NewProduct(NewProductID(), "porttest tx", 100, 5, now())
		pool, err := l.Products().Product(t.Context(), w.pool)
		if err != nil {
			t.Fatal(err)
		}
		w.order = newOrder(t, pool, 2, now())
		return w
	}
	writeAll := func(t *testing.T, tx domain.Store, w world) error {
		c := t.Context()
		if _, err := tx.Products().Create(c, w.created); err != nil {
			return err
		}
		if err := tx.Products().SetFrozen(c, w.pool, true, "tx"); err != nil {
			return err
		}
		if err := tx.Orders().Insert(c, w.order); err != nil {
			return err
		}
		if got, err := tx.Orders().Order(c, w.order.No()); err != nil || got.No() != w.order.No() {
			t.Errorf("a transaction does not read its own order: %v", err)
		}
		e := domain.FlowEntry{ProductID: w.pool, Ref: string(w.order.No()), Type: domain.FlowPay, Qty: 2, At: now()}
		if err := tx.Flows().Append(c, e); err != nil {
			return err
		}
		m := domain.OutboxMessage{Topic: domain.TopicDelivered, Key: w.key, Payload: []byte("{}"), At: now()}
		if err := tx.Outbox().Add(c, m); err != nil {
			return err
		}
		if _, err := tx.Cards().Allocate(c, w.pool, w.order.No(), 2); err != nil {
			return err
		}
		_, err := tx.Cards().Import(c, w.pool, newCodes(t, 1), 1)
		return err
	}
	wantNothing := func(t *testing.T, l domain.Ledger, w world, before int64) {
		t.Helper()
		c := t.Context()
		if _, err := l.Products().Product(c, w.created.ID()); !errors.Is(err, domain.ErrProductNotFound) {
			t.Errorf("created product survived the rollback (err = %v)", err)
		}
		if p, err := l.Products().Product(c, w.pool); err != nil || p.Frozen() {
			t.Errorf("freeze survived the rollback (frozen %v, err %v)", p.Frozen(), err)
		}
		if _, err := l.Orders().Order(c, w.order.No()); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("order survived the rollback (err = %v)", err)
		}
		if _, err := l.Orders().OrderByKey(c, w.order.Buyer(), w.order.IdempotencyKey()); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("order's key survived the rollback (err = %v)", err)
		}
		if got, _ := l.Flows().Entries(c, string(w.order.No())); len(got) != 0 {
			t.Errorf("flow rows survived the rollback: %+v", got)
		}
		if got, _ := l.Flows().Totals(c, w.pool); got[domain.FlowPay] != 0 {
			t.Errorf("flow totals survived the rollback: %v", got)
		}
		if got := pendingWithKey(t, l, w.key); len(got) != 0 {
			t.Errorf("outbox message survived the rollback: %+v", got)
		}
		if got := backlog(t, l); got != before {
			t.Errorf("Backlog = %d after rollback, want %d", got, before)
		}
		if got, _ := l.Cards().Cards(c, w.order.No()); len(got) != 0 {
			t.Errorf("allocation survived the rollback: %v", ids(got))
		}
		wantCounts(t, l, w.pool, domain.CardCounts{domain.CardUnsold: 3})
		allocate(t, l, w.pool, newOrderNo(), 3) // the whole pool is sellable again
	}

	t.Run("an error rolls back every write", func(t *testing.T) {
		l := newLedger(t)
		w := setup(t, l)
		before := backlog(t, l)
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if err := writeAll(t, tx, w); err != nil {
				t.Errorf("write in transaction: %v", err)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Atomically: err = %v, want fn's error", err)
		}
		wantNothing(t, l, w, before)
	})

	t.Run("a repository error rolls back the earlier writes", func(t *testing.T) {
		l := newLedger(t)
		w := setup(t, l)
		before := backlog(t, l)
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if err := writeAll(t, tx, w); err != nil {
				t.Errorf("write in transaction: %v", err)
			}
			return tx.Orders().Insert(t.Context(), w.order) // duplicate number
		})
		if !errors.Is(err, domain.ErrDuplicateOrder) {
			t.Fatalf("Atomically: err = %v, want ErrDuplicateOrder", err)
		}
		wantNothing(t, l, w, before)
	})

	t.Run("a panic rolls back and panics again", func(t *testing.T) {
		l := newLedger(t)
		w := setup(t, l)
		before := backlog(t, l)
		thrown := &panicValue{"boom"}
		func() {
			defer func() {
				if r := recover(); r != thrown {
					t.Fatalf("recovered %v, want the panic thrown in fn", r)
				}
			}()
			_ = l.Atomically(t.Context(), func(tx domain.Store) error {
				if err := writeAll(t, tx, w); err != nil {
					t.Errorf("write in transaction: %v", err)
				}
				panic(thrown)
			})
			t.Fatal("Atomically returned after fn panicked")
		}()
		wantNothing(t, l, w, before)
	})

	t.Run("success commits every write", func(t *testing.T) {
		l := newLedger(t)
		w := setup(t, l)
		before := backlog(t, l)
		if err := l.Atomically(t.Context(), func(tx domain.Store) error { return writeAll(t, tx, w) }); err != nil {
			t.Fatalf("Atomically: %v", err)
		}
		c := t.Context()
		wantProduct(t, l, w.created)
		if p, err := l.Products().Product(c, w.pool); err != nil || !p.Frozen() {
			t.Errorf("freeze not committed (frozen %v, err %v)", p.Frozen(), err)
		}
		wantOrder(t, l, w.order)
		if got, _ := l.Flows().Entries(c, string(w.order.No())); len(got) != 1 {
			t.Errorf("flow rows after commit: %+v, want 1", got)
		}
		if got := pendingWithKey(t, l, w.key); len(got) != 1 {
			t.Errorf("outbox messages after commit: %+v, want 1", got)
		}
		if got := backlog(t, l); got != before+1 {
			t.Errorf("Backlog = %d after commit, want %d", got, before+1)
		}
		if got, _ := l.Cards().Cards(c, w.order.No()); len(got) != 2 {
			t.Errorf("allocation after commit: %v, want 2 cards", ids(got))
		}
		wantCounts(t, l, w.pool, domain.CardCounts{domain.CardUnsold: 2, domain.CardSold: 2})
		for _, m := range pendingWithKey(t, l, w.key) {
			_ = l.Outbox().MarkSent(c, now(), m.ID)
		}
	})

	// Placing an order writes the order and its reserve flow row in one transaction; many at
	// once (a ledger may write them together) each get their own outcome.
	t.Run("race: 30 order writes, 10 with one buyer key: one of those wins, the rest all commit", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		buyer, key := newBuyer(), newKey()
		orders := make([]domain.Order, 30)
		for i := range orders {
			o, err := domain.NewOrder(newOrderNo(), newBuyer(), p, 1, newKey(), now(), 15*time.Minute)
			if i < 10 {
				o, err = domain.NewOrder(newOrderNo(), buyer, p, 1, key, now(), 15*time.Minute)
			}
			if err != nil {
				t.Fatal(err)
			}
			orders[i] = o
		}
		errs := make([]error, len(orders))
		parallel(len(orders), func(i int) {
			o := orders[i]
			errs[i] = l.Atomically(t.Context(), func(tx domain.Store) error {
				if err := tx.Orders().Insert(t.Context(), o); err != nil {
					return err
				}
				return tx.Flows().Append(t.Context(), domain.FlowEntry{ProductID: p.ID(), Ref: string(o.No()),
					Type: domain.FlowReserve, Qty: 1, At: o.CreatedAt()})
			})
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && i < 10 && winner >= 0:
				t.Fatalf("orders %d and %d with one key both committed", winner, i)
			case err == nil && i < 10:
				winner = i
			case err == nil:
			case i < 10 && errors.Is(err, domain.ErrDuplicateIdempotencyKey):
			default:
				t.Fatalf("order %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no order with the shared key committed")
		}
		if got, err := l.Orders().OrderByKey(t.Context(), buyer, key); err != nil || got.No() != orders[winner].No() {
			t.Fatalf("OrderByKey = %s, %v; want the winner %s", got.No(), err, orders[winner].No())
		}
		for i, o := range orders {
			stored := i >= 10 || i == winner
			if _, err := l.Orders().Order(t.Context(), o.No()); (err == nil) != stored {
				t.Errorf("order %d stored = %v (err %v), want %v", i, err == nil, err, stored)
			}
			want := 0
			if stored {
				want = 1
			}
			if got, _ := l.Flows().Entries(t.Context(), string(o.No())); len(got) != want {
				t.Errorf("order %d: %d flow rows, want %d", i, len(got), want)
			}
		}
		if got, _ := l.Flows().Totals(t.Context(), p.ID()); got[domain.FlowReserve] != 21 {
			t.Errorf("reserve flow total %d, want 21", got[domain.FlowReserve])
		}
	})
}

// errRollback is what the rollback cases return from Atomically.
var errRollback = errors.New("porttest: roll back")

// panicValue is what the panic case throws through Atomically.
type panicValue struct{ msg string }
