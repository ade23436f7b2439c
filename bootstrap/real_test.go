package bootstrap_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"cardshop/adapters/lab/netfault"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/bootstrap"
	"cardshop/domain"
)

// realService starts the whole service on Redis, MariaDB and RabbitMQ (its own database) and
// returns an HTTP client, a Redis client and the database for direct checks.
func realService(t *testing.T, orderTimeout time.Duration, tweaks ...func(*bootstrap.Config)) (client, *redis.Client, *sql.DB) {
	t.Helper()
	cfg, rdb, db := realConfig(t, orderTimeout)
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	return runService(t, cfg, io.Discard), rdb, db
}

// realConfig is the configuration of a service on Redis, MariaDB and RabbitMQ (its own
// database, migrated at start) listening on a free port, with a Redis client and the database
// for direct checks. Under CI=true an unreachable service fails the test.
func realConfig(t *testing.T, orderTimeout time.Duration) (bootstrap.Config, *redis.Client, *sql.DB) {
	t.Helper()
	return realConfigIn(t, orderTimeout, "cardshop_test_e2e")
}

// realConfigIn is realConfig on the MariaDB database name: suites that leave rows behind (the
// payment cases stop services with work in flight) use their own, so a test that counts rows
// of the shared one never meets them.
func realConfigIn(t *testing.T, orderTimeout time.Duration, database string) (bootstrap.Config, *redis.Client, *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: porttest.RedisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	porttest.RequireService(t, "Redis", rdb.Ping(ctx).Err())
	dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, database)
	porttest.RequireService(t, "MariaDB", err)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })

	cfg, err := bootstrap.LoadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	keys, hashKey := mysqlstore.GenerateKeyring()
	cfg.Adapters, cfg.HTTPAddr, cfg.MySQLDSN, cfg.RedisAddrs = bootstrap.AdaptersReal, freeAddr(t), bootstrap.ConnString(dsn), []string{porttest.RedisAddr}
	cfg.AMQPPrefix = "cardshop-e2e"
	cfg.AMQPURL, cfg.Migrate, cfg.CodeKeys, cfg.CodeHash = bootstrap.ConnString(porttest.AMQPURL), true, domain.Secret(keys), domain.Secret(hashKey)
	cfg.OrderTimeout, cfg.SweepInterval, cfg.RelayInterval = orderTimeout, 500*time.Millisecond, 200*time.Millisecond
	// No stock watch: the database is shared by the suites, and a watch would record events for
	// their products in the outbox the suites count (stock_events_real_test turns it on).
	cfg.StockEventsInterval = 0
	return cfg, rdb, db
}

// runService starts the service of cfg, its JSON log written to logs, and stops it when the
// test ends; opts are added to the application (fx.Populate, …). On the real adapters an
// unreachable service skips the test, or fails it under CI=true.
func runService(t *testing.T, cfg bootstrap.Config, logs io.Writer, opts ...fx.Option) client {
	t.Helper()
	c, _ := runStoppable(t, cfg, logs, opts...)
	return c
}

