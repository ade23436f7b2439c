package bootstrap_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/adapters/redisgate"
	"cardshop/bootstrap"
	"cardshop/domain"
	"cardshop/migrations"
)

// The CLI subcommands against the real adapters: migrate on MariaDB directly, and
// import-codes, reconcile, token and pay against a service running on Redis, MariaDB and
// RabbitMQ. Each test has a database of its own (cardshop_test_cli_<random>), dropped at the
// end with the Redis keys of its products, so it never meets another test's rows and no later
// start rebuilds its gates.

// cliDatabase creates an empty database of the test's own and drops it when the test ends; it
// returns its DSN and a handle on it.
// dropDatabase drops a test's own database, if it is there.
func dropDatabase(t *testing.T, name string) {
	server, err := sql.Open("mysql", porttest.MySQLDSN)
	if err != nil {
		t.Errorf("drop database %s: %v", name, err)
		return
	}
	defer server.Close()
	if _, err := server.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
		t.Errorf("drop database %s: %v", name, err)
	}
}

func cliDatabase(t *testing.T) (string, *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("cardshop_test_cli_%016x", rand.Uint64())
	dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, name)
	porttest.RequireService(t, "MariaDB", err)
	t.Cleanup(func() { dropDatabase(t, name) })
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return dsn, db
}

// cliShop is a real service on a database of the test's own.
type cliShop struct {
	c    client
	rdb  *redis.Client
	db   *sql.DB
	gate *redisgate.Gate

	mu       sync.Mutex
	products []domain.ProductID // whose Redis keys go at the end
}

// cliService starts the service on Redis, RabbitMQ and a fresh database (cliDatabase). At the
// end, after the service has stopped, the Redis keys of every product the test named through
// productID are deleted, then the database dropped.
func cliService(t *testing.T) *cliShop {
	t.Helper()
	dsn, db := cliDatabase(t)
	s := &cliShop{db: db}
	cleaner := redis.NewClient(&redis.Options{Addr: porttest.RedisAddr})
	t.Cleanup(func() { // registered before realService's: runs once the service has stopped
		defer cleaner.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.products {
			// Every gate key of a product carries its {pid} hash tag (see package redisgate);
			// the tests' buyer ids carry the pid too, so their rate-limit keys go as well.
			iter := cleaner.Scan(ctx, 0, fmt.Sprintf("*%d*", p), 1000).Iterator()
			var keys []string
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			if err := iter.Err(); err != nil {
				t.Errorf("scan the keys of product %d: %v", p, err)
				continue
			}
			if len(keys) > 0 {
				if err := cleaner.Del(ctx, keys...).Err(); err != nil {
					t.Errorf("delete the keys of product %d: %v", p, err)
				}
			}
		}
	})
	s.c, s.rdb, _ = realService(t, time.Minute, func(cfg *bootstrap.Config) { cfg.MySQLDSN = bootstrap.ConnString(dsn) })
	s.gate = redisgate.New(s.rdb)
	return s
}

// productID returns a fresh product id whose Redis keys are deleted at the end.
func (s *cliShop) productID() domain.ProductID {
	p := porttest.NewProductID()
	s.mu.Lock()
	s.products = append(s.products, p)
	s.mu.Unlock()
	return p
}

// product creates a product through the admin API.
func (s *cliShop) product(name string, price, maxPerOrder int) domain.ProductID {
	p := s.productID()
	s.c.want(201, "POST", "/admin/products", adminToken,
		fmt.Sprintf(`{"id":%d,"name":%q,"price":%d,"max_per_order":%d}`, p, name, price, maxPerOrder), nil)
	return p
}

// levels reads the product's gate through the Redis adapter; ok is false when the gate does
// not know it.
func (s *cliShop) levels(t *testing.T, p domain.ProductID) (domain.GateLevels, bool) {
	t.Helper()
	l, ok, err := s.gate.Levels(context.Background(), p)
	if err != nil {
		t.Fatalf("gate levels of %d: %v", p, err)
	}
	return l, ok
}

