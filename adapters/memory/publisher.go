package memory

import (
	"context"
	"fmt"

	"cardshop/domain"
)

// Publisher is an in-memory domain.EventPublisher that records what it is given and can be
// told to fail (FailNext), to test the outbox relay's retries.
type Publisher struct{ recorder[domain.OutboxMessage] }

var _ domain.EventPublisher = (*Publisher)(nil)

// NewPublisher returns a publisher with nothing published.
func NewPublisher() *Publisher {
	return &Publisher{recorder[domain.OutboxMessage]{copy: copyMessage}}
}

// Publish records a copy of m, or fails with an error wrapping domain.ErrUnavailable while
// failures injected by FailNext remain.
func (p *Publisher) Publish(_ context.Context, m domain.OutboxMessage) error {
	if !p.record(m) {
		return fmt.Errorf("publish %s %s: %w", m.Topic, m.Key, domain.ErrUnavailable)
	}
	return nil
}

// Published returns copies of the messages published so far, in order.
func (p *Publisher) Published() []domain.OutboxMessage { return p.all() }
