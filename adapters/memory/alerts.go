package memory

import (
	"context"
	"log/slog"
	"sync"

	"cardshop/domain"
)

// Alerts is an in-memory domain.Alerter: it keeps every alert and logs it at Error level.
type Alerts struct {
	log    *slog.Logger
	mu     sync.Mutex
	alerts []domain.Alert
}

var _ domain.Alerter = (*Alerts)(nil)

// NewAlerts returns an alerter logging to log, or to slog.Default() when log is nil.
func NewAlerts(log *slog.Logger) *Alerts {
	if log == nil {
		log = slog.Default()
	}
	return &Alerts{log: log}
}

// Alert records a and logs it with its kind, product, order number and message.
func (a *Alerts) Alert(ctx context.Context, al domain.Alert) {
	a.mu.Lock()
	a.alerts = append(a.alerts, al)
	a.mu.Unlock()
	a.log.ErrorContext(ctx, "alert", "kind", al.Kind, "product", int64(al.Product),
		"order_no", string(al.OrderNo), "message", al.Message)
}

// Alerts returns a copy of the alerts raised so far, in order.
func (a *Alerts) Alerts() []domain.Alert {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]domain.Alert(nil), a.alerts...)
}
