package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"cardshop/adapters/metrics"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/rabbitmq"
	"cardshop/adapters/redisgate"
	"cardshop/application"
	"cardshop/domain"
)

// RealAdapters provides the production adapters: the gate on Redis (a cluster when several
// addresses are given), the ledger on MySQL/MariaDB, the delay queue and events on RabbitMQ.
// The start fails, naming the service, when one is unreachable or the schema is not migrated.
func RealAdapters() fx.Option {
	return fx.Options(
		fx.Provide(
			newRedisClient,
			fx.Annotate(newGate, fx.As(new(domain.StockGate)), fx.As(fx.Self())),
			newRedisLimiter,
			newMySQL,
			newKeyring,
			mysqlstore.New,
			newLedger,
			newSalesReport,
			fx.Annotate(newBroker, fx.As(new(domain.DelayQueue)), fx.As(new(domain.EventPublisher)),
				fx.As(new(Consumer)), fx.As(fx.Self())),
			newLogAlerter,
			realReadiness,
			brokerQueueBacklog,
		),
		fx.Invoke(ensureGates),
		// The delay queue's backlog: one channel and a passive declare per queue per scrape,
		// nothing next to a scrape interval of seconds.
		fx.Invoke(func(m *metrics.Metrics, b *rabbitmq.Broker) {
			m.WatchQueueDepths(b.QueueDepths)
			m.WatchCloseConfirms(b.CloseConfirms)
		}),
		fx.Invoke(func(m *metrics.Metrics, l *mysqlstore.Ledger) {
			m.WatchLedgerRetries(map[string]func() int64{
				"deadlock":          func() int64 { return l.Stats().Deadlocks },
				"lock_wait_timeout": func() int64 { return l.Stats().LockTimeouts },
				"codes_locked":      func() int64 { return l.Stats().LockedCodes },
			})
		}),
	)
}

// newSalesReport is the read model of the shop's money: the MySQL ledger's own aggregate
// queries (reads, which the group-committing ledger would pass through anyway).
func newSalesReport(l *mysqlstore.Ledger) domain.SalesReport { return l }

// newLedger is the ledger port: the MySQL ledger, group-committing the writes of concurrent
// placed orders and status changes when CARDSHOP_LEDGER_BATCH is on, in batchLanes lanes.
func newLedger(cfg Config, l *mysqlstore.Ledger, m *metrics.Metrics) domain.Ledger {
	if !cfg.LedgerBatch {
		return l
	}
	return mysqlstore.NewBatching(l, mysqlstore.BatchConfig{Max: cfg.LedgerBatchMax, Wait: cfg.LedgerBatchWait,
		Lanes: batchLanes(cfg), Observer: m})
}

// batchLanes is CARDSHOP_LEDGER_BATCH_LANES, at most a quarter of the pool (at least 1), so
// that the batches leave connections to the rest.
func batchLanes(cfg Config) int {
	return max(1, min(cfg.LedgerBatchLanes, cfg.MySQLConns/4))
}

// logAlerter raises alerts as ERROR log lines with kind "alert", for the log pipeline to page on.
type logAlerter struct{ log *slog.Logger }

func newLogAlerter(log *slog.Logger) domain.Alerter { return logAlerter{log} }

func (a logAlerter) Alert(ctx context.Context, al domain.Alert) {
	a.log.ErrorContext(ctx, "alert", "alert", al.Kind, "product", al.Product, "order_no", al.OrderNo, "message", al.Message)
}

func newKeyring(cfg Config) (*mysqlstore.Keyring, error) {
	return mysqlstore.NewKeyring(cfg.CodeKeys.Reveal(), cfg.CodeHash.Reveal())
}

func newRedisClient(lc fx.Lifecycle, cfg Config) (redis.UniversalClient, error) {
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: cfg.RedisAddrs, MasterName: cfg.RedisMaster,
		IsClusterMode: cfg.RedisMaster == "" && len(cfg.RedisAddrs) > 1,
		PoolSize:      256, MinIdleConns: 32, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		// A call ends at its context's deadline (the request's) when that comes before the 2 s.
		ContextTimeoutEnabled: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis %s: %w", strings.Join(cfg.RedisAddrs, ","), err)
	}
	warmRedis(ctx, c)
	lc.Append(fx.StopHook(c.Close))
	return c, nil
}