// wantGate waits (the change may still be in the outbox) until the gate holds stock and sold.
func (s *cliShop) wantGate(t *testing.T, p domain.ProductID, stock, sold int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, ok := s.levels(t, p)
		if ok && l.Stock == stock && l.Sold == sold && !l.Frozen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gate of %d: %+v known %t, want stock %d sold %d", p, l, ok, stock, sold)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// count runs a COUNT/SUM query that answers one integer.
func count(t *testing.T, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var n sql.NullInt64
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n.Int64
}

// cardStatuses counts the product's codes in card_stock by status.
func cardStatuses(t *testing.T, db *sql.DB, p domain.ProductID) map[string]int64 {
	t.Helper()
	rows, err := db.Query("SELECT status, COUNT(*) FROM card_stock WHERE product_id=? GROUP BY status", p)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		got[st] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCLIRealMigrate: `migrate` on a fresh MariaDB database applies every embedded migration,
// and the schema is really there (tables, the unique keys that defend the invariants,
// bun_migrations); a second run changes nothing and says so; the service then starts on
// that database without migrating it. Usage errors and a database that does not exist exit 1
// and create nothing.
func TestCLIRealMigrate(t *testing.T) {
	dsn, db := cliDatabase(t)
	ctx := context.Background()
	mc, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	tables := func() []string {
		t.Helper()
		rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema=? ORDER BY table_name", mc.DBName)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return names
	}
	if got := tables(); len(got) != 0 {
		t.Fatalf("a fresh database has tables %v", got)
	}
	absent := mc.Clone()
	absent.DBName = mc.DBName + "_absent"
	server := mc.Clone()
	server.DBName = ""

	// Usage errors and bad DSNs: exit 1, a message saying what is wrong, nothing created.
	// CARDSHOP_MYSQL_DSN names a database that does not exist, so a command that fell back to
	// it could not change anything either.
	t.Setenv("CARDSHOP_MYSQL_DSN", absent.FormatDSN())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", dsn}, "unexpected argument"}, // the DSN without -dsn: not the default database instead
		{[]string{"migrate", "-dsn", dsn, "extra"}, `unexpected argument "extra"`},
		{[]string{"migrate", "-dsn", absent.FormatDSN()}, "Unknown database '" + absent.DBName + "'"},
		{[]string{"migrate"}, "Unknown database '" + absent.DBName + "'"}, // CARDSHOP_MYSQL_DSN is the default
		{[]string{"migrate", "-dsn", server.FormatDSN()}, "names no database"},
		{[]string{"migrate", "-dsn", "not a dsn"}, "parse DSN"},
		{[]string{"migrate", "-nope"}, "flag provided but not defined: -nope"},
	} {
		code, out, errOut := runMain(c.args...)
		if code == 0 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errOut, c.want)
		}
	}
	if got := tables(); len(got) != 0 {
		t.Fatalf("refused commands created tables %v", got)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name=?", absent.DBName); n != 0 {
		t.Fatalf("migrate created the database %s", absent.DBName)
	}

	// First run: every embedded migration, in order.
	want := migrations.Versions()
	code, out, errOut := runMain("migrate", "-dsn", dsn)
	if code != 0 {
		t.Fatalf("migrate exited %d: %q %q", code, out, errOut)
	}
	if wantOut := "applied " + strings.Join(want, "\napplied ") + "\n"; out != wantOut {
		t.Fatalf("migrate printed %q, want %q", out, wantOut)
	}
	got := tables()
	for _, name := range []string{"card_stock", "orders", "outbox", "products", "bun_migrations", "stock_flow"} {
		if !slices.Contains(got, name) {
			t.Errorf("table %s missing after migrate; have %v", name, got)
		}
	}
	for _, k := range []struct{ table, index string }{
		{"card_stock", "uk_product_code"}, {"orders", "uk_buyer_idem"}, {"stock_flow", "uk_ref_type"},
	} {
		if n := count(t, db, "SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema=? AND table_name=? AND index_name=? AND non_unique=0",
			mc.DBName, k.table, k.index); n == 0 {
			t.Errorf("unique key %s.%s missing after migrate", k.table, k.index)
		}
	}
	applied := func() string {
		t.Helper()
		rows, err := db.QueryContext(ctx, "SELECT name, migrated_at FROM bun_migrations ORDER BY name")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var v string
			var at []byte
			if err := rows.Scan(&v, &at); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s@%s\n", v, at)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	first := applied()
	numbers := make([]string, len(want)) // bun_migrations names a migration by its number
	for i, v := range want {
		numbers[i], _, _ = strings.Cut(v, "_")
	}
	if versions := regexp.MustCompile(`@.*\n`).ReplaceAllString(first, " "); versions != strings.Join(numbers, " ")+" " {
		t.Fatalf("bun_migrations holds %q, want %v", first, numbers)
	}
	bdb, err := mysqlstore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if pending, err := mysqlstore.Pending(ctx, bdb); err != nil || len(pending) != 0 {
		t.Fatalf("pending after migrate: %v, %v", pending, err)
	}

	// Second run, with the DSN from CARDSHOP_MYSQL_DSN: nothing to do, nothing done.
	t.Setenv("CARDSHOP_MYSQL_DSN", dsn)
	code, out, errOut = runMain("migrate")
	if code != 0 || out != "schema up to date\n" {
		t.Fatalf("second migrate: exit %d, %q %q", code, out, errOut)
	}
	if again := applied(); again != first {
		t.Fatalf("the second migrate touched bun_migrations:\n%s\nwas\n%s", again, first)
	}
	if again := tables(); !slices.Equal(again, got) {
		t.Fatalf("tables %v after the second migrate, were %v", again, got)
	}

	// The service starts on the migrated database without migrating (it refuses an
	// unmigrated one) and finds the schema complete.
	c, _, _ := realService(t, time.Minute, func(cfg *bootstrap.Config) { cfg.MySQLDSN, cfg.Migrate = bootstrap.ConnString(dsn), false })
	var ready struct {
		Checks map[string]string `json:"checks"`
	}
	c.want(200, "GET", "/readyz", "", "", &ready)
	if ready.Checks["migrations"] != "ok" || ready.Checks["mysql"] != "ok" {
		t.Fatalf("readyz checks on the migrated database: %v", ready.Checks)
	}
	if again := applied(); again != first {
		t.Fatalf("the service's start touched bun_migrations:\n%s\nwas\n%s", again, first)
	}
}

