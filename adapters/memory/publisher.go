package memory

import (
	"context"
	"fmt"
	"sync"

	"cardshop/domain"
)

// Publisher is an in-memory domain.EventPublisher that records what it is given and can be
// told to fail, to test the outbox relay's retries.
type Publisher struct {
	mu        sync.Mutex
	published []domain.OutboxMessage
	failNext  int
}

var _ domain.EventPublisher = (*Publisher)(nil)

// NewPublisher returns a publisher with nothing published.
func NewPublisher() *Publisher { return &Publisher{} }

// Publish records a copy of m, or fails with an error wrapping domain.ErrUnavailable while
// failures injected by FailNext remain.
func (p *Publisher) Publish(_ context.Context, m domain.OutboxMessage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failNext > 0 {
		p.failNext--
		return fmt.Errorf("publish %s %s: %w", m.Topic, m.Key, domain.ErrUnavailable)
	}
	p.published = append(p.published, copyMessage(m))
	return nil
}

// Published returns copies of the messages published so far, in order.
func (p *Publisher) Published() []domain.OutboxMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]domain.OutboxMessage, len(p.published))
	for i, m := range p.published {
		out[i] = copyMessage(m)
	}
	return out
}

// FailNext makes the next n calls of Publish fail.
func (p *Publisher) FailNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = n
}
