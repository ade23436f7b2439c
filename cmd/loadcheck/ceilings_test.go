package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/porttest"
)

// requireTool stops the test when a command-line tool is missing, as RequireService does for
// a service: skipped locally, failed with CI=true.
func requireTool(t *testing.T, name string) {
	t.Helper()
	_, err := exec.LookPath(name)
	porttest.RequireService(t, name, err)
}

// TestMain serves the hello ceiling's child process when the test binary is started as one
// (helloCeiling runs this executable again).
func TestMain(m *testing.M) {
	if addr := os.Getenv(helloServerEnv); addr != "" {
		if err := serveHello(addr); err != nil {
			fmt.Fprintln(os.Stderr, "hello server:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

func TestHelloCeiling(t *testing.T) {
	requireTool(t, "wrk")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := helloCeiling(ctx, WrkRun{Threads: 2, Conns: 20, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.RPS <= 0 || res.Requests <= 0 {
		t.Fatalf("hello ceiling %+v: want a positive rate", res)
	}
	if !res.cpu.measured || res.cpu.seconds <= 0 || res.cpu.requests != res.Requests {
		t.Fatalf("hello server CPU %+v: want its own positive CPU time over the run's %d answers", res.cpu, res.Requests)
	}
	t.Logf("Fiber hello world: %.0f req/s, p50 %s, p99 %s, %.1f µs of the server's CPU per answer",
		res.RPS, res.P50, res.P99, res.cpu.perRequest())
}

func TestRedisScriptCeiling(t *testing.T) {
	requireTool(t, "redis-benchmark")
	rdb := testRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rate, err := redisScriptCeiling(ctx, porttest.RedisAddr, 20, 20000)
	if err != nil {
		t.Fatal(err)
	}
	if rate <= 0 {
		t.Fatalf("rate %v, want positive", rate)
	}
	t.Logf("reserve.lua via redis-benchmark: %.0f calls/s", rate)
	// The scratch product's keys are gone.
	iter := rdb.Scan(ctx, 0, "idem:order:{*}:ceiling:*", 1000).Iterator()
	for iter.Next(ctx) {
		t.Fatalf("scratch key %s left behind", iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestInsertCeiling(t *testing.T) {
	db := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rate, err := insertCeiling(ctx, db, 8, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rate <= 0 {
		t.Fatalf("rate %v, want positive", rate)
	}
	t.Logf("single-row INSERT, 8 connections: %.0f rows/s", rate)
	assertNoScratchTables(ctx, t)
}

// The insert ceiling's table has the orders table's columns and indexes, as migrated: a
// migration that adds an index to orders must add it there too, or the ceiling flatters.
func TestInsertCeilingTableMirrorsOrders(t *testing.T) {
	db := testDB(t)
	ctx := t.Context()
	table := scratchName("insert")
	if _, err := db.ExecContext(ctx, insertScratchDDL(table)); err != nil {
		t.Fatal(err)
	}
	defer dropTables(ctx, db, table)
	shape := func(name string) string {
		var out []string
		for _, q := range []string{
			"SELECT CONCAT_WS(' ', column_name, column_type, is_nullable) FROM information_schema.columns " +
				"WHERE table_schema = DATABASE() AND table_name = ? ORDER BY column_name",
			"SELECT CONCAT_WS(' ', index_name, seq_in_index, column_name, non_unique) FROM information_schema.statistics " +
				"WHERE table_schema = DATABASE() AND table_name = ? ORDER BY index_name, seq_in_index",
		} {
			rows, err := db.QueryContext(ctx, q, name)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				out = append(out, s)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
		}
		return strings.Join(out, "\n")
	}
	if got, want := shape(table), shape("orders"); got != want || want == "" {
		t.Fatalf("the insert ceiling's table:\n%s\n\nthe orders table:\n%s", got, want)
	}
}

func TestPayTxCeiling(t *testing.T) {
	db := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rate, err := payTxCeiling(ctx, db, 8, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rate <= 0 {
		t.Fatalf("rate %v, want positive", rate)
	}
	t.Logf("raw pay transaction, 8 connections: %.0f tx/s", rate)
	assertNoScratchTables(ctx, t)
}

func assertNoScratchTables(ctx context.Context, t *testing.T) {
	t.Helper()
	var n int
	// Only tables of this test's own measurements could be left: names are unique per run.
	err := testDB(t).QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables "+
		"WHERE table_schema = DATABASE() AND table_name LIKE 'ceiling\\_%'").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d ceiling_ scratch tables left behind", n)
	}
}

func TestParseRedisBenchmark(t *testing.T) {
	progress := "EVALSHA a2cd 4 stock:product:{1} ... 60000: rps=0.0 (overall: -nan) avg_msec=-nan (overall: -nan)\r" +
		strings.Repeat(" ", 40) + "\r"
	cases := []struct {
		name, out string
		want      float64
	}{
		{"-q, redis 7", progress + "EVALSHA a2cd 4 stock:product:{1} idem:order:{1}:b:__rand_int__ 1 o__rand_int__|fp|1 60000: " +
			"88105.73 requests per second, p50=0.479 msec                    \n\n", 88105.73},
		{"-q, redis 5", "EVALSHA abc 0: 41152.26 requests per second\n\n", 41152.26},
		{"-q, integer rate", "PING_INLINE: 100000 requests per second\n", 100000},
		{"--csv, redis 7", `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"` + "\n" +
			`"EVALSHA a2cd 4 stock:product:{1} o__rand_int__|fp|1 60000","85106.38","0.529","0.176","0.495","0.759","0.959","2.751"` + "\n", 85106.38},
		{"--csv, redis 5", `"EVALSHA abc 0","41152.26"` + "\n", 41152.26},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRedisBenchmark(tc.out)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("rate %v, want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "Could not connect to Redis at 127.0.0.1:1: Connection refused\n",
		`"test","rps"` + "\n", "X: 0.00 requests per second\n"} {
		if got, err := parseRedisBenchmark(bad); err == nil {
			t.Errorf("parseRedisBenchmark(%q) = %v, want an error", bad, got)
		}
	}
}
