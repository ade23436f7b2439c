package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"

	"cardshop/domain"
)

// Transaction retry policy: a transaction that deadlocks or times out on a lock is run again
// up to maxRetries times, after a jittered pause that doubles from retryBase.
const (
	maxRetries = 5
	retryBase  = 2 * time.Millisecond
)

// Ledger is domain.Ledger on MySQL/MariaDB. It is safe for concurrent use.
type Ledger struct {
	db    *bun.DB
	keys  *Keyring
	root  *store
	stats struct{ retries, deadlocks, lockTimeouts, lockedCodes atomic.Int64 }
}

// TxStats counts, since New, the transactions Atomically ran again and why.
type TxStats struct {
	Retries      int64 // re-runs, for any of the reasons below
	Deadlocks    int64 // the server broke a deadlock by rolling the transaction back (1213)
	LockTimeouts int64 // a lock wait timed out (1205)
	LockedCodes  int64 // Allocate found too few unlocked codes and re-ran to wait for them
}

var _ domain.Ledger = (*Ledger)(nil)

// New returns the ledger stored in db, which should come from Open (New relies on its
// settings: UTC times, changed-rows counts, strict mode) and be migrated with Migrate. keys
// encrypts and decrypts card codes; New panics if it is nil.
func New(db *bun.DB, keys *Keyring) *Ledger {
	if db == nil || keys == nil {
		panic("mysqlstore.New: nil database or keyring")
	}
	l := &Ledger{db: db, keys: keys}
	l.root = &store{db: db, ledger: l}
	return l
}

// Products returns the product catalogue.
func (l *Ledger) Products() domain.ProductCatalog { return l.root.Products() }

// Orders returns the order repository.
func (l *Ledger) Orders() domain.OrderRepo { return l.root.Orders() }

// Cards returns the card pool.
func (l *Ledger) Cards() domain.CardVault { return l.root.Cards() }

// Flows returns the stock flow.
func (l *Ledger) Flows() domain.FlowLog { return l.root.Flows() }

// Outbox returns the outbox.
func (l *Ledger) Outbox() domain.Outbox { return l.root.Outbox() }

// Payments returns the payments.
func (l *Ledger) Payments() domain.PaymentRepo { return l.root.Payments() }

// Notifications returns the log of provider notifications.
func (l *Ledger) Notifications() domain.NotificationLog { return l.root.Notifications() }

// Operators returns the operators of the admin API and the console.
func (l *Ledger) Operators() domain.OperatorRepo { return l.root.Operators() }

// Audit returns the audit log of operators' writes.
func (l *Ledger) Audit() domain.AuditLog { return l.root.Audit() }

// Alerts returns the log of raised alerts and their acknowledgements.
func (l *Ledger) Alerts() domain.AlertLog { return l.root.Alerts() }

// Blocklist returns the blocklists' entries.
func (l *Ledger) Blocklist() domain.BlocklistRepo { return l.root.Blocklist() }

// AlertChannels returns the alert channels.
func (l *Ledger) AlertChannels() domain.AlertChannelRepo { return l.root.AlertChannels() }

// Channels returns the payment channels' settings, secrets sealed by the keyring.
func (l *Ledger) Channels() domain.ChannelRepo { return l.root.Channels() }

// Coupons returns the coupons.
func (l *Ledger) Coupons() domain.CouponStore { return l.root.Coupons() }

// Stats returns how many transactions were run again, and why.
func (l *Ledger) Stats() TxStats {
	return TxStats{Retries: l.stats.retries.Load(), Deadlocks: l.stats.deadlocks.Load(),
		LockTimeouts: l.stats.lockTimeouts.Load(), LockedCodes: l.stats.lockedCodes.Load()}
}

// count records why a transaction is run again.
func (l *Ledger) count(err error) {
	l.stats.retries.Add(1)
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, errCodesLocked):
		l.stats.lockedCodes.Add(1)
	case errors.As(err, &me) && me.Number == erLockDeadlock:
		l.stats.deadlocks.Add(1)
	case errors.As(err, &me) && me.Number == erLockWaitTimeout:
		l.stats.lockTimeouts.Add(1)
	}
}

