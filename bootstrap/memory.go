package bootstrap

import (
	"log/slog"

	"go.uber.org/fx"

	"cardshop/adapters/memory"
	"cardshop/adapters/metrics"
	"cardshop/domain"
)

// MemoryAdapters provides every driven port in memory: the whole service in one process with
// nothing else installed. State is lost when the process stops.
func MemoryAdapters() fx.Option {
	return fx.Options(
		fx.Provide(
			memory.NewLedger,
			func(c domain.Clock) *memory.Gate { return memory.NewGate(c) },
			func(c domain.Clock) *memory.DelayQueue { return memory.NewDelayQueue(c) },
			memory.NewPublisher,
			newMemoryLimiter,
			func(log *slog.Logger) *memory.Alerts { return memory.NewAlerts(log) },
			func(l *memory.Ledger) domain.Ledger { return l },
			func(g *memory.Gate) domain.StockGate { return g },
			func(q *memory.DelayQueue) domain.DelayQueue { return q },
			func(q *memory.DelayQueue) Consumer { return q },
			func(p *memory.Publisher) domain.EventPublisher { return p },
			func(a *memory.Alerts) domain.Alerter { return a },
			// Nothing to check: every port lives in this process.
			func() Readiness { return nil },
		),
		fx.Invoke(func(lc fx.Lifecycle, q *memory.DelayQueue) {
			lc.Append(fx.StopHook(q.Close))
		}),
		fx.Invoke(func(m *metrics.Metrics, q *memory.DelayQueue) { m.WatchDelayQueue(q.Pending) }),
	)
}
