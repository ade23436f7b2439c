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
// ScheduleClose(no, due) publishes to the largest bucket that does not exceed the remaining
// delay (with a small tolerance, see bucketFor, so that "15 min minus the few milliseconds since
// the order was written" still picks the 15-min bucket); below the smallest bucket it uses the
// smallest, and a due time already past goes straight to <prefix>.timeouts. The default ladder
// is 100ms, 1s, 5s, 30s, 1m, 5m, 15m, 1h, plus every configured delay and the retry delay
// (configure the order timeout, so that an order's close is one hop). A message carries its due time
// (header x-cardshop-due, unix ms), so a message that a shorter bucket delivers early is
// re-published by the consumer for the remaining time instead of being handed to the handler:
// the handler never sees an order before its due time, as the domain.DelayQueue contract says,
// and the order converges on its due time in a few hops (the use case would reschedule too,
// but the port promises "at or soon after due" to every user).
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
// Consume reads <prefix>.order-timeouts with manual acks and a prefetch of 32, and hands each
// order number to the handler from a small worker pool (handlers run concurrently). A nil
// result acks. An error reschedules the order Config.RetryDelay ahead with ScheduleClose and
// then acks; if that publish fails too, the delivery is nacked with requeue after a short
// pause. A body that is not an order number is logged and acked (dropped: the sweeper closes
// whatever order it might have meant). Redeliveries are passed through: the use case is
// idempotent.
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