// runStoppable is runService that also returns stop, which stops the service before the test
// ends (later calls, and the test's end, do nothing more).
func runStoppable(t *testing.T, cfg bootstrap.Config, logs io.Writer, opts ...fx.Option) (client, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app := fx.New(append([]fx.Option{bootstrap.Module(cfg), fx.NopLogger, fx.Decorate(func(*slog.Logger) *slog.Logger {
		return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})}, opts...)...)
	started := app.Err()
	if started == nil {
		started = app.Start(ctx)
	}
	if started != nil {
		if cfg.Adapters != bootstrap.AdaptersReal {
			t.Fatal(started)
		}
		porttest.RequireService(t, "Redis, MariaDB and RabbitMQ", started)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := app.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return client{t: t, base: "http://" + cfg.HTTPAddr, http: &http.Client{Timeout: 10 * time.Second}}, stop
}

type orderBody struct {
	OrderNo string   `json:"order_no"`
	Status  string   `json:"status"`
	Amount  int64    `json:"amount"`
	Codes   []string `json:"codes"`
}

// TestRealAdaptersEndToEnd sells over HTTP on the production adapters: place -> pay -> read
// codes; place -> short timeout -> CLOSED with the stock back in Redis and a flow row;
// refund (the read codes are voided); and a reconciliation with zero differences — each checked in Redis and MariaDB
// directly, not only through the API.
func TestRealAdaptersEndToEnd(t *testing.T) {
	c, rdb, db := realService(t, 2*time.Second)
	ctx := context.Background()
	pid := int64(porttest.NewProductID())
	stockKey := fmt.Sprintf("stock:product:{%d}", pid)
	soldKey := fmt.Sprintf("sold:product:{%d}", pid)
	gate := func() (int64, int64) {
		t.Helper()
		s, err1 := rdb.Get(ctx, stockKey).Int64()
		d, err2 := rdb.Get(ctx, soldKey).Int64()
		if err1 != nil || err2 != nil {
			t.Fatalf("gate keys: %v %v", err1, err2)
		}
		return s, d
	}

	c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Real 10","price":1000,"max_per_order":3}`, pid), nil)
	codes := make([]string, 6)
	for i := range codes {
		codes[i] = fmt.Sprintf("REAL-%d-%04d", pid, i)
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, strings.Join(codes, "\n"), nil)
	if s, d := gate(); s != 6 || d != 0 {
		t.Fatalf("gate after import: stock %d sold %d, want 6/0", s, d)
	}
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"real-buyer"}`, &tok)

	// place -> pay -> read codes
	var paid orderBody
	c.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":2}`, pid), &paid, "Idempotency-Key", fmt.Sprintf("real-%d-1", pid))
	var replay orderBody
	c.want(200, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":2}`, pid), &replay, "Idempotency-Key", fmt.Sprintf("real-%d-1", pid))
	if replay.OrderNo != paid.OrderNo {
		t.Fatalf("replay gave order %s, want %s", replay.OrderNo, paid.OrderNo)
	}
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	for i := 0; i < 2; i++ { // a duplicate callback changes nothing
		if code := bootstrap.Main([]string{"pay", "-url", c.base, "-order", paid.OrderNo, "-amount", "2000", "-ref", "real-ref-1"}, &strings.Builder{}, &strings.Builder{}); code != 0 {
			t.Fatalf("pay exited %d", code)
		}
	}
	c.want(200, "GET", "/api/orders/"+paid.OrderNo, tok.Token, "", &paid)
	if paid.Status != "PAID" || len(paid.Codes) != 2 || !strings.HasPrefix(paid.Codes[0], "REAL-") {
		t.Fatalf("paid order %+v", paid)
	}
	var sold int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM card_stock WHERE product_id=? AND status='SOLD' AND order_no=?", pid, paid.OrderNo).Scan(&sold); err != nil || sold != 2 {
		t.Fatalf("SOLD rows for the order: %d, %v", sold, err)
	}

	// place -> timeout -> CLOSED, stock back in Redis, flow row timeout-restore
	var expiring orderBody
	c.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":3}`, pid), &expiring, "Idempotency-Key", fmt.Sprintf("real-%d-2", pid))
	if s, d := gate(); s != 1 || d != 5 {
		t.Fatalf("gate with one paid and one pending order: stock %d sold %d, want 1/5", s, d)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var o orderBody
		c.want(200, "GET", "/api/orders/"+expiring.OrderNo, tok.Token, "", &o)
		if o.Status == "CLOSED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order still %s 15 s after a 2 s timeout", o.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var flowRows int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM stock_flow WHERE order_no=? AND change_type=3 AND qty=3", expiring.OrderNo).Scan(&flowRows); err != nil || flowRows != 1 {
		t.Fatalf("timeout-restore flow rows: %d, %v", flowRows, err)
	}
	for time.Now().Before(deadline) { // the gate change may still be in the outbox
		if s, d := gate(); s == 4 && d == 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s, d := gate(); s != 4 || d != 2 {
		t.Fatalf("gate after the timeout: stock %d sold %d, want 4/2", s, d)
	}

	// refund: the buyer has read the codes, so they are voided and the stock stays out
	var refund struct {
		Status        string `json:"status"`
		CodesRecycled int    `json:"codes_recycled"`
		CodesVoided   int    `json:"codes_voided"`
		RevealedAt    string `json:"revealed_at"`
	}
	c.want(200, "POST", "/admin/orders/"+paid.OrderNo+"/refund", adminToken, `{}`, &refund)
	if refund.Status != "REFUNDED" || refund.CodesVoided != 2 || refund.CodesRecycled != 0 || refund.RevealedAt == "" {
		t.Fatalf("refund of read codes answered %+v, want 2 voided", refund)
	}
	var voided, revealed int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM card_stock WHERE product_id=? AND status='VOID'", pid).Scan(&voided); err != nil || voided != 2 {
		t.Fatalf("VOID rows: %d, %v", voided, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE order_no=? AND revealed_at IS NOT NULL", paid.OrderNo).Scan(&revealed); err != nil || revealed != 1 {
		t.Fatalf("revealed_at of the read order: %d rows set, %v", revealed, err)
	}

	// reconcile: zero differences
	var rec struct {
		OK          bool `json:"ok"`
		Differences int  `json:"differences"`
		Gate        struct {
			Stock int64 `json:"stock"`
			Sold  int64 `json:"sold"`
		} `json:"gate"`
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/reconcile?repair=true", pid), adminToken, "", &rec)
	if !rec.OK || rec.Differences != 0 || rec.Gate.Stock != 4 || rec.Gate.Sold != 0 {
		t.Fatalf("reconcile %+v", rec)
	}
	var outboxLeft int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL").Scan(&outboxLeft); err != nil || outboxLeft != 0 {
		t.Fatalf("unsent outbox rows after reconcile: %d, %v", outboxLeft, err)
	}
	checkConsole(t, c, strconv.FormatInt(pid, 10), "Real 10", paid.OrderNo, codes)
}

