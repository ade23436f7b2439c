package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"cardshop/domain"
)

// Group commit bounds.
const (
	// MaxBatchWait bounds BatchConfig.Wait: a member never waits longer than this for others
	// to join its batch.
	MaxBatchWait = 2 * time.Millisecond
	// MaxBatchSize bounds BatchConfig.Max (16 placeholders a row keeps one INSERT far below the
	// server's 65,535).
	MaxBatchSize = 1000
	// batchBound is the deadline of a batch one of whose members has none.
	batchBound = 30 * time.Second
)

// The reasons a batch fell back to single writes, as BatchObserver.LedgerBatchFallback gets them.
const (
	FallbackDuplicateKey = "duplicate_key" // a number, buyer key or flow row is taken
	FallbackUnavailable  = "unavailable"   // the database could not do the work (retries included)
	FallbackError        = "error"         // any other refusal: a bad row, a value too long
)

// BatchConfig is how a BatchingLedger groups writes.
type BatchConfig struct {
	// Max is the most members one batch takes (1 to MaxBatchSize; 0 means 128).
	Max int
	// Wait is how long a batch about to start that found several members queued waits for
	// more (0 to MaxBatchWait). A member alone never waits.
	Wait time.Duration
	// Lanes is how many batches may run at once, each on its own connection (at least 1).
	Lanes int
	// Observer is told each batch's size, each member's wait and each fallback; nil for none.
	Observer BatchObserver
}

// BatchObserver receives the group commit's measurements (package metrics implements it).
type BatchObserver interface {
	// LedgerBatchSize observes the number of members of one batch about to be written.
	LedgerBatchSize(n int)
	// LedgerBatchWait observes how long one member was queued before its batch took it.
	LedgerBatchWait(d time.Duration)
	// LedgerBatchFallback counts one batch whose members were written one by one instead.
	LedgerBatchFallback(reason string)
}

// BatchingLedger is a Ledger whose Atomically writes concurrent transactions of two shapes in
// shared transactions, one COMMIT for a whole batch: placing orders (order inserts and flow
// rows: one multi-row INSERT of each), and changing one order's status (one conditional
// Transition, at most one Allocate of the order's codes, flow rows, outbox messages: a payment,
// an expired order closed, a failed payment; see PayBatch). Every other transaction, and every
// read, is the Ledger's own. See docs/DESIGN.md, "Group commit of placed orders and payments".
type BatchingLedger struct {
	*Ledger
	max   int
	wait  time.Duration
	obs   BatchObserver
	lanes []*lane
	next  atomic.Uint32 // where the search for an idle lane starts

	// Test hooks, nil in production: taken runs when a batch has taken its members, before it
	// writes; beforeCommit runs inside the batch's transaction after its INSERTs; alone when a
	// member batched first runs its own transaction.
	taken        func(n int)
	beforeCommit func()
	alone        func()
}

var _ domain.Ledger = (*BatchingLedger)(nil)

// NewBatching returns l with group commit of order writes as cfg says. It panics on a
// configuration outside the bounds above (bootstrap checks them first).
func NewBatching(l *Ledger, cfg BatchConfig) *BatchingLedger {
	if cfg.Max == 0 {
		cfg.Max = 128
	}
	if l == nil || cfg.Max < 1 || cfg.Max > MaxBatchSize || cfg.Wait < 0 || cfg.Wait > MaxBatchWait || cfg.Lanes < 1 {
		panic(fmt.Sprintf("mysqlstore.NewBatching: bad configuration %+v", cfg))
	}
	b := &BatchingLedger{Ledger: l, max: cfg.Max, wait: cfg.Wait, obs: cfg.Observer}
	if b.obs == nil {
		b.obs = noObserver{}
	}
	for range cfg.Lanes {
		b.lanes = append(b.lanes, &lane{})
	}
	return b
}