// TestCLIRealImportCodes: `import-codes` streams files (one per line, CSV, and one over the
// service's 1,000-code batch) into a product on MariaDB. The printed counts are the truth:
// duplicates inside the file and codes already stored are reported and stored once, invalid
// lines are named; the rows are in card_stock (UNSOLD, encrypted), the stock-in flow adds up,
// and the Redis gate offers exactly the pool. Refused imports change nothing.
func TestCLIRealImportCodes(t *testing.T) {
	s := cliService(t)
	p := s.product("Import", 300, 5)
	code := func(i int) string { return fmt.Sprintf("IMP-%d-%04d", p, i) }
	s.c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", p), adminToken, code(0), nil) // already stored
	s.wantGate(t, p, 1, 0)
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	url, pid := s.c.base, fmt.Sprint(p)
	stockIn := func() (rows, qty int64) {
		t.Helper()
		return count(t, s.db, "SELECT COUNT(*) FROM stock_flow WHERE product_id=? AND change_type=6", p),
			count(t, s.db, "SELECT SUM(qty) FROM stock_flow WHERE product_id=? AND change_type=6", p)
	}
	wantPool := func(n int64) {
		t.Helper()
		if got := cardStatuses(t, s.db, p); len(got) != 1 || got["UNSOLD"] != n {
			t.Fatalf("card_stock of the product: %v, want UNSOLD %d", got, n)
		}
		if d := count(t, s.db, "SELECT COUNT(DISTINCT code_hash) FROM card_stock WHERE product_id=?", p); d != n {
			t.Fatalf("%d distinct codes in %d rows", d, n)
		}
		if _, qty := stockIn(); qty != n {
			t.Fatalf("stock-in flow adds up to %d, want %d", qty, n)
		}
		s.wantGate(t, p, n, 0)
	}

	// One code per line: a repeat inside the file, one already stored, a blank line, a comment
	// and an invalid line.
	lines := writeFile(t, strings.Join([]string{
		code(1), code(2), "", "# batch 7", code(2), code(0), "not a code", code(3), code(4),
	}, "\n")+"\n")
	exit, out, errOut := runCtl("import-codes", "-url", url, "-product", pid, lines)
	if exit != 0 || out != "added       4\nduplicates  2\ninvalid     1\nin pool     0\ncomments    1\n"+
		"line 4: comment\nline 5: duplicate\nline 6: duplicate\nline 7: invalid (must not contain spaces)\n" {
		t.Fatalf("import-codes: exit %d, %q %q", exit, out, errOut)
	}
	if !strings.Contains(errOut, "(100%)") || !strings.Contains(errOut, "answered 200") {
		t.Errorf("no final progress line: %q", errOut)
	}
	wantPool(5)
	// The codes are stored encrypted: no row holds a code in clear.
	rows, err := s.db.Query("SELECT code_cipher FROM card_stock WHERE product_id=?", p)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var cipher []byte
		if err := rows.Scan(&cipher); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(cipher, []byte(fmt.Sprintf("IMP-%d-", p))) {
			t.Fatalf("a code is stored in clear: %q", cipher)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}

	// CSV, the code in the first field (quoted or not), with a repeat and a stored code.
	csv := writeFile(t, strings.Join([]string{
		"# code,expires,batch",
		`"` + code(5) + `",2030-01-01,b8`,
		code(6) + ",2030-01-01,b8",
		code(1) + ",2030-01-01,b8",
		code(5) + ",2031-01-01,b9",
	}, "\n")+"\n")
	exit, out, errOut = runCtl("import-codes", "-url", url, "-product", pid, "-format", "csv", "-progress", "0", csv)
	if exit != 0 || out != "added       2\nduplicates  2\ninvalid     0\nin pool     0\ncomments    1\n"+
		"line 1: comment\nline 4: duplicate\nline 5: duplicate\n" || errOut != "" {
		t.Fatalf("import-codes -format csv: exit %d, %q %q", exit, out, errOut)
	}
	wantPool(7)

	// Over one batch: a repeat of the first batch's code in the second, and a stored code.
	var big strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&big, "BIG-%d-%04d\n", p, i)
	}
	fmt.Fprintf(&big, "BIG-%d-0000\n%s\n", p, code(3))
	exit, out, errOut = runCtl("import-codes", "-url", url, "-product", pid, "-progress", "0", writeFile(t, big.String()))
	if exit != 0 || out != "added       1000\nduplicates  2\ninvalid     0\nin pool     0\nline 1001: duplicate\nline 1002: duplicate\n" {
		t.Fatalf("import-codes of 1,002 lines: exit %d, %q %q", exit, out, errOut)
	}
	wantPool(1007)

	// The first file again: all duplicates, nothing written, not even a flow row.
	flowRows, _ := stockIn()
	exit, out, errOut = runCtl("import-codes", "-url", url, "-product", pid, "-progress", "0", lines)
	if exit != 0 || out != "added       0\nduplicates  6\ninvalid     1\nin pool     0\ncomments    1\n"+
		"line 1: duplicate\nline 2: duplicate\nline 4: comment\nline 5: duplicate\nline 6: duplicate\n"+
		"line 7: invalid (must not contain spaces)\nline 8: duplicate\nline 9: duplicate\n" {
		t.Fatalf("re-import: exit %d, %q %q", exit, out, errOut)
	}
	wantPool(1007)
	if again, _ := stockIn(); again != flowRows {
		t.Fatalf("a re-import of duplicates wrote %d stock-in flow rows", again-flowRows)
	}

	// Refused: an unknown product, a wrong token, a bad -format. Exit 1, the reason on stderr,
	// nothing on stdout, and nothing stored anywhere.
	unknown := s.productID()
	exit, out, errOut = runCtl("import-codes", "-url", url, "-product", fmt.Sprint(unknown), "-progress", "0", lines)
	if exit != 1 || out != "" || !strings.Contains(errOut, "404") || !strings.Contains(errOut, `"code":"product_not_found"`) {
		t.Errorf("import-codes to an unknown product: exit %d, %q %q", exit, out, errOut)
	}
	if n := count(t, s.db, "SELECT COUNT(*) FROM card_stock WHERE product_id=?", unknown); n != 0 {
		t.Errorf("%d codes stored for an unknown product", n)
	}
	if _, ok := s.levels(t, unknown); ok {
		t.Error("the gate knows a product that does not exist")
	}
	fresh := writeFile(t, code(9)+"\n")
	t.Setenv("CARDSHOP_ADMIN_TOKEN", "wrong-token-0123456789")
	if exit, out, errOut := runCtl("import-codes", "-url", url, "-product", pid, fresh); exit != 1 || out != "" || !strings.Contains(errOut, `"code":"unauthorized"`) {
		t.Errorf("import-codes with a wrong token: exit %d, %q %q", exit, out, errOut)
	}
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	if exit, out, errOut := runCtl("import-codes", "-url", url, "-product", pid, "-format", "xml", fresh); exit != 1 || out != "" || !strings.Contains(errOut, "want lines or csv") {
		t.Errorf("import-codes -format xml: exit %d, %q %q", exit, out, errOut)
	}
	wantPool(1007)

	// The ledger and the gate agree.
	if exit, out, errOut := runCtl("reconcile", "-url", url, "-product", pid); exit != 0 || !strings.HasSuffix(out, "\n0 differences\n") ||
		!strings.Contains(out, "cards   UNSOLD 1007\n") {
		t.Fatalf("reconcile after the imports: exit %d, %q %q", exit, out, errOut)
	}
}

