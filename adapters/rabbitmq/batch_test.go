package rabbitmq_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/adapters/rabbitmq"
	"cardshop/domain"
)

func TestOrdersBodyFormat(t *testing.T) {
	a, b := domain.OrderNo("2601011200001234000000000001"), domain.OrderNo("2601011200001234000000000002")
	if got := string(rabbitmq.EncodeOrders([]domain.OrderNo{a})); got != string(a) {
		t.Fatalf("one order encodes as %q, want the bare number (the format before batching)", got)
	}
	if got := string(rabbitmq.EncodeOrders([]domain.OrderNo{a, b})); got != string(a)+"\n"+string(b) {
		t.Fatalf("two orders encode as %q", got)
	}
	for _, c := range []struct {
		body    string
		nos     []domain.OrderNo
		badLen  int
		comment string
	}{
		{string(a), []domain.OrderNo{a}, 0, "old single-order body"},
		{string(a) + "\n" + string(b), []domain.OrderNo{a, b}, 0, "batch"},
		{string(a) + "\r\n" + string(b) + "\n\n", []domain.OrderNo{a, b}, 0, "CRLF, blank lines, final newline"},
		{string(a) + "\nnot an order!\n" + string(b) + "\n" + string(a), []domain.OrderNo{a, b}, 1, "a bad line and a duplicate"},
		{"", nil, 0, "empty"},
		{"no good!", nil, 1, "nothing valid"},
	} {
		nos, bad := rabbitmq.DecodeOrders([]byte(c.body))
		if !slices.Equal(nos, c.nos) || len(bad) != c.badLen {
			t.Errorf("%s: DecodeOrders(%q) = %v, %d bad; want %v, %d bad", c.comment, c.body, nos, len(bad), c.nos, c.badLen)
		}
	}
}

func TestGroupByDue(t *testing.T) {
	buckets := rabbitmq.Ladder([]time.Duration{15 * time.Minute})
	now := time.Now()
	at := func(ds ...time.Duration) []time.Time {
		var out []time.Time
		for _, d := range ds {
			out = append(out, now.Add(d))
		}
		return out
	}
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		dues []time.Time
		want []int
	}{
		{"all past due: one message", at(-time.Minute, -ms, 0), []int{3}},
		{"past and future apart", at(-ms, ms, 2*ms), []int{1, 2}},
		{"order timeouts a few ms apart: one message", at(15*time.Minute-3*ms, 15*time.Minute, 15*time.Minute+40*ms), []int{3}},
		{"1s delays 20ms apart share, 21ms do not", at(time.Second, time.Second+20*ms, time.Second+41*ms), []int{2, 1}},
		{"different buckets", at(200*ms, 5*time.Second, 15*time.Minute), []int{1, 1, 1}},
	} {
		if got := rabbitmq.GroupSizes(buckets, c.dues, now); !slices.Equal(got, c.want) {
			t.Errorf("%s: groups %v, want %v", c.name, got, c.want)
		}
	}
}

