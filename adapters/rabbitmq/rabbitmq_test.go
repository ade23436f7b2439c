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

	"cardshop/adapters/porttest"
	"cardshop/adapters/rabbitmq"
	"cardshop/domain"
)

func TestContractRabbitMQ(t *testing.T) {
	porttest.RunDelayQueue(t, func(t *testing.T, handler func(context.Context, domain.OrderNo) error) domain.DelayQueue {
		b := dial(t, rabbitmq.Config{RetryDelay: 200 * time.Millisecond})
		b.Consume(handler)
		return b
	})
}

// The same contract with ScheduleClose answering before its confirm.
func TestContractRabbitMQAnsweredBeforeConfirm(t *testing.T) {
	porttest.RunDelayQueue(t, func(t *testing.T, handler func(context.Context, domain.OrderNo) error) domain.DelayQueue {
		b := dial(t, rabbitmq.Config{RetryDelay: 200 * time.Millisecond, Unconfirmed: 64})
		b.Consume(handler)
		return b
	})
}

func TestBucketFor(t *testing.T) {
	ladder := rabbitmq.Ladder([]time.Duration{15 * time.Minute, 200 * time.Millisecond})
	for _, c := range []struct {
		delay, want time.Duration
	}{
		{time.Millisecond, 100 * time.Millisecond},      // below the smallest: the smallest
		{50 * time.Millisecond, 100 * time.Millisecond}, // ditto
		{85 * time.Millisecond, 100 * time.Millisecond}, // within the 20ms tolerance
		{100 * time.Millisecond, 100 * time.Millisecond},
		{179 * time.Millisecond, 100 * time.Millisecond}, // 200ms would be 21ms late
		{180 * time.Millisecond, 200 * time.Millisecond},
		{199*time.Millisecond + 990*time.Microsecond, 200 * time.Millisecond},
		{979 * time.Millisecond, 200 * time.Millisecond},
		{980 * time.Millisecond, time.Second},
		{1500 * time.Millisecond, time.Second}, // between buckets: the shorter one, early
		{5 * time.Second, 5 * time.Second},
		{29 * time.Second, 5 * time.Second},
		{15*time.Minute - 5*time.Second, 15 * time.Minute}, // the order timeout, scheduled late
		{15*time.Minute - 10*time.Second, 5 * time.Minute}, // beyond 1% of 15m
		{15 * time.Minute, 15 * time.Minute},
		{59 * time.Minute, 15 * time.Minute},
		{3 * time.Hour, time.Hour},
	} {
		if got := rabbitmq.BucketFor(ladder, c.delay); got != c.want {
			t.Errorf("BucketFor(%s) = %s, want %s", c.delay, got, c.want)
		}
	}
}

func TestLadder(t *testing.T) {
	got := rabbitmq.Ladder([]time.Duration{
		15 * time.Minute, 1500*time.Microsecond + 400*time.Nanosecond, 0, -time.Second, time.Second, 2 * time.Hour,
	})
	want := []time.Duration{
		2 * time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second,
		time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 2 * time.Hour,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Ladder = %v, want %v", got, want)
	}
}

func TestDialUnreachable(t *testing.T) {
	start := time.Now()
	_, err := rabbitmq.Dial(t.Context(), rabbitmq.Config{URL: "amqp://guest:guest@127.0.0.1:1/"})
	if !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("Dial to a closed port: %v, want ErrUnavailable", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("Dial took %s to fail", time.Since(start))
	}
}

func TestDeliveredOnTime(t *testing.T) {
	b := dial(t, rabbitmq.Config{Delays: []time.Duration{time.Second}})
	s := newSink()
	b.Consume(s.handle)
	no := newOrderNo()
	start := time.Now()
	if err := b.ScheduleClose(t.Context(), no, start.Add(time.Second)); err != nil {
		t.Fatalf("ScheduleClose: %v", err)
	}
	a := s.next(t, 10*time.Second)
	if a.no != no {
		t.Fatalf("delivered %s, want %s", a.no, no)
	}
	waited := a.at.Sub(start)
	if waited < time.Second || waited > 5*time.Second {
		t.Fatalf("delivered after %s, want 1s (up to a few seconds late)", waited)
	}
	t.Logf("1s delay delivered after %s", waited)
}

