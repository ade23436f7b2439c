package memory

import (
	"context"
	"fmt"
	"sync"

	"cardshop/domain"
)

// Notifier is an in-memory domain.Notifier (the storefront's webhook) that records what it is
// given and can be told to fail, to test webhook retries.
type Notifier struct {
	mu       sync.Mutex
	sent     []domain.Notification
	failNext int
	attempts int
}

var _ domain.Notifier = (*Notifier)(nil)

// NewNotifier returns a notifier with nothing sent.
func NewNotifier() *Notifier { return &Notifier{} }

// Notify records a copy of n, or fails with an error wrapping domain.ErrUnavailable while
// failures injected by FailNext remain.
func (p *Notifier) Notify(_ context.Context, n domain.Notification) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts++
	if p.failNext > 0 {
		p.failNext--
		return fmt.Errorf("notify %s: %w", n.ID, domain.ErrUnavailable)
	}
	n.Data = append([]byte(nil), n.Data...)
	p.sent = append(p.sent, n)
	return nil
}

// Sent returns the notifications accepted so far, in order.
func (p *Notifier) Sent() []domain.Notification {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]domain.Notification, len(p.sent))
	for i, n := range p.sent {
		n.Data = append([]byte(nil), n.Data...)
		out[i] = n
	}
	return out
}

// Attempts counts every call of Notify, failed ones included.
func (p *Notifier) Attempts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts
}

// FailNext makes the next n calls of Notify fail.
func (p *Notifier) FailNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = n
}
