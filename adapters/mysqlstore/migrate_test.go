package mysqlstore_test

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/migrations"
)

const migrateDatabase = "cardshop_test_mysqlstore_migrate"

// TestMigrate applies the schema to an empty database from two "processes" at once, then
// checks that a second Migrate is a no-op.
func TestMigrate(t *testing.T) {
	openDB(t) // the service check
	ctx := t.Context()
	server, err := mysqlstore.Open(porttest.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if _, err := server.ExecContext(ctx, "DROP DATABASE IF EXISTS "+migrateDatabase); err != nil {
		t.Fatal(err)
	}
	dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, migrateDatabase)
	if err != nil {
		t.Fatal(err)
	}
	want := migrations.Versions()

	first, err := mysqlstore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := mysqlstore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()

	pending, err := mysqlstore.Pending(ctx, first)
	if err != nil || !slices.Equal(pending, want) {
		t.Fatalf("Pending on an empty database = %v, %v; want %v", pending, err, want)
	}

	var wg sync.WaitGroup
	results := make([][]string, 2)
	errs := make([]error, 2)
	for i, db := range []*bun.DB{first, second} {
		wg.Go(func() { results[i], errs[i] = mysqlstore.Migrate(ctx, db) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate: %v", err)
	}
	all := append(slices.Clone(results[0]), results[1]...)
	slices.Sort(all)
	if !slices.Equal(all, want) {
		t.Fatalf("concurrent Migrate applied %v and %v; want each of %v exactly once", results[0], results[1], want)
	}

	again, err := mysqlstore.Migrate(ctx, first)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Migrate = %v, %v; want nothing applied", again, err)
	}
	if pending, err := mysqlstore.Pending(ctx, second); err != nil || len(pending) != 0 {
		t.Fatalf("Pending after Migrate = %v, %v; want none", pending, err)
	}
	var recorded int
	if err := first.NewRaw("SELECT COUNT(*) FROM schema_migrations").Scan(ctx, &recorded); err != nil || recorded != len(want) {
		t.Fatalf("schema_migrations holds %d rows (%v), want %d", recorded, err, len(want))
	}

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
		"schema_migrations.PRIMARY"} {
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

func TestSplitStatements(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   []string
	}{
		{"plain", "CREATE TABLE a (x INT);\nCREATE TABLE b (y INT);\n", []string{"CREATE TABLE a (x INT)", "CREATE TABLE b (y INT)"}},
		{"no final semicolon", "SELECT 1; SELECT 2", []string{"SELECT 1", "SELECT 2"}},
		{"quotes", "SELECT 'a;b'; SELECT \"c;d\"; SELECT `e;f`", []string{"SELECT 'a;b'", `SELECT "c;d"`, "SELECT `e;f`"}},
		{"escapes", `SELECT 'it''s;'; SELECT 'back\';slash'`, []string{`SELECT 'it''s;'`, `SELECT 'back\';slash'`}},
		{"comments", "/* a; b */ SELECT 1; # x; y\nSELECT 2;\n-- trailing; comment\n",
			[]string{"/* a; b */ SELECT 1", "# x; y\nSELECT 2"}},
		{"double dash without space is minus", "SELECT 5--1; SELECT 2", []string{"SELECT 5--1", "SELECT 2"}},
		{"only comments", "-- nothing\n/* here; */\n  ;\n", nil},
		{"executable comment", "/*!40101 SET NAMES utf8mb4 */;", []string{"/*!40101 SET NAMES utf8mb4 */"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mysqlstore.SplitStatements(tt.script)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("split = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"SELECT 'open", "SELECT 1 /* open", "SELECT `x"} {
		if _, err := mysqlstore.SplitStatements(bad); err == nil {
			t.Errorf("split %q: no error, want one", bad)
		}
	}
}

func TestEmbeddedMigrationsSplit(t *testing.T) {
	for _, v := range migrations.Versions() {
		body, err := fs.ReadFile(migrations.FS, v+".sql")
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := mysqlstore.SplitStatements(string(body))
		if err != nil || len(stmts) == 0 {
			t.Fatalf("%s: %d statements, %v", v, len(stmts), err)
		}
	}
}
