package application

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"cardshop/domain"
)

// orderedTopics are the topics RelayOutbox carries out one message at a time, in the outbox's
// order: a product's stock events say where its stock went (sold out, then restocked), and the
// gate changes are few and quick. deliveryTopics are carried out relayParallel at a time: each
// delivery event is about one order, independent of the others. The webhook's topics have a
// relay of their own.
var (
	orderedTopics  = []string{domain.TopicGateChange, domain.TopicProductStock}
	deliveryTopics = []string{domain.TopicDelivered}
)

// relayParallel is how many delivery events the outbox relay publishes at once, as many as the
// production broker's pool of publisher channels (bootstrap: 64); docs/BENCHMARKS.md has the
// measurements behind the number.
const relayParallel = 64

// Retry backoff of a failed outbox message: the first retry waits about retryBase, each next
// one twice as long, up to the topic's cap. The gate and the broker are ours and come back
// soon; the storefront's webhook may be down for hours.
const (
	retryBase         = time.Second
	gateRetryCap      = 15 * time.Second
	brokerRetryCap    = time.Minute
	DefaultWebhookCap = 10 * time.Minute
	// webhookParallel is how many webhook requests are in flight at once: a flash sale's burst
	// of paid orders reaches a storefront that takes 100 ms per request at 80 events/s.
	webhookParallel = 8
	webhookPage     = 64 // messages per page of RelayWebhooks
	// WebhookLease is how long a relay holds a webhook message it is sending: another instance
	// reading the same message leaves it, so the storefront gets it once. It must exceed the
	// webhook's timeout; a relay that dies mid-send delays that event by at most this long.
	WebhookLease = 2 * time.Minute
)

// errNoWebhook fails a webhook message while no webhook is configured: it stays in the outbox
// (visible in the backlog) until one is.
var errNoWebhook = errors.New("no storefront webhook configured")

// RelayOutbox carries out due outbox messages of the gate and the broker: gate changes are
// applied to the gate (once per Ref, so a message relayed twice changes nothing) and stock
// events are published, one at a time and in order; then delivery events are published,
// relayParallel at once. A message that fails is counted and tried again after a backoff. It
// returns how many messages were sent.
func (s *Relay) RelayOutbox(ctx context.Context) (int, error) {
	sent, _, err := s.relayTopics(ctx, relayRun{batch: s.cfg.RelayBatch, parallel: 1, topics: orderedTopics, send: s.relay})
	if err != nil {
		return sent, err
	}
	more, _, err := s.relayTopics(ctx, relayRun{batch: s.cfg.RelayBatch, parallel: relayParallel, topics: deliveryTopics, send: s.relay})
	return sent + more, err
}

// errGateChangesUnsent refuses a gate rebuild while gate changes stay unsent.
var errGateChangesUnsent = fmt.Errorf("gate changes could not be applied before the rebuild: %w", domain.ErrUnavailable)

// drainGateChanges applies every unsent gate change now, waiting for its retry time or not,
// and fails when one still fails. A gate rebuild must come after them: the ledger's numbers
// it copies already count them, and one applied after the rebuild would count twice.
func (s *stock) drainGateChanges(ctx context.Context) error {
	_, failed, err := s.relayTopics(ctx, relayRun{batch: s.cfg.RelayBatch, parallel: 1,
		topics: []string{domain.TopicGateChange}, send: s.relay, drain: true})
	if err != nil {
		return err
	}
	if failed > 0 {
		return errGateChangesUnsent
	}
	return nil
}

// webhookTopics are the topics RelayWebhooks sends to the storefront.
var webhookTopics = []string{domain.TopicWebhook, domain.TopicWebhookStock}

// RelayWebhooks sends due webhook messages to the storefront through the Notifier, a few at a
// time, each retried with a backoff up to Config.WebhookMaxBackoff until the storefront accepts
// it. Each message is claimed (Outbox.Claim, WebhookLease) before it is sent, so instances
// relaying side by side do not send it twice. It returns how many were delivered.
func (s *Relay) RelayWebhooks(ctx context.Context) (int, error) {
	sent, _, err := s.relayTopics(ctx, relayRun{batch: min(s.cfg.RelayBatch, webhookPage), parallel: webhookParallel,
		topics: webhookTopics, send: s.notify, lease: WebhookLease})
	return sent, err
}