// TestCLIRealReconcileRepairsTheGate: `reconcile` finds a Redis gate that disagrees with the
// ledger (a stock key overwritten, then the keys lost), says which checks differ and exits 1
// without touching the gate; `reconcile -repair` rebuilds it from MariaDB, after which a
// second reconcile finds nothing and the gate sells exactly what the pool holds.
func TestCLIRealReconcileRepairsTheGate(t *testing.T) {
	s := cliService(t)
	ctx := context.Background()
	p := s.product("Reconcile", 250, 5)
	codes := make([]string, 5)
	for i := range codes {
		codes[i] = fmt.Sprintf("REC-%d-%d", p, i)
	}
	s.c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", p), adminToken, strings.Join(codes, "\n"), nil)
	var tok struct {
		Token string `json:"token"`
	}
	s.c.want(201, "POST", "/admin/tokens", adminToken, fmt.Sprintf(`{"buyer_id":"rec-%d"}`, p), &tok)
	order := func(status, qty int, key string) {
		t.Helper()
		s.c.want(status, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":%d}`, p, qty), nil,
			"Idempotency-Key", fmt.Sprintf("rec-%d-%s", p, key))
	}
	order(201, 2, "first")
	s.wantGate(t, p, 3, 2)
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	pid := fmt.Sprint(p)
	reconcile := func(args ...string) (int, string, string) {
		return runCtl(append([]string{"reconcile", "-url", s.c.base, "-product", pid}, args...)...)
	}
	diff := func(out, name string, want, got int64) {
		t.Helper()
		re := regexp.MustCompile(`(?m)^DIFF\s+` + regexp.QuoteMeta(name) + fmt.Sprintf(`\s+want %d\s+got %d$`, want, got))
		if !re.MatchString(out) {
			t.Errorf("reconcile printed %q, want a DIFF line %q want %d got %d", out, name, want, got)
		}
	}

	exit, out, errOut := reconcile()
	if exit != 0 || strings.Contains(out, "DIFF") || !strings.HasSuffix(out, "\n0 differences\n") {
		t.Fatalf("reconcile of a healthy product: exit %d, %q %q", exit, out, errOut)
	}
	for _, want := range []string{"product " + pid + "\n", "gate    stock 3, sold 2, frozen false\n", "cards   UNSOLD 5\n", "orders  PENDING 1 (qty 2)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("reconcile printed %q, want %q in it", out, want)
		}
	}

	// Break the gate: Redis now offers 40 codes of a pool of 5.
	stockKey := fmt.Sprintf("stock:product:{%d}", p)
	if err := s.rdb.Set(ctx, stockKey, 40, 0).Err(); err != nil {
		t.Fatal(err)
	}
	exit, out, errOut = reconcile()
	if exit != 1 || !strings.HasSuffix(out, "\n2 differences\n") || !strings.Contains(out, "gate    stock 40, sold 2, frozen false\n") {
		t.Fatalf("reconcile of a broken gate: exit %d, %q %q", exit, out, errOut)
	}
	diff(out, "gate stock + gate sold = imported - voided", 5, 42)
	diff(out, "flow: gate stock", 40, 3)
	if !strings.Contains(errOut, "2 differences remain") || !strings.Contains(errOut, "-repair") {
		t.Errorf("reconcile of a broken gate: stderr %q does not say what remains and how to repair", errOut)
	}
	if l, _ := s.levels(t, p); l.Stock != 40 || l.Sold != 2 {
		t.Fatalf("a reconcile without -repair changed the gate: %+v", l)
	}

	// Repair: the ledger wins.
	exit, out, errOut = reconcile("-repair")
	if exit != 0 || !strings.HasPrefix(out, "product "+pid+" (gate rebuilt from the ledger)\n") || strings.Contains(out, "DIFF") ||
		!strings.Contains(out, "gate    stock 3, sold 2, frozen false\n") || !strings.HasSuffix(out, "\n0 differences\n") {
		t.Fatalf("reconcile -repair: exit %d, %q %q", exit, out, errOut)
	}
	s.wantGate(t, p, 3, 2)
	exit, out, errOut = reconcile()
	if exit != 0 || strings.Contains(out, "DIFF") || strings.Contains(out, "rebuilt") || !strings.HasSuffix(out, "\n0 differences\n") {
		t.Fatalf("reconcile after the repair: exit %d, %q %q", exit, out, errOut)
	}
	// The repaired gate sells the 3 codes left and not one more.
	order(201, 3, "second")
	order(409, 1, "third")
	s.wantGate(t, p, 0, 5)

	// Lose the gate's keys: the product is unknown to it until -repair rebuilds it.
	if err := s.rdb.Del(ctx, stockKey, fmt.Sprintf("sold:product:{%d}", p)).Err(); err != nil {
		t.Fatal(err)
	}
	exit, out, errOut = reconcile()
	if exit != 1 || !strings.Contains(out, "gate    unknown (not built: run with -repair)\n") || !strings.HasSuffix(out, "\n1 differences\n") {
		t.Fatalf("reconcile of a lost gate: exit %d, %q %q", exit, out, errOut)
	}
	diff(out, "gate knows the product", 1, 0)
	if _, ok := s.levels(t, p); ok {
		t.Fatal("a reconcile without -repair rebuilt the gate")
	}
	if exit, out, errOut := reconcile("--repair"); exit != 0 || !strings.Contains(out, "gate    stock 0, sold 5, frozen false\n") ||
		!strings.HasSuffix(out, "\n0 differences\n") {
		t.Fatalf("reconcile --repair of a lost gate: exit %d, %q %q", exit, out, errOut)
	}
	s.wantGate(t, p, 0, 5)
	if exit, out, errOut := reconcile(); exit != 0 || !strings.HasSuffix(out, "\n0 differences\n") {
		t.Fatalf("reconcile after rebuilding a lost gate: exit %d, %q %q", exit, out, errOut)
	}

	// An unknown product, even with -repair: exit 1, and no gate appears for it.
	unknown := s.productID()
	if exit, out, errOut := runCtl("reconcile", "-url", s.c.base, "-product", fmt.Sprint(unknown), "-repair"); exit != 1 || out != "" ||
		!strings.Contains(errOut, `"code":"product_not_found"`) {
		t.Errorf("reconcile -repair of an unknown product: exit %d, %q %q", exit, out, errOut)
	}
	if _, ok := s.levels(t, unknown); ok {
		t.Error("reconcile -repair built a gate for a product that does not exist")
	}
}