// Atomically runs fn in one READ COMMITTED transaction and commits it when fn returns nil.
// It rolls back when fn returns an error or panics (the panic then continues).
//
// A transaction that deadlocks or times out on a lock, or whose Allocate must wait for codes
// that other payments hold locked (see the card pool's Allocate), is rolled back and fn runs
// again, up to five more times, after a short jittered pause; after that the error matches
// domain.ErrUnavailable. This happens even when fn swallowed the error: MySQL has already
// rolled the transaction back on a deadlock, so anything fn wrote after it would otherwise be
// committed on its own. fn must therefore have no effects outside tx, and should not keep
// results of a run that returned an error (a later run replaces them).
//
// Inside fn use only tx; calls on the Ledger itself run outside the transaction (and may wait
// for its locks). tx must not be used after fn returns; such use returns an error.
func (l *Ledger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	run := &runState{}
	for attempt := 0; ; attempt++ {
		err := l.runTx(ctx, run, fn)
		if err == nil || !retryable(err) {
			return err
		}
		if attempt == maxRetries || ctx.Err() != nil {
			return gaveUp(err)
		}
		l.count(err)
		pause := retryBase << attempt
		pause = pause/2 + rand.N(pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return gaveUp(err)
		case <-t.C:
		}
	}
}

// gaveUp marks a lock conflict that retries did not resolve as unavailability, if fn's
// repositories have not already.
func gaveUp(err error) error {
	if errors.Is(err, domain.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("transaction: %w: %w", domain.ErrUnavailable, err)
}

// runTx runs fn once in a transaction. A failure of COMMIT itself with a broken connection is
// reported as domain.ErrCommitUnknown: the server may have committed before the answer was
// lost, so a caller must not assume the writes are gone.
func (l *Ledger) runTx(ctx context.Context, run *runState, fn func(tx domain.Store) error) (err error) {
	state := &txState{run: run}
	// READ COMMITTED is the session's isolation level (Open forces tx_isolation), so BEGIN is one
	// round trip: sql.TxOptions{Isolation: …} would send SET TRANSACTION before every START.
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return wrapErr("begin transaction", err)
	}
	done := false
	defer func() {
		if !done { // fn panicked
			_ = tx.Rollback()
		}
	}()
	fnErr := func() error {
		defer state.end()
		err := fn(&store{db: tx, ledger: l, tx: state})
		if lost := state.lost(); lost != nil {
			// The server already rolled back: whatever fn made of the error, this run is void.
			if err != nil && !errors.Is(err, lost) {
				return errors.Join(lost, err)
			}
			return lost
		}
		return err
	}()
	done = true
	if fnErr != nil {
		_ = tx.Rollback()
		return fnErr
	}
	if err := tx.Commit(); err != nil {
		if unavailable(err) {
			return fmt.Errorf("commit: %w: %w: %w", domain.ErrUnavailable, domain.ErrCommitUnknown, err)
		}
		return wrapErr("commit", err)
	}
	return nil
}

// Snapshot runs fn in a READ ONLY transaction at REPEATABLE READ: InnoDB takes the read view
// at the transaction's first read, and every later read of fn sees the database as it was
// then, so numbers read by several queries agree with each other. A write fails (a read-only
// transaction refuses it). The transaction is rolled back at the end: it has nothing to commit.
func (l *Ledger) Snapshot(ctx context.Context, fn func(tx domain.Store) error) error {
	// The session runs at READ COMMITTED (Open forces it); this transaction alone needs one
	// view for all of its reads.
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return wrapErr("begin snapshot", err)
	}
	defer func() { _ = tx.Rollback() }()
	state := &txState{run: &runState{}}
	defer state.end()
	err = fn(&store{db: tx, ledger: l, tx: state})
	if lost := state.lost(); lost != nil && err == nil {
		err = lost
	}
	return err
}

