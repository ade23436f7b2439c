package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"cardshop/adapters/porttest"
)

// serve runs app on a free loopback port until the test ends and returns its base URL.
func serve(t *testing.T, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	return "http://" + ln.Addr().String()
}

// writeScript writes an embedded wrk script where wrk can read it.
func writeScript(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// taggedServer answers GET /p with a body and ETag "t<n>", n moving on every `every` (never
// when every is 0), and 304 when If-None-Match names the current tag, as the catalogue does.
func taggedServer(t *testing.T, every time.Duration) string {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	start := time.Now()
	app.Get("/p", func(c *fiber.Ctx) error {
		n := 0
		if every > 0 {
			n = int(time.Since(start) / every)
		}
		tag := fmt.Sprintf(`"t%d"`, n)
		c.Set(fiber.HeaderETag, tag)
		if c.Get(fiber.HeaderIfNoneMatch) == tag {
			return c.SendStatus(fiber.StatusNotModified)
		}
		return c.SendString(`{"id":1}`)
	})
	return serve(t, app)
}

func TestEtagScriptRevalidates(t *testing.T) {
	requireTool(t, "wrk")
	script := writeScript(t, "etag.lua", etagScript)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A tag that never changes: every conditional request is answered 304.
	r, err := runWrk(ctx, WrkRun{Threads: 2, Conns: 10, Duration: time.Second, URL: taggedServer(t, 0) + "/p", Script: script, Args: []string{"1"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := revalidationCheck(r, 10); !c.OK {
		t.Errorf("stable tag: %s", c.Detail)
	}
	if r.Counts["new-tag"] != 2 {
		t.Errorf("stable tag: %d new tags, want one per thread (2)", r.Counts["new-tag"])
	}

	// A tag that moves every 50 ms, every other request conditional: tagged 200s and 304s.
	r, err = runWrk(ctx, WrkRun{Threads: 2, Conns: 10, Duration: time.Second, URL: taggedServer(t, 50*time.Millisecond) + "/p", Script: script, Args: []string{"2"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := duringCheck(r, 2); !c.OK {
		t.Errorf("moving tag: %s", c.Detail)
	}
	if c := revalidationCheck(r, 10); c.OK {
		t.Errorf("moving tag passes the stable-tag check: %s", c.Detail)
	}
}

func TestOrderScriptTalliesRefusals(t *testing.T) {
	requireTool(t, "wrk")
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	var n atomic.Int64
	app.Post("/api/order", func(c *fiber.Ctx) error {
		switch n.Add(1) % 3 {
		case 0:
			return c.Status(201).SendString(`{"order_no":"1"}`)
		case 1:
			c.Set(fiber.HeaderRetryAfter, "7")
			return c.Status(409).SendString(`{"code":"sale_not_started","message":"x"}`)
		}
		return c.Status(409).SendString(`{"code":"sold_out","message":"x"}`)
	})
	base := serve(t, app)
	script := writeScript(t, "order.lua", orderScript)
	tokens := writeScript(t, "tokens.txt", "tok-a\ntok-b\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	args := []string{"1", "1", "1", tokens, "test"}
	r, err := runWrk(ctx, WrkRun{Threads: 1, Conns: 4, Duration: time.Second, URL: base, Script: script, Args: append(args, "codes")})
	if err != nil {
		t.Fatal(err)
	}
	ns, so := r.Counts["409:sale_not_started"], r.Counts["409:sold_out"]
	if ns == 0 || so == 0 || ns+so != r.Status[409] {
		t.Fatalf("tallies %v do not split the %d 409s by code", r.Counts, r.Status[409])
	}
	if r.Counts["retry-after:409:sale_not_started"] != ns || r.Counts["retry-after:409:sold_out"] != 0 || r.Counts["max:retry-after"] != 7 {
		t.Errorf("Retry-After tallies %v: want one per sale_not_started, none for sold_out, max 7", r.Counts)
	}
	if c := notStartedCheck(r); !c.OK {
		t.Errorf("notStartedCheck: %s", c.Detail)
	}

	// Without "codes" the script parses no body.
	r, err = runWrk(ctx, WrkRun{Threads: 1, Conns: 4, Duration: time.Second, URL: base, Script: script, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Counts) != 0 || r.Status[409] == 0 {
		t.Errorf("without codes: tallies %v, statuses %v; want no tallies", r.Counts, r.Status)
	}
}

func TestParseWrkCounts(t *testing.T) {
	out := "Requests/sec: 10.0\n100 requests in 1.00s\nstatus 409 7\ncount 409:sold_out 5\ncount max:retry-after 3\n"
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Counts["409:sold_out"] != 5 || r.Counts["max:retry-after"] != 3 || r.Status[409] != 7 {
		t.Errorf("parsed %+v", r)
	}
	m := mergeRuns([]WrkResult{r, r})
	if m.Counts["409:sold_out"] != 10 || m.Counts["max:retry-after"] != 3 || m.Status[409] != 14 || m.Requests != 200 {
		t.Errorf("merged %+v: want sums, and the largest of a max: tally", m)
	}
}

func TestSeriesValue(t *testing.T) {
	exposition := `# TYPE cardshop_gate_duration_seconds histogram
cardshop_gate_duration_seconds_bucket{op="LevelsMany",le="0.0001"} 3
cardshop_gate_duration_seconds_sum{op="LevelsMany"} 0.004
cardshop_gate_duration_seconds_count{op="Levels"} 99
cardshop_gate_duration_seconds_count{op="LevelsMany"} 12
# TYPE cardshop_gate_lease_answers_total counter
cardshop_gate_lease_answers_total 1.314416e+06
cardshop_gate_lease_answers_total_extra 5
`
	for _, tt := range []struct {
		name, label string
		want        int64
	}{
		{"cardshop_gate_duration_seconds_count", `op="LevelsMany"`, 12},
		{"cardshop_gate_duration_seconds_count", `op="Levels"`, 99},
		{"cardshop_gate_duration_seconds_count", `op="Reserve"`, 0},
		{"cardshop_gate_lease_answers_total", "", 1314416},
		{"cardshop_gate_leases_total", `result="granted"`, 0},
	} {
		got, err := seriesValue(strings.NewReader(exposition), tt.name, tt.label)
		if err != nil || got != tt.want {
			t.Errorf("seriesValue(%s{%s}) = %d, %v; want %d", tt.name, tt.label, got, err, tt.want)
		}
	}
}

func TestParseCommandCalls(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_mget:calls=42,usec=80,usec_per_call=1.90,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=7,usec=3\r\n"
	for cmd, want := range map[string]int64{"mget": 42, "get": 7, "evalsha": 0} {
		got, err := parseCommandCalls(info, cmd)
		if err != nil || got != want {
			t.Errorf("parseCommandCalls(%s) = %d, %v; want %d", cmd, got, err, want)
		}
	}
}

func TestGateReadCheck(t *testing.T) {
	insts := []*instance{{name: "a"}, {name: "b"}}
	at := time.Unix(1000, 0)
	before := meter{start: at, end: at, reads: []int64{5, 5}, mget: 100}
	after := meter{start: at.Add(time.Second), end: at.Add(time.Second), reads: []int64{14, 7}, mget: 122}
	// One second: at most ⌊1s/250ms⌋+2 = 6 catalogue refreshes and ⌊1s/1s⌋+2 = 3 stock-watch
	// passes each; "a" read 9 times, "b" twice (its stock watch: no catalogue request reached it).
	if c := gateReadCheck("test", insts, before, after); !c.OK {
		t.Errorf("9 and 2 gate reads in 1 s: %s", c.Detail)
	}
	if got, want := redisReads(insts, before, after, 2), "Redis MGET calls 22 (server-wide) for the instances' 11 gate reads × 2 products = 22"; got != want {
		t.Errorf("redisReads = %q, want %q", got, want)
	}
	after.reads[1] = 15
	if c := gateReadCheck("test", insts, before, after); c.OK {
		t.Errorf("10 gate reads of one instance in 1 s pass: %s", c.Detail)
	}
	after.reads = []int64{8, 8}
	if c := gateReadCheck("test", insts, before, after); c.OK {
		t.Errorf("no more reads than the stock watches make passes: %s", c.Detail)
	}
}

func TestJudgeStatements(t *testing.T) {
	// 42 idle statements in 3 s (14/s); a run of 3.5 s would see 49 of its own.
	v := judgeStatements(42, 3*time.Second, 55, 3500*time.Millisecond)
	if v.expected != 49 || v.excess != 6 || v.reloads != 2 || v.allowed != 16 {
		t.Fatalf("verdict %+v: want expected 49, excess 6, 2 reloads, allowed 2 + 14", v)
	}
	// 10 s: two reloads due, plus one at each end.
	if v := judgeStatements(0, time.Second, 0, 10*time.Second); v.reloads != 4 || v.allowed != 4 {
		t.Errorf("10 s with no background: %+v, want 4 reloads allowed", v)
	}
}

func TestStartWatchChecks(t *testing.T) {
	start := time.UnixMilli(1_800_000_000_000)
	ok := &startWatch{pid: 1, startsAt: start, firstHold: start.UnixMilli(), preSamples: 40, lastBefore: 15 * time.Millisecond}
	for _, c := range ok.checks() {
		if !c.OK {
			t.Errorf("%s: %s", c.Name, c.Detail)
		}
	}
	for name, w := range map[string]*startWatch{
		"a hold 1 ms early": {startsAt: start, firstHold: start.UnixMilli() - 1, preSamples: 40},
		"no hold seen":      {startsAt: start, preSamples: 40},
		"a row before":      {startsAt: start, firstHold: start.UnixMilli(), preSamples: 40, early: []string{"1 orders 3ms before the start"}},
		"no sample before":  {startsAt: start, firstHold: start.UnixMilli()},
	} {
		if failed := len(w.checks()) - passed(w.checks()); failed != 1 {
			t.Errorf("%s: %d checks fail, want 1", name, failed)
		}
	}
}

func passed(cs []Check) int {
	n := 0
	for _, c := range cs {
		if c.OK {
			n++
		}
	}
	return n
}

func TestStartWatchReadsTheFirstHold(t *testing.T) {
	rdb := testRedis(t)
	db := testDB(t)
	pid := int64(porttest.NewProductID())
	ctx := context.Background()
	key := fmt.Sprintf("holds:{%d}", pid)
	t.Cleanup(func() { _ = rdb.Del(ctx, key).Err() })
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	start := now.Add(-time.Second).Truncate(time.Millisecond)
	if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(start.UnixMilli() + 40), Member: "o2"},
		redis.Z{Score: float64(start.UnixMilli() + 7), Member: "o1"}).Err(); err != nil {
		t.Fatal(err)
	}
	w := &startWatch{pid: pid, startsAt: start}
	wctx, cancel := context.WithTimeout(ctx, 3*startPoll)
	defer cancel()
	w.run(wctx, db, rdb)
	if w.firstHold != start.UnixMilli()+7 || !w.started || w.preSamples != 0 {
		t.Fatalf("watch %+v: want the first hold at start+7ms, the start passed, no sample before it", w)
	}
	if cs := w.checks(); cs[0].OK != true || !strings.Contains(cs[0].Detail, "+7ms") {
		t.Errorf("hold check: %+v", cs[0])
	}
}

func TestHoldingCheck(t *testing.T) {
	f := newFixture(t)
	e := &env{db: f.db}
	ctx := context.Background()
	// The fixture's buyers hold A 2, B 3, C 1 (PAID) and D 2, E 1 (PENDING); the others hold
	// nothing (closed, failed, refunded, unfulfilled).
	c, err := e.holdingCheck(ctx, f.pid, 3, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !c.OK || !strings.Contains(c.Detail, "buyers holding units 5: at the limit 1, over it 0") {
		t.Errorf("limit 3: %+v", c)
	}
	if c, _ = e.holdingCheck(ctx, f.pid, 2, "test"); c.OK || !strings.Contains(c.Detail, "over it 1 (most held by one buyer: 3)") {
		t.Errorf("limit 2: %+v", c)
	}
}

func TestBuyerLimitRefusals(t *testing.T) {
	r := WrkResult{Status: map[int]int64{201: 10, 200: 4, 429: 25, 409: 5},
		Counts: map[string]int64{holdingRefusal: 25, "409:request_in_progress": 5}}
	if c := buyerLimitRefusals(r); !c.OK {
		t.Errorf("limit refusals only: %s", c.Detail)
	}
	r.Status[409], r.Counts["409:sold_out"] = 6, 1
	if c := buyerLimitRefusals(r); c.OK {
		t.Errorf("a sold_out passes: %s", c.Detail)
	}
	r.Status, r.Counts = map[int]int64{201: 10, 409: 30}, map[string]int64{"409:request_in_progress": 30}
	if c := buyerLimitRefusals(r); c.OK {
		t.Errorf("no buyer_limit refusal passes: %s", c.Detail)
	}
}

func TestNotStartedCheck(t *testing.T) {
	good := func() WrkResult {
		return WrkResult{Status: map[int]int64{201: 1000, 409: 500},
			Counts: map[string]int64{"409:sale_not_started": 300, "retry-after:409:sale_not_started": 300, "409:sold_out": 200}}
	}
	if c := notStartedCheck(good()); !c.OK {
		t.Errorf("good: %s", c.Detail)
	}
	r := good()
	r.Counts["retry-after:409:sale_not_started"] = 299
	if c := notStartedCheck(r); c.OK {
		t.Errorf("a refusal without Retry-After passes: %s", c.Detail)
	}
	r = good()
	r.Status[503] = 1
	if c := notStartedCheck(r); c.OK {
		t.Errorf("a 503 passes: %s", c.Detail)
	}
	if c := soldOutAfterStart(good(), 3); c.OK {
		t.Errorf("stock left passes as sold out: %s", c.Detail)
	}
}

func TestHeldMatch(t *testing.T) {
	f := newFixture(t)
	e := &env{db: f.db, rdb: f.rdb}
	ctx := context.Background()
	key := "held:" + f.tag()
	t.Cleanup(func() { _ = f.rdb.Del(ctx, key).Err() })
	// The ledger's holdings: A 2, B 3, C 1 (PAID), D 2, E 1 (PENDING).
	if err := f.rdb.HSet(ctx, key, "lc-buyer-A", 2, "lc-buyer-B", 3, "lc-buyer-C", 1, "lc-buyer-D", 2, "lc-buyer-E", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if c, err := e.heldMatch(ctx, f.pid); err != nil || !c.OK {
		t.Fatalf("equal holdings: %+v %v", c, err)
	}
	for name, change := range map[string]func() error{
		"a count off by one":      func() error { return f.rdb.HSet(ctx, key, "lc-buyer-B", 2).Err() },
		"a buyer missing":         func() error { return f.rdb.HDel(ctx, key, "lc-buyer-E").Err() },
		"a buyer holding nothing": func() error { return f.rdb.HSet(ctx, key, "lc-buyer-F", 2).Err() },
	} {
		if err := f.rdb.HSet(ctx, key, "lc-buyer-A", 2, "lc-buyer-B", 3, "lc-buyer-C", 1, "lc-buyer-D", 2, "lc-buyer-E", 1).Err(); err != nil {
			t.Fatal(err)
		}
		_ = f.rdb.HDel(ctx, key, "lc-buyer-F").Err()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		if c, err := e.heldMatch(ctx, f.pid); err != nil || c.OK {
			t.Errorf("%s passes: %+v %v", name, c, err)
		}
	}
}

func TestTrimCutsRunes(t *testing.T) {
	name := "per-buyer limit: buyer_limit 2, qty 1-2, each key ×3 at once"
	got := trim(name, 52)
	if !utf8.ValidString(got) || utf8.RuneCountInString(got) != 52 || !strings.HasSuffix(got, "key ×…") {
		t.Errorf("trim(%q, 52) = %q: want 52 whole characters ending in an ellipsis", name, got)
	}
	if trim("short", 52) != "short" {
		t.Error("a short name is changed")
	}
}

func TestParseWrkMaxLatency(t *testing.T) {
	out := "Running 10s test @ http://127.0.0.1:8080\n  2 threads and 200 connections\n" +
		"  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency     5.62ms    3.01ms   1.20s    87.38%\n" +
		"    Req/Sec    18.12k     1.23k   21.00k    70.00%\n  Latency Distribution\n     50%    5.10ms\n     99%   40.00ms\n" +
		"Requests/sec: 10.0\n100 requests in 1.00s\n"
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Max != 1200*time.Millisecond || r.P50 != 5100*time.Microsecond || r.P99 != 40*time.Millisecond {
		t.Errorf("max %s, p50 %s, p99 %s; want 1.2s, 5.1ms, 40ms", r.Max, r.P50, r.P99)
	}
}