// TestCLIRealTokenAndPay: a buyer token from `token` is accepted by the running service for
// POST /api/order and names the buyer; a token signed with another secret is refused. `pay`
// sends a signed callback that marks the order PAID with its codes (read back with GET, and
// in MariaDB and Redis); the provider's retry changes nothing; `pay -status failed` returns
// the reservation. A wrong amount, a wrong secret or a stray argument exits 1 and leaves the
// order PENDING, still payable.
func TestCLIRealTokenAndPay(t *testing.T) {
	s := cliService(t)
	p := s.product("Token and pay", 700, 3)
	imported := map[string]bool{}
	var file strings.Builder
	for i := range 4 {
		c := fmt.Sprintf("PAY-%d-%d", p, i)
		imported[c] = true
		fmt.Fprintln(&file, c)
	}
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	if exit, out, errOut := runCtl("import-codes", "-url", s.c.base, "-product", fmt.Sprint(p), "-progress", "0", writeFile(t, file.String())); exit != 0 ||
		!strings.HasPrefix(out, "added       4\n") {
		t.Fatalf("import-codes: exit %d, %q %q", exit, out, errOut)
	}
	s.wantGate(t, p, 4, 0)

	t.Setenv("CARDSHOP_TOKEN_SECRET", tokenSecret)
	issue := func(buyer string) string {
		t.Helper()
		exit, out, errOut := runMain("token", "-buyer", buyer, "-ttl", "10m")
		if exit != 0 || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
			t.Fatalf("token -buyer %s: exit %d, %q %q", buyer, exit, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	buyer := fmt.Sprintf("cli-buyer-%d", p)
	tok, other := issue(buyer), issue(buyer+"-other")
	place := func(qty int, key string) orderBody {
		t.Helper()
		var o orderBody
		s.c.want(201, "POST", "/api/order", tok, fmt.Sprintf(`{"product_id":%d,"qty":%d}`, p, qty), &o, "Idempotency-Key", fmt.Sprintf("pay-%d-%s", p, key))
		if o.Status != "PENDING" || o.Amount != int64(700*qty) {
			t.Fatalf("new order %+v", o)
		}
		return o
	}
	get := func(no string) orderBody {
		t.Helper()
		var o orderBody
		s.c.want(200, "GET", "/api/orders/"+no, tok, "", &o)
		return o
	}
	status := func(no string) string {
		t.Helper()
		var st string
		if err := s.db.QueryRow("SELECT status FROM orders WHERE order_no=?", no).Scan(&st); err != nil {
			t.Fatalf("order %s: %v", no, err)
		}
		return st
	}

	// The service accepts the token and the order is the token's buyer's.
	first := place(2, "first")
	var owner string
	if err := s.db.QueryRow("SELECT buyer_id FROM orders WHERE order_no=?", first.OrderNo).Scan(&owner); err != nil || owner != buyer {
		t.Fatalf("order %s belongs to %q (%v), want %q", first.OrderNo, owner, err, buyer)
	}
	s.c.want(404, "GET", "/api/orders/"+first.OrderNo, other, "", nil) // another buyer's token
	t.Setenv("CARDSHOP_TOKEN_SECRET", "not-the-service-secret-0123")
	forged := issue(buyer)
	s.c.want(401, "POST", "/api/order", forged, fmt.Sprintf(`{"product_id":%d,"qty":1}`, p), nil, "Idempotency-Key", fmt.Sprintf("pay-%d-forged", p))
	s.c.want(401, "GET", "/api/orders/"+first.OrderNo, forged, "", nil)
	s.wantGate(t, p, 2, 2)

	// pay without -amount reads the amount with the admin token; the order is PAID with two
	// of the imported codes, in MariaDB and in Redis too.
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	exit, out, errOut := runMain("pay", "-url", s.c.base, "-order", first.OrderNo)
	if exit != 0 || !strings.HasPrefix(out, `200 {"result":"success"`) || !strings.Contains(out, `"status":"PAID"`) {
		t.Fatalf("pay: exit %d, %q %q", exit, out, errOut)
	}
	paid := get(first.OrderNo)
	if paid.Status != "PAID" || len(paid.Codes) != 2 || paid.Codes[0] == paid.Codes[1] || !imported[paid.Codes[0]] || !imported[paid.Codes[1]] {
		t.Fatalf("paid order %+v, want PAID with 2 distinct imported codes", paid)
	}
	var ref string
	if err := s.db.QueryRow("SELECT payment_ref FROM orders WHERE order_no=? AND status='PAID' AND amount=1400", first.OrderNo).Scan(&ref); err != nil || !strings.HasPrefix(ref, "cli-") {
		t.Fatalf("paid order row: ref %q, %v", ref, err)
	}
	soldFor := func(no string) int64 {
		t.Helper()
		return count(t, s.db, "SELECT COUNT(*) FROM card_stock WHERE product_id=? AND status='SOLD' AND order_no=?", p, no)
	}
	if n := soldFor(first.OrderNo); n != 2 {
		t.Fatalf("%d SOLD codes for the paid order, want 2", n)
	}
	if n := count(t, s.db, "SELECT SUM(qty) FROM stock_flow WHERE order_no=? AND change_type=2", first.OrderNo); n != 2 {
		t.Fatalf("pay flow of the order: %d, want 2", n)
	}
	s.wantGate(t, p, 2, 2)

	// The provider retries the same callback: same answer, same codes, nothing sold twice.
	exit, out, errOut = runMain("pay", "-url", s.c.base, "-order", first.OrderNo, "-amount", "1400", "-ref", ref)
	if exit != 0 || !strings.HasPrefix(out, `200 {"result":"success"`) || !strings.Contains(out, `"status":"PAID"`) {
		t.Fatalf("pay again: exit %d, %q %q", exit, out, errOut)
	}
	if again := get(first.OrderNo); again.Status != "PAID" || !slices.Equal(again.Codes, paid.Codes) || soldFor(first.OrderNo) != 2 {
		t.Fatalf("after a repeated callback: %+v", again)
	}

	// A failed payment returns the reservation.
	failed := place(1, "failed")
	s.wantGate(t, p, 1, 3)
	if exit, out, errOut := runMain("pay", "-url", s.c.base, "-order", failed.OrderNo, "-status", "failed"); exit != 0 || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("pay -status failed: exit %d, %q %q", exit, out, errOut)
	}
	if o := get(failed.OrderNo); o.Status != "FAILED" || len(o.Codes) != 0 || soldFor(failed.OrderNo) != 0 {
		t.Fatalf("order after a failed payment: %+v", o)
	}
	s.wantGate(t, p, 2, 2)

	// Refused callbacks change nothing: the order stays PENDING and keeps its reservation.
	last := place(2, "last")
	s.wantGate(t, p, 0, 4)
	for _, c := range []struct {
		name     string
		secret   string
		args     []string
		wantOut  string
		wantErr  string
		wantExit int
	}{
		{"a wrong amount", paymentSecret, []string{"-amount", "1"}, `422 {"code":"amount_mismatch"`, "callback answered 422", 1},
		{"a wrong secret", "not-the-payment-secret-0123", []string{"-amount", "1400"}, `401 {"code":"invalid_signature"`, "callback answered 401", 1},
		{"a stray argument", paymentSecret, []string{"-amount", "1400", "now"}, "", `unexpected argument "now"`, 1},
		{"an unknown order", paymentSecret, []string{"-amount", "1400", "-order", "99990101000000000000000000"}, "404 ", "callback answered 404", 1},
	} {
		t.Setenv("CARDSHOP_PAYMENT_SECRET", c.secret)
		args := append([]string{"pay", "-url", s.c.base, "-order", last.OrderNo}, c.args...)
		exit, out, errOut := runMain(args...)
		if exit != c.wantExit || !strings.HasPrefix(out, c.wantOut) || (c.wantOut == "" && out != "") || !strings.Contains(errOut, c.wantErr) {
			t.Errorf("pay with %s: exit %d, %q %q; want exit %d, stdout %q…, stderr with %q", c.name, exit, out, errOut, c.wantExit, c.wantOut, c.wantErr)
		}
		if st := status(last.OrderNo); st != "PENDING" || soldFor(last.OrderNo) != 0 {
			t.Fatalf("after pay with %s the order is %s with %d codes", c.name, st, soldFor(last.OrderNo))
		}
	}
	s.wantGate(t, p, 0, 4)
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	if exit, out, errOut := runMain("pay", "-url", s.c.base, "-order", last.OrderNo); exit != 0 || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("pay after the refusals: exit %d, %q %q", exit, out, errOut)
	}
	if o := get(last.OrderNo); o.Status != "PAID" || len(o.Codes) != 2 || slices.Contains(paid.Codes, o.Codes[0]) || slices.Contains(paid.Codes, o.Codes[1]) {
		t.Fatalf("last order %+v, want PAID with 2 codes nobody else has", o)
	}

	// Sold out, and the ledger and the gate agree.
	if exit, out, errOut := runCtl("reconcile", "-url", s.c.base, "-product", fmt.Sprint(p)); exit != 0 ||
		!strings.Contains(out, "cards   SOLD 4\n") || !strings.HasSuffix(out, "\n0 differences\n") {
		t.Fatalf("reconcile at the end: exit %d, %q %q", exit, out, errOut)
	}
}

