package application

import (
	"context"
	"fmt"

	"cardshop/domain"
)

// RelayOutbox carries out pending outbox messages: gate changes are applied to the gate (once
// per Ref, so a message relayed twice changes nothing), delivery events are published. A
// message that fails is counted and tried again on the next run. It returns how many messages
// were sent.
func (s *Shop) RelayOutbox(ctx context.Context) (int, error) {
	sent := 0
	for {
		msgs, err := s.ledger.Outbox().Pending(ctx, s.cfg.RelayBatch)
		if err != nil {
			return sent, fmt.Errorf("read outbox: %w", err)
		}
		failed := 0
		for _, m := range msgs {
			if err := s.relay(ctx, m); err != nil {
				failed++
				s.log.WarnContext(ctx, "outbox message not relayed", "id", m.ID, "topic", m.Topic, "key", m.Key, "err", err)
				if err := s.ledger.Outbox().MarkFailed(ctx, m.ID); err != nil {
					return sent, fmt.Errorf("count outbox failure: %w", err)
				}
				continue
			}
			if err := s.ledger.Outbox().MarkSent(ctx, m.ID, s.clock.Now()); err != nil {
				return sent, fmt.Errorf("mark outbox message sent: %w", err)
			}
			sent++
		}
		// Stop on a short page, or when nothing in a full page went through (the broker is
		// down): the next run tries again.
		if len(msgs) < s.cfg.RelayBatch || failed == len(msgs) {
			return sent, nil
		}
	}
}

func (s *Shop) relay(ctx context.Context, m domain.OutboxMessage) error {
	switch m.Topic {
	case domain.TopicGateChange:
		c, err := DecodeGateChange(m.Payload)
		if err != nil {
			return err
		}
		_, err = s.gate.Apply(ctx, c)
		return err
	case domain.TopicDelivered:
		return s.pub.Publish(ctx, m)
	default:
		return fmt.Errorf("unknown outbox topic %q", m.Topic)
	}
}
