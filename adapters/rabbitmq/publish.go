package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/domain"
)

// pubChannel is one publisher channel of the pool. Whoever took it from Broker.pool owns it
// alone, so at most one publish is in flight on it: that is what lets a basic.return be matched
// to its message (see the package documentation).
type pubChannel struct {
	conn    *amqp.Connection // the connection ch was opened on
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
}

// ready makes sure the channel is open on conn, reopening it after a reconnect or after the
// broker closed it (a channel-level error such as publishing to a missing exchange).
func (p *pubChannel) ready(conn *amqp.Connection) error {
	if p.ch != nil && p.conn == conn && !p.ch.IsClosed() {
		return nil
	}
	p.discard()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return fmt.Errorf("enable publisher confirms: %w", err)
	}
	p.conn, p.ch = conn, ch
	// Buffered: amqp091-go's reader goroutine must be able to hand over a return without
	// waiting for us, before it goes on to the ack that follows it.
	p.returns = ch.NotifyReturn(make(chan amqp.Return, 4))
	p.closes = ch.NotifyClose(make(chan *amqp.Error, 1))
	return nil
}

// discard drops the channel, so that nothing left over from an unfinished publish (a late ack
// or return) can be taken for the next message's.
func (p *pubChannel) discard() {
	if p.ch == nil {
		return
	}
	ch := p.ch
	p.conn, p.ch, p.returns, p.closes = nil, nil, nil, nil
	// Close waits for the broker's close-ok; on a sick connection that may take a while.
	go func() { _ = ch.Close() }()
}

// closeReason returns why the channel was closed by the broker, if it says.
func (p *pubChannel) closeReason() error {
	select {
	case e, ok := <-p.closes:
		if ok && e != nil {
			return e
		}
	default:
	}
	return amqp.ErrClosed
}

// publish sends msg with mandatory=true and waits for the broker's confirm. Every failure wraps
// domain.ErrUnavailable (an unroutable message also wraps ErrUnroutable).
func (b *Broker) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, publishTimeout)
		defer cancel()
	}
	conn, err := b.current()
	if err != nil {
		return unavailable("publish", err)
	}
	var p *pubChannel
	select {
	case p = <-b.pool:
	case <-ctx.Done():
		return unavailable("publish: wait for a channel", ctx.Err())
	}
	defer func() { b.pool <- p }()

	if err := p.ready(conn); err != nil {
		p.discard()
		return unavailable("publish", err)
	}
	// Nothing can be waiting here (a channel is discarded whenever a publish ends early), but a
	// stale return must never fail this message.
	for drained := false; !drained; {
		select {
		case <-p.returns:
		default:
			drained = true
		}
	}
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil {
		p.discard()
		return unavailable("publish", err)
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		p.discard()
		return unavailable("publish: wait for confirm", err)
	}
	if !acked {
		if p.ch.IsClosed() { // amqp091-go nacks every pending confirm when the channel closes
			err := p.closeReason()
			p.discard()
			return unavailable("publish: channel closed before confirm", err)
		}
		return unavailable("publish", errors.New("broker nacked the message"))
	}
	select {
	case r, ok := <-p.returns:
		if ok {
			return unavailable("publish",
				fmt.Errorf("%w: exchange %q routing key %q: %d %s", ErrUnroutable, r.Exchange, r.RoutingKey, r.ReplyCode, r.ReplyText))
		}
		// Closed listener: the channel closed after the ack; the message was confirmed.
		p.discard()
	default:
	}
	return nil
}