// runState is what the attempts of one Atomically call share.
type runState struct {
	// waitForLocks makes Allocate wait for locked codes instead of skipping them: set when an
	// attempt found enough codes but too few unlocked ones (see cardVault.Allocate).
	waitForLocks atomic.Bool
}

// txState is what the repositories of one transaction share: whether the transaction was lost
// (to a deadlock, a lock timeout, or a restart Allocate asked for), and whether Atomically has
// returned.
type txState struct {
	run   *runState
	mu    sync.Mutex
	err   error
	ended bool
}

// restart voids the transaction so that Atomically runs it again, with err as the reason.
func (t *txState) restart(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

var errTxEnded = errors.New("mysqlstore: transaction already ended")

func (t *txState) lost() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *txState) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
}

// check refuses work in a transaction that has ended or was lost.
func (t *txState) check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.ended:
		return errTxEnded
	case t.err != nil:
		return fmt.Errorf("transaction rolled back by the server: %w", t.err)
	}
	return nil
}

func (t *txState) observe(err error) {
	if err == nil || !retryable(err) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

// store binds the repositories to the database (tx nil: each call is its own statement, or
// its own transaction where it needs several) or to one transaction.
type store struct {
	db     bun.IDB
	ledger *Ledger
	tx     *txState
}

func (s *store) Products() domain.ProductCatalog { return productCatalog{s} }
func (s *store) Orders() domain.OrderRepo        { return orderRepo{s} }
func (s *store) Cards() domain.CardVault         { return cardVault{s} }
func (s *store) Flows() domain.FlowLog           { return flowLog{s} }
func (s *store) Outbox() domain.Outbox           { return outbox{s} }
func (s *store) Payments() domain.PaymentRepo    { return paymentRepo{s} }
func (s *store) Notifications() domain.NotificationLog {
	return notificationLog{s}
}
func (s *store) Operators() domain.OperatorRepo { return operatorRepo{s} }
func (s *store) Audit() domain.AuditLog         { return auditLog{s} }
func (s *store) Alerts() domain.AlertLog        { return alertLog{s} }
func (s *store) Blocklist() domain.BlocklistRepo {
	return blocklistRepo{s}
}
func (s *store) AlertChannels() domain.AlertChannelRepo { return alertChannels{s} }
func (s *store) Channels() domain.ChannelRepo           { return channelRepo{s} }
func (s *store) Coupons() domain.CouponStore            { return couponStore{s} }

func (s *store) keys() *Keyring { return s.ledger.keys }

// usable refuses work in an ended or lost transaction.
func (s *store) usable(op string) error {
	if s.tx == nil {
		return nil
	}
	if err := s.tx.check(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// failed records err against the transaction and wraps it for the caller.
func (s *store) failed(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.tx != nil {
		s.tx.observe(err)
	}
	return wrapErr(op, err)
}

// exec runs one statement.
func (s *store) exec(ctx context.Context, op, query string, args ...any) (sql.Result, error) {
	if err := s.usable(op); err != nil {
		return nil, err
	}
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return nil, s.failed(op, err)
	}
	return res, nil
}

// execN runs one statement and returns the number of rows it changed.
func (s *store) execN(ctx context.Context, op, query string, args ...any) (int64, error) {
	res, err := s.exec(ctx, op, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return n, s.failed(op, err)
}

// get runs a query and scans its rows into dest (a struct, a slice of structs or scalars).
// A struct or scalar dest with no row is an error matching sql.ErrNoRows.
func (s *store) get(ctx context.Context, op string, dest any, query string, args ...any) error {
	if err := s.usable(op); err != nil {
		return err
	}
	return s.failed(op, s.db.NewRaw(query, args...).Scan(ctx, dest))
}

// atomic runs fn on a store bound to a transaction: s itself inside Atomically, otherwise a
// new transaction of its own (with the same retries).
func (s *store) atomic(ctx context.Context, fn func(s *store) error) error {
	if s.tx != nil {
		return fn(s)
	}
	return s.ledger.Atomically(ctx, func(tx domain.Store) error { return fn(tx.(*store)) })
}

// nullTime stores the zero time as NULL and every other time in UTC.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

// nullString stores the empty string as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
