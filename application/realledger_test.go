package application_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/domain"
)

// realLedger opens, once per test that calls it, a migrated MariaDB database of its own (name)
// with fixed keys (what earlier runs sealed stays readable), and, with redis set, a Redis
// client: the real adapters of the tests that run on memory and on MariaDB + Redis. get stops
// the test as porttest.RequireService says when a service cannot be reached; the pool and the
// client are closed when the test ends, so a -count=N run does not pile up connections, and
// the pool holds at most 16.
type realLedger struct {
	name  string
	redis bool

	once   sync.Once
	ledger domain.Ledger
	pool   interface{ Close() error }
	rc     redis.UniversalClient
	err    error
}

func newRealLedger(t *testing.T, name string, withRedis bool) *realLedger {
	r := &realLedger{name: name, redis: withRedis}
	t.Cleanup(func() {
		if r.pool != nil {
			_ = r.pool.Close()
		}
		if r.rc != nil {
			_ = r.rc.Close()
		}
	})
	return r
}

func (r *realLedger) get(t *testing.T) (domain.Ledger, redis.UniversalClient) {
	t.Helper()
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, r.name)
		if err != nil {
			r.err = err
			return
		}
		db, err := mysqlstore.Open(dsn)
		if err != nil {
			r.err = err
			return
		}
		// A few connections: the packages' tests run at once, and MariaDB allows 151 in all.
		db.SetMaxOpenConns(16)
		r.pool = db
		if _, err = mysqlstore.Migrate(ctx, db); err != nil {
			r.err = err
			return
		}
		kr, err := mysqlstore.NewKeyring("k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
			"aGFzaCBrZXkgZm9yIGNhcmRzaG9wIHRlc3RzIG9ubHkh")
		if err != nil {
			r.err = err
			return
		}
		r.ledger = mysqlstore.New(db, kr)
		if r.redis {
			r.rc = redis.NewClient(&redis.Options{Addr: porttest.RedisAddr})
			r.err = r.rc.Ping(ctx).Err()
		}
	})
	what := "MariaDB"
	if r.redis {
		what = "MariaDB and Redis"
	}
	porttest.RequireService(t, what, r.err)
	return r.ledger, r.rc
}
