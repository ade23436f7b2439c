package porttest

import (
	"testing"
	"time"

	"cardshop/domain"
)

// runSnapshot checks Ledger.Snapshot: every read of one snapshot sees the same state, a
// transaction committed while it runs is not seen by it (and is seen after it), and a write
// attempted through it leaves nothing behind.
func runSnapshot(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("a snapshot sees one state while transactions commit", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		insertOrder(t, l, newOrder(t, p, 2, now()))
		committed := make(chan error, 1)
		var first, second map[domain.OrderStatus]domain.StatusTotal
		err := l.Snapshot(t.Context(), func(tx domain.Store) error {
			var err error
			if first, err = tx.Orders().Totals(t.Context(), p.ID()); err != nil {
				return err
			}
			go func() {
				committed <- l.Atomically(t.Context(), func(w domain.Store) error {
					return w.Orders().Insert(t.Context(), newOrder(t, p, 3, now()))
				})
			}()
			// A database commits the insert meanwhile; the in-memory ledger serialises it after
			// the snapshot. Either way the snapshot must not see it.
			select {
			case err := <-committed:
				committed <- err
			case <-time.After(300 * time.Millisecond):
			}
			second, err = tx.Orders().Totals(t.Context(), p.ID())
			return err
		})
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if first[domain.StatusPending] != (domain.StatusTotal{Orders: 1, Qty: 2}) || second[domain.StatusPending] != first[domain.StatusPending] {
			t.Fatalf("totals within one snapshot = %v then %v, want one PENDING order of 2 both times", first, second)
		}
		if err := <-committed; err != nil {
			t.Fatalf("the concurrent insert: %v", err)
		}
		after, err := l.Orders().Totals(t.Context(), p.ID())
		if err != nil || after[domain.StatusPending] != (domain.StatusTotal{Orders: 2, Qty: 5}) {
			t.Fatalf("totals after the snapshot = %v, %v; want two PENDING orders of 5", after, err)
		}
	})

	t.Run("a write through a snapshot leaves nothing behind", func(t *testing.T) {
		l := newLedger(t)
		p := createProduct(t, l)
		o := newOrder(t, p, 1, now())
		_ = l.Snapshot(t.Context(), func(tx domain.Store) error {
			_ = tx.Orders().Insert(t.Context(), o) // refused (read-only) or undone
			return nil
		})
		if _, err := l.Orders().Order(t.Context(), o.No()); err == nil {
			t.Fatalf("an order written through a snapshot exists afterwards")
		}
	})
}
