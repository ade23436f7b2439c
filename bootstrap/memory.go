package bootstrap

import (
	"context"

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
			fx.Annotate(memory.NewLedger, fx.As(new(domain.Ledger)), fx.As(new(domain.SalesReport))),
			fx.Annotate(memory.NewGate, fx.As(new(domain.StockGate))),
			fx.Annotate(memory.NewDelayQueue, fx.As(new(domain.DelayQueue)), fx.As(new(Consumer)), fx.As(fx.Self())),
			fx.Annotate(memory.NewPublisher, fx.As(new(domain.EventPublisher))),
			fx.Annotate(memory.NewAlerts, fx.As(new(domain.Alerter))),
			newMemoryLimiter,
			// Nothing to check: every port lives in this process.
			func() Readiness { return nil },
			memoryQueueBacklog,
		),
		fx.Invoke(func(lc fx.Lifecycle, q *memory.DelayQueue) {
			lc.Append(fx.StopHook(q.Close))
		}),
		fx.Invoke(func(m *metrics.Metrics, q *memory.DelayQueue) { m.WatchDelayQueue(q.Pending) }),
	)
}

// memoryQueueBacklog is the in-memory delay queue's backlog: the closes scheduled and not yet
// handled.
func memoryQueueBacklog(q *memory.DelayQueue) QueueBacklog {
	return func(context.Context) (map[string]int64, error) {
		return map[string]int64{"order closes (in memory)": int64(q.Pending())}, nil
	}
}
