package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/domain"
)

// Group commit of ScheduleClose (see the package documentation).
const (
	maxBatch      = 256                  // orders that flush a batch at once
	defaultLinger = 5 * time.Millisecond // a batch is flushed at the latest this long after its first order
)

// pendingClose is one ScheduleClose call waiting for the message that carries its order.
type pendingClose struct {
	no   domain.OrderNo
	due  time.Time
	ctx  context.Context // the caller's: bounds the publish, and an abandoned order is not sent
	done chan error      // buffered: receives the publish result once (a waiting caller's)
	// answered: the caller returned before the confirm (Config.Unconfirmed); ctx is then its
	// own, detached from the caller's and bounded by publishTimeout, and release ends it.
	answered bool
	release  context.CancelFunc
}

// settle hands p the result of its publish: to its caller, or, for an order answered before the
// confirm, to the broker's counters. It reports whether an answered order's message failed.
func (b *Broker) settle(p *pendingClose, err error) (lost bool) {
	if !p.answered {
		p.done <- err
		return false
	}
	b.releaseAnswer(p)
	if err != nil {
		b.lostCloses.Add(1)
		return true
	}
	return false
}

// closeBatcher collects ScheduleClose calls until a batch is full or its linger has passed.
// Flushes run on their own goroutines, several at once.
type closeBatcher struct {
	mu      sync.Mutex
	items   []*pendingClose
	timer   *time.Timer // armed by a batch's first order
	gen     uint64      // counts batches taken, so that a stale timer flushes nothing
	linger  time.Duration
	closed  bool
	flushes sync.WaitGroup // batches taken and not yet flushed
}

// enqueue adds p to the current batch; p.done receives the result of its publish. It fails only
// after the batcher was closed.
func (b *Broker) enqueue(p *pendingClose) error {
	q := &b.batch
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return errClosed
	}
	q.items = append(q.items, p)
	var full []*pendingClose
	switch {
	case len(q.items) >= maxBatch:
		full = q.take()
	case len(q.items) == 1:
		gen := q.gen
		q.timer = time.AfterFunc(q.linger, func() { b.lingerExpired(gen) })
	}
	q.mu.Unlock()
	if full != nil {
		go func() {
			defer q.flushes.Done()
			b.flush(full)
		}()
	}
	return nil
}

// take empties the batch for a flush; the caller must call q.flushes.Done after it. q.mu is held.
func (q *closeBatcher) take() []*pendingClose {
	items := q.items
	q.items = nil
	q.gen++
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	q.flushes.Add(1)
	return items
}

// lingerExpired flushes batch gen when its linger has passed, unless it was flushed already.
func (b *Broker) lingerExpired(gen uint64) {
	q := &b.batch
	q.mu.Lock()
	if q.gen != gen || len(q.items) == 0 {
		q.mu.Unlock()
		return
	}
	items := q.take()
	q.mu.Unlock()
	defer q.flushes.Done()
	b.flush(items)
}

// closeBatcher refuses new orders, flushes the queued ones and waits for every flush in flight.
// The connection must still be open (it is, until Close has called this).
func (b *Broker) closeBatcher() {
	q := &b.batch
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	var items []*pendingClose
	if len(q.items) > 0 {
		items = q.take()
	}
	q.mu.Unlock()
	if items != nil {
		b.flush(items)
		q.flushes.Done()
	}
	q.flushes.Wait()
}

// flush publishes a batch: the orders whose callers still wait, sorted by due time and cut into
// groups (see groupByDue), one confirmed message per group, the groups in parallel.
func (b *Broker) flush(items []*pendingClose) {
	live := items[:0]
	var lost []*pendingClose
	for _, p := range items {
		if err := p.ctx.Err(); err != nil {
			// A waiting caller returned on its context already: nobody reads the result. An
			// answered order's own deadline passed before its flush: it is lost.
			if b.settle(p, err) {
				lost = append(lost, p)
			}
			continue
		}
		live = append(live, p)
	}
	b.logLost(lost, errors.New("not published before its deadline"))
	if len(live) == 0 {
		return
	}
	slices.SortFunc(live, func(x, y *pendingClose) int { return x.due.Compare(y.due) })
	groups := groupByDue(b.topo.buckets, live, time.Now())
	var wg sync.WaitGroup
	for _, g := range groups[1:] {
		wg.Go(func() { b.publishGroup(g) })
	}
	b.publishGroup(groups[0])
	wg.Wait()
}