// Atomically runs fn first against a recording store: when fn is of one of the two shapes
// above and returns nil, its rows join a batch and Atomically returns the batch's
// outcome; otherwise fn runs as Ledger.Atomically runs it. fn's contract is the port's: it
// may run more than once and has no effects outside tx.
//
// A batch that fails, other than by a lost COMMIT answer, is rolled back and each of its
// members runs alone, so each gets exactly the outcome it would have had without batching.
// A lost COMMIT answer is domain.ErrCommitUnknown for every member. A member whose ctx ends
// while it is queued leaves the queue and returns the context's error, writing nothing; once
// its batch has taken it, its ctx does not affect the batch: a cancelled member waits for the
// batch's outcome, and one whose deadline passes returns domain.ErrCommitUnknown (with
// ErrUnavailable) at its deadline, since the batch, which runs to the latest deadline of its
// members, may still commit it.
func (b *BatchingLedger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	m, ok := b.record(fn)
	if !ok {
		return b.Ledger.Atomically(ctx, fn)
	}
	m.ctx, m.queued, m.done = ctx, time.Now(), make(chan batchResult, 1)
	m.fn = fn
	ln := b.pick(m)
	ln.join(b, m)
	var r batchResult
	select {
	case r = <-m.done:
	case <-ctx.Done():
		if ln.leave(m) {
			return wrapErr("wait for a batch", ctx.Err())
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			r = <-m.done // cancelled: nobody waits for the answer, the exact outcome costs nothing
			break
		}
		select {
		case r = <-m.done:
		default:
			// The member's deadline passed while its batch runs (a stalled database): it is
			// answered now, as a COMMIT whose reply was lost, because the batch may still
			// commit it — the caller must not give anything back on this answer.
			return fmt.Errorf("wait for a batch: %w: %w: %w", domain.ErrUnavailable, domain.ErrCommitUnknown, ctx.Err())
		}
	}
	if r.lost {
		if err, ok := b.lose(m); ok {
			return err
		}
		r.alone = true // fn does more than answer the lost race: its own transaction decides
	}
	if r.alone {
		if b.alone != nil {
			b.alone()
		}
		return b.Ledger.Atomically(ctx, fn)
	}
	return r.err
}

// lose runs a member the batch found to have lost its transition (PayLost) once more, against
// a store whose only answer is that Transition lost, and returns fn's result: what its own
// transaction would have returned, without one. ok is false when fn makes any other call
// first or after (its transaction would do more than answer the lost race): the member then
// runs alone.
func (b *BatchingLedger) lose(m *member) (err error, ok bool) {
	rec := &recorder{lose: m.pay}
	err = rec.run(m.fn)
	if rec.refused || rec.moved == nil {
		return nil, false
	}
	return err, true
}

// notBatchable is the panic with which the recording store stops fn at its first call that is
// not an order insert or a flow append. A panic, not an error: fn never sees a failure that a
// normal run would not have (it may log or assert what a repository returns).
type notBatchable struct{}

// record runs fn against the recording store and returns its rows, or ok false when fn did
// anything else, returned an error or recorded nothing.
func (b *BatchingLedger) record(fn func(tx domain.Store) error) (m *member, ok bool) {
	rec := &recorder{}
	m = &member{}
	if err := rec.run(fn); err != nil || rec.refused {
		return nil, false
	}
	switch {
	case len(rec.orders) > 0 && rec.moved == nil && rec.taken == nil && len(rec.outbox) == 0:
		m.orders, m.flows = rec.orders, rec.flows
		return m, true
	case len(rec.orders) == 0 && rec.moved != nil && (rec.taken == nil || rec.taken.matches(rec.moved.Paid)):
		// A payment (its codes allocated to the order it pays), or a status change that takes
		// no codes: an expired order closed, a failed payment.
		pay := *rec.moved
		pay.Codes = rec.taken != nil
		pay.Flows, pay.Outbox = rec.flows, rec.outbox
		m.pay = &pay
		return m, true
	}
	return nil, false
}

var errNotBatchable = errors.New("mysqlstore: transaction is not an order insert nor a payment")