// An order due between two buckets travels in the shorter one and reaches the timeouts queue
// early (no later than its due time), carrying its due time; scheduling the remaining time again
// brings it out at (not before) its due time. The consumer does exactly this.
func TestEarlyArrivalAndRemainder(t *testing.T) {
	b := dial(t, rabbitmq.Config{}) // no Consume: the test reads the timeouts queue itself
	raw := rawChannel(t)
	no := newOrderNo()
	start := time.Now()
	due := start.Add(1300 * time.Millisecond) // between the 1s and 5s buckets
	if err := b.ScheduleClose(t.Context(), no, due); err != nil {
		t.Fatalf("ScheduleClose: %v", err)
	}
	get := func() (amqp.Delivery, time.Time) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			d, ok, err := raw.Get(b.OrderTimeoutsQueue(), true)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if ok {
				return d, time.Now()
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("nothing arrived on the timeouts queue")
		return amqp.Delivery{}, time.Time{}
	}
	d, at := get()
	if string(d.Body) != string(no) || d.MessageId == "" || d.DeliveryMode != amqp.Persistent {
		t.Fatalf("arrived body %q id %q mode %d, want %s persistent with a batch id", d.Body, d.MessageId, d.DeliveryMode, no)
	}
	if got, ok := d.Headers[rabbitmq.DueHeader].(int64); !ok || got != due.UnixMilli() {
		t.Fatalf("due header %v, want %d", d.Headers[rabbitmq.DueHeader], due.UnixMilli())
	}
	if at.After(due) {
		t.Fatalf("first arrival %s after scheduling, after the due time (1.3s)", at.Sub(start))
	}
	if at.Sub(start) < time.Second {
		t.Fatalf("first arrival after %s, before the 1s bucket's TTL", at.Sub(start))
	}
	first := at.Sub(start)
	hops := 1
	for ; time.Now().Before(due); hops++ {
		if err := b.ScheduleClose(t.Context(), no, due); err != nil {
			t.Fatalf("ScheduleClose of the remainder: %v", err)
		}
		d, at = get()
		if string(d.Body) != string(no) {
			t.Fatalf("arrived %q, want %s", d.Body, no)
		}
	}
	if late := at.Sub(due); late > time.Second {
		t.Fatalf("arrived %s after its due time", late)
	}
	t.Logf("due in 1.3s: first arrival at %s, due after %d hops, final arrival %s after due", first, hops, at.Sub(due))
}

// The consumer parks an early arrival again, so the handler sees the order at its due time,
// once.
func TestConsumerHoldsEarlyArrivalUntilDue(t *testing.T) {
	b := dial(t, rabbitmq.Config{})
	s := newSink()
	b.Consume(s.handle)
	no := newOrderNo()
	due := time.Now().Add(1300 * time.Millisecond)
	if err := b.ScheduleClose(t.Context(), no, due); err != nil {
		t.Fatalf("ScheduleClose: %v", err)
	}
	a := s.next(t, 10*time.Second)
	if a.no != no || a.at.Before(due) || a.at.After(due.Add(time.Second)) {
		t.Fatalf("handler saw %s at due%+v, want %s at due (up to 1s late)", a.no, a.at.Sub(due), no)
	}
	select {
	case a := <-s.ch:
		t.Fatalf("handled again: %+v", a)
	case <-time.After(500 * time.Millisecond):
	}
}