// TestCLIRealProductCommands: product-create with every flag stores the product on MariaDB
// (row read back) and its sale rules in the Redis gate (an order before the start is refused
// as not started, one over the buyer limit as buyer_limit); product-show prints what
// product-create printed; product-update changes only the flags given, -starts-at "" stores
// NULL and the gate sells at once, -buyer-limit 0 lifts the limit; a change the service
// refuses exits 1 with its code and message and leaves the row as it was.
func TestCLIRealProductCommands(t *testing.T) {
	s := cliService(t)
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	p := s.productID()
	url, pid := s.c.base, fmt.Sprint(p)
	row := func() string {
		t.Helper()
		var r string
		if err := s.db.QueryRow("SELECT CONCAT_WS('|', name, price, max_per_order, price_tiers, stock_display, IFNULL(CAST(starts_at AS CHAR), 'NULL'), "+
			"IFNULL(CAST(ends_at AS CHAR), 'NULL'), buyer_limit, refund_releases_limit, low_stock_threshold) FROM products WHERE id=?", p).Scan(&r); err != nil {
			t.Fatalf("product %d: %v", p, err)
		}
		return r
	}
	wantRow := func(what, want string) {
		t.Helper()
		if got := row(); got != want {
			t.Fatalf("%s: the products row is %s, want %s", what, got, want)
		}
	}

	exit, out, errOut := runCtl("product-create", "-url", url, "-id", pid, "-name", "Real product", "-price", "700", "-max-per-order", "5",
		"-tiers", "2:650,4:600", "-stock-display", "level", "-starts-at", "2030-01-02T03:04:05.678+08:00", "-ends-at", "2031-01-01T00:00:00Z",
		"-buyer-limit", "2", "-refund-releases-limit", "-low-stock-threshold", "3")
	head := productOut(pid, "Real product", "700", "5", "2:650,4:600", "level", "2030-01-01T19:04:05.678Z", "2031-01-01T00:00:00Z", "2", "true", "3")
	created := wantProduct(t, "product-create", exit, out, errOut, head)
	wantRow("after product-create", `Real product|700|5|[{"min_qty":2,"unit_price":650},{"min_qty":4,"unit_price":600}]|level|`+
		"2030-01-01 19:04:05.678|2031-01-01 00:00:00.000|2|1|3")
	exit, out, errOut = runCtl("product-show", "-url", url, "-product", pid)
	// The create's answer shows created_at as stored (MariaDB keeps microseconds).
	if shown := wantProduct(t, "product-show", exit, out, errOut, head); !shown.Equal(created) {
		t.Errorf("product-show: created_at %s, product-create printed %s", shown, created)
	}

	// The gate has the rules: before the start, no order.
	var codes strings.Builder
	for i := range 6 {
		fmt.Fprintf(&codes, "PRODUCT-%d-%d\n", p, i)
	}
	if exit, out, errOut := runCtl("import-codes", "-url", url, "-product", pid, "-progress", "0", writeFile(t, codes.String())); exit != 0 ||
		!strings.HasPrefix(out, "added       6\n") {
		t.Fatalf("import-codes: exit %d, %q %q", exit, out, errOut)
	}
	s.wantGate(t, p, 6, 0)
	var tok struct {
		Token string `json:"token"`
	}
	s.c.want(201, "POST", "/admin/tokens", adminToken, fmt.Sprintf(`{"buyer_id":"product-%d"}`, p), &tok)
	order := func(status, qty int, key, wantCode string) {
		t.Helper()
		var ans struct {
			Code string `json:"code"`
		}
		s.c.want(status, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":%d}`, p, qty), &ans,
			"Idempotency-Key", fmt.Sprintf("product-%d-%s", p, key))
		if ans.Code != wantCode {
			t.Fatalf("order %s: code %q, want %q", key, ans.Code, wantCode)
		}
	}
	order(409, 1, "early", "sale_not_started")

	// One field: the others stay, in MariaDB too.
	exit, out, errOut = runCtl("product-update", "-url", url, "-product", pid, "-price", "800")
	wantProduct(t, "product-update -price", exit, out, errOut,
		productOut(pid, "Real product", "800", "5", "2:650,4:600", "level", "2030-01-01T19:04:05.678Z", "2031-01-01T00:00:00Z", "2", "true", "3"))
	wantRow("after -price", `Real product|800|5|[{"min_qty":2,"unit_price":650},{"min_qty":4,"unit_price":600}]|level|`+
		"2030-01-01 19:04:05.678|2031-01-01 00:00:00.000|2|1|3")

	// -starts-at "": NULL in MariaDB, and the gate sells at once, up to the buyer limit.
	exit, out, errOut = runCtl("product-update", "-url", url, "-product", pid, "-starts-at", "")
	open := productOut(pid, "Real product", "800", "5", "2:650,4:600", "level", "none", "2031-01-01T00:00:00Z", "2", "true", "3")
	wantProduct(t, `product-update -starts-at ""`, exit, out, errOut, open)
	wantRow(`after -starts-at ""`, `Real product|800|5|[{"min_qty":2,"unit_price":650},{"min_qty":4,"unit_price":600}]|level|`+
		"NULL|2031-01-01 00:00:00.000|2|1|3")
	order(201, 2, "first", "")
	order(429, 1, "over", "buyer_limit")

	// A change the service refuses: exit 1 with its code and message, nothing stored.
	exit, out, errOut = runCtl("product-update", "-url", url, "-product", pid, "-starts-at", "2032-01-01T00:00:00Z", "-buyer-limit", "0")
	if exit != 1 || out != "" || errOut != "cardshopctl: 400 invalid_request: ends_at: must be after starts_at\n" {
		t.Fatalf("a start after the end: exit %d, %q %q", exit, out, errOut)
	}
	wantRow("after the refusal", `Real product|800|5|[{"min_qty":2,"unit_price":650},{"min_qty":4,"unit_price":600}]|level|`+
		"NULL|2031-01-01 00:00:00.000|2|1|3")
	order(429, 1, "still-over", "buyer_limit")

	// -buyer-limit 0 and -tiers "" lift the limit and remove the tiers; the buyer orders again.
	exit, out, errOut = runCtl("product-update", "-url", url, "-product", pid, "-buyer-limit", "0", "-tiers", "", "-ends-at", "")
	wantProduct(t, "product-update lifting the limit", exit, out, errOut,
		productOut(pid, "Real product", "800", "5", "none", "level", "none", "none", "none", "true", "3"))
	wantRow("after lifting the limit", "Real product|800|5|[]|level|NULL|NULL|0|1|3")
	order(201, 3, "second", "")
	s.wantGate(t, p, 1, 5)

	if exit, out, errOut := runCtl("product-show", "-url", url, "-product", fmt.Sprint(s.productID())); exit != 1 || out != "" ||
		errOut != "cardshopctl: 404 product_not_found: no such product\n" {
		t.Errorf("product-show of an unknown product: exit %d, %q %q", exit, out, errOut)
	}
	if exit, out, errOut := runCtl("reconcile", "-url", url, "-product", pid); exit != 0 || !strings.HasSuffix(out, "\n0 differences\n") {
		t.Fatalf("reconcile at the end: exit %d, %q %q", exit, out, errOut)
	}
}

