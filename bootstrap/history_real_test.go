package bootstrap_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/lab/historytest"
	"cardshop/adapters/memory"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/adapters/rabbitmq"
	"cardshop/adapters/redisgate"
	"cardshop/application"
	"cardshop/domain"
)

// Each run of the history has a MariaDB database and a RabbitMQ prefix of its own
// (cardshop_test_history_<random>, cardshop-history-<random>), deleted when it ends: the outbox
// and the delay queue are not per product, so two runs at once on one machine (two checkouts'
// tests) sharing them would relay and close each other's orders.

// TestConcurrentHistoryRealAdapters runs the concurrent history test (package historytest) on
// Redis, MariaDB and RabbitMQ, built with the constructors bootstrap uses: the gate on Redis
// (auto-pipelined), the ledger on MariaDB, the delay queue and the events on RabbitMQ; the
// payment providers are the history's own, in process, as on the memory adapters.
// HISTORY_SEED replays a run's operation streams; `make soak` runs it for longer.
func TestConcurrentHistoryRealAdapters(t *testing.T) {
	historytest.Run(t, historytest.Backend{Name: "Redis, MariaDB and RabbitMQ", Package: "./bootstrap/",
		Duration: 20 * time.Second, Open: func(t *testing.T, cfg application.Config) historytest.Ports {
			return openRealHistory(t, cfg, false)
		}})
}

// TestConcurrentHistoryRealAdaptersBatching runs the history on the same adapters with the
// ledger group-committing placed orders (CARDSHOP_LEDGER_BATCH=on), for a shorter time. It
// has one lane, so that the history's dozen workers do share batches.
func TestConcurrentHistoryRealAdaptersBatching(t *testing.T) {
	historytest.Run(t, historytest.Backend{Name: "Redis, batching MariaDB and RabbitMQ", Package: "./bootstrap/",
		Duration: 10 * time.Second, Open: func(t *testing.T, cfg application.Config) historytest.Ports {
			return openRealHistory(t, cfg, true)
		}})
}

// openRealHistory opens the real adapters for a history; batch makes the ledger a
// group-committing one.
func openRealHistory(t *testing.T, cfg application.Config, batch bool) historytest.Ports {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)

	rdb := redis.NewClient(&redis.Options{Addr: porttest.RedisAddr, PoolSize: 64})
	t.Cleanup(func() { _ = rdb.Close() })
	porttest.RequireService(t, "Redis", rdb.Ping(ctx).Err())
	ap, err := redisgate.AutoPipeliner(rdb)
	if err != nil {
		t.Fatal(err)
	}
	gate := redisgate.New(rdb).WithAutoPipeline(ap)

	run := fmt.Sprintf("%016x", rand.Uint64())
	name := "cardshop_test_history_" + run
	dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, name)
	porttest.RequireService(t, "MariaDB", err)
	t.Cleanup(func() { dropDatabase(t, name) })
	db, err := mysqlstore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(32)
	if _, err := mysqlstore.Migrate(ctx, db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	keyring, err := mysqlstore.NewKeyring(mysqlstore.GenerateKeyring())
	if err != nil {
		t.Fatal(err)
	}

	prefix, delays := "cardshop-history-"+run, []time.Duration{cfg.OrderTimeout}
	broker, err := rabbitmq.Dial(ctx, rabbitmq.Config{URL: porttest.AMQPURL, Prefix: prefix, Delays: delays, Logger: quiet})
	porttest.RequireService(t, "RabbitMQ", err)
	t.Cleanup(func() {
		if err := broker.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rabbitmq.DeleteTopology(ctx, porttest.AMQPURL, prefix, delays); err != nil {
			t.Errorf("delete the history's queues: %v", err)
		}
	})
	var ledger domain.Ledger = mysqlstore.New(db, keyring)
	if batch {
		obs := &batchSizes{}
		ledger = mysqlstore.NewBatching(ledger.(*mysqlstore.Ledger), mysqlstore.BatchConfig{Lanes: 1, Observer: obs})
		t.Cleanup(func() {
			t.Logf("group commit: %d batches, %d of several orders (largest %d), %d fallbacks",
				obs.batches.Load(), obs.shared.Load(), obs.largest.Load(), obs.fallbacks.Load())
		})
	}
	return historytest.Ports{Ledger: ledger, Gate: gate, Queue: broker, Publisher: broker,
		Clock: &memory.SystemClock{}, Consume: broker.Consume, NewProductID: porttest.NewProductID}
}

// batchSizes counts a batching ledger's batches, for the history's log.
type batchSizes struct{ batches, shared, largest, fallbacks atomic.Int64 }

func (b *batchSizes) LedgerBatchSize(n int) {
	b.batches.Add(1)
	if n > 1 {
		b.shared.Add(1)
	}
	for {
		l := b.largest.Load()
		if int64(n) <= l || b.largest.CompareAndSwap(l, int64(n)) {
			return
		}
	}
}

func (b *batchSizes) LedgerBatchWait(time.Duration) {}
func (b *batchSizes) LedgerBatchFallback(string)    { b.fallbacks.Add(1) }
