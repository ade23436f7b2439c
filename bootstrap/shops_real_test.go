package bootstrap_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/porttest"
	"cardshop/adapters/rabbitmq"
	"cardshop/bootstrap"
)

// twoShopsTimeout is the order timeout of both shops: long enough that every even order is
// paid before it expires (under -race), short enough that the odd ones close within the test.
const twoShopsTimeout = 8 * time.Second

// shopUnderTest is one of the two shops: its service, its database, its names.
type shopUnderTest struct {
	name        string // "a" or "b"
	redisPrefix string
	amqpPrefix  string
	database    string
	codePrefix  string
	price       int64
	codes       int
	c           client
	db          *sql.DB
	tokens      []string
	// accepted lists the orders the shop accepted, paid the even ones it paid.
	mu       sync.Mutex
	accepted map[string]int // order no -> qty
	paid     map[string]int
}

// TestTwoShopsOnOneRedisRabbitMQAndMariaDB runs two different shops at once on one Redis, one
// RabbitMQ and one MariaDB server: two databases, two AMQP prefixes, two Redis prefixes
// (CARDSHOP_REDIS_PREFIX). Both sell a product with the same id, from many buyers at once,
// until it is sold out; each pays half of its orders and lets the other half expire (closed
// by its own delay queue). Then, for each shop: the units it accepted are exactly the codes it
// imported (no unit of one sold by the other), its gate counters are exact (stock = imported
// − paid, sold = paid), its reconciliation is clean, its paid orders read back its own codes,
// and the other shop knows none of its orders. Every Redis key of the product, and the rate
// limits, sit under one of the two prefixes. The databases, the queues and the keys are
// deleted at the end.
func TestTwoShopsOnOneRedisRabbitMQAndMariaDB(t *testing.T) {
	run := fmt.Sprintf("%08x", rand.Uint32())
	pid := int64(porttest.NewProductID()) // the same id in both shops
	shops := []*shopUnderTest{
		{name: "a", codePrefix: "SHOPA", price: 700, codes: 37},
		{name: "b", codePrefix: "SHOPB", price: 1100, codes: 23},
	}
	var rdb *redis.Client
	for _, s := range shops {
		s.redisPrefix, s.amqpPrefix = "shop-"+s.name+"-"+run, "cardshop-shop-"+s.name+"-"+run
		s.database = "cardshop_test_shop_" + s.name + "_" + run
		cfg, r, db := realConfigIn(t, twoShopsTimeout, s.database)
		rdb, s.db = r, db
		t.Cleanup(func() { dropDatabase(t, s.database) })
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := rabbitmq.DeleteTopology(ctx, porttest.AMQPURL, s.amqpPrefix, []time.Duration{twoShopsTimeout}); err != nil {
				t.Errorf("delete the queues of %s: %v", s.amqpPrefix, err)
			}
		})
		t.Cleanup(func() { deleteKeys(t, r, s.redisPrefix+":*") })
		cfg.RedisPrefix, cfg.AMQPPrefix = s.redisPrefix, s.amqpPrefix
		// Per-buyer limits that no buyer of the test reaches, over a day: each order moves the
		// buyer's limit key 86 s ahead, so the keys are still there to look at when the test
		// ends.
		cfg.RatePerBuyer, cfg.RateWindow = 1000, 24*time.Hour
		s.c = runService(t, cfg, io.Discard)
		s.accepted, s.paid = map[string]int{}, map[string]int{}
	}

	const buyers = 8
	for _, s := range shops {
		s.c.want(201, "POST", "/admin/products", adminToken,
			fmt.Sprintf(`{"id":%d,"name":"Shop %s card","price":%d,"max_per_order":2}`, pid, s.name, s.price), nil)
		codes := make([]string, s.codes)
		for i := range codes {
			codes[i] = fmt.Sprintf("%s-%d-%04d", s.codePrefix, pid, i)
		}
		s.c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, strings.Join(codes, "\n"), nil)
		for i := range buyers {
			var tok struct {
				Token string `json:"token"`
			}
			// The same buyer ids in both shops, too.
			s.c.want(201, "POST", "/admin/tokens", adminToken, fmt.Sprintf(`{"buyer_id":"two-shops-%s-%d"}`, run, i), &tok)
			s.tokens = append(s.tokens, tok.Token)
		}
	}

	// Both shops sell at once: every buyer of each orders 2 at a time, then 1 at a time once 2
	// are not there, until sold out, and pays its even orders right away.
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	errs := make(chan error, 2*buyers)
	var wg sync.WaitGroup
	for _, s := range shops {
		for i, tok := range s.tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.buy(pid, i, run, tok)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	ctx := context.Background()
	for _, s := range shops {
		got := 0
		for _, q := range s.accepted {
			got += q
		}
		if got != s.codes {
			t.Errorf("shop %s accepted %d units in %d orders, imported %d: the shops shared stock", s.name, got, len(s.accepted), s.codes)
		}
	}
	// The odd orders expire, each shop's delay queue (or sweeper) closing its own.
	deadline := time.Now().Add(twoShopsTimeout + 30*time.Second)
	for _, s := range shops {
		for {
			var pending int
			if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE status='PENDING'").Scan(&pending); err != nil {
				t.Fatal(err)
			}
			if pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("shop %s: %d orders still PENDING %s after their timeout", s.name, pending, 30*time.Second)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	for _, s := range shops {
		paidQty := 0
		for _, q := range s.paid {
			paidQty += q
		}
		want := [2]int64{int64(s.codes - paidQty), int64(paidQty)}
		gate := func() ([2]int64, error) {
			v, err := rdb.MGet(ctx, fmt.Sprintf("%s:stock:product:{%d}", s.redisPrefix, pid),
				fmt.Sprintf("%s:sold:product:{%d}", s.redisPrefix, pid)).Result()
			if err != nil {
				return [2]int64{}, err
			}
			var out [2]int64
			for i := range out {
				str, _ := v[i].(string)
				if _, err := fmt.Sscan(str, &out[i]); err != nil {
					return out, fmt.Errorf("gate value %v: %w", v[i], err)
				}
			}
			return out, nil
		}
		// The closes' stock returns may still be in the outbox.
		var got [2]int64
		var err error
		for {
			if got, err = gate(); err == nil && got == want || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil || got != want {
			t.Errorf("shop %s: gate stock/sold %v (%v), want %v", s.name, got, err, want)
		}

		var rec struct {
			OK          bool             `json:"ok"`
			Differences int              `json:"differences"`
			Cards       map[string]int64 `json:"cards"`
			Orders      map[string]struct {
				Orders int64 `json:"orders"`
				Qty    int64 `json:"qty"`
			} `json:"orders"`
		}
		s.c.want(200, "GET", fmt.Sprintf("/admin/products/%d/reconcile", pid), adminToken, "", &rec)
		if !rec.OK || rec.Differences != 0 || rec.Cards["SOLD"] != int64(paidQty) ||
			rec.Orders["PAID"].Qty != int64(paidQty) || rec.Orders["PAID"].Orders != int64(len(s.paid)) ||
			rec.Orders["CLOSED"].Orders != int64(len(s.accepted)-len(s.paid)) {
			t.Errorf("shop %s: reconcile %+v; want clean, %d paid units in %d orders, %d closed", s.name, rec,
				paidQty, len(s.paid), len(s.accepted)-len(s.paid))
		}
		var orders int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&orders); err != nil || orders != len(s.accepted) {
			t.Errorf("shop %s: %d orders in its database (%v), it accepted %d", s.name, orders, err, len(s.accepted))
		}
	}
	// Each shop's paid orders read back its own codes; the other shop knows none of its orders.
	for i, s := range shops {
		other := shops[1-i]
		for no := range s.accepted {
			var o orderBody
			s.c.want(200, "GET", "/admin/orders/"+no, adminToken, "", &o)
			for _, code := range o.Codes {
				if !strings.HasPrefix(code, s.codePrefix+"-") {
					t.Errorf("shop %s's order %s delivered %s, a code of another shop", s.name, no, code)
				}
			}
			if _, ok := s.paid[no]; ok && (o.Status != "PAID" || len(o.Codes) != s.paid[no]) {
				t.Errorf("shop %s's paid order %s: %+v", s.name, no, o)
			}
			if status, body := other.c.do("GET", "/admin/orders/"+no, adminToken, ""); status != 404 {
				t.Errorf("shop %s answered %d %s for shop %s's order %s, want 404", other.name, status, body, s.name, no)
			}
		}
	}
	// Every key of the product, and every rate limit of the run, lies under one of the prefixes.
	keys := scanAll(t, rdb, fmt.Sprintf("*{%d}*", pid))
	if len(keys) == 0 {
		t.Fatal("no Redis key of the product")
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, shops[0].redisPrefix+":") && !strings.HasPrefix(k, shops[1].redisPrefix+":") {
			t.Errorf("Redis key %s belongs to no shop", k)
		}
	}
	// The two shops' buyers have the same ids, and each shop keeps their limits apart.
	for i := range buyers {
		limit := fmt.Sprintf("rl:{buyer:two-shops-%s-%d}", run, i)
		for _, s := range shops {
			if n, err := rdb.Exists(ctx, s.redisPrefix+":"+limit).Result(); err != nil || n != 1 {
				t.Errorf("shop %s: EXISTS %s:%s = %d, %v; want 1", s.name, s.redisPrefix, limit, n, err)
			}
		}
		if n, err := rdb.Exists(ctx, limit).Result(); err != nil || n != 0 {
			t.Errorf("EXISTS %s = %d, %v; want 0: a rate limit outside both prefixes", limit, n, err)
		}
	}
}

