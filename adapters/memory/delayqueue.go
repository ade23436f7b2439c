package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"cardshop/domain"
)

// Redelivery backoff of a message whose handler failed, as a broker's requeue would do.
const (
	firstRedelivery = 100 * time.Millisecond
	maxRedelivery   = 5 * time.Second
)

// DelayQueue is an in-memory domain.DelayQueue: each scheduled close is a real timer that calls
// the handler given to Consume when due. Delivery is at least once: a handler error makes the
// message come back after a backoff (100ms, doubling, at most 5s) until the handler succeeds.
// Handlers may run concurrently. Messages do not survive the process.
type DelayQueue struct {
	clock domain.Clock

	mu      sync.Mutex
	handler func(context.Context, domain.OrderNo) error
	held    []domain.OrderNo // due before a handler existed
	pending int
	timers  map[uint64]*time.Timer // by delivery id, to stop them on Close
	lastID  uint64
	closed  bool
	running sync.WaitGroup
}

var _ domain.DelayQueue = (*DelayQueue)(nil)

// NewDelayQueue returns a queue that computes delays against clock (the timers themselves are
// real).
func NewDelayQueue(clock domain.Clock) *DelayQueue {
	return &DelayQueue{clock: clock, timers: make(map[uint64]*time.Timer)}
}

// errQueueClosed is returned by ScheduleClose after Close.
var errQueueClosed = fmt.Errorf("delay queue closed: %w", domain.ErrUnavailable)

// ScheduleClose delivers no to the handler at due (immediately if due has passed).
func (q *DelayQueue) ScheduleClose(ctx context.Context, no domain.OrderNo, due time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("schedule close of %s: %w", no, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errQueueClosed
	}
	q.pending++
	q.after(max(0, due.Sub(q.clock.Now())), no, firstRedelivery)
	return nil
}

// after starts a timer delivering no after d; backoff is the delay before a redelivery should
// this delivery fail. Called with q.mu held.
func (q *DelayQueue) after(d time.Duration, no domain.OrderNo, backoff time.Duration) {
	q.lastID++
	id := q.lastID
	q.timers[id] = time.AfterFunc(d, func() { q.deliver(id, no, backoff) })
}

func (q *DelayQueue) deliver(id uint64, no domain.OrderNo, backoff time.Duration) {
	q.mu.Lock()
	// The timer may fire before after() has stored it; the lock orders the two.
	delete(q.timers, id)
	if q.closed {
		q.mu.Unlock()
		return
	}
	h := q.handler
	if h == nil {
		q.held = append(q.held, no)
		q.mu.Unlock()
		return
	}
	q.running.Add(1)
	q.mu.Unlock()
	defer q.running.Done()

	err := h(context.Background(), no)

	q.mu.Lock()
	defer q.mu.Unlock()
	if err == nil {
		q.pending--
		return
	}
	if !q.closed {
		q.after(backoff, no, min(2*backoff, maxRedelivery))
	}
}

// Consume sets the handler called for every due message and delivers the messages that fell
// due before there was one. A later call replaces the handler.
func (q *DelayQueue) Consume(handler func(context.Context, domain.OrderNo) error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.handler = handler
	if handler == nil || q.closed {
		return
	}
	for _, no := range q.held {
		q.after(0, no, firstRedelivery)
	}
	q.held = nil
}

// Pending counts the messages scheduled and not yet handled successfully.
func (q *DelayQueue) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending
}

// Close stops every timer, drops the messages not yet delivered and waits for the running
// handlers to return. Scheduling after Close fails with an error wrapping ErrUnavailable.
func (q *DelayQueue) Close() {
	q.mu.Lock()
	q.closed = true
	for _, t := range q.timers {
		t.Stop()
	}
	clear(q.timers)
	q.mu.Unlock()
	// No handler starts after closed is set, so Wait cannot race an Add.
	q.running.Wait()
}