// TestRealAdaptersRebuildTheGateAtStart: a product whose gate keys are gone (Redis lost
// them) is rebuilt from the ledger when the service starts.
func TestRealAdaptersRebuildTheGateAtStart(t *testing.T) {
	c, rdb, _ := realService(t, time.Minute)
	ctx := context.Background()
	pid := int64(porttest.NewProductID())
	c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Lost","price":100,"max_per_order":1}`, pid), nil)
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, fmt.Sprintf("LOST-%d-1\nLOST-%d-2", pid, pid), nil)
	keys := []string{fmt.Sprintf("stock:product:{%d}", pid), fmt.Sprintf("sold:product:{%d}", pid)}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"lost-buyer"}`, &tok)
	// Never oversold on a missing key: refused until rebuilt.
	c.want(503, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":1}`, pid), nil, "Idempotency-Key", fmt.Sprintf("lost-%d-1", pid))

	c2, _, _ := realService(t, time.Minute) // a second instance starts and rebuilds it
	if s, err := rdb.Get(ctx, keys[0]).Int64(); err != nil || s != 2 {
		t.Fatalf("stock after a restart: %d, %v", s, err)
	}
	c2.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":1}`, pid), nil, "Idempotency-Key", fmt.Sprintf("lost-%d-2", pid))
}