func TestPublishConfirmedAndRoutedToDeliveredQueue(t *testing.T) {
	b := dial(t, rabbitmq.Config{})
	raw := rawChannel(t)
	no := newOrderNo()
	payload := []byte(`{"event_id":"e-1","order_no":"` + string(no) + `"}`)
	m := domain.OutboxMessage{ID: 42, Topic: domain.TopicDelivered, Key: string(no), Payload: payload, At: time.Now()}
	if err := b.Publish(t.Context(), m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	// The confirm means the message is in the queue already: no polling.
	d, ok, err := raw.Get(b.DeliveredQueue(), true)
	if err != nil || !ok {
		t.Fatalf("Get from %s: ok=%v err=%v", b.DeliveredQueue(), ok, err)
	}
	if string(d.Body) != string(payload) || d.MessageId != "42" || d.ContentType != "application/json" ||
		d.DeliveryMode != amqp.Persistent || d.RoutingKey != domain.TopicDelivered {
		t.Fatalf("got body %q id %q type %q mode %d key %q", d.Body, d.MessageId, d.ContentType, d.DeliveryMode, d.RoutingKey)
	}
	// Without an outbox id the key identifies the message.
	m.ID = 0
	if err := b.Publish(t.Context(), m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if d, ok, err := raw.Get(b.DeliveredQueue(), true); err != nil || !ok || d.MessageId != string(no) {
		t.Fatalf("Get: ok=%v err=%v id %q, want %s", ok, err, d.MessageId, no)
	}
}

// A stock event is routed by its own type (product.low_stock, …) to the stock queue, not to
// the delivered queue; a product.stock payload that names no stock event is refused before it
// reaches the broker.
func TestPublishStockEventRoutedByType(t *testing.T) {
	b := dial(t, rabbitmq.Config{})
	raw := rawChannel(t)
	for i, typ := range []string{domain.EventLowStock, domain.EventSoldOut, domain.EventRestocked} {
		payload := []byte(`{"event_id":"` + typ + `:7:1","type":"` + typ + `","product_id":7}`)
		m := domain.OutboxMessage{ID: int64(i + 1), Topic: domain.TopicProductStock, Key: "7", Payload: payload, At: time.Now()}
		if err := b.Publish(t.Context(), m); err != nil {
			t.Fatalf("Publish %s: %v", typ, err)
		}
		d, ok, err := raw.Get(b.StockQueue(), true)
		if err != nil || !ok {
			t.Fatalf("Get from %s: ok=%v err=%v", b.StockQueue(), ok, err)
		}
		if string(d.Body) != string(payload) || d.RoutingKey != typ || d.Type != typ || d.CorrelationId != "7" {
			t.Fatalf("got body %q key %q type %q correlation %q, want %s", d.Body, d.RoutingKey, d.Type, d.CorrelationId, typ)
		}
	}
	if q, err := raw.QueueDeclarePassive(b.DeliveredQueue(), true, false, false, false,
		amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}); err != nil || q.Messages != 0 {
		t.Fatalf("delivered queue holds %d messages (err %v), want none", q.Messages, err)
	}
	for _, payload := range []string{`{"type":"order.delivered"}`, `{}`, `not json`} {
		err := b.Publish(t.Context(), domain.OutboxMessage{ID: 9, Topic: domain.TopicProductStock, Key: "7", Payload: []byte(payload)})
		if err == nil || !strings.Contains(err.Error(), "stock event") {
			t.Fatalf("Publish of stock payload %s: %v, want a refusal naming the stock event", payload, err)
		}
	}
}

func TestPublishUnroutableFails(t *testing.T) {
	b := dial(t, rabbitmq.Config{Channels: 2})
	raw := rawChannel(t)
	// More unroutable publishes than channels, then routable ones: a return must fail exactly
	// its own message, never a later one on the same channel.
	for i := range 6 {
		err := b.Publish(t.Context(), domain.OutboxMessage{ID: int64(i + 1), Topic: "nobody.listens", Key: "k", Payload: []byte(`{}`)})
		if !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, rabbitmq.ErrUnroutable) {
			t.Fatalf("Publish to an unbound topic: %v, want ErrUnroutable wrapping ErrUnavailable", err)
		}
	}
	for i := range 6 {
		if err := b.Publish(t.Context(), domain.OutboxMessage{ID: int64(i + 1), Topic: domain.TopicDelivered, Payload: []byte(`{}`)}); err != nil {
			t.Fatalf("Publish after returns: %v", err)
		}
	}
	q, err := raw.QueueDeclarePassive(b.DeliveredQueue(), true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum})
	if err != nil || q.Messages != 6 {
		t.Fatalf("delivered queue holds %d messages (err %v), want 6", q.Messages, err)
	}
}