// newGate builds the Redis gate; with CARDSHOP_REDIS_AUTOPIPELINE the hot reserve script runs
// through go-redis's auto-pipeliner, so concurrent reservations share round trips, and with
// CARDSHOP_SOLDOUT_LEASE a sold-out product's new orders are answered without one
// (docs/BENCHMARKS.md has the numbers); with CARDSHOP_REDIS_REPLICA_ACKS a reservation is
// answered only once that many replicas have it (a failover then loses none). Its keys live
// under CARDSHOP_REDIS_PREFIX.
func newGate(cfg Config, c redis.UniversalClient, m *metrics.Metrics) (*redisgate.Gate, error) {
	g := redisgate.New(c).WithKeyPrefix(cfg.RedisPrefix).WithSoldOutLease(cfg.SoldOutLease, m).WithReplicaAcks(cfg.RedisReplicaAcks, cfg.RedisReplicaWait)
	if !cfg.RedisAutoPipeline {
		return g, nil
	}
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		return nil, fmt.Errorf("redis auto-pipeline: %w", err)
	}
	return g.WithAutoPipeline(ap), nil
}

// warmRedis opens the idle connections before the first request: a cold pool would open them
// under the first burst of a flash sale.
func warmRedis(ctx context.Context, c redis.UniversalClient) {
	for i := 0; i < 32; i++ {
		_ = c.Ping(ctx).Err()
	}
}

func newMySQL(lc fx.Lifecycle, cfg Config, log *slog.Logger) (*bun.DB, error) {
	db, err := mysqlstore.Open(cfg.MySQLDSN.Reveal())
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db.SetMaxOpenConns(cfg.MySQLConns)
	db.SetMaxIdleConns(cfg.MySQLConns)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: %w", err)
	}
	if cfg.Migrate {
		applied, err := mysqlstore.Migrate(ctx, db)
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("migrate: %w", err)
		}
		if len(applied) > 0 {
			log.Info("migrations applied", "versions", applied)
		}
	}
	pending, err := mysqlstore.Pending(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: %w", err)
	}
	if len(pending) > 0 {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: migrations not applied: %s (run `cardshop migrate` or set CARDSHOP_MIGRATE=true)", strings.Join(pending, ", "))
	}
	lc.Append(fx.StopHook(db.Close))
	return db, nil
}

func newBroker(lc fx.Lifecycle, cfg Config, log *slog.Logger) (*rabbitmq.Broker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := rabbitmq.Dial(ctx, rabbitmq.Config{URL: cfg.AMQPURL.Reveal(), Prefix: cfg.AMQPPrefix, Channels: 64, Unconfirmed: cfg.AMQPUnconfirmed, Delays: []time.Duration{cfg.OrderTimeout}, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	lc.Append(fx.StopHook(b.Close))
	return b, nil
}

// ensureGates initialises the gate of every product Redis does not know (a fresh or flushed
// Redis) from the ledger before the service takes traffic.
func ensureGates(lc fx.Lifecycle, catalogue *application.Catalogue, log *slog.Logger) {
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		n, err := catalogue.EnsureGates(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			log.Info("gates rebuilt from the ledger at start", "products", n)
		}
		return nil
	}))
}

// brokerQueueBacklog is RabbitMQ's count of the messages ready in each queue of the service
// (Broker.QueueDepths; a delay bucket's message carries a group of order closes).
func brokerQueueBacklog(b *rabbitmq.Broker) QueueBacklog {
	return func(ctx context.Context) (map[string]int64, error) {
		d, err := b.QueueDepths(ctx)
		if err != nil {
			return nil, err
		}
		out := make(map[string]int64, len(d))
		for q, n := range d {
			out[q] = int64(n)
		}
		return out, nil
	}
}