// ScheduleClose schedules the close of no at due and returns once the broker has confirmed the
// message that carries it, or, with Config.Unconfirmed, once the order is queued for its batch
// (as long as fewer than Config.Unconfirmed such orders wait for their confirm). The consumer
// hands no to the handler at or soon after due, never before (a message that arrives early is
// re-published for the rest of the delay). Delivery is at least once.
//
// Calls are committed in groups: the order joins the current batch, which is flushed when it
// holds maxBatch orders or defaultLinger after its first order, as one message per group of
// close due times (see the package documentation). The call therefore takes at least the linger
// plus one confirm, and every caller of a message gets that message's result.
//
// Errors wrap domain.ErrUnavailable: not connected, broker closed, nack, return, or no confirm
// before ctx ends (10s without a deadline). The message may still have been stored then (a
// caller whose ctx ends stops waiting, but its order may already be on its way); a retry can
// deliver it twice, which the consumer tolerates.
func (b *Broker) ScheduleClose(ctx context.Context, no domain.OrderNo, due time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("schedule close of %s: %w", no, unavailable("publish", err))
	}
	// Fail fast during an outage rather than after the linger.
	if _, err := b.current(); err != nil {
		return fmt.Errorf("schedule close of %s: %w", no, unavailable("publish", err))
	}
	p := &pendingClose{no: no, due: due, ctx: ctx, done: make(chan error, 1)}
	if b.reserveAnswer() {
		p.answered = true
		p.ctx, p.release = context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	}
	if err := b.enqueue(p); err != nil {
		if p.answered {
			b.releaseAnswer(p)
		}
		return fmt.Errorf("schedule close of %s: %w", no, unavailable("publish", err))
	}
	if p.answered {
		return nil
	}
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("schedule close of %s: %w", no, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("schedule close of %s: %w", no, unavailable("publish: wait for the batch", ctx.Err()))
	}
}

// reserveAnswer takes one of the Config.Unconfirmed places of the orders answered before their
// confirm; false when none is free (or the bound is 0): the caller waits for its confirm.
func (b *Broker) reserveAnswer() bool {
	limit := int64(b.cfg.Unconfirmed)
	for {
		n := b.unconfirmed.Load()
		if n >= limit {
			return false
		}
		if b.unconfirmed.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// releaseAnswer gives back the place reserveAnswer took for p and ends p's own context.
func (b *Broker) releaseAnswer(p *pendingClose) {
	p.release()
	b.unconfirmed.Add(-1)
}

// Publish sends the outbox message to the events exchange (persistent, application/json,
// MessageId the outbox id, or m.Key when the id is zero) and waits for the broker's confirm.
// The routing key and the Type are the topic, except for a stock event (TopicProductStock):
// there they are the event's own type, product.low_stock, product.sold_out or
// product.restocked, so a consumer can bind to one of them (the stock queue binds product.*).
// It is mandatory: a routing key no queue is bound to fails with ErrUnroutable instead of
// vanishing (the delivered and stock queues are declared with the topology for that reason).
//
// Errors wrap domain.ErrUnavailable (and ErrUnroutable for a return): the relay tries the
// message again later, so a notifier may see it twice; the payload's event id identifies it.
func (b *Broker) Publish(ctx context.Context, m domain.OutboxMessage) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish %s %s: %w", m.Topic, m.Key, err)
	}
	id := m.Key
	if m.ID != 0 {
		id = strconv.FormatInt(m.ID, 10)
	}
	at := m.At
	if at.IsZero() {
		at = time.Now()
	}
	key, err := eventRoutingKey(m)
	if err != nil {
		return fmt.Errorf("publish %s %s: %w", m.Topic, m.Key, err)
	}
	err = b.publish(ctx, b.topo.events, key, amqp.Publishing{
		DeliveryMode:  amqp.Persistent,
		ContentType:   "application/json",
		MessageId:     id,
		CorrelationId: m.Key,
		Type:          key,
		Timestamp:     at,
		Body:          m.Payload,
	})
	if err != nil {
		return fmt.Errorf("publish %s %s: %w", m.Topic, m.Key, err)
	}
	return nil
}

// eventRoutingKey is the routing key of an outbox event: its topic, or for a stock event the
// event's type read from the payload. A stock payload without a known stock type is refused
// (it would otherwise go nowhere, or to a queue that does not expect it).
func eventRoutingKey(m domain.OutboxMessage) (string, error) {
	if m.Topic != domain.TopicProductStock {
		return m.Topic, nil
	}
	var e struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(m.Payload, &e); err != nil {
		return "", fmt.Errorf("stock event payload: %w", err)
	}
	switch e.Type {
	case domain.EventLowStock, domain.EventSoldOut, domain.EventRestocked:
		return e.Type, nil
	}
	return "", fmt.Errorf("stock event payload: type %q is not a stock event", e.Type)
}
