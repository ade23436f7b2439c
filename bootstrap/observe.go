package bootstrap

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"cardshop/adapters/metrics"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/rabbitmq"
	"cardshop/adapters/redisgate"
	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// Readiness is what GET /readyz checks; each adapter set provides its own.
type Readiness []webkit.ReadinessCheck

// QueueBacklog reads the delay queue's backlog, messages by queue name, for the console's
// dashboard; each adapter set provides its own.
type QueueBacklog func(context.Context) (map[string]int64, error)

// readinessProductCap bounds how many products the gate check asks about per /readyz, so a
// large catalogue cannot make the probe slow; products past it are not checked.
const readinessProductCap = 1000

// observability times the gate and the ledger of whichever adapter set was chosen (fx.Decorate
// wraps the port every consumer receives) and exports the outbox backlog.
func observability() fx.Option {
	return fx.Options(
		fx.Provide(metrics.New),
		fx.Decorate(
			func(m *metrics.Metrics, g domain.StockGate) domain.StockGate { return m.Gate(g) },
			func(m *metrics.Metrics, l domain.Ledger) domain.Ledger { return m.Ledger(l) },
		),
		fx.Invoke(func(m *metrics.Metrics, l domain.Ledger) {
			m.WatchOutboxBacklog(func(ctx context.Context) (int64, error) { return l.Outbox().Backlog(ctx) })
			b := ReadBuildInfo()
			m.SetBuildInfo(b.Version, b.Revision(), b.Go)
		}),
	)
}

// realReadiness checks each service the real set depends on. The checks use the adapters
// directly, not the timed ports, so that probes do not skew the gate's latency histogram.
func realReadiness(db *bun.DB, gate *redisgate.Gate, broker *rabbitmq.Broker, ledger *mysqlstore.Ledger) Readiness {
	return Readiness{
		{Name: "redis", Check: gate.Ping},
		{Name: "mysql", Check: db.PingContext},
		{Name: "migrations", Check: func(ctx context.Context) error {
			pending, err := mysqlstore.Pending(ctx, db)
			if err != nil {
				return err
			}
			if len(pending) > 0 {
				return fmt.Errorf("%d migrations not applied", len(pending))
			}
			return nil
		}},
		{Name: "rabbitmq", Check: broker.Ping},
		{Name: "gate", Check: gatesInitialised(ledger.Products(), gate, readinessProductCap)},
	}
}

// errGateMissing is a product of the catalogue the gate has no counters for: orders for it
// would be refused until it is rebuilt.
var errGateMissing = errors.New("gate not initialised")

// gatesInitialised checks that the gate knows the first max products of the catalogue.
func gatesInitialised(catalog domain.ProductCatalog, gate domain.StockGate, max int) func(context.Context) error {
	return func(ctx context.Context) error {
		products, err := catalog.Products(ctx)
		if err != nil {
			return err
		}
		if len(products) > max {
			products = products[:max]
		}
		for _, p := range products {
			_, ok, err := gate.Levels(ctx, p.ID())
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("product %d: %w", p.ID(), errGateMissing)
			}
		}
		return nil
	}
}
