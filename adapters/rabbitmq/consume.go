package rabbitmq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/domain"
)

// Consume starts the timeout consumer: every order number due on the order-timeouts queue is
// handed to handler (several at once, also those of one message), and it returns at once. The
// consumer survives reconnections; Close stops it. A message is acked once every order in it
// was handled: a nil result is done, an error reschedules that order Config.RetryDelay ahead.
// A later call only replaces the handler; a nil handler is ignored.
func (b *Broker) Consume(handler func(context.Context, domain.OrderNo) error) {
	if handler == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handler = handler
	if b.consuming || b.closing {
		return
	}
	b.consuming = true
	b.wg.Add(1)
	go b.consumeLoop()
}

func (b *Broker) currentHandler() func(context.Context, domain.OrderNo) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.handler
}

// consumeLoop runs a consumer on every connection the supervisor establishes, until Close.
func (b *Broker) consumeLoop() {
	defer b.wg.Done()
	backoff := minBackoff
	for {
		conn, err := b.waitConn(b.life)
		if err != nil {
			return
		}
		started := time.Now()
		if err := b.consumeOn(conn); err != nil {
			b.log.Warn("timeout consumer stopped", "err", err)
		}
		if b.life.Err() != nil {
			return
		}
		// The connection may be dead without the supervisor having noticed yet, or the queue
		// may be gone: pause before trying again rather than spin.
		if time.Since(started) > maxBackoff {
			backoff = minBackoff
		}
		select {
		case <-b.life.Done():
			return
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// consumeOn consumes on one connection until its channel closes or the broker is closed. On
// Close it cancels the consumer and waits for the running handlers.
func (b *Broker) consumeOn(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer func() { _ = ch.Close() }()
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return fmt.Errorf("set prefetch: %w", err)
	}
	tag := fmt.Sprintf("%s-consumer-%08x", b.connName, rand.Uint32())
	deliveries, err := ch.Consume(b.topo.orderTimeouts, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", b.topo.orderTimeouts, err)
	}
	var running sync.WaitGroup
	for range workers {
		running.Go(func() {
			for d := range deliveries {
				b.handle(d)
			}
		})
	}
	stopped := make(chan struct{})
	go func() {
		running.Wait()
		close(stopped)
	}()
	select {
	case <-stopped: // the channel or the connection closed: deliveries is closed
		return fmt.Errorf("consumer channel closed: %w", errDisconnected)
	case <-b.life.Done():
		// No new deliveries; the ones already sent drain through handle (which requeues them
		// now that the broker is closing) and deliveries closes.
		if err := ch.Cancel(tag, false); err != nil {
			b.log.Warn("cancel timeout consumer", "err", err)
		}
		<-stopped
		return nil
	}
}

// handle processes one delivery; see Consume. A message lists one or more order numbers.
func (b *Broker) handle(d amqp.Delivery) {
	nos, bad := decodeOrders(d.Body)
	if len(nos) == 0 {
		// Dropped: the sweeper closes whatever order it might have meant.
		b.log.Error("malformed timeout message dropped", "body", truncate(d.Body), "message_id", d.MessageId)
		b.ack(d)
		return
	}
	if len(bad) > 0 {
		b.log.Error("malformed lines of a timeout message skipped",
			"count", len(bad), "first", bad[0], "message_id", d.MessageId)
	}
	if b.life.Err() != nil { // closing: leave it to the next consumer
		b.nack(d)
		return
	}
	if due, ok := dueOf(d); ok && time.Now().Before(due) {
		// A shorter bucket delivered it early: park the whole message again for the rest of
		// the delay.
		if err := b.repark(d, nos, due); err != nil {
			b.log.Warn("timeout message not re-parked; requeued", "message_id", d.MessageId, "orders", len(nos), "err", err)
			b.pauseThenNack(d)
			return
		}
		b.ack(d)
		return
	}
	failed, complete := b.runHandlers(nos)
	if !complete { // closing: the orders not handled (and, harmlessly, the others) come back
		b.nack(d)
		return
	}
	if len(failed) == 0 {
		b.ack(d)
		return
	}
	// Rescheduled each on its own, all at once: they share the next batch.
	retryAt := time.Now().Add(b.cfg.RetryDelay)
	errs := make([]error, len(failed))
	var wg sync.WaitGroup
	for i, no := range failed {
		wg.Go(func() { errs[i] = b.republish(no, retryAt) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.log.Warn("timeout not rescheduled; message requeued", "order_no", failed[i], "message_id", d.MessageId, "err", err)
			b.pauseThenNack(d)
			return
		}
	}
	b.ack(d)
}

// runHandlers calls the handler for every order of a message, several at once within the
// broker's handler slots, and returns the orders whose handler failed. complete is false when
// Close stopped it before every order was started (the ones started have finished).
func (b *Broker) runHandlers(nos []domain.OrderNo) (failed []domain.OrderNo, complete bool) {
	handler := b.currentHandler()
	errs := make([]error, len(nos))
	var wg sync.WaitGroup
	complete = true
	for i, no := range nos {
		if b.life.Err() != nil {
			complete = false
			break
		}
		select {
		case b.handlerSlots <- struct{}{}:
		case <-b.life.Done():
			complete = false
		}
		if !complete {
			break
		}
		wg.Go(func() {
			defer func() { <-b.handlerSlots }()
			ctx, cancel := context.WithTimeout(context.Background(), handlerTimeout)
			defer cancel()
			errs[i] = handler(ctx, no)
		})
	}
	wg.Wait()
	if !complete {
		return nil, false
	}
	for i, err := range errs {
		if err != nil {
			b.log.Warn("timeout handler failed; rescheduled", "order_no", nos[i], "retry_in", b.cfg.RetryDelay, "err", err)
			failed = append(failed, nos[i])
		}
	}
	return failed, true
}

// repark publishes the orders of an early message again, with the same id and due time, for the
// rest of the delay. The new message is confirmed before the old one is acked.
func (b *Broker) repark(d amqp.Delivery, nos []domain.OrderNo, due time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), republishTimeout)
	defer cancel()
	id := d.MessageId
	if id == "" {
		id = newBatchID()
	}
	return b.publishTimeouts(ctx, nos, due, id)
}

// republish schedules no again (through the batches of ScheduleClose). The new message is
// confirmed before the old one is acked, so a crash in between duplicates the close (harmless)
// but never loses it.
func (b *Broker) republish(no domain.OrderNo, due time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), republishTimeout)
	defer cancel()
	return b.ScheduleClose(ctx, no, due)
}

// pauseThenNack requeues d after a short pause (cut short by Close), so that a broker that
// cannot take the reschedule is not hammered with the same message.
func (b *Broker) pauseThenNack(d amqp.Delivery) {
	select {
	case <-b.life.Done():
	case <-time.After(nackPause):
	}
	b.nack(d)
}

func (b *Broker) ack(d amqp.Delivery) {
	if err := d.Ack(false); err != nil {
		// The channel is gone; the broker redelivers the message to the next consumer.
		b.log.Debug("ack failed", "err", err)
	}
}

func (b *Broker) nack(d amqp.Delivery) {
	if err := d.Nack(false, true); err != nil {
		b.log.Debug("nack failed", "err", err)
	}
}

// dueOf reads the due time a message was scheduled for.
func dueOf(d amqp.Delivery) (time.Time, bool) {
	var ms int64
	switch v := d.Headers[dueHeader].(type) {
	case int64:
		ms = v
	case int32:
		ms = int64(v)
	case int:
		ms = int64(v)
	default:
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

func truncate(b []byte) string {
	const limit = 64
	if len(b) > limit {
		return string(b[:limit]) + "…"
	}
	return string(b)
}