// pick returns the lane m queues in: a status change (PayBatch's member) its order's lane, so
// that changes of one order meet in one lane and the later is decided on the row the earlier
// left; a placed order an idle lane, else the one with the shortest queue. Why:
// docs/DESIGN.md, "Changes of one order meet in one lane".
func (b *BatchingLedger) pick(m *member) *lane {
	if m.pay != nil {
		return b.lanes[laneOf(m.pay.Paid.No(), len(b.lanes))]
	}
	start := int(b.next.Add(1))
	var best *lane
	bestLen := 0
	for i := range b.lanes {
		ln := b.lanes[(start+i)%len(b.lanes)]
		ln.mu.Lock()
		running, n := ln.running, len(ln.queue)
		ln.mu.Unlock()
		if !running {
			return ln
		}
		if best == nil || n < bestLen {
			best, bestLen = ln, n
		}
	}
	return best
}

// laneOf spreads order numbers over n lanes.
func laneOf(no domain.OrderNo, n int) int {
	return int(maphash.String(laneSeed, string(no)) % uint64(n)) //nolint:gosec // G115: n > 0 lanes
}

// laneSeed seeds laneOf: one seed for the process, so one order always maps to one lane.
var laneSeed = maphash.MakeSeed()

// member is one Atomically call waiting for a batch.
type member struct {
	ctx    context.Context
	orders []domain.Order
	flows  []domain.FlowEntry
	// pay is a payment's writes (PayBatch's member) when the transaction is a payment; orders
	// and flows are then empty.
	pay    *PayMember
	fn     func(tx domain.Store) error // the transaction, run again when the batch found it lost
	queued time.Time
	taken  bool // set by the lane, under its lock, when a batch takes the member
	done   chan batchResult
}

// batchResult is a batch's outcome for one member: err, or alone when the member must run
// its transaction by itself, or lost when its transition lost (PayLost).
type batchResult struct {
	err   error
	alone bool
	lost  bool
}

// lane is a queue of members with at most one batch running: members that arrive while it
// runs form the next batch.
type lane struct {
	mu      sync.Mutex
	queue   []*member
	running bool
}

// join queues m and, when no batch is running in the lane, starts one at once.
func (ln *lane) join(b *BatchingLedger, m *member) {
	ln.mu.Lock()
	ln.queue = append(ln.queue, m)
	start := !ln.running
	ln.running = true
	ln.mu.Unlock()
	if start {
		go ln.drain(b)
	}
}

// leave takes m out of the queue and reports whether it was still there (not yet taken).
func (ln *lane) leave(m *member) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if m.taken {
		return false
	}
	if i := slices.Index(ln.queue, m); i >= 0 {
		ln.queue = slices.Delete(ln.queue, i, i+1)
	}
	return true
}

// drain writes batches until the queue is empty, then marks the lane idle.
func (ln *lane) drain(b *BatchingLedger) {
	for {
		batch := ln.take(b.max, b.wait)
		if batch == nil {
			return
		}
		b.write(batch)
	}
}

// take removes up to max members from the queue, first waiting up to wait for more when it
// found several but fewer than max; nil (and the lane idle) when the queue is empty.
func (ln *lane) take(max int, wait time.Duration) []*member {
	ln.mu.Lock()
	if n := len(ln.queue); wait > 0 && n > 1 && n < max {
		ln.mu.Unlock()
		time.Sleep(wait)
		ln.mu.Lock()
	}
	defer ln.mu.Unlock()
	n := min(len(ln.queue), max)
	if n == 0 {
		ln.running = false
		return nil
	}
	batch := slices.Clone(ln.queue[:n])
	ln.queue = slices.Delete(ln.queue, 0, n)
	for _, m := range batch {
		m.taken = true
	}
	return batch
}

// write runs one batch and gives every member its outcome: its placed orders as one
// transaction (with the Ledger's deadlock retries), its payments as another (PayBatch).
func (b *BatchingLedger) write(batch []*member) {
	started := time.Now()
	b.obs.LedgerBatchSize(len(batch))
	var placed, paid []*member
	for _, m := range batch {
		b.obs.LedgerBatchWait(started.Sub(m.queued))
		if m.pay != nil {
			paid = append(paid, m)
		} else {
			placed = append(placed, m)
		}
	}
	if b.taken != nil {
		b.taken(len(batch))
	}
	if len(placed) > 0 {
		b.writeOrders(placed)
	}
	if len(paid) > 0 {
		b.writePayments(paid)
	}
}

