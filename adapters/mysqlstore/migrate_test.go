package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/migrations"
)

const migrateDatabase = "cardshop_test_mysqlstore_migrate"

// emptyDatabase drops and creates the database name and returns its DSN.
func emptyDatabase(t *testing.T, name string) string {
	t.Helper()
	openDB(t) // the service check
	ctx := t.Context()
	server, err := mysqlstore.Open(porttest.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if _, err := server.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		t.Fatal(err)
	}
	dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, name)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// handles opens n pools on dsn: n processes, as far as the server can tell.
func handles(t *testing.T, dsn string, n int) []*bun.DB {
	t.Helper()
	dbs := make([]*bun.DB, n)
	for i := range dbs {
		db, err := mysqlstore.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs
}

// migrateAtOnce runs Migrate on every handle at once and checks that between them they
// applied want, each version exactly once.
func migrateAtOnce(t *testing.T, dbs []*bun.DB, want []string) {
	t.Helper()
	var wg sync.WaitGroup
	results := make([][]string, len(dbs))
	errs := make([]error, len(dbs))
	for i, db := range dbs {
		wg.Go(func() { results[i], errs[i] = mysqlstore.Migrate(t.Context(), db) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate: %v", err)
	}
	all := slices.Concat(results...)
	slices.Sort(all)
	if !slices.Equal(all, want) {
		t.Fatalf("concurrent Migrate applied %v; want each of %v exactly once", results, want)
	}
}

// recorded reads bun_migrations: the time each migration was recorded, by number ("0001").
func recorded(t *testing.T, db *bun.DB) map[string]time.Time {
	t.Helper()
	var rows []struct {
		Name       string    `bun:"name"`
		MigratedAt time.Time `bun:"migrated_at"`
	}
	if err := db.NewRaw("SELECT name, migrated_at FROM bun_migrations").Scan(t.Context(), &rows); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		if _, dup := out[r.Name]; dup {
			t.Fatalf("bun_migrations records %s twice", r.Name)
		}
		out[r.Name] = r.MigratedAt
	}
	return out
}

// numbers are the versions' numbers ("0001" of "0001_init"), as bun_migrations names them.
func numbers(versions []string) []string {
	out := make([]string, len(versions))
	for i, v := range versions {
		out[i], _, _ = strings.Cut(v, "_")
	}
	return out
}

// checkRecorded: bun_migrations records exactly the versions want, each once.
func checkRecorded(t *testing.T, db *bun.DB, want []string) {
	t.Helper()
	if got := slices.Sorted(maps.Keys(recorded(t, db))); !slices.Equal(got, numbers(want)) {
		t.Fatalf("bun_migrations records %v, want %v", got, numbers(want))
	}
}

// TestMigrate applies the schema to an empty database from four "processes" at once, then
// checks that a second Migrate is a no-op.
func TestMigrate(t *testing.T) {
	ctx := t.Context()
	dbs := handles(t, emptyDatabase(t, migrateDatabase), 4)
	first, second := dbs[0], dbs[1]
	want := migrations.Versions()

	pending, err := mysqlstore.Pending(ctx, first)
	if err != nil || !slices.Equal(pending, want) {
		t.Fatalf("Pending on an empty database = %v, %v; want %v", pending, err, want)
	}

	migrateAtOnce(t, dbs, want)

	again, err := mysqlstore.Migrate(ctx, first)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Migrate = %v, %v; want nothing applied", again, err)
	}
	if pending, err := mysqlstore.Pending(ctx, second); err != nil || len(pending) != 0 {
		t.Fatalf("Pending after Migrate = %v, %v; want none", pending, err)
	}
	checkRecorded(t, first, want)

	// The schema the ledger relies on.
	var keys []struct {
		Table string `bun:"table_name"`
		Index string `bun:"index_name"`
	}
	if err := first.NewRaw("SELECT DISTINCT table_name, index_name FROM information_schema.statistics WHERE table_schema = ?",
		migrateDatabase).Scan(ctx, &keys); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, k := range keys {
		have[k.Table+"."+k.Index] = true
	}
	if have["outbox.idx_unsent"] {
		t.Error("outbox.idx_unsent is still there: 0002 replaces it with idx_due")
	}
	for _, k := range []string{"products.PRIMARY", "card_stock.uk_product_code", "card_stock.uk_pool_code", "card_stock.idx_alloc", "card_stock.idx_order",
		"orders.PRIMARY", "orders.uk_buyer_idem", "orders.idx_expiry", "orders.idx_product_status",
		"stock_flow.idx_product", "stock_flow.uk_ref_type", "outbox.idx_due",
		"payments.PRIMARY", "payments.idx_provider_ref", "payment_notifications.PRIMARY", "payment_notifications.idx_order",
		"payment_notifications.idx_received", "operators.PRIMARY", "audit_log.PRIMARY", "audit_log.idx_operator",
		"audit_log.idx_action", "audit_log.idx_at", "orders.idx_buyer_created", "orders.idx_created", "outbox.idx_key",
		"alerts.PRIMARY", "alerts.uk_open", "alerts.idx_open_id", "alerts.idx_kind", "alerts.idx_product",
		"bun_migrations.PRIMARY"} {
		if !have[k] {
			t.Errorf("index %s is missing", k)
		}
	}

	// An outbox row written without retry_at (by the previous version, during a rolling
	// upgrade) is due at once.
	if _, err := first.ExecContext(ctx, "INSERT INTO outbox (topic, msg_key, payload, created_at) VALUES ('gate.change', 'old', '{}', UTC_TIMESTAMP(6))"); err != nil {
		t.Fatalf("insert without retry_at: %v", err)
	}
	var due int
	if err := first.NewRaw("SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL AND retry_at <= ? AND msg_key = 'old'",
		time.Now().UTC()).Scan(ctx, &due); err != nil || due != 1 {
		t.Fatalf("row without retry_at: due %d (%v), want 1", due, err)
	}
}

func TestMigrateRespectsContext(t *testing.T) {
	db := openDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := mysqlstore.Migrate(ctx, db); !errors.Is(err, context.Canceled) {
		t.Fatalf("Migrate with a cancelled context: err = %v, want context.Canceled", err)
	}
}

// legacyMigrate leaves db as the runner before bun/migrate (until commit 409c12b) left it
// after applying the first n embedded migrations: their schema, and schema_migrations (its
// DDL as that runner wrote it) listing them, applied a minute apart from 2025-01-01.
func legacyMigrate(t *testing.T, db *bun.DB, n int) map[string]time.Time {
	t.Helper()
	ctx := t.Context()
	const createMigrationsTable = "CREATE TABLE IF NOT EXISTS schema_migrations (" +
		"version VARCHAR(255) NOT NULL PRIMARY KEY, applied_at DATETIME(6) NOT NULL" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
	if _, err := db.DB.ExecContext(ctx, createMigrationsTable); err != nil {
		t.Fatal(err)
	}
	at := make(map[string]time.Time)
	for i, v := range migrations.Versions()[:n] {
		stmts, err := mysqlstore.Statements(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			if _, err := db.DB.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", v, err)
			}
		}
		applied := time.Date(2025, 1, 1, 0, i, 0, 0, time.UTC)
		if _, err := db.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", v, applied); err != nil {
			t.Fatal(err)
		}
		at[numbers([]string{v})[0]] = applied
	}
	return at
}

