// Package rabbitmq is the RabbitMQ adapter (amqp091-go): the order-timeout delay queue
// (domain.DelayQueue and its consumer) and the event publisher of the outbox relay
// (domain.EventPublisher). It imports the domain package, amqp091-go and the standard library,
// nothing else of cardshop.
//
// # Delay queue without the delayed-message plugin
//
// The broker has no delayed-message plugin, so delays are built from per-queue TTLs and
// dead-lettering. For every delay bucket d there is a durable quorum queue
// <prefix>.delay.<d in ms> with x-message-ttl d, x-dead-letter-exchange <prefix>.timeouts,
// x-dead-letter-routing-key close, x-dead-letter-strategy at-least-once and
// x-overflow reject-publish (at-least-once dead-lettering requires it). Nobody consumes a delay
// queue: a message sits there for exactly d and is then moved, by the broker and with its own
// confirms between the two queues, to the durable direct exchange <prefix>.timeouts, which routes
// it to the durable quorum queue <prefix>.order-timeouts that Consume reads. Because every
// message of one queue has the same TTL, the oldest message is always the next to expire, which
// is why the TTL is per queue and not per message (a quorum queue only expires messages at its
// head).
//
// A timeout message goes to the largest bucket that does not exceed the remaining
// delay (with a small tolerance, see bucketFor, so that "15 min minus the few milliseconds since
// the order was written" still picks the 15-min bucket); below the smallest bucket it uses the
// smallest, and a due time already past goes straight to <prefix>.timeouts. The default ladder
// is 100ms, 1s, 5s, 30s, 1m, 5m, 15m, 1h, plus every configured delay and the retry delay
// (configure the order timeout, so that an order's close is one hop). A message carries its due time
// (header x-cardshop-due, unix ms), so a message that a shorter bucket delivers early is
// re-published whole by the consumer for the remaining time instead of being handed to the
// handler: the handler never sees an order before its due time, as the domain.DelayQueue
// contract says, and the order converges on its due time in a few hops (the use case would
// reschedule too, but the port promises "at or soon after due" to every user).
//
// # Group commit of ScheduleClose
//
// A confirmed, persistent message in a quorum queue costs the broker far more CPU than its few
// bytes (a Raft log entry, a confirm, then a confirmed dead-lettering into a second quorum
// queue), so one message per order would make the broker compete with the database for CPU at
// flash-sale order rates (the numbers are in docs/BENCHMARKS.md). So ScheduleClose calls are
// committed in groups: a call queues its (order, due) and waits; the batch is flushed when it
// holds 256 orders or 5ms after its first order, whichever comes first, on its own goroutine
// (several flushes may be in flight, each on a channel of the pool). A flush leaves out the
// orders whose callers have already given up, sorts the rest by due time and publishes one
// message per group of orders due close together: the orders already due (straight to the
// timeouts exchange), then runs of orders due within the bucket tolerance of the run's first
// (1% of the bucket, at least 20ms: the lateness the bucket choice already accepts). In
// practice every order of a batch has the same order timeout, so a flush is one message. The
// message is persistent, mandatory and confirmed like any other; its body lists the order
// numbers, one a line; its due header is the LATEST due time of its orders (an order is
// delivered at most the group's spread late, never early); its MessageId is a random batch id
// (close-<16 hex>, kept when the consumer re-parks it). Every caller of a message gets that
// message's result: nil once it is confirmed, or an error wrapping domain.ErrUnavailable. A
// caller whose ctx ends stops waiting at once and gets ctx's error wrapped in
// domain.ErrUnavailable; its order may still be published (harmless: closing is idempotent).
// The publish is bounded by the latest deadline of its callers, at most 10s. During an outage
// a call fails at once rather than after the linger. Close flushes what is queued (with the
// connection still up, or failing those callers when it is not) and waits for the flushes in
// flight before closing the connection. The price is latency: a call takes at least the linger
// (5ms) plus one confirm, even alone.
//
// # Answering before the confirm
//
// With Config.Unconfirmed > 0, ScheduleClose returns nil as soon as its order is queued for a
// batch, without waiting for the linger and the confirm, as long as fewer than Unconfirmed such
// orders wait for their confirm; past that bound a call waits as above, so a slow broker slows
// the callers down instead of piling orders up. The caller loses nothing it used: a failed
// ScheduleClose is only logged by the service, because the sweeper closes every order past its
// expiry whether or not its message came. What changes is who sees a failure: the broker logs
// it (once per message, with the number of orders) and counts it (CloseConfirms), instead of
// the caller. An answered order's publish is bounded by its own 10s deadline, not by the
// caller's context, which usually ends when the request is answered. A call still fails at once
// while the broker is disconnected, blocked or closed. Close flushes answered orders like
// waiting ones and waits for their confirms, so a clean shutdown loses none.
//
// # Events
//
// Publish sends outbox events to the durable topic exchange <prefix>.events with the topic as
// routing key; a stock event (topic product.stock) goes with its own type instead
// (product.low_stock, product.sold_out, product.restocked, read from the payload). The
// topology declares a durable quorum queue for each: <prefix>.delivered bound to
// order.delivered and <prefix>.stock bound to product.*, so no event is unroutable.
//
// # Publisher confirms and mandatory
//
// Every publish goes through a pool of Config.Channels channels in confirm mode. A channel is
// taken from the pool for exactly one publish at a time: it is sent with mandatory=true, then
// the deferred confirmation is awaited. RabbitMQ sends basic.return before the basic.ack of
// the same message, and amqp091-go hands a return to the NotifyReturn listener synchronously
// from its reader goroutine before it processes the following ack; with one publish in flight
// per channel and a buffered listener, a return is therefore already waiting when the confirm
// arrives, and the publish fails with ErrUnroutable. A nack, a return, a timeout (the caller's
// deadline, or 10s when it has none), a closed channel or a lost connection all give an error
// wrapping domain.ErrUnavailable together with its cause; the message may then have reached
// the broker or not, so callers retry (outbox relay, sweeper) and consumers tolerate
// duplicates. A channel whose confirm was not awaited to the end is discarded, so a late ack or
// return can never be taken for the next message's. While the broker blocks the connection
// (connection.blocked: a memory or disk alarm) it reads nothing from the socket and a publish
// would hang in its write, which amqp091-go does not interrupt on context; publishes and Ping
// fail fast with domain.ErrUnavailable until it unblocks.
//
// # Consumer
//
// Consume reads <prefix>.order-timeouts with manual acks and a prefetch of 32 messages, 8 at a
// time. A body is one order number a line; a body of a single number, the format before group
// commit, is just one line, so messages queued before an upgrade are consumed as they are.
// Every order number of a due message goes to the handler, those of one message concurrently
// too, at most 8 handler calls at once over all messages. Each order whose handler fails is
// rescheduled on its own Config.RetryDelay ahead with ScheduleClose (the failures of a message
// share a batch); the message is acked once every order in it was handled or rescheduled. If
// a reschedule fails, the whole message is nacked with requeue after a short pause (its other
// orders are handled again: harmless). On Close, the orders of a message not started yet are
// not started and the message is requeued once the running handlers are done. Lines that are
// not order numbers are logged and skipped; a message without any is logged and acked
// (dropped: the sweeper closes whatever order it might have meant). Redeliveries are passed
// through: the use case is idempotent.
//
// # Reconnection
//
// A supervisor goroutine watches the connection with NotifyClose. When it is lost it marks the
// broker disconnected at once (publishes and Ping fail fast with domain.ErrUnavailable instead
// of waiting on a dead socket), redials with capped exponential backoff (100ms doubling up to
// 5s, with jitter), re-declares the whole topology and publishes the new connection. Publisher
// channels notice the new connection and reopen themselves on their next use; the consumer loop
// waits for the new connection and starts a new consumer. Nothing durable is lost: scheduled
// messages live in durable quorum queues, and deliveries that were not acked when the
// connection dropped are redelivered by the broker.
//
// amqp091-go v1.16 has an opt-in automatic recovery (Config.Recovery), but it is marked
// experimental, it recovers channels and consumers in place behind the same objects (so a
// publish during an outage may block or be replayed instead of failing fast), and it resets
// pending confirmations in ways that are hard to reason about. The explicit supervisor is
// about a hundred lines, fails fast, and is exercised by the tests (broker-side connection
// close and a cut TCP proxy), so it is preferred.
package rabbitmq
