// Command loadcheck is the load proof (docs/PRODUCT.md): it starts cardshop on the real
// adapters (or targets running instances), measures this machine's ceilings, runs the
// flash-sale scenarios with wrk, pays most orders through signed callbacks (duplicates mixed
// in), or in one scenario through Stripe's Checkout and webhooks played by its simulator, lets
// the rest expire, and then checks every invariant directly against Redis and MariaDB. It
// prints the numbers and exits non-zero if any invariant fails.
//
// Run it with `make loadcheck` (full) or `make loadcheck-short` (CI); README.md says more.
package main

import (
	"context"
	"database/sql"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/rabbitmq"
)

//go:embed script.lua
var orderScript string

//go:embed hello.lua
var helloScript string

//go:embed etag.lua
var etagScript string

// options are the command-line settings.
type options struct {
	duration     time.Duration
	threads      int
	conns        int
	short        bool
	chaos        bool
	only         string
	orderTimeout time.Duration
	payShare     float64
	payConns     int
	dupCallbacks float64
	keep         bool
	targets      string
	mysqlServer  string
	redisAddr    string
	amqpURL      string
	// batch is -batch, the instances' CARDSHOP_LEDGER_BATCH ("" leaves the service's default);
	// ab > 0 runs the selected scenarios that many rounds with abVar's two values, alternately.
	batch string
	ab    int
	abVar abSetting
	// setting is the "CARDSHOP_NAME=value" every instance gets on top of the harness's own
	// (from -batch, or the A/B arm running), "" for none.
	setting string
	// charts is the folder the charts go to (charts.go); "" makes a temporary one.
	charts string
}

