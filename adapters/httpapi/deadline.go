package httpapi

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// lazyDeadline is a request's context with the API's deadline whose timer is made only when
// something waits on it. Deadline answers at once (go-redis sets its socket deadlines from
// it); Done, AfterFunc and contexts derived from it start the timer. A request that calls no
// dependency — most of a flash sale's answers: sold out under a lease, refused by a rule —
// then pays for no timer, where context.WithTimeout made one for every request.
type lazyDeadline struct {
	parent context.Context
	at     time.Time

	once   sync.Once
	timed  atomic.Pointer[timedCtx] // set by the first wait
	closed atomic.Bool              // release ran: a later wait sees the request as ended
}

type timedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func withLazyDeadline(parent context.Context, d time.Duration) *lazyDeadline {
	at := time.Now().Add(d)
	if pd, ok := parent.Deadline(); ok && pd.Before(at) {
		at = pd
	}
	return &lazyDeadline{parent: parent, at: at}
}

func (l *lazyDeadline) timer() *timedCtx {
	l.once.Do(func() {
		ctx, cancel := context.WithDeadline(l.parent, l.at)
		// Stored before closed is read, as release sets closed before it reads timed: one of
		// the two always sees the other and cancels.
		l.timed.Store(&timedCtx{ctx: ctx, cancel: cancel})
		if l.closed.Load() {
			cancel()
		}
	})
	return l.timed.Load()
}

// release ends the request: the timer, if one was made, is stopped and anything still waiting
// on the context is told the request is over.
func (l *lazyDeadline) release() {
	l.closed.Store(true)
	if t := l.timed.Load(); t != nil {
		t.cancel()
	}
}

func (l *lazyDeadline) Deadline() (time.Time, bool) { return l.at, true }

func (l *lazyDeadline) Done() <-chan struct{} { return l.timer().ctx.Done() }

// Err needs no timer until one was made: the deadline and the parent say it all.
func (l *lazyDeadline) Err() error {
	if t := l.timed.Load(); t != nil {
		return t.ctx.Err()
	}
	if err := l.parent.Err(); err != nil {
		return err
	}
	if l.closed.Load() {
		return context.Canceled
	}
	if !time.Now().Before(l.at) {
		return context.DeadlineExceeded
	}
	return nil
}

func (l *lazyDeadline) Value(key any) any { return l.parent.Value(key) }

// AfterFunc lets the context package tie a derived context to this one without a goroutine
// of its own (it looks for this method on parents it does not know).
func (l *lazyDeadline) AfterFunc(f func()) func() bool { return context.AfterFunc(l.timer().ctx, f) }
