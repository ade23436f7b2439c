package porttest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// deliveryTimeout bounds how late a delivery may be. It is generous on purpose: the suite
// checks that messages arrive, not how fast (a broker's delayed delivery is coarse).
const deliveryTimeout = 10 * time.Second

// RunDelayQueue checks a domain.DelayQueue against the port's contract. newQueue returns a
// queue whose due messages are delivered to handler; it is called once per case. A shared
// queue may deliver messages of other tests: the handler given here ignores (and acknowledges)
// order numbers this suite did not schedule.
func RunDelayQueue(t *testing.T, newQueue func(t *testing.T, handler func(context.Context, domain.OrderNo) error) domain.DelayQueue) {
	t.Run("a message is delivered at its due time, not before", func(t *testing.T) {
		rec := newRecorder()
		q := newQueue(t, rec.handle)
		no := rec.expect(0)
		start := time.Now()
		schedule(t, q, no, start.Add(200*time.Millisecond))
		d := rec.next(t)
		if d.no != no {
			t.Fatalf("delivered %s, want %s", d.no, no)
		}
		if waited := d.at.Sub(start); waited < 180*time.Millisecond {
			t.Fatalf("delivered %s after scheduling, want at least 200ms", waited)
		}
	})

	t.Run("a message past due is delivered promptly", func(t *testing.T) {
		rec := newRecorder()
		q := newQueue(t, rec.handle)
		no := rec.expect(0)
		schedule(t, q, no, time.Now().Add(-time.Minute))
		if d := rec.next(t); d.no != no {
			t.Fatalf("delivered %s, want %s", d.no, no)
		}
	})

	t.Run("a failed delivery is redelivered until it succeeds", func(t *testing.T) {
		rec := newRecorder()
		q := newQueue(t, rec.handle)
		no := rec.expect(1)
		schedule(t, q, no, time.Now())
		first, second := rec.next(t), rec.next(t)
		if first.no != no || !first.failed || second.no != no || second.failed {
			t.Fatalf("deliveries %+v, %+v; want %s failed, then %s succeeded", first, second, no, no)
		}
		select {
		case d := <-rec.ch:
			t.Fatalf("delivered again after success: %+v", d)
		case <-time.After(700 * time.Millisecond):
		}
	})

	t.Run("twenty messages are all delivered", func(t *testing.T) {
		rec := newRecorder()
		q := newQueue(t, rec.handle)
		want := map[domain.OrderNo]bool{}
		for i := range 20 {
			no := rec.expect(0)
			want[no] = true
			schedule(t, q, no, time.Now().Add(time.Duration(i*10)*time.Millisecond))
		}
		for len(want) > 0 {
			delete(want, rec.next(t).no) // duplicates are allowed: delivery is at least once
		}
	})
}

type delivery struct {
	no     domain.OrderNo
	at     time.Time
	failed bool
}

// recorder is the suite's handler: it reports each delivery of an expected order number on ch
// and fails the number's first deliveries as told.
type recorder struct {
	mu    sync.Mutex
	fails map[domain.OrderNo]int // expected numbers -> deliveries still to fail
	ch    chan delivery
}

func newRecorder() *recorder {
	return &recorder{fails: map[domain.OrderNo]int{}, ch: make(chan delivery, 1024)}
}

var errInjected = errors.New("porttest: injected handler failure")

// expect registers a fresh order number whose first fails deliveries will fail.
func (r *recorder) expect(fails int) domain.OrderNo {
	no := newOrderNo()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails[no] = fails
	return no
}

func (r *recorder) handle(_ context.Context, no domain.OrderNo) error {
	at := time.Now()
	r.mu.Lock()
	fails, ours := r.fails[no]
	if ours && fails > 0 {
		r.fails[no]--
	}
	r.mu.Unlock()
	if !ours {
		return nil
	}
	d := delivery{no: no, at: at, failed: fails > 0}
	select {
	case r.ch <- d:
	default: // the test has stopped listening
	}
	if d.failed {
		return errInjected
	}
	return nil
}

// next waits for the next delivery.
func (r *recorder) next(t *testing.T) delivery {
	t.Helper()
	select {
	case d := <-r.ch:
		return d
	case <-time.After(deliveryTimeout):
		t.Fatalf("no delivery within %s", deliveryTimeout)
		return delivery{}
	}
}

func schedule(t *testing.T, q domain.DelayQueue, no domain.OrderNo, due time.Time) {
	t.Helper()
	if err := q.ScheduleClose(t.Context(), no, due); err != nil {
		t.Fatalf("ScheduleClose: %v", err)
	}
}