func main() {
	if addr := os.Getenv(helloServerEnv); addr != "" {
		if err := serveHello(addr); err != nil {
			fmt.Fprintln(os.Stderr, "hello server:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "wrk duration of each scenario")
	flag.IntVar(&o.threads, "threads", 2, "wrk threads")
	flag.IntVar(&o.conns, "conns", 200, "wrk connections")
	flag.BoolVar(&o.short, "short", false, "CI form: 3 s per scenario, smaller stock, short ceilings")
	flag.BoolVar(&o.chaos, "chaos", false, "chaos mode: the fault scenarios (11-19) on MariaDB,\n"+
		"Redis and RabbitMQ servers of the load check's own, a fault injected a third of the way into each sale\n"+
		"(15 s per scenario, -short 6 s, plus the fault's length)")
	flag.StringVar(&o.only, "only", "", "comma-separated scenario numbers to run (default all)")
	flag.DurationVar(&o.orderTimeout, "order-timeout", fullOrderTimeout, "the service's order timeout (unpaid orders close after it)")
	flag.Float64Var(&o.payShare, "pay", 0.8, "share of the orders that get paid")
	flag.IntVar(&o.payConns, "pay-conns", 128, "callbacks in flight at once (a provider's concurrent deliveries); the raw pay\n"+
		"transaction's ceiling is measured at 32 connections and at this many, and the better one is the ceiling")
	flag.Float64Var(&o.dupCallbacks, "dup-callbacks", 0.2, "share of the paid orders whose callback (in the Stripe scenario: payment request and webhook) is sent twice at once")
	flag.BoolVar(&o.keep, "keep", false, "leave the load database in place for inspection")
	flag.StringVar(&o.targets, "target", "", "comma-separated base URLs of already running instances to load instead of starting them\n"+
		"(secrets from CARDSHOP_ADMIN_TOKEN, CARDSHOP_PAYMENT_SECRET, CARDSHOP_TOKEN_SECRET; their database from\n"+
		"CARDSHOP_MYSQL_DSN; -order-timeout must match theirs; start them with CARDSHOP_RATE_PER_IP=0,\n"+
		"CARDSHOP_RATE_PER_BUYER=0 and CARDSHOP_BUYER_CAP=0, as all load comes from one IP, and without CARDSHOP_REDIS_PREFIX,\n"+
		"as the checks read the gate's keys by their bare names; scenarios 5, 7 and 9 need two,\n"+
		"scenario 8 needs instances it starts itself and is skipped)")
	flag.StringVar(&o.mysqlServer, "mysql", envOr("TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"), "MariaDB server DSN (a database cardshop_load is created)")
	flag.StringVar(&o.redisAddr, "redis", envOr("TEST_REDIS_ADDR", "127.0.0.1:6379"), "Redis address")
	flag.StringVar(&o.amqpURL, "amqp", envOr("TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), "RabbitMQ URL")
	flag.StringVar(&o.batch, "batch", "", "the instances' CARDSHOP_LEDGER_BATCH: on or off (default: the service's, on)")
	flag.IntVar(&o.ab, "ab", 0, "A/B: run the selected scenarios (-only, default 2 and 1) this many rounds with -ab-var's\n"+
		"two values alternately, and print orders/s and payments/s per arm (medians and spread)")
	o.abVar = abSetting{name: "CARDSHOP_LEDGER_BATCH", a: "off", b: "on"}
	flag.StringVar(&o.charts, "charts", "", "folder for the SVG charts of each scenario and of the ceilings (default: a new temporary folder)")
	flag.Var(&o.abVar, "ab-var", "the setting -ab compares, NAME=A,B (the instances' CARDSHOP_NAME set to A, then to B)")
	flag.Parse()
	if o.batch != "" && o.batch != "on" && o.batch != "off" {
		fmt.Fprintf(os.Stderr, "loadcheck: -batch must be on or off, got %q\n", o.batch)
		os.Exit(2)
	}
	if o.batch != "" {
		o.setting = "CARDSHOP_LEDGER_BATCH=" + o.batch
	}
	if o.ab > 0 && o.only == "" {
		o.only = "2,1"
	}
	if o.short {
		o.duration, o.orderTimeout = 3*time.Second, shortOrderTimeout
	}
	if o.chaos {
		if o.targets != "" || o.ab > 0 {
			fmt.Fprintln(os.Stderr, "loadcheck: -chaos starts its own services and instances: not with -target or -ab")
			os.Exit(2)
		}
		o.duration, o.orderTimeout = 15*time.Second, chaosOrderTimeout
		if o.short {
			o.duration, o.orderTimeout = 6*time.Second, chaosShortOrderTimeout
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	checks, failed, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadcheck:", err)
		os.Exit(2)
	}
	if failed > 0 {
		fmt.Printf("\nFAIL: %d invariant check(s) failed\n", failed)
	} else {
		fmt.Println("\nPASS: every invariant holds in every scenario")
	}
	fmt.Printf("loadcheck: %d passed, %d failed\n", checks-failed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// amqpPrefix is the instances' queue prefix (CARDSHOP_AMQP_PREFIX).
const amqpPrefix = "cardshop-load"

// The instances' order timeout in the full and the short form (-order-timeout's defaults).
const (
	fullOrderTimeout  = 40 * time.Second
	shortOrderTimeout = 12 * time.Second
	// The chaos mode's are shorter than its load, so that unpaid orders expire while the
	// orders run and the fault meets the expiries too.
	chaosOrderTimeout      = 10 * time.Second
	chaosShortOrderTimeout = 5 * time.Second
)

// deleteQueues deletes the instances' queues and exchanges, with the delay queues of both
// order timeouts the load check uses (full, short and chaos forms) and of this run's.
func (e *env) deleteQueues(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := rabbitmq.DeleteTopology(ctx, e.o.amqpURL, amqpPrefix, []time.Duration{fullOrderTimeout, shortOrderTimeout,
		chaosOrderTimeout, chaosShortOrderTimeout, e.o.orderTimeout}); err != nil {
		return fmt.Errorf("RabbitMQ: %w", err)
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// harnessIdleConns is how many MariaDB connections the harness keeps open while idle. Its
// queries run one at a time; the instances' pools stay open 5 minutes after a load (idle
// connections are closed after that), so the connections the harness keeps are taken from a
// later scenario's instances (the start-instant scenario runs two more).
const harnessIdleConns = 8

// env is what every service instance and the harness share.
type env struct {
	o          options
	dir        string
	binary     string
	dsn        string
	db         *sql.DB
	rdb        *redis.Client
	secrets    secrets
	ceil       ceilings
	orderLua   string
	pacedLua   string // orderLua with a pause before each request (scenario.pace)
	helloLua   string
	etagLua    string
	instances  []*instance
	tokensFile string
	// buyerTokens are the tokens of tokensFile by buyer id, for calls made as an order's buyer.
	buyerTokens map[string]string
	// stripe is the Stripe simulator the started instances pay through; nil with -target.
	stripe *stripeEnv
	// own are the chaos mode's own MariaDB and Redis; nil outside it.
	own *ownServices
	// sentinels is the Sentinel set of the chaos mode's failover scenario while it runs.
	sentinels *sentinelSet
	// proxies stand between the stall scenarios' instance and the own services while one runs.
	proxies *proxies
	// lb and lbPair are the retrying load balancer and its two instances while the load
	// balancer's scenario (19) runs.
	lb     *retryingLB
	lbPair [2]*instance
}

type secrets struct{ admin, payment, token, codeKeys, codeHash string }

type ceilings struct {
	hello   helloResult
	redis   float64
	insert  float64
	payTx   float64
	measure time.Duration
}

// run returns how many invariant checks ran and how many failed.
func run(ctx context.Context, o options) (checks, failed int, err error) {
	if err := ensureWrk(); err != nil {
		return 0, 0, err
	}
	dir, err := os.MkdirTemp("", "cardshop-loadcheck-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	e := &env{o: o, dir: dir}
	e.orderLua, e.helloLua, e.etagLua = filepath.Join(dir, "order.lua"), filepath.Join(dir, "hello.lua"), filepath.Join(dir, "etag.lua")
	e.pacedLua = filepath.Join(dir, "paced.lua")
	for path, script := range map[string]string{e.orderLua: orderScript, e.pacedLua: orderScript + pacedAppendix,
		e.helloLua: helloScript, e.etagLua: etagScript} {
		if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
			return 0, 0, err
		}
	}

	fmt.Printf("cardshop load check — %s — %s\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine())
	fmt.Printf("wrk -t%d -c%d -d%s --latency per scenario; order timeout %s; pay %.0f%% (%.0f%% of them twice at once)\n\n",
		o.threads, o.conns, o.duration, o.orderTimeout, o.payShare*100, o.dupCallbacks*100)

	if o.targets == "" {
		if err := e.build(ctx); err != nil {
			return 0, 0, err
		}
	}
	if o.chaos {
		own, err := startOwnServices(ctx, filepath.Join(dir, "services"))
		if err != nil {
			return 0, 0, err
		}
		defer own.stop()
		e.own, e.o.mysqlServer, e.o.redisAddr = own, own.serverDSN(), own.redisAddr
		// The harness's pool keeps connections to the MariaDB it kills: the driver's line for
		// each one it finds dead is noise here (database/sql retries on a fresh one).
		_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	}
	if err := e.openStores(ctx); err != nil {
		return 0, 0, err
	}
	defer e.db.Close()
	defer e.rdb.Close()
	if !o.keep && o.targets == "" {
		defer e.dropDatabase()
	}
	if o.targets == "" {
		// The instances' queues start empty and are removed at the end: closes scheduled by a
		// run that was killed would otherwise reach this run's instances (a read of an order
		// that no longer exists, each), and the broker would keep every run's leftovers.
		if err := e.deleteQueues(ctx); err != nil {
			return 0, 0, err
		}
		defer func() { _ = e.deleteQueues(context.WithoutCancel(ctx)) }()
		if err := e.startStripe(); err != nil {
			return 0, 0, err
		}
		defer e.stripe.sim.Close()
	}
	if err := e.measureCeilings(ctx); err != nil {
		return 0, 0, err
	}
	if err := e.writeTokens(2000); err != nil {
		return 0, 0, err
	}
	defer e.stopInstances()

	if o.ab > 0 {
		return e.runAB(ctx)
	}
	var results []scenarioResult
	list := scenarios(o)
	if o.chaos {
		list = chaosScenarios(o)
	}
	for _, sc := range list {
		if o.only != "" && !strings.Contains(","+o.only+",", fmt.Sprintf(",%d,", sc.num)) {
			continue
		}
		if ctx.Err() != nil {
			return checks, failed, ctx.Err()
		}
		res, err := e.runScenario(ctx, sc)
		if err != nil {
			return checks, failed, fmt.Errorf("scenario %d (%s): %w", sc.num, sc.name, err)
		}
		failed += res.failed()
		checks += len(res.checks)
		results = append(results, res)
	}
	e.printSummary(results)
	if err := e.drawSummary(results); err != nil {
		return checks, failed, err
	}
	return checks, failed, nil
}

// build compiles the service binary once.
func (e *env) build(ctx context.Context) error {
	e.binary = filepath.Join(e.dir, "cardshop")
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	fmt.Println("building cardshop …")
	return runCmd(ctx, root, "go", "build", "-o", e.binary, "./cmd/cardshop")
}

func (e *env) openStores(ctx context.Context) error {
	if e.o.targets != "" {
		return e.openTargets(ctx)
	}
	dsn, err := mysqlstore.CreateDatabase(ctx, e.o.mysqlServer, "cardshop_load")
	if err != nil {
		return fmt.Errorf("MariaDB: %w", err)
	}
	if err := e.connect(ctx, dsn); err != nil {
		return err
	}
	keys, hash := mysqlstore.GenerateKeyring()
	e.secrets = secrets{admin: randomSecret(), payment: randomSecret(), token: randomSecret(), codeKeys: keys, codeHash: hash}
	return nil
}

func (e *env) dropDatabase() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.db.ExecContext(ctx, "DROP DATABASE IF EXISTS cardshop_load"); err != nil {
		fmt.Fprintln(os.Stderr, "drop cardshop_load:", err)
	}
}

func (e *env) measureCeilings(ctx context.Context) error {
	d := 5 * time.Second
	if e.o.short {
		d = 2 * time.Second
	}
	e.ceil.measure = d
	fmt.Println("measuring this machine's ceilings …")
	var err error
	if e.ceil.hello, err = helloCeiling(ctx, WrkRun{Threads: e.o.threads, Conns: e.o.conns, Duration: e.o.duration, Script: e.helloLua}); err != nil {
		return fmt.Errorf("hello ceiling: %w", err)
	}
	n := 300000
	if e.o.short {
		n = 50000
	}
	if e.ceil.redis, err = redisScriptCeiling(ctx, e.o.redisAddr, 50, n); err != nil {
		return fmt.Errorf("redis ceiling: %w", err)
	}
	if e.ceil.insert, err = e.measureInsert(ctx, d); err != nil {
		return err
	}
	defer func() { e.db.SetMaxOpenConns(48); e.db.SetMaxIdleConns(harnessIdleConns) }()
	// The raw pay transaction at 32 connections and at the callbacks' concurrency: the ceiling
	// is the better of the two, so that the callbacks are compared at their own concurrency
	// with the best the single transaction does.
	e.db.SetMaxOpenConns(max(64, e.o.payConns))
	e.db.SetMaxIdleConns(max(64, e.o.payConns))
	var payAt []string
	for _, conns := range slices.Compact([]int{32, e.o.payConns}) {
		rate, err := payTxCeiling(ctx, e.db, conns, d)
		if err != nil {
			return fmt.Errorf("pay ceiling: %w", err)
		}
		payAt = append(payAt, fmt.Sprintf("%s tx/s at %d connections", num(rate), conns))
		e.ceil.payTx = max(e.ceil.payTx, rate)
	}
	fmt.Printf("  Fiber hello world (same wrk command) %s req/s · p99 %s · %s\n", num(e.ceil.hello.RPS), ms(e.ceil.hello.P99),
		cpuLine(e.ceil.hello.cpu))
	fmt.Printf("  Redis reserve script (redis-benchmark EVALSHA, 50 clients) %s calls/s\n", num(e.ceil.redis))
	fmt.Printf("  MariaDB single-row INSERT, 64 connections %s rows/s\n", num(e.ceil.insert))
	fmt.Printf("  raw pay transaction on one hot product: %s; the ceiling is %s tx/s\n\n", strings.Join(payAt, ", "), num(e.ceil.payTx))
	return nil
}

// openTargets points the harness at running instances: their secrets and database come from
// the CARDSHOP_* environment the instances were started with.
func (e *env) openTargets(ctx context.Context) error {
	e.secrets = secrets{admin: os.Getenv("CARDSHOP_ADMIN_TOKEN"), payment: os.Getenv("CARDSHOP_PAYMENT_SECRET"),
		token: os.Getenv("CARDSHOP_TOKEN_SECRET")}
	if e.secrets.admin == "" || e.secrets.payment == "" || e.secrets.token == "" {
		return fmt.Errorf("-target needs CARDSHOP_ADMIN_TOKEN, CARDSHOP_PAYMENT_SECRET and CARDSHOP_TOKEN_SECRET of the instances")
	}
	if err := e.connect(ctx, envOr("CARDSHOP_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test")); err != nil {
		return err
	}
	for i, u := range strings.Split(e.o.targets, ",") {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		e.instances = append(e.instances, &instance{name: fmt.Sprintf("target-%d", i+1), base: u})
	}
	return nil
}

// connect opens the harness's own connections to the database at dsn and to Redis.
func (e *env) connect(ctx context.Context, dsn string) error {
	e.dsn = dsn
	var err error
	if e.db, err = sql.Open("mysql", dsn); err != nil {
		return err
	}
	// MariaDB allows 151 connections by default: 2 instances x 48 + the harness's 48 at most,
	// of which it keeps harnessIdleConns open between its queries.
	e.db.SetMaxOpenConns(48)
	e.db.SetMaxIdleConns(harnessIdleConns)
	if err := e.db.PingContext(ctx); err != nil {
		return fmt.Errorf("MariaDB: %w", err)
	}
	e.rdb = redis.NewClient(&redis.Options{Addr: e.o.redisAddr, PoolSize: 64})
	if err := e.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}
