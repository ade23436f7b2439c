package mysqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"cardshop/domain"
)

type outbox struct{ s *store }

type outboxRow struct {
	ID        int64     `bun:"id"`
	Topic     string    `bun:"topic"`
	Key       string    `bun:"msg_key"`
	Payload   []byte    `bun:"payload"`
	CreatedAt time.Time `bun:"created_at"`
	Attempts  int       `bun:"attempts"`
	RetryAt   time.Time `bun:"retry_at"`
}

// Add stores a zero m.At as the time of the insert.
func (o outbox) Add(ctx context.Context, m domain.OutboxMessage) error {
	return addMessages(ctx, o.s, fmt.Sprintf("add %s message %s to the outbox", m.Topic, m.Key), []domain.OutboxMessage{m})
}

// addMessages inserts messages with one multi-row INSERT (Add is the one-message case; a
// payment batch adds all of its members' at once). A zero At is stored as the time of the
// insert, a zero RetryAt as At.
func addMessages(ctx context.Context, s *store, op string, msgs []domain.OutboxMessage) error {
	values := make([]string, 0, len(msgs))
	args := make([]any, 0, 6*len(msgs))
	now := time.Now().UTC()
	for _, m := range msgs {
		if m.Topic == "" {
			return domain.Invalid("topic", "required")
		}
		payload := m.Payload
		if payload == nil {
			payload = []byte{}
		}
		at := m.At.UTC()
		if m.At.IsZero() {
			at = now
		}
		due := at
		if !m.RetryAt.IsZero() {
			due = m.RetryAt.UTC()
		}
		values = append(values, "(?, ?, ?, ?, ?, ?)")
		args = append(args, m.Topic, m.Key, payload, at, m.Attempts, due)
	}
	_, err := s.exec(ctx, op, "INSERT INTO outbox (topic, msg_key, payload, created_at, attempts, retry_at) VALUES "+
		strings.Join(values, ", "), args...)
	return err
}

// Pending reads the (sent_at, retry_at, id) index: unsent rows have sent_at NULL, and the due
// ones are a range of it already in the order returned, so a long tail of messages waiting
// for a retry (a storefront webhook that is down) costs nothing.
// A topic filter is applied to the rows of that range: other topics' due rows are few, as they
// are relayed as soon as they are due.
func (o outbox) Pending(ctx context.Context, now time.Time, limit int, topics ...string) ([]domain.OutboxMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	filter, args := topicFilter(topics)
	var rows []outboxRow
	if err := o.s.get(ctx, "pending outbox messages", &rows, "SELECT id, topic, msg_key, payload, created_at, attempts, retry_at "+
		"FROM outbox WHERE sent_at IS NULL AND retry_at <= ?"+filter+" ORDER BY retry_at, id LIMIT ?",
		append(append([]any{now.UTC()}, args...), limit)...); err != nil {
		return nil, err
	}
	out := make([]domain.OutboxMessage, len(rows))
	for i, r := range rows {
		out[i] = domain.OutboxMessage{ID: r.ID, Topic: r.Topic, Key: r.Key, Payload: r.Payload, At: r.CreatedAt,
			Attempts: r.Attempts, RetryAt: r.RetryAt}
	}
	return out, nil
}

// MarkSent is one UPDATE for all the ids; it keeps the first sent time, and an unknown id is
// ignored, as there is nothing to send.
func (o outbox) MarkSent(ctx context.Context, at time.Time, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := o.s.exec(ctx, fmt.Sprintf("mark %d outbox messages sent", len(ids)),
		"UPDATE outbox SET sent_at = ? WHERE id IN (?) AND sent_at IS NULL", at.UTC(), bun.List(ids))
	return err
}

func (o outbox) MarkFailed(ctx context.Context, id int64, retryAt time.Time) error {
	_, err := o.s.exec(ctx, fmt.Sprintf("mark outbox message %d failed", id),
		"UPDATE outbox SET attempts = attempts + 1, retry_at = ? WHERE id = ?", retryAt.UTC(), id)
	return err
}

// Claim is a compare-and-set of retry_at: the row matches only while nobody else has claimed,
// failed or sent it since it was read.
func (o outbox) Claim(ctx context.Context, id int64, from, until time.Time) (bool, error) {
	n, err := o.s.execN(ctx, fmt.Sprintf("claim outbox message %d", id),
		"UPDATE outbox SET retry_at = ? WHERE id = ? AND sent_at IS NULL AND retry_at = ?", until.UTC(), id, from.UTC())
	return n == 1, err
}

func (o outbox) Backlog(ctx context.Context, topics ...string) (int64, error) {
	filter, args := topicFilter(topics)
	var n int64
	err := o.s.get(ctx, "outbox backlog", &n, "SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL"+filter, args...)
	return n, err
}

// topicFilter returns the AND clause and its arguments that keep the given topics; none
// keeps every topic.
func topicFilter(topics []string) (string, []any) {
	if len(topics) == 0 {
		return "", nil
	}
	args := make([]any, len(topics))
	for i, t := range topics {
		args[i] = t
	}
	return " AND topic IN (?" + strings.Repeat(", ?", len(topics)-1) + ")", args
}

// ByKey reads idx_key (msg_key, id): an order's few messages, in id order.
func (o outbox) ByKey(ctx context.Context, key string, topics ...string) ([]domain.OutboxRecord, error) {
	if key == "" {
		return nil, domain.Invalid("key", "required")
	}
	filter, args := topicFilter(topics)
	var rows []struct {
		ID        int64     `bun:"id"`
		Topic     string    `bun:"topic"`
		Key       string    `bun:"msg_key"`
		Payload   []byte    `bun:"payload"`
		CreatedAt time.Time `bun:"created_at"`
		Attempts  int       `bun:"attempts"`
		RetryAt   time.Time `bun:"retry_at"`
		SentAt    time.Time `bun:"sent_at"` // NULL reads as the zero time
	}
	if err := o.s.get(ctx, fmt.Sprintf("outbox messages of %s", key), &rows, "SELECT id, topic, msg_key, payload, created_at, "+
		"attempts, retry_at, sent_at FROM outbox WHERE msg_key = ?"+filter+" ORDER BY id", append([]any{key}, args...)...); err != nil {
		return nil, err
	}
	out := make([]domain.OutboxRecord, len(rows))
	for i, r := range rows {
		out[i] = domain.OutboxRecord{OutboxMessage: domain.OutboxMessage{ID: r.ID, Topic: r.Topic, Key: r.Key, Payload: r.Payload,
			At: r.CreatedAt, Attempts: r.Attempts, RetryAt: r.RetryAt}, SentAt: r.SentAt}
	}
	return out, nil
}