// buy places orders of s's product as buyer i (token tok) until it is sold out: 2 units at a
// time, then 1 once 2 are not there. It pays every even order it placed at once (the pay
// command, as a provider's callback), and records what it placed and paid.
func (s *shopUnderTest) buy(pid int64, i int, run, tok string) error {
	// No keep-alive: no idle connection of a buyer waits on the service's shutdown.
	h := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	qty := 2
	for n := 0; ; n++ {
		key := fmt.Sprintf("two-shops-%s-%d-%d", run, i, n)
		status, body, err := postOrder(h, s.c.base+"/api/order", tok, fmt.Sprintf(`{"product_id":%d,"qty":%d}`, pid, qty), key)
		if err != nil {
			return fmt.Errorf("shop %s buyer %d: %w", s.name, i, err)
		}
		if status == 409 && strings.Contains(string(body), `"sold_out"`) {
			if qty == 1 {
				return nil
			}
			qty = 1
			continue
		}
		if status != 201 {
			return fmt.Errorf("shop %s buyer %d: order answered %d %s", s.name, i, status, body)
		}
		var o orderBody
		if err := json.Unmarshal(body, &o); err != nil {
			return fmt.Errorf("shop %s buyer %d: %w in %s", s.name, i, err, body)
		}
		s.mu.Lock()
		s.accepted[o.OrderNo] = qty
		s.mu.Unlock()
		if n%2 == 1 {
			continue // left to expire
		}
		amount := fmt.Sprint(s.price * int64(qty))
		if code := bootstrap.Main([]string{"pay", "-url", s.c.base, "-order", o.OrderNo, "-amount", amount, "-ref", "pay-" + o.OrderNo},
			io.Discard, io.Discard); code != 0 {
			return fmt.Errorf("shop %s buyer %d: pay %s exited %d", s.name, i, o.OrderNo, code)
		}
		s.mu.Lock()
		s.paid[o.OrderNo] = qty
		s.mu.Unlock()
	}
}

// postOrder sends an order request and returns the answer (it runs off the test's goroutine, so it
// returns errors instead of failing the test).
func postOrder(h *http.Client, url, tok, body, key string) (int, []byte, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := h.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// scanAll lists the keys of rdb matching pattern.
func scanAll(t *testing.T, rdb *redis.Client, pattern string) []string {
	t.Helper()
	var out []string
	iter := rdb.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// deleteKeys deletes the keys of rdb matching pattern.
func deleteKeys(t *testing.T, rdb *redis.Client, pattern string) {
	for _, k := range scanAll(t, rdb, pattern) {
		if err := rdb.Del(context.Background(), k).Err(); err != nil {
			t.Errorf("delete %s: %v", k, err)
		}
	}
}