// Concurrent ScheduleClose calls share messages, and every order still reaches the handler, at
// or after its own due time.
func TestConcurrentScheduleCloseBatched(t *testing.T) {
	const n = 1000
	b := dial(t, rabbitmq.Config{Delays: []time.Duration{2 * time.Second}})
	s := newSink()
	b.Consume(s.handle)
	start := time.Now()
	dues := map[domain.OrderNo]time.Time{}
	nos := make([]domain.OrderNo, n)
	for i := range nos {
		nos[i] = newOrderNo()
		// Due times a few milliseconds apart, as for orders placed together.
		dues[nos[i]] = start.Add(2*time.Second + time.Duration(i%10)*time.Millisecond)
	}
	before := b.TimeoutMessages()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, no := range nos {
		wg.Go(func() { errs <- b.ScheduleClose(context.Background(), no, dues[no]) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("ScheduleClose: %v", err)
		}
	}
	took := time.Since(start)
	if took > 1500*time.Millisecond {
		t.Fatalf("%d concurrent ScheduleClose took %s", n, took)
	}
	// Read before the first message is due: the consumer has not re-published anything yet.
	msgs := b.TimeoutMessages() - before
	t.Logf("%d concurrent ScheduleClose: %d messages, confirmed after %s", n, msgs, took)
	if msgs < 1 || msgs > n/20 {
		t.Fatalf("%d orders took %d messages, want far fewer (at most %d)", n, msgs, n/20)
	}
	want := map[domain.OrderNo]bool{}
	for _, no := range nos {
		want[no] = true
	}
	dups := 0
	for len(want) > 0 {
		a := s.next(t, 15*time.Second)
		due, ours := dues[a.no]
		if !ours {
			t.Fatalf("handler got %s, not scheduled by this test", a.no)
		}
		if a.at.Before(due) {
			t.Fatalf("%s handled %s before its due time", a.no, due.Sub(a.at))
		}
		if !want[a.no] {
			dups++
		}
		delete(want, a.no)
	}
	t.Logf("all %d delivered %s after scheduling (%d duplicates)", n, time.Since(start), dups)
}

// publishRaw publishes a timeout message by hand to the timeouts exchange, as a message already
// in the queues (or an older release) would arrive.
func publishRaw(t *testing.T, raw *amqp.Channel, b *rabbitmq.Broker, id string, due time.Time, body string) {
	t.Helper()
	err := raw.PublishWithContext(t.Context(), b.Exchanges()[0], "close", true, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent,
		ContentType:  "text/plain",
		MessageId:    id,
		Timestamp:    time.Now(),
		Headers:      amqp.Table{rabbitmq.DueHeader: due.UnixMilli()},
		Body:         []byte(body),
	})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// In a batch whose handler fails for one order, only that order comes back, RetryDelay later.
func TestBatchWithOneFailingOrder(t *testing.T) {
	const retry = 300 * time.Millisecond
	b := dial(t, rabbitmq.Config{RetryDelay: retry})
	raw := rawChannel(t)
	s := newSink()
	b.Consume(s.handle)
	nos := make([]string, 5)
	for i := range nos {
		nos[i] = string(newOrderNo())
	}
	failing := domain.OrderNo(nos[2])
	s.failFirst(failing, 1)
	publishRaw(t, raw, b, "batch-1", time.Now().Add(-time.Second), strings.Join(nos, "\n"))

	want := map[domain.OrderNo]bool{}
	for _, no := range nos {
		want[domain.OrderNo(no)] = true
	}
	var failedAt time.Time
	for len(want) > 0 {
		a := s.next(t, 10*time.Second)
		if !want[a.no] {
			t.Fatalf("%s handled twice before the batch was done", a.no)
		}
		delete(want, a.no)
		if a.no == failing {
			failedAt = a.at
		}
	}
	a := s.next(t, 10*time.Second)
	if a.no != failing {
		t.Fatalf("redelivered %s, want only the failing %s", a.no, failing)
	}
	if gap := a.at.Sub(failedAt); gap < retry || gap > retry+3*time.Second {
		t.Fatalf("failing order redelivered %s after its failure, want RetryDelay (%s)", gap, retry)
	}
	select {
	case a := <-s.ch:
		t.Fatalf("handled again: %+v", a)
	case <-time.After(time.Second):
	}
}

// Messages of the format before batching (one order number, its own MessageId) are consumed:
// one already due, and one that arrives early and is held until its due time.
func TestOldSingleOrderMessageConsumed(t *testing.T) {
	b := dial(t, rabbitmq.Config{})
	raw := rawChannel(t)
	s := newSink()
	b.Consume(s.handle)
	due, early := newOrderNo(), newOrderNo()
	earlyDue := time.Now().Add(400 * time.Millisecond)
	publishRaw(t, raw, b, string(due), time.Now().Add(-time.Minute), string(due))
	publishRaw(t, raw, b, string(early), earlyDue, string(early))
	got := map[domain.OrderNo]time.Time{}
	for len(got) < 2 {
		a := s.next(t, 10*time.Second)
		if _, dup := got[a.no]; dup || (a.no != due && a.no != early) {
			t.Fatalf("unexpected delivery %+v", a)
		}
		got[a.no] = a.at
	}
	if got[early].Before(earlyDue) {
		t.Fatalf("early message handled %s before its due time", earlyDue.Sub(got[early]))
	}
	select {
	case a := <-s.ch:
		t.Fatalf("handled again: %+v", a)
	case <-time.After(500 * time.Millisecond):
	}
}

// A caller whose context ends while it waits (in the batch, or for the broker's confirm) gets an
// error wrapping domain.ErrUnavailable and its context's error at once.
func TestScheduleCloseCallerGivesUp(t *testing.T) {
	call := func(t *testing.T, b *rabbitmq.Broker, cancelAfter time.Duration) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- b.ScheduleClose(ctx, newOrderNo(), time.Now().Add(time.Hour)) }()
		time.Sleep(cancelAfter)
		select {
		case err := <-done:
			t.Fatalf("ScheduleClose returned %v before its context was cancelled", err)
		default:
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, context.Canceled) {
				t.Fatalf("ScheduleClose after cancel: %v, want ErrUnavailable and context.Canceled", err)
			}
		case <-time.After(time.Second):
			t.Fatal("ScheduleClose still waiting a second after its context was cancelled")
		}
	}
	t.Run("queued in a batch", func(t *testing.T) {
		b := dial(t, rabbitmq.Config{})
		b.SetLinger(time.Hour)
		call(t, b, 100*time.Millisecond)
		// The abandoned order stays queued until the flush (here Close's), which leaves it out.
		if q := b.Queued(); q != 1 {
			t.Fatalf("%d orders queued, want the abandoned one", q)
		}
		closeWithin(t, b, 5*time.Second)
		if m := b.TimeoutMessages(); m != 0 {
			t.Fatalf("%d messages published for an abandoned order, want 0", m)
		}
	})
	t.Run("waiting for the confirm", func(t *testing.T) {
		p, url := proxied(t)
		b := dial(t, rabbitmq.Config{URL: url})
		p.stall() // the broker answers nothing: the batch's confirm does not come
		call(t, b, 200*time.Millisecond)
		p.resume()
		if err := b.ScheduleClose(t.Context(), newOrderNo(), time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("ScheduleClose after the broker answers again: %v", err)
		}
	})
}