// writePayments writes the payments of a batch with PayBatch: a member PayBatch cannot decide
// as its own transaction would (PayAlone) runs alone; a batch that fails, other than by a lost
// COMMIT answer, is written by nothing and each member runs alone.
func (b *BatchingLedger) writePayments(batch []*member) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	members := make([]PayMember, len(batch))
	for i, m := range batch {
		members[i] = *m.pay
	}
	out, err := b.Ledger.PayBatch(ctx, members)
	if err != nil && !errors.Is(err, domain.ErrCommitUnknown) {
		b.obs.LedgerBatchFallback(fallbackReason(err))
	}
	for i, m := range batch {
		switch {
		case errors.Is(err, domain.ErrCommitUnknown):
			m.done <- batchResult{err: err}
		case err != nil || out[i] == PayAlone:
			m.done <- batchResult{alone: true}
		case out[i] == PayLost:
			m.done <- batchResult{lost: true}
		default:
			m.done <- batchResult{}
		}
	}
}

// writeOrders writes the placed orders of a batch as one transaction: one multi-row INSERT of
// the orders, one of their flow rows.
func (b *BatchingLedger) writeOrders(batch []*member) {
	var orders []domain.Order
	var flows []domain.FlowEntry
	for _, m := range batch {
		orders = append(orders, m.orders...)
		flows = append(flows, m.flows...)
	}
	ctx, cancel := batchContext(batch)
	defer cancel()
	err := b.Ledger.Atomically(ctx, func(tx domain.Store) error {
		s := tx.(*store)
		if err := insertOrders(ctx, s, fmt.Sprintf("insert %d orders", len(orders)), orders); err != nil {
			return err
		}
		if len(flows) > 0 {
			if err := appendFlows(ctx, s, fmt.Sprintf("append %d flow rows", len(flows)), flows); err != nil {
				return err
			}
		}
		if b.beforeCommit != nil {
			b.beforeCommit()
		}
		return nil
	})
	r := batchResult{err: err}
	if err != nil && !errors.Is(err, domain.ErrCommitUnknown) {
		// One member's row (or the database) refused the batch: nothing of it is stored, and
		// each member runs alone to get its own outcome.
		b.obs.LedgerBatchFallback(fallbackReason(err))
		r = batchResult{alone: true}
	}
	for _, m := range batch {
		m.done <- r
	}
}

// batchContext is the context a batch runs on: none of its members' cancellations reaches it
// (a member taken waits for the outcome), and it ends at the latest of their deadlines, or
// after batchBound when one of them has none.
func batchContext(batch []*member) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, m := range batch {
		d, ok := m.ctx.Deadline()
		if !ok {
			latest = time.Now().Add(batchBound)
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
}

func fallbackReason(err error) string {
	switch {
	case errors.Is(err, domain.ErrDuplicateOrder), errors.Is(err, domain.ErrDuplicateIdempotencyKey),
		errors.Is(err, domain.ErrDuplicateFlow):
		return FallbackDuplicateKey
	case errors.Is(err, domain.ErrUnavailable):
		return FallbackUnavailable
	}
	return FallbackError
}

type noObserver struct{}

func (noObserver) LedgerBatchSize(int)           {}
func (noObserver) LedgerBatchWait(time.Duration) {}
func (noObserver) LedgerBatchFallback(string)    {}

// recorder is the Store fn first runs against: Orders().Insert, Orders().Transition (once),
// Cards().Allocate (once), Flows().Append and Outbox().Add record their rows and succeed; any
// other call stops fn (the notBatchable panic) and marks the run
// refused, in case fn recovers it.
type recorder struct {
	orders  []domain.Order
	flows   []domain.FlowEntry
	outbox  []domain.OutboxMessage
	moved   *PayMember  // the one Transition recorded (a payment's), answered as won
	taken   *allocation // the one Allocate recorded, answered with no codes
	refused bool
	// lose, when set, makes this the store of a member whose transition lost (PayLost): its
	// first call must be Transition of lose's order from lose's status, answered lost; any
	// other call stops fn.
	lose *PayMember
}

// allocation is an Allocate the recording store answered.
type allocation struct {
	product domain.ProductID
	no      domain.OrderNo
	qty     int
}

// matches reports whether the allocation is the paid order's codes: its product, number and
// qty, to the order moved to PAID.
func (a *allocation) matches(paid domain.Order) bool {
	return paid.Status() == domain.StatusPaid && a.product == paid.Product() && a.no == paid.No() && a.qty == paid.Qty()
}

// run runs fn against r, turning the notBatchable panic that stops it into errNotBatchable.
func (r *recorder) run(fn func(tx domain.Store) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if _, stop := p.(notBatchable); !stop {
				panic(p)
			}
			err = errNotBatchable
		}
	}()
	return fn(r)
}

