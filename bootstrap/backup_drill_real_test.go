package bootstrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"cardshop/adapters/adminclient"
	"cardshop/adapters/authtoken"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/paysig"
	"cardshop/adapters/porttest"
	"cardshop/adapters/porttest/redistest"
	"cardshop/adapters/rabbitmq"
	"cardshop/bootstrap"
	"cardshop/domain"
)

// TestBackupDrill is the backup drill of docs/PRODUCTION.md ("What to back up"), run by `make
// backup-drill` (which prints its figures) and by `make test`: during a sale — buyers placing
// and paying orders through the service on Redis, MariaDB and RabbitMQ — it takes an online
// dump of the ledger (`mariadb-dump --single-transaction`), lets the sale go on, then loses
// everything but the dump and the secrets: the dump is restored into a fresh database, and the
// service starts on it with a fresh, empty Redis (a redis-server of the test's own) and fresh
// queues. Then the gate is rebuilt from the ledger, reconcile finds no difference, every order
// paid before the dump began reads back PAID with its codes, every order placed after the dump
// ended is gone (the documented loss), and the shop sells again. The same database started with
// other code keys cannot show a code: the keys are part of the backup.
func TestBackupDrill(t *testing.T) {
	dumpBin, clientBin := lookTool(t, "mariadb-dump", "mysqldump"), lookTool(t, "mariadb", "mysql")
	server, err := mysqldriver.ParseDSN(porttest.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	const price, codes = 500, 3000
	issuer, err := authtoken.New(tokenSecret)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := paysig.New(paymentSecret, 0)
	if err != nil {
		t.Fatal(err)
	}

	// The shop as it runs: a database and a Redis of its own, its own queues, rate limits off
	// (the drill's buyers all come from 127.0.0.1).
	liveDSN, _ := cliDatabase(t)
	cfg, _, _ := realConfig(t, time.Minute)
	cfg.MySQLDSN, cfg.RedisAddrs = bootstrap.ConnString(liveDSN), []string{redistest.StartEmpty(t)}
	cfg.AMQPPrefix = drillQueues(t, cfg.OrderTimeout)
	cfg.RatePerIP, cfg.RatePerBuyer = 0, 0
	live, stopLive := runStoppable(t, cfg, io.Discard)
	pid := porttest.NewProductID()
	live.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Drill","price":%d,"max_per_order":1}`, pid, price), nil)
	pool := make([]string, codes)
	for i := range pool {
		pool[i] = fmt.Sprintf("DRILL-%d-%05d", pid, i)
	}
	live.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, strings.Join(pool, "\n"), nil)

	// The sale: buyers place an order each and pay four in five of them, until stopped.
	type sale struct {
		no, token    string
		placed, paid time.Time // when the request was sent; when the payment was confirmed (zero: unpaid)
		codes        []string
	}
	var (
		mu      sync.Mutex
		orders  []sale
		failure atomic.Pointer[error]
		next    atomic.Int64
		stopped atomic.Bool
		wg      sync.WaitGroup
	)
	fail := func(err error) { failure.CompareAndSwap(nil, &err) }
	httpc := &http.Client{Timeout: 10 * time.Second}
	payer := adminclient.New(live.base, adminToken)
	buyer := func(n int64) string {
		tok, _, err := issuer.Issue(domain.BuyerID(fmt.Sprintf("drill-%d-%d", pid, n)), time.Now(), time.Hour)
		if err != nil {
			fail(err)
		}
		return tok
	}
	for w := 0; w < 16; w++ {
		wg.Go(func() {
			for !stopped.Load() && failure.Load() == nil {
				n := next.Add(1)
				s := sale{token: buyer(n), placed: time.Now()}
				var o orderBody
				status, body, err := call(httpc, "POST", live.base+"/api/order", s.token, fmt.Sprintf(`{"product_id":%d,"qty":1}`, pid), &o,
					"Idempotency-Key", fmt.Sprintf("drill-key-%08d", n))
				if err != nil || status != 201 {
					fail(fmt.Errorf("order %d: %d %s %v", n, status, body, err))
					return
				}
				s.no = o.OrderNo
				if n%5 != 0 {
					answered, body, err := payer.Pay(context.Background(), signer,
						paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: price, PaymentRef: "drill-" + o.OrderNo}, time.Now())
					if err != nil || answered != 200 {
						fail(fmt.Errorf("pay %s: %d %s %v", o.OrderNo, answered, body, err))
						return
					}
					s.paid = time.Now()
					status, _, err := call(httpc, "GET", live.base+"/api/orders/"+o.OrderNo, s.token, "", &o)
					if err != nil || status != 200 || o.Status != "PAID" || len(o.Codes) != 1 {
						fail(fmt.Errorf("read %s: %d %+v %v", o.OrderNo, status, o, err))
						return
					}
					s.codes = o.Codes
				}
				mu.Lock()
				orders = append(orders, s)
				mu.Unlock()
			}
		})
	}
	soFar := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(orders)
	}
	waitFor := func(n int) {
		for deadline := time.Now().Add(30 * time.Second); soFar() < n && failure.Load() == nil; {
			if time.Now().After(deadline) {
				t.Errorf("the sale placed %d orders in 30 s, want %d", soFar(), n)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The backup, online, in the middle of the sale.
	waitFor(150)
	dump := filepath.Join(t.TempDir(), "ledger.sql")
	dumpStart := time.Now()
	runTool(t, server, dump, "", dumpBin, "--single-transaction", "--hex-blob", "--no-tablespaces", mysqlName(t, liveDSN))
	dumpEnd := time.Now()
	atDump := soFar()
	waitFor(atDump + 100) // the orders the restore will lose
	stopped.Store(true)
	wg.Wait()
	if err := failure.Load(); err != nil {
		t.Fatalf("the sale: %v", *err)
	}
	stopLive() // the shop is lost: its database, its Redis, its queues
	info, err := os.Stat(dump)
	if err != nil {
		t.Fatal(err)
	}

	// The restore: the dump into a fresh database, a fresh empty Redis, fresh queues, and the
	// secrets (code keys included) of the lost shop.
	restoredDSN, restored := cliDatabase(t)
	restoreStart := time.Now()
	runTool(t, server, "", dump, clientBin, mysqlName(t, restoredDSN))
	restoreTime := time.Since(restoreStart)
	emptyRedis := redistest.StartEmpty(t)
	rdb := redis.NewClient(&redis.Options{Addr: emptyRedis})
	t.Cleanup(func() { _ = rdb.Close() })
	if n, err := rdb.DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Fatalf("the fresh Redis holds %d keys (%v), want none", n, err)
	}
	back := cfg
	back.HTTPAddr, back.MySQLDSN, back.RedisAddrs = freeAddr(t), bootstrap.ConnString(restoredDSN), []string{emptyRedis}
	back.AMQPPrefix = drillQueues(t, cfg.OrderTimeout)
	logs := &lockedBuffer{}
	startAt := time.Now()
	shop, stopShop := runStoppable(t, back, logs)
	startTime := time.Since(startAt)
	if !strings.Contains(logs.String(), `"msg":"gates rebuilt from the ledger at start","products":1`) {
		t.Errorf("the start did not rebuild the gate from the ledger; log:\n%s", logs)
	}
	var first orderBody
	status, body, err := call(httpc, "POST", shop.base+"/api/order", buyer(-1), fmt.Sprintf(`{"product_id":%d,"qty":1}`, pid), &first,
		"Idempotency-Key", "drill-after-restore")
	if err != nil || status != 201 {
		t.Fatalf("the first order after the restore: %d %s %v", status, body, err)
	}
	firstOrder := time.Since(startAt)

	// The ledger as restored agrees with the gate rebuilt from it.
	var rec struct {
		OK          bool `json:"ok"`
		Differences int  `json:"differences"`
		Gate        *struct {
			Stock int64 `json:"stock"`
			Sold  int64 `json:"sold"`
		} `json:"gate"`
	}
	shop.want(200, "POST", fmt.Sprintf("/admin/products/%d/reconcile", pid), adminToken, "", &rec)
	held := count(t, restored, "SELECT SUM(qty) FROM orders WHERE product_id=? AND status IN ('PENDING','PAID')", pid)
	if !rec.OK || rec.Differences != 0 || rec.Gate == nil || rec.Gate.Sold != held || rec.Gate.Stock != codes-held {
		t.Fatalf("reconcile after the restore: %+v, gate %+v; the ledger's orders hold %d of %d codes", rec, rec.Gate, held, codes)
	}

	// Every order paid before the dump began reads back with its codes; every order placed after
	// it ended is the documented loss; those in between are as the dump's snapshot saw them.
	var kept, lost, between, pendingKept int
	for _, s := range orders {
		var o orderBody
		status, _, err := call(httpc, "GET", shop.base+"/api/orders/"+s.no, s.token, "", &o)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !s.paid.IsZero() && s.paid.Before(dumpStart):
			if status != 200 || o.Status != "PAID" || !slices.Equal(o.Codes, s.codes) {
				t.Errorf("order %s, paid before the dump: %d %+v, want PAID with %v", s.no, status, o, s.codes)
			}
			kept++
		case s.paid.IsZero() && s.placed.Before(dumpStart) && status == 200:
			if o.Status != "PENDING" {
				t.Errorf("order %s, unpaid at the dump: %s, want PENDING", s.no, o.Status)
			}
			pendingKept++
		case s.placed.After(dumpEnd):
			if status != 404 {
				t.Errorf("order %s, placed after the dump: %d %+v, want 404 (lost)", s.no, status, o)
			}
			lost++
		default:
			between++
		}
	}
	if kept < 80 || lost < 50 {
		t.Errorf("the drill kept %d paid orders and lost %d: too few to prove anything", kept, lost)
	}
	stopShop()

	// The same restored database without the lost shop's code keys (other keys, as a restore
	// without the secrets would have to use) shows no code.
	keys, hashKey := mysqlstore.GenerateKeyring()
	blind := back
	blind.HTTPAddr, blind.CodeKeys, blind.CodeHash = freeAddr(t), domain.Secret(keys), domain.Secret(hashKey)
	noKeys, _ := runStoppable(t, blind, io.Discard)
	var anyPaid sale
	for _, s := range orders {
		if !s.paid.IsZero() && s.paid.Before(dumpStart) {
			anyPaid = s
			break
		}
	}
	var o orderBody
	status, body, err = call(httpc, "GET", noKeys.base+"/api/orders/"+anyPaid.no, anyPaid.token, "", &o)
	if err != nil || (status == 200 && len(o.Codes) > 0) {
		t.Fatalf("without the code keys order %s read %d %s (%v), want no code", anyPaid.no, status, body, err)
	}

	t.Logf("backup drill: %d orders in the sale (%d paid before the dump), dump %.1f KiB in %s (online, during the sale)",
		len(orders), kept, float64(info.Size())/1024, dumpEnd.Sub(dumpStart).Round(time.Millisecond))
	t.Logf("backup drill: restore %s into a fresh database; start on an empty Redis %s; first order accepted %s after the start",
		restoreTime.Round(time.Millisecond), startTime.Round(time.Millisecond), firstOrder.Round(time.Millisecond))
	t.Logf("backup drill: kept %d paid and %d unpaid orders with their codes; lost %d placed after the dump ended, %d in flight when it began; reconcile 0 differences; without the code keys: %d %s",
		kept, pendingKept, lost, between, status, bytes.TrimSpace(body))
}