// Close flushes the orders still queued: their callers get the publish's result, and every
// order whose caller got nil is in the broker.
func TestCloseFlushesQueuedOrders(t *testing.T) {
	const n = 100
	t.Run("connected", func(t *testing.T) {
		b := dial(t, rabbitmq.Config{}) // no Consume: the orders stay in the timeouts queue
		raw := rawChannel(t)
		b.SetLinger(time.Hour) // only Close flushes
		results := scheduleQueued(t, b, n)
		closeWithin(t, b, 5*time.Second)
		confirmed := map[domain.OrderNo]bool{}
		for no, err := range results() {
			if err != nil {
				t.Fatalf("ScheduleClose flushed by Close: %v", err)
			}
			confirmed[no] = true
		}
		// Everything confirmed is in the queue.
		for no := range queuedOrders(t, raw, b.OrderTimeoutsQueue()) {
			delete(confirmed, no)
		}
		if len(confirmed) > 0 {
			t.Fatalf("%d confirmed orders missing from the queue", len(confirmed))
		}
		if err := b.ScheduleClose(t.Context(), newOrderNo(), time.Now()); !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("ScheduleClose after Close: %v, want ErrUnavailable", err)
		}
	})
	t.Run("disconnected", func(t *testing.T) {
		p, url := proxied(t)
		b := dial(t, rabbitmq.Config{URL: url})
		b.SetLinger(time.Hour)
		results := scheduleQueued(t, b, n)
		p.cut()
		closeWithin(t, b, 5*time.Second)
		for no, err := range results() {
			if !errors.Is(err, domain.ErrUnavailable) {
				t.Fatalf("ScheduleClose of %s flushed by Close without a connection: %v, want ErrUnavailable", no, err)
			}
		}
	})
}