// TestCLIRealOperatorCommands: operator-add with the shared admin token stores the operator
// in MariaDB (its token's hash, never the token); its token then works for whoami and a
// product-create; operator-rotate ends the old token; the audit log the CLI prints is read back
// from MariaDB's audit_log, rows and CLI lines agreeing, filtered by -operator and paged by -all.
func TestCLIRealOperatorCommands(t *testing.T) {
	s := cliService(t)
	url := s.c.base
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	name := fmt.Sprintf("real-%d", rand.Uint32())

	exit, out, errOut := runCtl("operator-add", "-url", url, "-name", name, "-role", "operator")
	tok := wantOperatorToken(t, "operator-add", exit, out, errOut, name, "operator")
	var role string
	var hash []byte
	if err := s.db.QueryRow("SELECT role, token_hash FROM operators WHERE name=?", name).Scan(&role, &hash); err != nil {
		t.Fatalf("the operators row of %s: %v", name, err)
	}
	if role != "operator" || len(hash) != 32 || bytes.Contains(hash, []byte(tok[len(name)+1:])) {
		t.Fatalf("the operators row: role %q, hash %x", role, hash)
	}

	t.Setenv("CARDSHOP_ADMIN_TOKEN", tok)
	if exit, out, errOut := runCtl("whoami", "-url", url); exit != 0 || out != "name: "+name+"\nrole: operator\n" {
		t.Fatalf("whoami with the operator's token: exit %d, %q %q", exit, out, errOut)
	}
	p := s.productID()
	exit, out, errOut = runCtl("product-create", "-url", url, "-id", fmt.Sprint(p), "-name", "By "+name, "-price", "100", "-max-per-order", "1")
	wantProduct(t, "product-create as the operator", exit, out, errOut, productOut(fmt.Sprint(p), "By "+name, "100", "1", "none", "exact", "none", "none", "none", "false", "none"))
	// An operator may not manage operators: refused, and recorded.
	if exit, out, errOut := runCtl("operator-add", "-url", url, "-name", "x"+name, "-role", "admin"); exit != 1 || out != "" ||
		errOut != "cardshopctl: 403 forbidden: the role operator may not do this; it needs admin\n" {
		t.Fatalf("operator-add as an operator: exit %d, %q %q", exit, out, errOut)
	}

	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	exit, out, errOut = runCtl("operator-rotate", "-url", url, "-name", name)
	tok2 := wantOperatorToken(t, "operator-rotate", exit, out, errOut, name, "operator")
	t.Setenv("CARDSHOP_ADMIN_TOKEN", tok)
	if exit, out, errOut := runCtl("whoami", "-url", url); exit != 1 || errOut != "cardshopctl: 401 unauthorized: missing or invalid credentials\n" {
		t.Fatalf("whoami with the rotated token: exit %d, %q %q", exit, out, errOut)
	}
	t.Setenv("CARDSHOP_ADMIN_TOKEN", tok2)

	// The audit log through the CLI, as the operator (any role reads it), against the rows.
	rows, err := s.db.Query("SELECT CONCAT(IF(operator = '', '-', operator), ' (', IF(role = '', '-', role), ') ', action, ' ', IF(target = '', '-', target), ' → ', result, " +
		"IF(params = '', '', CONCAT('  ', params))) FROM audit_log ORDER BY id DESC")
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"- (-) admin.auth_failed operator " + name + " → 401 unauthorized", // the token before the rotation
		"admin-token (admin) operator.rotate operator " + name + " → 200",
		name + " (operator) operator.create - → 403 forbidden  {\"name\":\"x" + name + "\",\"role\":\"admin\"}",
		fmt.Sprintf("%s (operator) product.create - → 201  {\"id\":%d,\"max_per_order\":1,\"name\":\"By %s\",\"price\":100}", name, p, name),
		"admin-token (admin) operator.create - → 201  {\"name\":\"" + name + "\",\"role\":\"operator\"}",
	}
	if strings.Join(stored, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit_log holds\n%s\nwant\n%s", strings.Join(stored, "\n"), strings.Join(want, "\n"))
	}
	exit, out, errOut = runCtl("audit", "-url", url)
	if got := auditLines(t, "audit", exit, out, errOut); strings.Join(got, "\n") != strings.Join(want, "\n") || errOut != "" {
		t.Fatalf("audit printed\n%s\nwant the rows\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	exit, out, errOut = runCtl("audit", "-url", url, "-operator", name, "-limit", "1", "-all", "-since", "1h")
	if got := auditLines(t, "audit -operator -limit 1 -all", exit, out, errOut); strings.Join(got, "\n") != strings.Join(want[2:4], "\n") || errOut != "" {
		t.Fatalf("audit -operator %s -limit 1 -all printed\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want[2:4], "\n"))
	}
	if strings.Contains(out, tok[len(name)+1:]) || strings.Contains(out, tok2[len(name)+1:]) {
		t.Fatal("audit printed a token")
	}
}
