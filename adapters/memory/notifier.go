package memory

import (
	"context"
	"fmt"

	"cardshop/domain"
)

// Notifier is an in-memory domain.Notifier (the storefront's webhook) that records what it is
// given and can be told to fail (FailNext), to test webhook retries.
type Notifier struct{ recorder[domain.Notification] }

var _ domain.Notifier = (*Notifier)(nil)

// NewNotifier returns a notifier with nothing sent.
func NewNotifier() *Notifier {
	return &Notifier{recorder[domain.Notification]{copy: func(n domain.Notification) domain.Notification {
		n.Data = append([]byte(nil), n.Data...)
		return n
	}}}
}

// Notify records a copy of n, or fails with an error wrapping domain.ErrUnavailable while
// failures injected by FailNext remain.
func (p *Notifier) Notify(_ context.Context, n domain.Notification) error {
	if !p.record(n) {
		return fmt.Errorf("notify %s: %w", n.ID, domain.ErrUnavailable)
	}
	return nil
}

// Sent returns the notifications accepted so far, in order.
func (p *Notifier) Sent() []domain.Notification { return p.all() }