// WebhookBacklog counts the webhook messages not yet delivered.
func (s *Relay) WebhookBacklog(ctx context.Context) (int64, error) {
	return s.ledger.Outbox().Backlog(ctx, webhookTopics...)
}

// relayRun is one pass of a relay.
type relayRun struct {
	batch, parallel int // messages per page; sent at once
	topics          []string
	send            func(context.Context, domain.OutboxMessage) error
	// drain sends every unsent message, due or not, and stops at the first page with a failure
	// (which it would otherwise read again and again).
	drain bool
	// lease, when set, claims each message for that long before sending it; a message another
	// relay claimed first is left to it.
	lease time.Duration
	// attempts, when set, is how many times a message is tried: after its last failure giveUp
	// is called, the failure counted (Attempts reaches attempts) and the message marked done
	// (sent), so it is tried no more.
	attempts int
	giveUp   func(context.Context, domain.OutboxMessage, error)
	// final, when set, says that a failure cannot be helped by trying again: the message is
	// given up at once, as after its last attempt.
	final func(error) bool
}

// relayTopics sends the due messages of r.topics page by page, up to r.parallel at once, and
// records each outcome: failed with its next attempt pushed back as it happens, and the page's
// sent messages in one write once the page is done, before the next page is read (a claimed
// message is marked as soon as it is sent, see relayOne). It returns how many were sent and
// how many failed. A relay that dies before that write leaves the page's sent messages unsent,
// to be sent again: delivery is at least once, and each topic's receiver drops a repeat (the
// gate by the change's Ref, consumers and storefronts by the event's ID).
func (s *outbox) relayTopics(ctx context.Context, r relayRun) (sent, failedAll int, _ error) {
	batch := r.batch
	for {
		due := s.clock.Now()
		if r.drain {
			due = due.AddDate(100, 0, 0)
		}
		msgs, err := s.ledger.Outbox().Pending(ctx, due, batch, r.topics...)
		if err != nil {
			return sent, failedAll, fmt.Errorf("read outbox: %w", err)
		}
		var (
			mu             sync.Mutex
			failed, okHere int
			sentIDs        []int64
			firstErr       error
			wg             sync.WaitGroup
			slots          = make(chan struct{}, r.parallel)
		)
		for _, m := range msgs {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				outcome, err := s.relayOne(ctx, m, r)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				switch {
				case outcome == relaySent && r.lease > 0:
					okHere++ // marked by relayOne
				case outcome == relaySent:
					sentIDs = append(sentIDs, m.ID)
				case outcome == relayFailed:
					failed++
				}
			}()
		}
		wg.Wait()
		if len(sentIDs) > 0 {
			if err := s.ledger.Outbox().MarkSent(ctx, s.clock.Now(), sentIDs...); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("mark outbox messages sent: %w", err)
			} else if err == nil {
				sent += len(sentIDs)
			}
		}
		sent += okHere
		failedAll += failed
		if firstErr != nil {
			return sent, failedAll, firstErr
		}
		// Stop on a short page, or when nothing in a full page went through (the peer is
		// down): the failed messages wait for their retry time.
		if len(msgs) < batch || failed == len(msgs) || (r.drain && failed > 0) || ctx.Err() != nil {
			return sent, failedAll, ctx.Err()
		}
	}
}

// relayOutcome is what became of one message in a relay pass.
type relayOutcome int

const (
	relaySent   relayOutcome = iota
	relayFailed              // to be tried again after its backoff
	relayLeft                // another relay claimed it first
)