// scheduleQueued starts n ScheduleClose calls due now and waits until all are queued; results
// waits for them to return.
// With Config.Unconfirmed, ScheduleClose answers as soon as its order is queued, up to that
// many orders waiting for their confirm; past the bound a call waits for its confirm again. The
// answered orders are published even though their callers' contexts have ended, Close flushes
// them, and a message that fails is counted against its answered orders.
func TestScheduleCloseAnsweredBeforeItsConfirm(t *testing.T) {
	t.Run("connected", func(t *testing.T) {
		b := dial(t, rabbitmq.Config{Unconfirmed: 3}) // no Consume: the orders stay in the timeouts queue
		raw := rawChannel(t)
		b.SetLinger(time.Hour) // only Close flushes: a call that waited for its confirm would not return
		answered := map[domain.OrderNo]bool{}
		for range 3 {
			no := newOrderNo()
			ctx, cancel := context.WithCancel(t.Context())
			if err := b.ScheduleClose(ctx, no, time.Now()); err != nil {
				t.Fatalf("ScheduleClose within the bound: %v", err)
			}
			cancel() // the request is answered and its context ends: the order is still sent
			answered[no] = true
		}
		if u, lost := b.CloseConfirms(); u != 3 || lost != 0 {
			t.Fatalf("CloseConfirms() = %d unconfirmed, %d lost; want 3, 0", u, lost)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		late := newOrderNo()
		if err := b.ScheduleClose(ctx, late, time.Now()); !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ScheduleClose past the bound, no flush before its deadline: %v, want it to wait and give up", err)
		}
		closeWithin(t, b, 5*time.Second)
		if u, lost := b.CloseConfirms(); u != 0 || lost != 0 {
			t.Fatalf("CloseConfirms() after Close = %d unconfirmed, %d lost; want 0, 0", u, lost)
		}
		got := queuedOrders(t, raw, b.OrderTimeoutsQueue())
		if len(got) != len(answered) || got[late] {
			t.Fatalf("queue holds %v, want exactly the answered orders %v", got, answered)
		}
		for no := range answered {
			if !got[no] {
				t.Fatalf("answered order %s missing from the queue (holds %v)", no, got)
			}
		}
	})
	t.Run("message fails", func(t *testing.T) {
		p, url := proxied(t)
		b := dial(t, rabbitmq.Config{URL: url, Unconfirmed: 10})
		b.SetLinger(time.Hour)
		for range 5 {
			if err := b.ScheduleClose(t.Context(), newOrderNo(), time.Now()); err != nil {
				t.Fatalf("ScheduleClose within the bound: %v", err)
			}
		}
		p.cut() // Close's flush finds no connection
		closeWithin(t, b, 5*time.Second)
		if u, lost := b.CloseConfirms(); u != 0 || lost != 5 {
			t.Fatalf("CloseConfirms() = %d unconfirmed, %d lost; want 0, 5", u, lost)
		}
	})
	t.Run("many callers at once", func(t *testing.T) {
		const callers, bound = 400, 50
		b := dial(t, rabbitmq.Config{Unconfirmed: bound})
		raw := rawChannel(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		scheduled := map[domain.OrderNo]bool{}
		for range callers {
			wg.Go(func() {
				no := newOrderNo()
				if err := b.ScheduleClose(t.Context(), no, time.Now()); err != nil {
					t.Errorf("ScheduleClose: %v", err)
					return
				}
				if u, _ := b.CloseConfirms(); u > bound {
					t.Errorf("%d orders answered before their confirm, bound %d", u, bound)
				}
				mu.Lock()
				scheduled[no] = true
				mu.Unlock()
			})
		}
		wg.Wait()
		closeWithin(t, b, 10*time.Second)
		if u, lost := b.CloseConfirms(); u != 0 || lost != 0 {
			t.Fatalf("CloseConfirms() = %d unconfirmed, %d lost; want 0, 0", u, lost)
		}
		for no := range queuedOrders(t, raw, b.OrderTimeoutsQueue()) {
			delete(scheduled, no)
		}
		if len(scheduled) != 0 {
			t.Fatalf("%d of %d scheduled orders missing from the queue", len(scheduled), callers)
		}
	})
}

// queuedOrders takes every message off queue and returns the orders they carry.
func queuedOrders(t *testing.T, raw *amqp.Channel, queue string) map[domain.OrderNo]bool {
	t.Helper()
	got := map[domain.OrderNo]bool{}
	for {
		d, ok, err := raw.Get(queue, true)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if !ok {
			return got
		}
		nos, _ := rabbitmq.DecodeOrders(d.Body)
		for _, no := range nos {
			got[no] = true
		}
	}
}

func scheduleQueued(t *testing.T, b *rabbitmq.Broker, n int) (results func() map[domain.OrderNo]error) {
	t.Helper()
	var mu sync.Mutex
	errs := map[domain.OrderNo]error{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			no := newOrderNo()
			err := b.ScheduleClose(context.Background(), no, time.Now())
			mu.Lock()
			errs[no] = err
			mu.Unlock()
		})
	}
	waitFor(t, 5*time.Second, "all calls queued", func() bool { return b.Queued() == n })
	return func() map[domain.OrderNo]error {
		wg.Wait()
		return errs
	}
}

func closeWithin(t *testing.T, b *rabbitmq.Broker, d time.Duration) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("Close did not return within %s", d)
	}
}