// lookTool finds the first of the commands on PATH; without any the test stops as
// porttest.RequireService says (skipped, or failed under CI=true).
func lookTool(t *testing.T, names ...string) string {
	t.Helper()
	var err error
	for _, n := range names {
		var p string
		if p, err = exec.LookPath(n); err == nil {
			return p
		}
	}
	porttest.RequireService(t, strings.Join(names, " or "), err)
	return ""
}

// runTool runs a MariaDB client tool against the test server, its output written to out and its
// input read from in (each when not empty).
func runTool(t *testing.T, server *mysqldriver.Config, out, in, tool string, args ...string) {
	t.Helper()
	host, port := "127.0.0.1", "3306"
	if h, p, ok := strings.Cut(server.Addr, ":"); ok {
		host, port = h, p
	}
	cmd := exec.Command(tool, append([]string{"--protocol=tcp", "-h", host, "-P", port, "-u", server.User}, args...)...)
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+server.Passwd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdout = f
	}
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v: %s", filepath.Base(tool), err, stderr.String())
	}
}

// mysqlName is the database a DSN names.
func mysqlName(t *testing.T, dsn string) string {
	t.Helper()
	c, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return c.DBName
}

// drillQueues is a RabbitMQ prefix of the test's own, its queues deleted when the test ends.
func drillQueues(t *testing.T, timeout time.Duration) string {
	t.Helper()
	prefix := fmt.Sprintf("cardshop-drill-%016x", rand.Uint64())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rabbitmq.DeleteTopology(ctx, porttest.AMQPURL, prefix, []time.Duration{timeout}); err != nil {
			t.Errorf("delete the drill's queues: %v", err)
		}
	})
	return prefix
}

// call makes an HTTP request off the test's goroutine (no t.Fatal): the status and the answer,
// decoded into out when it is 2xx.
func call(c *http.Client, method, url, token, body string, out any, hdr ...string) (int, []byte, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, b, err
	}
	if res.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, b, fmt.Errorf("%w in %s", err, b)
		}
	}
	return res.StatusCode, b, nil
}
