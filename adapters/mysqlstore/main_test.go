package mysqlstore_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/migrations"
)

// testDatabase is this package's own database, so that packages tested in parallel never see
// each other's rows. It is named after the newest migration: a checkout with other migrations
// (another branch, an older release's tests) never runs on a schema it does not know, nor
// applies its own to this one.
var testDatabase = "cardshop_test_mysqlstore_" + newestMigration()

func newestMigration() string {
	v := migrations.Versions()
	n, _, _ := strings.Cut(v[len(v)-1], "_")
	return n
}

// Fixed test keys (32 and 32 bytes, base64): rows written by earlier runs stay readable.
const (
	testKeyOld  = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	testKeyNew  = "k2:ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
	testHashKey = "aGFzaCBrZXkgZm9yIGNhcmRzaG9wIHRlc3RzIG9ubHkh"
)

var shared struct {
	once sync.Once
	dsn  string
	db   *bun.DB
	err  error
}

// openDB returns the migrated test database, or stops the test as porttest.RequireService
// says when MariaDB cannot be reached (skip locally, fail with CI=true).
func openDB(t testing.TB) *bun.DB {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shared.dsn, shared.err = mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, testDatabase)
		if shared.err != nil {
			return
		}
		shared.db, shared.err = mysqlstore.Open(shared.dsn)
		if shared.err != nil {
			return
		}
		if shared.err = shared.db.PingContext(ctx); shared.err != nil {
			return
		}
		_, shared.err = mysqlstore.Migrate(ctx, shared.db)
	})
	porttest.RequireService(t, "MariaDB", shared.err)
	return shared.db
}

func keyring(t testing.TB, keys string) *mysqlstore.Keyring {
	t.Helper()
	k, err := mysqlstore.NewKeyring(keys, testHashKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newLedger is a ledger on the shared test database with the old test key active.
func newLedger(t testing.TB) *mysqlstore.Ledger {
	t.Helper()
	return mysqlstore.New(openDB(t), keyring(t, testKeyOld))
}

// rawDB is the test database through database/sql alone, to look at rows as stored.
func rawDB(t testing.TB) *sql.DB { return openDB(t).DB }