// groupByDue cuts orders sorted by due time into the groups that share a message: the orders
// already due, then runs of orders due within batchSpread of the run's first. A message carries
// the latest due time of its orders, so an order is delivered at most the spread after its own
// due time (plus what its bucket adds), and never before it.
func groupByDue(buckets []time.Duration, sorted []*pendingClose, now time.Time) [][]*pendingClose {
	var groups [][]*pendingClose
	i := 0
	for i < len(sorted) && !sorted[i].due.After(now) {
		i++
	}
	if i > 0 {
		groups = append(groups, sorted[:i])
	}
	for i < len(sorted) {
		first := sorted[i].due
		limit := first.Add(batchSpread(buckets, first.Sub(now)))
		j := i + 1
		for j < len(sorted) && !sorted[j].due.After(limit) {
			j++
		}
		groups = append(groups, sorted[i:j])
		i = j
	}
	return groups
}

// batchSpread is how far apart the due times of one message's orders may be, for orders due in
// delay: the tolerance of the bucket that delay takes (1% of it, at least 20ms), the lateness
// that bucket choice already accepts.
func batchSpread(buckets []time.Duration, delay time.Duration) time.Duration {
	if delay <= 0 {
		return 0
	}
	return bucketTolerance(bucketFor(buckets, delay))
}

// publishGroup publishes one timeout message for the orders of g (sorted by due time) and hands
// the result to each of their callers.
func (b *Broker) publishGroup(g []*pendingClose) {
	nos := make([]domain.OrderNo, len(g))
	for i, p := range g {
		nos[i] = p.no
	}
	ctx, cancel := context.WithDeadline(context.Background(), groupDeadline(g))
	err := b.publishTimeouts(ctx, nos, g[len(g)-1].due, newBatchID())
	cancel()
	var lost []*pendingClose
	for _, p := range g {
		if b.settle(p, err) {
			lost = append(lost, p)
		}
	}
	b.logLost(lost, err)
}

// logLost reports, once per message, the orders answered before their confirm whose message
// failed: their timeout will not come, and the sweeper closes them when they fall due.
func (b *Broker) logLost(lost []*pendingClose, err error) {
	if len(lost) == 0 {
		return
	}
	b.log.Warn("timeout message of orders already answered not confirmed; the sweeper closes them",
		"orders", len(lost), "first_order_no", lost[0].no, "err", err)
}

// groupDeadline bounds the publish of g's message: as long as the most patient of its callers
// waits, and at most publishTimeout (a caller without a deadline counts as publishTimeout).
func groupDeadline(g []*pendingClose) time.Time {
	limit := time.Now().Add(publishTimeout)
	var latest time.Time
	for _, p := range g {
		d, ok := p.ctx.Deadline()
		if !ok || d.After(limit) {
			return limit
		}
		if d.After(latest) {
			latest = d
		}
	}
	return latest
}

// publishTimeouts publishes one persistent, mandatory timeout message for nos, due at due: into
// the delay bucket bucketFor picks for the remaining delay, or straight to the timeouts exchange
// when due has passed. It waits for the confirm; errors wrap domain.ErrUnavailable.
func (b *Broker) publishTimeouts(ctx context.Context, nos []domain.OrderNo, due time.Time, id string) error {
	now := time.Now()
	exchange, key := b.topo.timeouts, closeRoutingKey
	if delay := due.Sub(now); delay > 0 {
		exchange, key = "", b.topo.delayQueue(bucketFor(b.topo.buckets, delay))
	}
	err := b.publish(ctx, exchange, key, amqp.Publishing{
		DeliveryMode: amqp.Persistent,
		ContentType:  "text/plain",
		MessageId:    id,
		Timestamp:    now,
		Headers:      amqp.Table{dueHeader: due.UnixMilli()},
		Body:         encodeOrders(nos),
	})
	if err == nil {
		b.timeoutMessages.Add(1)
	}
	return err
}

// newBatchID names a timeout message: random, for tracing it through the queues.
func newBatchID() string { return fmt.Sprintf("close-%016x", rand.Uint64()) }

// encodeOrders is a timeout message's body: the order numbers, one a line. A single order's
// body is just its number, which is also the format of the messages before batching.
func encodeOrders(nos []domain.OrderNo) []byte {
	n := len(nos)
	for _, no := range nos {
		n += len(no)
	}
	body := make([]byte, 0, n)
	for i, no := range nos {
		if i > 0 {
			body = append(body, '\n')
		}
		body = append(body, no...)
	}
	return body
}

// decodeOrders reads a timeout message's body: one order number a line (a body of one number
// without a newline, the format before batching, is one line). Blank lines are ignored, a
// number listed twice is returned once, and lines that are not order numbers are returned apart.
func decodeOrders(body []byte) (nos []domain.OrderNo, bad []string) {
	seen := map[domain.OrderNo]bool{}
	for line := range strings.Lines(string(body)) {
		s := strings.TrimSpace(line)
		if s == "" {
			continue
		}
		no, err := domain.ParseOrderNo(s)
		if err != nil {
			bad = append(bad, truncate([]byte(s)))
			continue
		}
		if !seen[no] {
			seen[no] = true
			nos = append(nos, no)
		}
	}
	return nos, bad
}