// TestMigrateForwardFromLegacyRunner: a database the runner before bun/migrate left behind
// (some or all migrations applied, recorded in schema_migrations) migrates forward without a
// manual step: Pending counts what it recorded, Migrate from three processes at once applies
// only the newer migrations, bun_migrations then records every migration once (those of
// schema_migrations with their times), and schema_migrations is left as it was.
func TestMigrateForwardFromLegacyRunner(t *testing.T) {
	all := migrations.Versions()
	for _, behind := range []int{5, 0} {
		t.Run(fmt.Sprintf("%d behind", behind), func(t *testing.T) {
			ctx := t.Context()
			dbs := handles(t, emptyDatabase(t, fmt.Sprintf("%s_legacy_%d", migrateDatabase, behind)), 3)
			db := dbs[0]
			legacy := legacyMigrate(t, db, len(all)-behind)
			newer := all[len(all)-behind:]

			pending, err := mysqlstore.Pending(ctx, db)
			if err != nil || !slices.Equal(pending, newer) {
				t.Fatalf("Pending on the legacy database = %v, %v; want %v", pending, err, newer)
			}
			migrateAtOnce(t, dbs, newer)
			if again, err := mysqlstore.Migrate(ctx, dbs[1]); err != nil || len(again) != 0 {
				t.Fatalf("second Migrate = %v, %v; want nothing applied", again, err)
			}
			if pending, err := mysqlstore.Pending(ctx, dbs[2]); err != nil || len(pending) != 0 {
				t.Fatalf("Pending after Migrate = %v, %v; want none", pending, err)
			}
			checkRecorded(t, db, all)
			got := recorded(t, db)
			for n, at := range legacy {
				if !got[n].Equal(at) {
					t.Errorf("bun_migrations records %s at %v, want %v (schema_migrations' time)", n, got[n], at)
				}
			}
			var rows int
			if err := db.NewRaw("SELECT COUNT(*) FROM schema_migrations").Scan(ctx, &rows); err != nil || rows != len(legacy) {
				t.Fatalf("schema_migrations holds %d rows (%v), want the %d it had", rows, err, len(legacy))
			}
		})
	}
}

// TestMigrateToleratesNewerDatabase: migrations the database records and this binary does
// not embed (a newer release ran first; recorded by either runner) are left alone, as the
// runner before bun/migrate left them: nothing is pending, Migrate applies nothing.
func TestMigrateToleratesNewerDatabase(t *testing.T) {
	ctx := t.Context()
	db := handles(t, emptyDatabase(t, migrateDatabase+"_newer"), 1)[0]
	all := migrations.Versions()
	legacyMigrate(t, db, len(all))
	if _, err := db.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES ('9998_from_the_future', UTC_TIMESTAMP(6))"); err != nil {
		t.Fatal(err)
	}
	if applied, err := mysqlstore.Migrate(ctx, db); err != nil || len(applied) != 0 {
		t.Fatalf("Migrate = %v, %v; want nothing applied", applied, err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO bun_migrations (name, group_id, migrated_at) VALUES ('9999', 9, UTC_TIMESTAMP(6))"); err != nil {
		t.Fatal(err)
	}
	if applied, err := mysqlstore.Migrate(ctx, db); err != nil || len(applied) != 0 {
		t.Fatalf("Migrate = %v, %v; want nothing applied", applied, err)
	}
	if pending, err := mysqlstore.Pending(ctx, db); err != nil || len(pending) != 0 {
		t.Fatalf("Pending = %v, %v; want none", pending, err)
	}
	checkRecorded(t, db, append(slices.Clone(all), "9998_from_the_future", "9999_from_the_future"))
}
