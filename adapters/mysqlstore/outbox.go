package mysqlstore

import (
	"context"
	"fmt"
	"time"

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
}

// Add stores a zero m.At as the time of the insert.
func (o outbox) Add(ctx context.Context, m domain.OutboxMessage) error {
	if m.Topic == "" {
		return domain.Invalid("topic", "required")
	}
	payload := m.Payload
	if payload == nil {
		payload = []byte{}
	}
	at := m.At.UTC()
	if m.At.IsZero() {
		at = time.Now().UTC()
	}
	_, err := o.s.exec(ctx, fmt.Sprintf("add %s message %s to the outbox", m.Topic, m.Key),
		"INSERT INTO outbox (topic, msg_key, payload, created_at, attempts) VALUES (?, ?, ?, ?, ?)",
		m.Topic, m.Key, payload, at, m.Attempts)
	return err
}

// Pending reads the (sent_at, id) index: unsent rows have sent_at NULL and come in id order.
func (o outbox) Pending(ctx context.Context, limit int) ([]domain.OutboxMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	var rows []outboxRow
	if err := o.s.get(ctx, "pending outbox messages", &rows, "SELECT id, topic, msg_key, payload, created_at, attempts "+
		"FROM outbox WHERE sent_at IS NULL ORDER BY id LIMIT ?", limit); err != nil {
		return nil, err
	}
	out := make([]domain.OutboxMessage, len(rows))
	for i, r := range rows {
		out[i] = domain.OutboxMessage{ID: r.ID, Topic: r.Topic, Key: r.Key, Payload: r.Payload, At: r.CreatedAt,
			Attempts: r.Attempts}
	}
	return out, nil
}

// MarkSent keeps the first sent time; an unknown id is ignored, as there is nothing to send.
func (o outbox) MarkSent(ctx context.Context, id int64, at time.Time) error {
	_, err := o.s.exec(ctx, fmt.Sprintf("mark outbox message %d sent", id),
		"UPDATE outbox SET sent_at = ? WHERE id = ? AND sent_at IS NULL", at.UTC(), id)
	return err
}

func (o outbox) MarkFailed(ctx context.Context, id int64) error {
	_, err := o.s.exec(ctx, fmt.Sprintf("mark outbox message %d failed", id),
		"UPDATE outbox SET attempts = attempts + 1 WHERE id = ?", id)
	return err
}

func (o outbox) Backlog(ctx context.Context) (int64, error) {
	var n int64
	err := o.s.get(ctx, "outbox backlog", &n, "SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL")
	return n, err
}
