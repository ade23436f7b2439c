package memory

import (
	"context"
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
	put(o.s, d.outboxRows, m.ID, outboxRow{msg: m})
	put(o.s, d.unsent, m.ID, struct{}{})
	return nil
}

// Pending lists unsent messages in id (insertion) order.
func (o outbox) Pending(_ context.Context, limit int) ([]domain.OutboxMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	release, err := o.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	ids := make([]int64, 0, len(o.s.data.unsent))
	for id := range o.s.data.unsent {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]domain.OutboxMessage, len(ids))
	for i, id := range ids {
		out[i] = copyMessage(o.s.data.outboxRows[id].msg)
	}
	return out, nil
}

// MarkSent ignores an unknown id as it ignores a second call: there is nothing left to send.
func (o outbox) MarkSent(_ context.Context, id int64, at time.Time) error {
	release, err := o.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	row, ok := o.s.data.outboxRows[id]
	if !ok || row.sent {
		return nil
	}
	row.sent, row.sentAt = true, at
	put(o.s, o.s.data.outboxRows, id, row)
	del(o.s, o.s.data.unsent, id)
	return nil
}

func (o outbox) MarkFailed(_ context.Context, id int64) error {
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
	put(o.s, o.s.data.outboxRows, id, row)
	return nil
}

func (o outbox) Backlog(_ context.Context) (int64, error) {
	release, err := o.s.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	return int64(len(o.s.data.unsent)), nil
}