// TestRealAdaptersMariaDBDown: with MariaDB unreachable (a proxy cut in front of it), an
// order is refused with 503 and its gate reservation given back; a payment callback answers
// 503 so the provider retries, and the retry succeeds once MariaDB is back; the ledger and the
// gate then agree.
func TestRealAdaptersMariaDBDown(t *testing.T) {
	var proxy *netfault.Proxy
	c, rdb, _ := realService(t, time.Minute, func(cfg *bootstrap.Config) {
		mc, err := mysqldriver.ParseDSN(cfg.MySQLDSN.Reveal())
		if err != nil {
			t.Fatal(err)
		}
		proxy = netfault.NewProxy(t, mc.Addr)
		mc.Addr = proxy.Addr()
		cfg.MySQLDSN = bootstrap.ConnString(mc.FormatDSN())
	})
	ctx := context.Background()
	pid := int64(porttest.NewProductID())
	c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Down","price":500,"max_per_order":2}`, pid), nil)
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, fmt.Sprintf("DOWN-%d-1\nDOWN-%d-2\nDOWN-%d-3", pid, pid, pid), nil)
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"down-buyer"}`, &tok)
	var pending orderBody
	c.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":1}`, pid), &pending, "Idempotency-Key", fmt.Sprintf("down-%d-1", pid))
	gate := func() string {
		v, err := rdb.MGet(ctx, fmt.Sprintf("stock:product:{%d}", pid), fmt.Sprintf("sold:product:{%d}", pid)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(v)
	}
	before := gate()

	proxy.Cut()
	c.want(503, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":2}`, pid), nil, "Idempotency-Key", fmt.Sprintf("down-%d-2", pid))
	if after := gate(); after != before {
		t.Fatalf("gate %s after a refused order, want %s: the reservation was not given back", after, before)
	}
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	pay := func() int {
		return bootstrap.Main([]string{"pay", "-url", c.base, "-order", pending.OrderNo, "-amount", "500", "-ref", "down-ref"}, &strings.Builder{}, &strings.Builder{})
	}
	if code := pay(); code == 0 {
		t.Fatal("a payment callback succeeded while MariaDB was down")
	}

	proxy.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for pay() != 0 { // the provider retries
		if time.Now().After(deadline) {
			t.Fatal("the payment retry did not succeed after MariaDB came back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.want(200, "GET", "/api/orders/"+pending.OrderNo, tok.Token, "", &pending)
	if pending.Status != "PAID" || len(pending.Codes) != 1 {
		t.Fatalf("order after the retry: %+v", pending)
	}
	c.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":2}`, pid), nil, "Idempotency-Key", fmt.Sprintf("down-%d-2", pid))
	var rec struct {
		OK bool `json:"ok"`
	}
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/reconcile?repair=false", pid), adminToken, "", &rec)
	if !rec.OK {
		t.Fatal("gate and ledger disagree after MariaDB came back")
	}
}

// TestRealAdaptersReady: with Redis, MariaDB and RabbitMQ up, the schema migrated and every
// gate initialised, /readyz answers 200 with every check passing, and /metrics exports the
// ledger's retries.
func TestRealAdaptersReady(t *testing.T) {
	c, _, _ := realService(t, time.Minute)
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	c.want(200, "GET", "/readyz", "", "", &ready)
	for _, name := range []string{"redis", "mysql", "migrations", "rabbitmq", "gate"} {
		if ready.Checks[name] != "ok" {
			t.Errorf("check %s: %q", name, ready.Checks[name])
		}
	}
	if ready.Status != "ready" || len(ready.Checks) != 5 {
		t.Fatalf("readyz %+v", ready)
	}
	status, body := c.do("GET", "/metrics", "", "")
	if status != 200 || !strings.Contains(string(body), `cardshop_ledger_retries_total{reason="deadlock"}`) {
		t.Fatalf("/metrics %d without ledger retries", status)
	}
	for _, q := range []string{"order-timeouts", "delivered", "delay.900000"} {
		if !strings.Contains(string(body), `cardshop_broker_queue_messages{queue="`+q+`"} `) {
			t.Errorf("/metrics lacks the depth of the %s queue", q)
		}
	}
	for _, m := range []string{"cardshop_close_schedule_unconfirmed ", "cardshop_close_schedule_lost_total 0"} {
		if !strings.Contains(string(body), "\n"+m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
}
