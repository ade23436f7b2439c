package memory

import (
	"context"
	"slices"
	"sort"
	"time"

	"cardshop/domain"
)

type outbox struct{ s *store }

func copyMessage(m domain.OutboxMessage) domain.OutboxMessage {
	if m.Payload != nil {
		m.Payload = append([]byte(nil), m.Payload...)
	}
	return m
}

func (o outbox) Add(_ context.Context, m domain.OutboxMessage) error {
	if m.Topic == "" {
		return domain.Invalid("topic", "required")
	}
	release, err := o.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	d := o.s.data
	d.lastOutboxID++
	m = copyMessage(m)
	m.ID = d.lastOutboxID
	if m.RetryAt.IsZero() {
		m.RetryAt = m.At
	}
	put(o.s, d.outboxRows, m.ID, outboxRow{msg: m})
	put(o.s, d.unsent, m.ID, struct{}{})
	return nil
}

// Pending lists unsent messages due at now, by (RetryAt, id).
func (o outbox) Pending(_ context.Context, now time.Time, limit int, topics ...string) ([]domain.OutboxMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	release, err := o.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	rows := o.s.data.outboxRows
	ids := make([]int64, 0, len(o.s.data.unsent))
	for id := range o.s.data.unsent {
		if m := rows[id].msg; !m.RetryAt.After(now) && ofTopics(m.Topic, topics) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := rows[ids[i]].msg.RetryAt, rows[ids[j]].msg.RetryAt
		if !a.Equal(b) {
			return a.Before(b)
		}
		return ids[i] < ids[j]
	})
	if len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]domain.OutboxMessage, len(ids))
	for i, id := range ids {
		out[i] = copyMessage(rows[id].msg)
	}
	return out, nil
}

// MarkSent ignores an unknown id as it ignores a second call: there is nothing left to send.
func (o outbox) MarkSent(_ context.Context, at time.Time, ids ...int64) error {
	release, err := o.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	for _, id := range ids {
		row, ok := o.s.data.outboxRows[id]
		if !ok || row.sent {
			continue
		}
		row.sent, row.sentAt = true, at
		put(o.s, o.s.data.outboxRows, id, row)
		del(o.s, o.s.data.unsent, id)
	}
	return nil
}

func (o outbox) MarkFailed(_ context.Context, id int64, retryAt time.Time) error {
	release, err := o.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	row, ok := o.s.data.outboxRows[id]
	if !ok {
		return nil
	}
	row.msg.Attempts++
	row.msg.RetryAt = retryAt
	put(o.s, o.s.data.outboxRows, id, row)
	return nil
}

func (o outbox) Claim(_ context.Context, id int64, from, until time.Time) (bool, error) {
	release, err := o.s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	row, ok := o.s.data.outboxRows[id]
	if !ok || row.sent || !row.msg.RetryAt.Equal(from) {
		return false, nil
	}
	row.msg.RetryAt = until
	put(o.s, o.s.data.outboxRows, id, row)
	return true, nil
}

func (o outbox) Backlog(_ context.Context, topics ...string) (int64, error) {
	release, err := o.s.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	if len(topics) == 0 {
		return int64(len(o.s.data.unsent)), nil
	}
	var n int64
	for id := range o.s.data.unsent {
		if ofTopics(o.s.data.outboxRows[id].msg.Topic, topics) {
			n++
		}
	}
	return n, nil
}

// ofTopics tells whether topic is one of topics, where no topics means every topic.
func ofTopics(topic string, topics []string) bool {
	return len(topics) == 0 || slices.Contains(topics, topic)
}

// ByKey scans the outbox, in id (Add) order.
func (o outbox) ByKey(_ context.Context, key string, topics ...string) ([]domain.OutboxRecord, error) {
	if key == "" {
		return nil, domain.Invalid("key", "required")
	}
	release, err := o.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	var out []domain.OutboxRecord
	for _, row := range o.s.data.outboxRows {
		if row.msg.Key == key && ofTopics(row.msg.Topic, topics) {
			out = append(out, domain.OutboxRecord{OutboxMessage: copyMessage(row.msg), SentAt: row.sentAt})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