// refuse stops fn: its transaction is not batchable.
func (r *recorder) refuse() {
	r.refused = true
	panic(notBatchable{})
}

// writes stops fn in a lost member's store: after a lost transition only an answer is left to
// give, and a write before it would change what fn's own transaction does.
func (r *recorder) writes() {
	if r.lose != nil {
		r.refuse()
	}
}

func (r *recorder) Products() domain.ProductCatalog        { r.refuse(); return nil }
func (r *recorder) Orders() domain.OrderRepo               { return recordedOrders{r} }
func (r *recorder) Cards() domain.CardVault                { return recordedCards{r} }
func (r *recorder) Flows() domain.FlowLog                  { return recordedFlows{r} }
func (r *recorder) Outbox() domain.Outbox                  { return recordedOutbox{r} }
func (r *recorder) Payments() domain.PaymentRepo           { r.refuse(); return nil }
func (r *recorder) Notifications() domain.NotificationLog  { r.refuse(); return nil }
func (r *recorder) Operators() domain.OperatorRepo         { r.refuse(); return nil }
func (r *recorder) Audit() domain.AuditLog                 { r.refuse(); return nil }
func (r *recorder) Alerts() domain.AlertLog                { r.refuse(); return nil }
func (r *recorder) Blocklist() domain.BlocklistRepo        { r.refuse(); return nil }
func (r *recorder) AlertChannels() domain.AlertChannelRepo { r.refuse(); return nil }
func (r *recorder) Channels() domain.ChannelRepo           { r.refuse(); return nil }
func (r *recorder) Coupons() domain.CouponStore            { r.refuse(); return nil }

// recordedOrders records inserts; every other method stops fn.
type recordedOrders struct{ r *recorder }

func (o recordedOrders) Insert(_ context.Context, ord domain.Order) error {
	o.r.writes()
	o.r.orders = append(o.r.orders, ord)
	return nil
}

func (o recordedOrders) Order(context.Context, domain.OrderNo) (domain.Order, error) {
	o.r.refuse()
	return domain.Order{}, errNotBatchable
}

func (o recordedOrders) OrderByKey(context.Context, domain.BuyerID, domain.IdempotencyKey) (domain.Order, error) {
	o.r.refuse()
	return domain.Order{}, errNotBatchable
}

// Transition records the first transition (a payment's, or a change that takes no codes) and
// answers it won: the batch
// decides it on the order's locked row (PayBatch), and a member it cannot decide so runs alone,
// where Transition answers for real. A second transition stops fn.
//
// In a lost member's store (lose set) it answers lost, the answer the batch found on the
// member's locked row, for the same order and status only.
func (o recordedOrders) Transition(_ context.Context, ord domain.Order, from domain.OrderStatus) (bool, error) {
	if o.r.moved != nil {
		o.r.refuse()
	}
	o.r.moved = &PayMember{Paid: ord, From: from}
	if l := o.r.lose; l != nil {
		if ord.No() != l.Paid.No() || from != l.From {
			o.r.refuse()
		}
		return false, nil
	}
	return true, nil
}

func (o recordedOrders) MarkRevealed(context.Context, domain.OrderNo, time.Time) (bool, error) {
	o.r.refuse()
	return false, errNotBatchable
}

func (o recordedOrders) Expired(context.Context, time.Time, int) ([]domain.Order, error) {
	o.r.refuse()
	return nil, errNotBatchable
}

func (o recordedOrders) Totals(context.Context, domain.ProductID) (map[domain.OrderStatus]domain.StatusTotal, error) {
	o.r.refuse()
	return nil, errNotBatchable
}

