package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"cardshop/lua"
)

// The machine's ceilings: what the same wrk, Redis and MariaDB can do with nothing of cardshop
// in the way, measured in the same run, so the scenarios' numbers can be read against them.

// helloServerEnv, when set in a process's environment, makes this program (or its test
// binary, see TestMain) serve the hello-world handler on the address it holds instead of
// running: the hello ceiling's server is a child process, so its CPU time is its own.
const helloServerEnv = "LOADCHECK_HELLO_SERVER"

// serveHello serves GET / -> "hello" with Fiber on addr until the process is killed.
func serveHello(addr string) error {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString("hello") })
	return app.Listen(addr)
}

// helloResult is the hello ceiling: wrk's numbers and the hello server's own CPU time over the
// run.
type helloResult struct {
	WrkResult
	cpu cpuUse
}

// helloCeiling serves a hello-world Fiber handler on a free loopback port in a child process
// (this executable again, with helloServerEnv) and measures it with the same wrk command as
// the scenarios (threads, conns, duration from run; run.URL/Script are set by this function),
// and the child's CPU time over the wrk run. A caller's Script is kept when given, so it must
// only GET and count (hello.lua); without one wrk sends plain GETs.
func helloCeiling(ctx context.Context, run WrkRun) (helloResult, error) {
	addr, err := freeAddr()
	if err != nil {
		return helloResult{}, fmt.Errorf("hello ceiling: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return helloResult{}, fmt.Errorf("hello ceiling: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helloServerEnv+"="+addr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return helloResult{}, fmt.Errorf("hello ceiling: start the server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()

	run.URL = "http://" + addr + "/"
	run.Args = nil
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := expectHello(ctx, run.URL)
		if err == nil {
			break
		}
		select {
		case <-exited:
			return helloResult{}, fmt.Errorf("hello ceiling: the server ended: %s", out.String())
		case <-ctx.Done():
			return helloResult{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return helloResult{}, fmt.Errorf("hello ceiling: %w", err)
		}
	}
	pid := []int{cmd.Process.Pid}
	before := sampleCPU(pid)
	res, err := runWrk(ctx, run)
	after := sampleCPU(pid)
	if err != nil {
		return helloResult{WrkResult: res}, fmt.Errorf("hello ceiling: %w", err)
	}
	for code, n := range res.Status {
		if code != http.StatusOK && n > 0 {
			return helloResult{WrkResult: res}, fmt.Errorf("hello ceiling: %d answers with status %d (want only 200)", n, code)
		}
	}
	if res.RPS <= 0 {
		return helloResult{WrkResult: res}, fmt.Errorf("hello ceiling: wrk measured %v req/s", res.RPS)
	}
	return helloResult{WrkResult: res, cpu: cpuBetween(before, after, pid, res.Requests)}, nil
}

// expectHello checks that url answers 200 "hello".
func expectHello(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(b) != "hello" {
		return fmt.Errorf("GET %s answered %d %q, want 200 \"hello\"", url, resp.StatusCode, b)
	}
	return nil
}

// The scratch product of the Redis ceiling: an id above the ones tests and runs use
// (porttest.NewProductID stays below 9e15), with a huge stock that never runs out.
const (
	scratchPIDBase   = 9_100_000_000_000_000
	scratchStock     = 1_000_000_000_000_000
	scratchClaimTTL  = 2 * time.Minute // the claims evaporate even if the clean-up does not run
	scratchKeysTTL   = time.Hour
	benchKeyspaceLen = 1_000_000_000 // -r: claim keys differ (a rare collision is a Replayed run)
)

// redisScriptCeiling runs redis-benchmark against the gate's reserve script (EVALSHA of
// lua.Reserve, loaded first with SCRIPT LOAD) on a scratch product with a huge stock, unique
// claim keys via __rand_int__ (-r), `clients` connections, n requests; returns calls/s.
//
// Before the benchmark it runs the same command once and checks the exact reply (Reserved,
// then Replayed for the same claim), and after it checks that the calls really reserved (the
// sold counter grew by about n), so a script error can never pass for speed. The scratch
// product's keys are deleted afterwards (SCAN + DEL on its hash tag only).
func redisScriptCeiling(ctx context.Context, addr string, clients, n int) (float64, error) {
	if clients < 1 || n < 1 {
		return 0, fmt.Errorf("redis ceiling: clients %d and n %d must be positive", clients, n)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("redis ceiling: address %q: %w", addr, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	pid, err := rand.Int(rand.Reader, big.NewInt(1_000_000_000_000))
	if err != nil {
		return 0, err
	}
	tag := "{" + strconv.FormatInt(scratchPIDBase+pid.Int64(), 10) + "}"
	stock, sold, frozen := "stock:product:"+tag, "sold:product:"+tag, "frozen:product:"+tag
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		_ = deleteTagged(cctx, rdb, tag)
	}()

	sha, err := rdb.ScriptLoad(ctx, lua.Reserve).Result()
	if err != nil {
		return 0, fmt.Errorf("redis ceiling: SCRIPT LOAD: %w", err)
	}
	if err := rdb.Set(ctx, stock, scratchStock, scratchKeysTTL).Err(); err != nil {
		return 0, fmt.Errorf("redis ceiling: %w", err)
	}
	if err := rdb.Set(ctx, sold, 0, scratchKeysTTL).Err(); err != nil {
		return 0, fmt.Errorf("redis ceiling: %w", err)
	}
	ttl := strconv.FormatInt(scratchClaimTTL.Milliseconds(), 10)
	// KEYS and ARGV as reserve.lua wants them: the claim value's qty equals ARGV[1].
	// The full form the gate sends: the hold (holds/holdinfo/holdbuyer) and the buyer budget
	// (cap 1e9, never reached) are written, the rebuild fence and the sold-out lease are checked,
	// the sale rules are read (none: no window, no limit) and a claim bit is set, as on every
	// real order; no coupon, as on most.
	holdAt := "1" // track the hold, scored by Redis's clock
	cmdArgs := func(claimSuffix, orderNo string) []string {
		return []string{"EVALSHA", sha, "16", stock, sold, frozen, "idem:order:" + tag + ":ceiling:" + claimSuffix,
			"holds:" + tag, "holdinfo:" + tag, "budget:" + tag + ":ceiling-" + claimSuffix, "rebuild:" + tag,
			"rules:" + tag, "held:" + tag, "holdbuyer:" + tag, "soldout:" + tag, "claimbits:v1:" + tag,
			"couponuse:" + tag, "couponbuyer:" + tag, "holdcoupon:" + tag,
			"1", orderNo + "|ceiling|1", ttl, holdAt, "1000000000", "600000", "ceiling-" + claimSuffix, "1", "4242",
			"", "0", "0"}
	}

	probe := cmdArgs("probe", "probe")
	for i, want := range []string{
		fmt.Sprintf("[1  %d]", scratchStock-1),                // Reserved, stock after
		fmt.Sprintf("[2 probe|ceiling|1 %d]", scratchStock-1), // Replayed, the claim
	} {
		args := make([]any, len(probe))
		for j, a := range probe {
			args[j] = a
		}
		reply, err := rdb.Do(ctx, args...).Slice()
		if err != nil {
			return 0, fmt.Errorf("redis ceiling: probe %d: %w", i+1, err)
		}
		if got := fmt.Sprint(reply); got != want {
			return 0, fmt.Errorf("redis ceiling: probe %d answered %s, want %s", i+1, got, want)
		}
	}
	before, err := rdb.Get(ctx, sold).Int64()
	if err != nil {
		return 0, fmt.Errorf("redis ceiling: %w", err)
	}

	bench := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(n),
		"-r", strconv.Itoa(benchKeyspaceLen), "-q"}, cmdArgs("__rand_int__", "o__rand_int__")...)
	cmd := exec.CommandContext(ctx, "redis-benchmark", bench...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("redis ceiling: redis-benchmark %s: %w\n%s", strings.Join(bench, " "), err, out.String())
	}
	rps, err := parseRedisBenchmark(out.String())
	if err != nil {
		return 0, fmt.Errorf("redis ceiling: %w", err)
	}
	after, err := rdb.Get(ctx, sold).Int64()
	if err != nil {
		return 0, fmt.Errorf("redis ceiling: %w", err)
	}
	if reserved := after - before; reserved < int64(n)*9/10 {
		return 0, fmt.Errorf("redis ceiling: %d calls reserved only %d units: the script did not run as expected\n%s",
			n, reserved, out.String())
	}
	return rps, nil
}

// deleteTagged deletes every key whose name holds tag (one scratch product's hash tag).
func deleteTagged(ctx context.Context, rdb *redis.Client, tag string) error {
	pattern := "*" + globEscape(tag) + "*"
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// globEscape escapes Redis glob metacharacters.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

var reBenchRPS = regexp.MustCompile(`([0-9]+(?:\.[0-9]+)?) requests per second`)

// parseRedisBenchmark reads the rate of a one-test redis-benchmark run from its -q output
// (progress lines end in '\r'; the last "<n> requests per second" wins) or its --csv output
// (the "rps" column, or the second column of the older header-less form).
func parseRedisBenchmark(out string) (float64, error) {
	if m := reBenchRPS.FindAllStringSubmatch(out, -1); len(m) > 0 {
		return positive(m[len(m)-1][1], out)
	}
	r := csv.NewReader(strings.NewReader(strings.ReplaceAll(out, "\r", "\n")))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	recs, err := r.ReadAll()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark output is neither -q nor --csv: %w\n%s", err, out)
	}
	col := 1
	for i, rec := range recs {
		if len(rec) > 1 && rec[0] == "test" {
			for j, f := range rec {
				if f == "rps" {
					col = j
				}
			}
			recs = recs[i+1:]
			break
		}
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if len(recs[i]) > col {
			if _, err := strconv.ParseFloat(recs[i][col], 64); err == nil {
				return positive(recs[i][col], out)
			}
		}
	}
	return 0, fmt.Errorf("redis-benchmark output has no rate:\n%s", out)
}

func positive(s, out string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("redis-benchmark rate %q is not a positive number:\n%s", s, out)
	}
	return v, nil
}

// scratchName returns a table name for one measurement: prefixed ceiling_ and unique, so two
// runs on one database never share (or drop) each other's tables.
func scratchName(kind string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "ceiling_" + kind + "_" + hex.EncodeToString(b)
}

func dropTables(ctx context.Context, db *sql.DB, names ...string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, n := range names {
		_, _ = db.ExecContext(cctx, "DROP TABLE IF EXISTS `"+n+"`")
	}
}

// errExhausted tells measure that a worker ran out of seeded rows: the measurement stops there.
var errExhausted = errors.New("scratch rows exhausted")

// measure runs op from conns goroutines until d has passed (or op reports errExhausted) and
// returns the completed ops per second over the time they ran. Each op runs on ctx whole (a
// query is never cut by the deadline, which would kill its connection); the first other error
// stops the measurement and is returned.
func measure(ctx context.Context, db *sql.DB, conns int, d time.Duration, op func(ctx context.Context, worker int) error) (float64, error) {
	if conns < 1 || d <= 0 {
		return 0, fmt.Errorf("conns %d and duration %s must be positive", conns, d)
	}
	if err := warmPool(ctx, db, conns); err != nil {
		return 0, err
	}
	var (
		done     atomic.Int64
		stop     atomic.Bool
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	var end atomic.Int64 // when the measurement stopped early (UnixNano), 0 when it ran d
	for w := range conns {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil && time.Now().Before(deadline) {
				err := op(ctx, w)
				if err == nil {
					done.Add(1)
					continue
				}
				if stop.CompareAndSwap(false, true) {
					end.Store(time.Now().UnixNano())
				}
				if !errors.Is(err, errExhausted) {
					errOnce.Do(func() { firstErr = err })
				}
				return
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	if e := end.Load(); e != 0 {
		elapsed = time.Unix(0, e).Sub(start)
	}
	if elapsed <= 0 || done.Load() == 0 {
		return 0, fmt.Errorf("nothing completed in %s", elapsed)
	}
	return float64(done.Load()) / elapsed.Seconds(), nil
}

// warmPool opens conns connections before the clock starts, so that the measurement does
// not count their handshakes.
func warmPool(ctx context.Context, db *sql.DB, conns int) error {
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for i := range conns {
		wg.Go(func() {
			var one int
			errs[i] = db.QueryRowContext(ctx, "SELECT 1 FROM DUAL WHERE SLEEP(0.01) = 0").Scan(&one)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// insertCeiling measures single-row autocommit INSERTs/s into a scratch table of db with
// conns goroutines (64 in the load check) for d. The table mirrors orders (its columns, its
// primary key and secondary indexes: TestInsertCeilingTableMirrorsOrders compares them with
// the migrated table), the service's hottest insert.
func insertCeiling(ctx context.Context, db *sql.DB, conns int, d time.Duration) (float64, error) {
	table := scratchName("insert")
	defer dropTables(ctx, db, table)
	if _, err := db.ExecContext(ctx, insertScratchDDL(table)); err != nil {
		return 0, fmt.Errorf("insert ceiling: create %s: %w", table, err)
	}
	run := scratchName("") // distinct order numbers per measurement
	q := "INSERT INTO `" + table + "` (order_no, buyer_id, product_id, qty, unit_price, amount, idem_key, status, " +
		"reason, created_at, expires_at, updated_at) VALUES (?, ?, 1, 1, 100, 100, ?, 'PENDING', '', " +
		"UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 15 MINUTE, UTC_TIMESTAMP(6))"
	seq := make([]int64, conns)
	rate, err := measure(ctx, db, conns, d, func(ctx context.Context, w int) error {
		seq[w]++
		no := fmt.Sprintf("%s%04d%010d", run[len(run)-8:], w, seq[w])
		_, err := db.ExecContext(ctx, q, no, fmt.Sprintf("ceiling-%04d", w), no)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("insert ceiling: %w", err)
	}
	return rate, nil
}

// insertScratchDDL creates the insert ceiling's table: the orders table as the migrations
// leave it.
func insertScratchDDL(table string) string {
	return "CREATE TABLE `" + table + "` (" +
		"order_no VARCHAR(32) NOT NULL, buyer_id VARCHAR(64) NOT NULL, product_id BIGINT NOT NULL, " +
		"qty INT NOT NULL, unit_price BIGINT NOT NULL, amount BIGINT NOT NULL, coupon VARCHAR(32) NOT NULL DEFAULT '', " +
		"discount BIGINT NOT NULL DEFAULT 0, idem_key VARCHAR(64) NULL, " +
		"status ENUM('PENDING','PAID','CLOSED','FAILED','REFUNDED','UNFULFILLED') NOT NULL, reason TEXT NOT NULL, " +
		"payment_ref VARCHAR(128) NOT NULL DEFAULT '', created_at DATETIME(6) NOT NULL, expires_at DATETIME(6) NOT NULL, " +
		"paid_at DATETIME(6) NULL, ended_at DATETIME(6) NULL, revealed_at DATETIME(6) NULL, updated_at DATETIME(6) NOT NULL, " +
		"buyer_email VARCHAR(254) NULL, buyer_lang VARCHAR(8) NULL, access_hash BINARY(32) NULL, " +
		"PRIMARY KEY (order_no), UNIQUE KEY uk_buyer_idem (buyer_id, idem_key), " +
		"KEY idx_expiry (status, expires_at), KEY idx_buyer_created (buyer_id, created_at), " +
		"KEY idx_product_status (product_id, status, created_at), KEY idx_created (created_at), " +
		"KEY idx_paid (paid_at, product_id, amount), KEY idx_refunded (status, ended_at, product_id, amount), " +
		"KEY idx_product_created (product_id, created_at), KEY idx_email_created (buyer_email, created_at)" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
}

// payRowsPerSecond sizes the pay ceiling's seed: the scratch tables hold this many rows per
// second of measurement (rounded up to a power of two, at least minPayRows). If a machine pays
// faster, the measurement stops when the rows run out and the rate is taken over that time.
const (
	payRowsPerSecond = 8_000
	minPayRows       = 1 << 14
)

// payTxCeiling measures the raw payment transaction on one hot product: at READ COMMITTED,
// BEGIN; UPDATE scratch_orders SET status='PAID' WHERE order_no=? AND status='PENDING';
// SELECT id FROM scratch_cards WHERE product_id=? AND status IN ('UNSOLD','RECYCLED') ORDER BY status, id LIMIT 1 FOR UPDATE SKIP LOCKED;
// UPDATE scratch_cards SET status='SOLD', order_no=? WHERE id=?; COMMIT — with conns goroutines for d. Returns tx/s.
func payTxCeiling(ctx context.Context, db *sql.DB, conns int, d time.Duration) (float64, error) {
	orders, cards := scratchName("orders"), scratchName("cards")
	defer dropTables(ctx, db, orders, cards)
	rows := int64(minPayRows)
	for float64(rows) < d.Seconds()*payRowsPerSecond {
		rows *= 2
	}
	const pid = 1
	if err := seedPayTables(ctx, db, orders, cards, pid, rows); err != nil {
		return 0, fmt.Errorf("pay ceiling: %w", err)
	}
	upOrder := "UPDATE `" + orders + "` SET status = 'PAID', updated_at = UTC_TIMESTAMP(6) WHERE order_no = ? AND status = 'PENDING'"
	pick := "SELECT id FROM `" + cards + "` WHERE product_id = ? AND status IN ('UNSOLD', 'RECYCLED') " +
		"ORDER BY status, id LIMIT 1 FOR UPDATE SKIP LOCKED"
	upCard := "UPDATE `" + cards + "` SET status = 'SOLD', order_no = ?, updated_at = UTC_TIMESTAMP(6) WHERE id = ?"
	var next atomic.Int64
	rate, err := measure(ctx, db, conns, d, func(ctx context.Context, _ int) error {
		i := next.Add(1)
		if i > rows {
			return errExhausted
		}
		no := "c" + strconv.FormatInt(i, 10)
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		res, err := tx.ExecContext(ctx, upOrder, no)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("order %s: %d rows paid (%v), want 1", no, n, err)
		}
		var id int64
		if err := tx.QueryRowContext(ctx, pick, pid).Scan(&id); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return errExhausted
			}
			return err
		}
		if _, err := tx.ExecContext(ctx, upCard, no, id); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return 0, fmt.Errorf("pay ceiling: %w", err)
	}
	return rate, nil
}

// seedPayTables creates the pay ceiling's tables — orders and card_stock with the columns and
// indexes the transaction touches — and fills them with rows PENDING orders c1..c<rows> and
// rows UNSOLD codes of product pid, doubling the rows with INSERT … SELECT.
func seedPayTables(ctx context.Context, db *sql.DB, orders, cards string, pid int, rows int64) error {
	stmts := []string{
		"CREATE TABLE `" + orders + "` (order_no VARCHAR(32) NOT NULL, product_id BIGINT NOT NULL, qty INT NOT NULL, " +
			"status ENUM('PENDING','PAID','CLOSED','FAILED','REFUNDED','UNFULFILLED') NOT NULL, " +
			"expires_at DATETIME(6) NOT NULL, updated_at DATETIME(6) NOT NULL, " +
			"PRIMARY KEY (order_no), KEY idx_expiry (status, expires_at), KEY idx_product_status (product_id, status)" +
			") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
		"CREATE TABLE `" + cards + "` (id BIGINT NOT NULL AUTO_INCREMENT, product_id BIGINT NOT NULL, " +
			"code_cipher VARBINARY(255) NOT NULL, status ENUM('UNSOLD','SOLD','RECYCLED','VOID') NOT NULL DEFAULT 'UNSOLD', " +
			"order_no VARCHAR(32) NULL, updated_at DATETIME(6) NOT NULL, " +
			"PRIMARY KEY (id), KEY idx_alloc (product_id, status, id), KEY idx_order (order_no)" +
			") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
		"INSERT INTO `" + orders + "` (order_no, product_id, qty, status, expires_at, updated_at) " +
			"VALUES ('c1', " + strconv.Itoa(pid) + ", 1, 'PENDING', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, UTC_TIMESTAMP(6))",
		// A code's cipher is about as long as a real one (nonce + code + tag).
		"INSERT INTO `" + cards + "` (product_id, code_cipher, updated_at) " +
			"VALUES (" + strconv.Itoa(pid) + ", UNHEX(REPEAT('ab', 60)), UTC_TIMESTAMP(6))",
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	for n := int64(1); n < rows; n *= 2 {
		if _, err := db.ExecContext(ctx, "INSERT INTO `"+orders+"` (order_no, product_id, qty, status, expires_at, updated_at) "+
			"SELECT CONCAT('c', CAST(SUBSTRING(order_no, 2) AS UNSIGNED) + ?), product_id, qty, status, expires_at, updated_at "+
			"FROM `"+orders+"`", n); err != nil {
			return fmt.Errorf("seed orders: %w", err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO `"+cards+"` (product_id, code_cipher, updated_at) "+
			"SELECT product_id, code_cipher, updated_at FROM `"+cards+"`"); err != nil {
			return fmt.Errorf("seed cards: %w", err)
		}
	}
	// Fresh statistics, so the allocation query plans as it does on the real table.
	for _, t := range []string{orders, cards} {
		rows, err := db.QueryContext(ctx, "ANALYZE TABLE `"+t+"`") // answers a result set
		if err != nil {
			return fmt.Errorf("seed: analyze %s: %w", t, err)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("seed: analyze %s: %w", t, err)
		}
	}
	return nil
}