// A channel the broker closes (publishing to an exchange that has been deleted) fails that
// publish and is replaced by a fresh one for the next.
func TestPublishOnBrokenChannelFailsAndPoolRecovers(t *testing.T) {
	b := dial(t, rabbitmq.Config{Channels: 1})
	raw := rawChannel(t)
	if err := raw.ExchangeDelete(b.Exchanges()[1], false, false); err != nil {
		t.Fatalf("delete events exchange: %v", err)
	}
	err := b.Publish(t.Context(), domain.OutboxMessage{ID: 1, Topic: domain.TopicDelivered, Payload: []byte(`{}`)})
	if !errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Fatalf("Publish to a deleted exchange: %v, want ErrUnavailable with NOT_FOUND", err)
	}
	if err := b.ScheduleClose(t.Context(), newOrderNo(), time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("ScheduleClose on the replaced channel: %v", err)
	}
}

func TestHandlerErrorRedeliveredAfterRetryDelay(t *testing.T) {
	const retry = 200 * time.Millisecond
	b := dial(t, rabbitmq.Config{RetryDelay: retry})
	s := newSink()
	b.Consume(s.handle)
	no := newOrderNo()
	s.failFirst(no, 2)
	if err := b.ScheduleClose(t.Context(), no, time.Now()); err != nil {
		t.Fatalf("ScheduleClose: %v", err)
	}
	var ats []time.Time
	for range 3 {
		a := s.next(t, 10*time.Second)
		if a.no != no {
			t.Fatalf("delivered %s, want %s", a.no, no)
		}
		ats = append(ats, a.at)
	}
	for i := 1; i < len(ats); i++ {
		if gap := ats[i].Sub(ats[i-1]); gap < retry || gap > retry+3*time.Second {
			t.Fatalf("redelivery %d came %s after the failure, want RetryDelay (%s)", i, gap, retry)
		}
	}
	select {
	case a := <-s.ch:
		t.Fatalf("delivered again after success: %+v", a)
	case <-time.After(600 * time.Millisecond):
	}
}