func (o recordedOrders) Existing(context.Context, []domain.OrderNo) (map[domain.OrderNo]bool, error) {
	o.r.refuse()
	return nil, errNotBatchable
}

func (o recordedOrders) HeldByBuyer(context.Context, domain.ProductID, bool) (map[domain.BuyerID]int64, error) {
	o.r.refuse()
	return nil, errNotBatchable
}

func (o recordedOrders) CouponUses(context.Context, domain.ProductID) (domain.CouponCounts, error) {
	o.r.refuse()
	return nil, errNotBatchable
}

func (o recordedOrders) Search(context.Context, domain.OrderFilter) ([]domain.Order, error) {
	o.r.refuse()
	return nil, errNotBatchable
}

// recordedFlows records appends; every other method stops fn.
type recordedFlows struct{ r *recorder }

func (f recordedFlows) Append(_ context.Context, e domain.FlowEntry) error {
	f.r.writes()
	f.r.flows = append(f.r.flows, e)
	return nil
}

func (f recordedFlows) Totals(context.Context, domain.ProductID) (domain.FlowTotals, error) {
	f.r.refuse()
	return nil, errNotBatchable
}

func (f recordedFlows) Entries(context.Context, string) ([]domain.FlowEntry, error) {
	f.r.refuse()
	return nil, errNotBatchable
}

func (f recordedFlows) PerInterval(context.Context, domain.ProductID, domain.FlowType, time.Time, time.Duration, int) ([]int64, error) {
	f.r.refuse()
	return nil, errNotBatchable
}

// recordedCards records one allocation, answered with no codes (a payment's transaction does
// not read them: the buyer reads them later); every other method, or a second allocation,
// stops fn.
type recordedCards struct{ r *recorder }

func (c recordedCards) Allocate(_ context.Context, p domain.ProductID, no domain.OrderNo, qty int) ([]domain.Card, error) {
	if c.r.taken != nil || qty < 1 || c.r.lose != nil {
		c.r.refuse()
	}
	c.r.taken = &allocation{product: p, no: no, qty: qty}
	return nil, nil
}

func (c recordedCards) Import(context.Context, domain.ProductID, []domain.CardCode, int) (domain.ImportResult, error) {
	c.r.refuse()
	return domain.ImportResult{}, errNotBatchable
}

func (c recordedCards) Cards(context.Context, domain.OrderNo) ([]domain.Card, error) {
	c.r.refuse()
	return nil, errNotBatchable
}

func (c recordedCards) Reclaim(context.Context, domain.OrderNo, domain.CardStatus) (int, error) {
	c.r.refuse()
	return 0, errNotBatchable
}

func (c recordedCards) Counts(context.Context, domain.ProductID) (domain.CardCounts, error) {
	c.r.refuse()
	return nil, errNotBatchable
}

func (c recordedCards) Void(context.Context, domain.ProductID, []domain.CardCode) (domain.VoidResult, error) {
	c.r.refuse()
	return domain.VoidResult{}, errNotBatchable
}

// recordedOutbox records added messages; every other method stops fn.
type recordedOutbox struct{ r *recorder }

func (o recordedOutbox) Add(_ context.Context, m domain.OutboxMessage) error {
	o.r.writes()
	o.r.outbox = append(o.r.outbox, m)
	return nil
}

func (o recordedOutbox) Pending(context.Context, time.Time, int, ...string) ([]domain.OutboxMessage, error) {
	o.r.refuse()
	return nil, errNotBatchable
}

func (o recordedOutbox) MarkSent(context.Context, time.Time, ...int64) error {
	o.r.refuse()
	return errNotBatchable
}

func (o recordedOutbox) MarkFailed(context.Context, int64, time.Time) error {
	o.r.refuse()
	return errNotBatchable
}

func (o recordedOutbox) Claim(context.Context, int64, time.Time, time.Time) (bool, error) {
	o.r.refuse()
	return false, errNotBatchable
}

func (o recordedOutbox) Backlog(context.Context, ...string) (int64, error) {
	o.r.refuse()
	return 0, errNotBatchable
}

func (o recordedOutbox) ByKey(context.Context, string, ...string) ([]domain.OutboxRecord, error) {
	o.r.refuse()
	return nil, errNotBatchable
}
