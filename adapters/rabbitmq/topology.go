package rabbitmq

import (
	"context"
	"fmt"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/domain"
)

// defaultDelays is the delay ladder every broker declares, on top of Config.Delays.
var defaultDelays = []time.Duration{
	100 * time.Millisecond,
	time.Second,
	5 * time.Second,
	30 * time.Second,
	time.Minute,
	5 * time.Minute,
	15 * time.Minute,
	time.Hour,
}

// Routing keys and header names.
const (
	closeRoutingKey = "close"
	dueHeader       = "x-cardshop-due" // due time of a scheduled close, unix milliseconds
	// stockBinding binds the stock queue to every stock event's routing key (product.low_stock,
	// product.sold_out, product.restocked; see eventRoutingKey).
	stockBinding = "product.*"
)

// topology names every exchange and queue of one prefix.
type topology struct {
	prefix        string
	timeouts      string // direct exchange the delay queues dead-letter into
	events        string // topic exchange of outbox events
	orderTimeouts string // quorum queue read by Consume
	delivered     string // quorum queue of the notifiers, bound to order.delivered
	stock         string // quorum queue of the stock events, bound to product.*
	buckets       []time.Duration
}

func newTopology(prefix string, delays []time.Duration) topology {
	return topology{
		prefix:        prefix,
		timeouts:      prefix + ".timeouts",
		events:        prefix + ".events",
		orderTimeouts: prefix + ".order-timeouts",
		delivered:     prefix + ".delivered",
		stock:         prefix + ".stock",
		buckets:       ladder(delays),
	}
}

// delayQueue names the queue of bucket d.
func (t topology) delayQueue(d time.Duration) string {
	return fmt.Sprintf("%s.delay.%d", t.prefix, d.Milliseconds())
}

// queues lists every queue of the topology.
func (t topology) queues() []string {
	qs := []string{t.orderTimeouts, t.delivered, t.stock}
	for _, d := range t.buckets {
		qs = append(qs, t.delayQueue(d))
	}
	return qs
}

// exchanges lists every exchange of the topology.
func (t topology) exchanges() []string { return []string{t.timeouts, t.events} }

// ladder merges the default ladder with the configured delays: whole milliseconds, at least
// 1ms, sorted, without duplicates.
func ladder(extra []time.Duration) []time.Duration {
	var out []time.Duration
	for _, d := range slices.Concat(defaultDelays, extra) {
		d = d.Round(time.Millisecond)
		if d >= time.Millisecond {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// bucketTolerance is how much later than asked a message may be delivered so that a bucket
// slightly longer than the remaining delay is still chosen: 1% of the bucket, at least 20ms.
// Without it, an order timeout of 15 min scheduled a few milliseconds after the order was
// written (remaining 14m59.99s) would take the 5-min bucket and need several hops.
func bucketTolerance(b time.Duration) time.Duration { return max(b/100, 20*time.Millisecond) }

// bucketFor picks the delay bucket for a message due in delay: the largest bucket b with
// b <= delay + bucketTolerance(b), or the smallest bucket when there is none. A bucket shorter
// than delay delivers early and the consumer re-publishes the rest; a bucket longer than delay
// (only ever by the tolerance, or for delays below the smallest bucket) delivers late. buckets
// must be sorted ascending and not empty; delay <= 0 is not asked for (it goes straight to the
// timeouts exchange).
func bucketFor(buckets []time.Duration, delay time.Duration) time.Duration {
	chosen := buckets[0]
	for _, b := range buckets {
		if b <= delay+bucketTolerance(b) {
			chosen = b
		}
	}
	return chosen
}

// declare creates (or checks) every exchange, queue and binding. Declaring is idempotent; a
// queue that exists with other arguments fails with PRECONDITION_FAILED, which surfaces as the
// error of Dial (a configuration mistake, not an outage).
func (t topology) declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer func() { _ = ch.Close() }()

	quorum := func(extra amqp.Table) amqp.Table {
		args := amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}
		for k, v := range extra {
			args[k] = v
		}
		return args
	}
	for _, ex := range []struct{ name, kind string }{
		{t.timeouts, amqp.ExchangeDirect},
		{t.events, amqp.ExchangeTopic},
	} {
		if err := ch.ExchangeDeclare(ex.name, ex.kind, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare exchange %s: %w", ex.name, err)
		}
	}
	for _, q := range []struct{ name, exchange, key string }{
		{t.orderTimeouts, t.timeouts, closeRoutingKey},
		{t.delivered, t.events, domain.TopicDelivered},
		{t.stock, t.events, stockBinding},
	} {
		if _, err := ch.QueueDeclare(q.name, true, false, false, false, quorum(nil)); err != nil {
			return fmt.Errorf("declare queue %s: %w", q.name, err)
		}
		if err := ch.QueueBind(q.name, q.key, q.exchange, false, nil); err != nil {
			return fmt.Errorf("bind queue %s: %w", q.name, err)
		}
	}
	for _, d := range t.buckets {
		name := t.delayQueue(d)
		args := quorum(amqp.Table{
			"x-message-ttl":             d.Milliseconds(),
			"x-dead-letter-exchange":    t.timeouts,
			"x-dead-letter-routing-key": closeRoutingKey,
			"x-dead-letter-strategy":    "at-least-once",
			"x-overflow":                "reject-publish",
		})
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			return fmt.Errorf("declare queue %s: %w", name, err)
		}
	}
	return nil
}

// DeleteTopology deletes every queue and exchange a broker of prefix with the given extra
// delays (Config.Delays) declares, with the messages in them; one that does not exist is no
// error. It is for a prefix nothing uses any more: a test's, or a load run's before it starts
// (a killed run leaves its scheduled closes behind, and they would reach the next run's
// instances) and after it ends.
func DeleteTopology(ctx context.Context, url, prefix string, delays []time.Duration) error {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return fmt.Errorf("delete topology %s: %w", prefix, err)
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("delete topology %s: %w", prefix, err)
	}
	t := newTopology(prefix, delays)
	for _, q := range t.queues() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			return fmt.Errorf("delete queue %s: %w", q, err)
		}
	}
	for _, ex := range t.exchanges() {
		if err := ch.ExchangeDelete(ex, false, false); err != nil {
			return fmt.Errorf("delete exchange %s: %w", ex, err)
		}
	}
	return nil
}