// relayOne claims m when r says so, sends it and records a failure. A message sent under a
// claim is marked at once (its page may outlast the claim: slow webhooks, and another relay
// would send it again); any other is marked with its page. The error is the ledger's, when the
// claim or the outcome could not be recorded.
func (s *outbox) relayOne(ctx context.Context, m domain.OutboxMessage, r relayRun) (relayOutcome, error) {
	if r.lease > 0 {
		won, err := s.ledger.Outbox().Claim(ctx, m.ID, m.RetryAt, s.clock.Now().Add(r.lease))
		if err != nil {
			return relayFailed, fmt.Errorf("claim outbox message: %w", err)
		}
		if !won {
			return relayLeft, nil
		}
	}
	if err := r.send(ctx, m); err != nil {
		if r.attempts > 0 && (m.Attempts+1 >= r.attempts || r.final != nil && r.final(err)) {
			s.log.ErrorContext(ctx, "outbox message given up after its last attempt", "id", m.ID, "topic", m.Topic,
				"key", m.Key, "attempt", m.Attempts+1, "err", err)
			r.giveUp(ctx, m, err)
			// Counted under the claim (due again only when it ends), so no relay takes it between
			// the two writes; then done.
			if err := s.ledger.Outbox().MarkFailed(ctx, m.ID, s.clock.Now().Add(r.lease)); err != nil {
				return relayFailed, fmt.Errorf("count outbox failure: %w", err)
			}
			if err := s.ledger.Outbox().MarkSent(ctx, s.clock.Now(), m.ID); err != nil {
				return relayFailed, fmt.Errorf("mark outbox message given up: %w", err)
			}
			return relayFailed, nil
		}
		// A peer's rate limit (retry_after) wins over a shorter backoff.
		retry := s.clock.Now().Add(max(s.retryDelay(m.Topic, m.Attempts+1), retryAfter(err)))
		s.log.WarnContext(ctx, "outbox message not relayed", "id", m.ID, "topic", m.Topic, "key", m.Key,
			"attempt", m.Attempts+1, "retry_at", retry, "err", err)
		if err := s.ledger.Outbox().MarkFailed(ctx, m.ID, retry); err != nil {
			return relayFailed, fmt.Errorf("count outbox failure: %w", err)
		}
		return relayFailed, nil
	}
	if r.lease > 0 {
		if err := s.ledger.Outbox().MarkSent(ctx, s.clock.Now(), m.ID); err != nil {
			return relayFailed, fmt.Errorf("mark outbox message sent: %w", err)
		}
	}
	return relaySent, nil
}

// retryDelay is how long a message of topic waits after its attempt-th failure: exponential
// from retryBase up to the topic's cap, with jitter (a random point in the upper half) so that
// messages that failed together are not all retried together.
func (s *outbox) retryDelay(topic string, attempt int) time.Duration {
	base, limit := retryBase, brokerRetryCap
	switch topic {
	case domain.TopicGateChange:
		limit = gateRetryCap
	case domain.TopicWebhook, domain.TopicWebhookStock:
		limit = s.cfg.WebhookMaxBackoff
	case domain.TopicOrderMail:
		base, limit = mailRetryBase, mailRetryCap
	case domain.TopicAlertPush:
		base, limit = alertRetryBase, alertRetryCap
	}
	d := limit
	if attempt < 24 { // the shift stays far from overflowing
		d = min(base<<max(attempt-1, 0), limit)
	}
	return d/2 + rand.N(d/2+1)
}

func (s *outbox) relay(ctx context.Context, m domain.OutboxMessage) error {
	switch m.Topic {
	case domain.TopicGateChange:
		c, err := DecodeGateChange(m.Payload)
		if err != nil {
			return err
		}
		_, err = s.gate.Apply(ctx, c)
		return err
	case domain.TopicDelivered, domain.TopicProductStock:
		return s.pub.Publish(ctx, m)
	default:
		return fmt.Errorf("unknown outbox topic %q", m.Topic)
	}
}

// notify sends a webhook message: a delivery event (order.delivered) or a stock event (its
// own type). The notification's ID is the event's, so a receiver can drop the copies that
// at-least-once delivery may bring.
func (s *outbox) notify(ctx context.Context, m domain.OutboxMessage) error {
	if s.notifier == nil {
		return errNoWebhook
	}
	id, typ, err := decodeWebhookEvent(m.Payload)
	if err != nil {
		return err
	}
	return s.notifier.Notify(ctx, domain.Notification{ID: id, Type: typ, At: m.At,
		Attempt: m.Attempts + 1, Data: m.Payload})
}