func TestMalformedMessageDropped(t *testing.T) {
	b := dial(t, rabbitmq.Config{})
	raw := rawChannel(t)
	s := newSink()
	b.Consume(s.handle)
	for _, body := range []string{"", "not an order number!", string(make([]byte, 100))} {
		if err := raw.PublishWithContext(t.Context(), b.Exchanges()[0], "close", false, false, amqp.Publishing{Body: []byte(body)}); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	no := newOrderNo()
	if err := b.ScheduleClose(t.Context(), no, time.Now()); err != nil {
		t.Fatalf("ScheduleClose: %v", err)
	}
	if a := s.next(t, 10*time.Second); a.no != no {
		t.Fatalf("handler got %q, want only %s", a.no, no)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Unacked messages would be back in the queue once the consumer's channel is closed.
	q, err := raw.QueueDeclarePassive(b.OrderTimeoutsQueue(), true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum})
	if err != nil || q.Messages != 0 {
		t.Fatalf("timeouts queue holds %d messages (err %v), want 0: malformed ones are acked", q.Messages, err)
	}
}

func TestCloseWaitsForRunningHandlers(t *testing.T) {
	b := dial(t, rabbitmq.Config{})
	started, release := make(chan domain.OrderNo, 1), make(chan struct{})
	var finished sync.WaitGroup
	finished.Add(1)
	b.Consume(func(_ context.Context, no domain.OrderNo) error {
		started <- no
		<-release
		finished.Done()
		return nil
	})
	if err := b.ScheduleClose(t.Context(), newOrderNo(), time.Now()); err != nil {
		t.Fatalf("ScheduleClose: %v", err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler not called")
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a handler was running", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the handler finished")
	}
	finished.Wait()
	for name, err := range map[string]error{
		"ScheduleClose": b.ScheduleClose(t.Context(), newOrderNo(), time.Now()),
		"Publish":       b.Publish(t.Context(), domain.OutboxMessage{Topic: domain.TopicDelivered}),
		"Ping":          b.Ping(t.Context()),
	} {
		if !errors.Is(err, domain.ErrUnavailable) {
			t.Errorf("%s after Close: %v, want ErrUnavailable", name, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestTwoHundredConcurrentMessagesAllDelivered(t *testing.T) {
	const n = 200
	b := dial(t, rabbitmq.Config{})
	s := newSink()
	b.Consume(s.handle)
	want := map[domain.OrderNo]bool{}
	nos := make([]domain.OrderNo, n)
	for i := range nos {
		nos[i] = newOrderNo()
		want[nos[i]] = true
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i, no := range nos {
		wg.Go(func() {
			// Spread over 0..1.5s: immediate, bucketed and re-parked messages mixed.
			errs <- b.ScheduleClose(context.Background(), no, start.Add(time.Duration(i)*7500*time.Microsecond))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("ScheduleClose: %v", err)
		}
	}
	t.Logf("200 concurrent ScheduleClose took %s", time.Since(start))
	dups := 0
	for len(want) > 0 {
		a := s.next(t, 15*time.Second)
		if !want[a.no] {
			dups++
		}
		delete(want, a.no)
	}
	t.Logf("all 200 delivered after %s (%d duplicates)", time.Since(start), dups)
}

// QueueDepths counts what waits in each queue: a close scheduled far ahead in its delay bucket,
// a published event in the delivered queue, nothing elsewhere.
func TestQueueDepths(t *testing.T) {
	b := dial(t, rabbitmq.Config{})
	depths, err := b.QueueDepths(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(depths) != len(b.Queues()) {
		t.Fatalf("depths of %d queues, want %d: %v", len(depths), len(b.Queues()), depths)
	}
	for q, n := range depths {
		if n != 0 {
			t.Fatalf("fresh topology: %s holds %d", q, n)
		}
	}
	if err := b.ScheduleClose(t.Context(), newOrderNo(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	m := domain.OutboxMessage{ID: 7, Topic: domain.TopicDelivered, Key: "k", Payload: []byte(`{}`), At: time.Now()}
	if err := b.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	depths, err = b.QueueDepths(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"delivered": 1, "delay.3600000": 1}
	for q, n := range depths {
		if n != want[q] {
			t.Errorf("%s holds %d, want %d (all: %v)", q, n, want[q], depths)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.QueueDepths(t.Context()); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("QueueDepths on a closed broker: %v, want ErrUnavailable", err)
	}
}

// DeleteTopology removes every queue and exchange of a prefix, with the closes scheduled in
// them, and deleting again (nothing left) is no error.
func TestDeleteTopologyRemovesEveryQueueAndItsMessages(t *testing.T) {
	prefix := randomPrefix()
	delays := []time.Duration{40 * time.Second}
	b := dial(t, rabbitmq.Config{Prefix: prefix, Delays: delays})
	ctx := t.Context()
	if err := b.ScheduleClose(ctx, newOrderNo(), time.Now().Add(40*time.Second)); err != nil {
		t.Fatal(err)
	}
	queues, exchanges := b.Queues(), b.Exchanges()
	if err := rabbitmq.DeleteTopology(ctx, porttest.AMQPURL, prefix, delays); err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if _, err := rawChannel(t).QueueDeclarePassive(q, true, false, false, false, nil); err == nil {
			t.Fatalf("queue %s is still there", q)
		}
	}
	for _, ex := range exchanges {
		if err := rawChannel(t).ExchangeDeclarePassive(ex, "direct", true, false, false, false, nil); err == nil {
			t.Fatalf("exchange %s is still there", ex)
		}
	}
	if err := rabbitmq.DeleteTopology(ctx, porttest.AMQPURL, prefix, delays); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
}
