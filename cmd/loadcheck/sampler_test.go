package main

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// exposition is a cardshop /metrics text with the sampler's series: orders by outcome, and the
// request histogram of POST /api/order (2xx and 4xx), of a catalogue GET and of /metrics.
// buckets are cumulative counts for le 0.001, 0.0025, 0.005, 0.01 and +Inf of the order
// route's 2xx series; the other series add fixed counts.
func exposition(created, soldOut, errors float64, buckets [5]float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP cardshop_orders_total Answers.\n# TYPE cardshop_orders_total counter\n")
	fmt.Fprintf(&b, "cardshop_orders_total{outcome=\"created\"} %g\n", created)
	fmt.Fprintf(&b, "cardshop_orders_total{outcome=\"sold_out\"} %g\n", soldOut)
	fmt.Fprintf(&b, "cardshop_orders_total{outcome=\"error\"} %g\n", errors)
	fmt.Fprintf(&b, "cardshop_orders_total{outcome=\"frozen\"} 0\n")
	les := []string{"0.001", "0.0025", "0.005", "0.01", "+Inf"}
	for i, le := range les {
		fmt.Fprintf(&b, "cardshop_http_request_duration_seconds_bucket{method=\"POST\",route=\"/api/order\",status_class=\"2xx\",le=\"%s\"} %g\n", le, buckets[i])
		// /metrics answers are left out: a huge count in its slowest bucket must not move the quantiles.
		fmt.Fprintf(&b, "cardshop_http_request_duration_seconds_bucket{method=\"GET\",route=\"/metrics\",status_class=\"2xx\",le=\"%s\"} %d\n", le, map[bool]int{true: 1e6}[le == "+Inf"])
	}
	fmt.Fprintf(&b, "cardshop_http_request_duration_seconds_count{method=\"POST\",route=\"/api/order\",status_class=\"2xx\"} %g\n", buckets[4])
	fmt.Fprintf(&b, "cardshop_http_request_duration_seconds_count{method=\"GET\",route=\"/api/products/:id\",status_class=\"2xx\"} 40\n")
	fmt.Fprintf(&b, "cardshop_http_request_duration_seconds_count{method=\"GET\",route=\"/metrics\",status_class=\"2xx\"} 1000000\n")
	fmt.Fprintf(&b, "go_goroutines 12\n")
	return b.String()
}

func TestParseMetricsReadTakesTheOrderOutcomesAndTheLoadedRoutes(t *testing.T) {
	at := time.Unix(100, 0)
	got, ok, err := parseMetricsRead(strings.NewReader(exposition(10, 5, 2, [5]float64{1, 2, 3, 4, 5})), at)
	if err != nil || !ok {
		t.Fatalf("parse: ok %v, err %v", ok, err)
	}
	want := map[string]float64{"201 created": 10, "409 sold out": 5, "5xx error": 2, "423 frozen": 0, "other routes 2xx": 40}
	if len(got.answers) != len(want) {
		t.Errorf("answers %v, want %v", got.answers, want)
	}
	for k, v := range want {
		if got.answers[k] != v {
			t.Errorf("answers[%q] = %g, want %g", k, got.answers[k], v)
		}
	}
	if got.buckets[math.Inf(1)] != 5 || got.buckets[0.001] != 1 || got.buckets[0.01] != 4 {
		t.Errorf("buckets %v: want the order route's only (/metrics left out)", got.buckets)
	}
	if _, ok, _ := parseMetricsRead(strings.NewReader("hello world\n"), at); ok {
		t.Error("a text without cardshop's series was taken for an instance's exposition")
	}
}

func TestSplitSampleReadsQuotedLabels(t *testing.T) {
	name, labels, v, ok := splitSample(`cardshop_x_bucket{route="/a,\"b\"}",le="+Inf"} 7 1700000000`)
	if !ok || name != "cardshop_x_bucket" || v != 7 || labels["route"] != `/a,"b"}` || labels["le"] != "+Inf" {
		t.Fatalf("got %q %v %g %v", name, labels, v, ok)
	}
	if _, _, v, ok := splitSample("cardshop_y 3.5"); !ok || v != 3.5 {
		t.Fatalf("no labels: %g %v", v, ok)
	}
	for _, bad := range []string{"cardshop_z", `cardshop_z{a="b} 1`, "cardshop_z{} x"} {
		if _, _, _, ok := splitSample(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestQuantileInterpolatesInsideItsBucketAsPrometheusDoes(t *testing.T) {
	inf := math.Inf(1)
	b := map[float64]float64{0.001: 0, 0.0025: 50, 0.005: 90, 0.01: 100, inf: 100}
	for _, c := range []struct{ q, want float64 }{
		{0.5, 0.0025},                // rank 50: the top of the second bucket
		{0.25, 0.001 + 0.0015*25/50}, // rank 25: halfway through the second bucket
		{0.99, 0.005 + 0.005*9/10.0}, // rank 99: nine tenths into the fourth
		{0.7, 0.0025 + 0.0025*20/40}, // rank 70: half of the third
	} {
		if got := quantile(c.q, b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("quantile(%g) = %g, want %g", c.q, got, c.want)
		}
	}
	// A rank beyond the last finite bound gets that bound; nothing counted gets NaN.
	if got := quantile(0.99, map[float64]float64{0.01: 10, inf: 100}); got != 0.01 {
		t.Errorf("rank in +Inf: %g, want 0.01", got)
	}
	if got := quantile(0.5, map[float64]float64{0.01: 0, inf: 0}); !math.IsNaN(got) {
		t.Errorf("empty: %g, want NaN", got)
	}
	// The first bucket starts at 0.
	if got := quantile(0.5, map[float64]float64{0.002: 10, inf: 10}); got != 0.001 {
		t.Errorf("first bucket: %g, want 0.001", got)
	}
}

func read(t *testing.T, at time.Time, created, soldOut, errors float64, buckets [5]float64) *metricsRead {
	t.Helper()
	r, ok, err := parseMetricsRead(strings.NewReader(exposition(created, soldOut, errors, buckets)), at)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	return &r
}

func TestSamplerTurnsReadsIntoRatesAndQuantilesPerInterval(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newSampler(500*time.Millisecond, nil)
	s.tl = timeline{start: t0}
	urls := []string{"a", "b"}
	// The baselines.
	s.add(t0, urls, []*metricsRead{read(t, t0, 100, 0, 0, [5]float64{0, 0, 0, 0, 0}), read(t, t0, 50, 0, 0, [5]float64{})})
	if len(s.tl.points) != 0 {
		t.Fatalf("the baseline made a point: %+v", s.tl.points)
	}
	// Half a second later: a placed 200 more, b 100 more, and b 40 sold out; a's 200 answers all
	// took 1–2.5 ms, b's 100 all 5–10 ms.
	t1 := t0.Add(500 * time.Millisecond)
	s.add(t1, urls, []*metricsRead{read(t, t1, 300, 0, 0, [5]float64{0, 200, 200, 200, 200}),
		read(t, t1, 150, 40, 0, [5]float64{0, 0, 0, 100, 100})})
	// Then a's process was replaced (its counters restart: 10 created since) and b did not answer.
	t2 := t1.Add(500 * time.Millisecond)
	s.add(t2, urls, []*metricsRead{read(t, t2, 10, 0, 3, [5]float64{10, 10, 10, 13, 13}), nil})
	// Then nobody answered.
	t3 := t2.Add(500 * time.Millisecond)
	s.add(t3, urls, []*metricsRead{nil, nil})

	if len(s.tl.points) != 3 {
		t.Fatalf("%d points, want 3", len(s.tl.points))
	}
	p := s.tl.points[0]
	if p.at != 0.5 || p.dt != 0.5 || p.rates["201 created"] != 600 || p.rates["409 sold out"] != 80 || p.answered != 300 {
		t.Errorf("first interval: %+v", p)
	}
	// Rank 150 of 300 falls at the end of a's 200 in (1, 2.5] ms: 1 + 1.5×150/200 ms.
	if want := 0.001 + 0.0015*150/200; math.Abs(p.p50-want) > 1e-12 {
		t.Errorf("p50 %g, want %g", p.p50, want)
	}
	// Rank 297 falls in b's (5, 10] ms bucket: 97 of its 100.
	if want := 0.005 + 0.005*97/100; math.Abs(p.p99-want) > 1e-12 {
		t.Errorf("p99 %g, want %g", p.p99, want)
	}
	p = s.tl.points[1]
	if p.rates["201 created"] != 20 || p.rates["5xx error"] != 6 || p.answered != 13 {
		t.Errorf("after the restart: %+v (want the restarted counters taken from 0)", p)
	}
	p = s.tl.points[2]
	if p.rates["201 created"] != 0 || !math.IsNaN(p.p50) || p.answered != 0 {
		t.Errorf("nobody answered: %+v, want no answers and no latency", p)
	}
	// b answers again after two missed reads: its difference spreads over its own 1.5 s.
	t4 := t3.Add(500 * time.Millisecond)
	s.add(t4, urls, []*metricsRead{nil, read(t, t4, 300, 40, 0, [5]float64{0, 0, 0, 100, 100})})
	if got := s.tl.points[3].rates["201 created"]; got != 100 {
		t.Errorf("b's 150 over 1.5 s = %g/s, want 100", got)
	}
}

// TestSamplerReadsTheInstancesOverHTTP drives tick by hand against two fake instances and a
// server that is not cardshop (no timers: each tick is called).
func TestSamplerReadsTheInstancesOverHTTP(t *testing.T) {
	var mu sync.Mutex
	created := 0.0
	inst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(w, exposition(created, 0, 0, [5]float64{created, created, created, created, created}))
	}))
	defer inst.Close()
	hello := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "Hello, World!") }))
	defer hello.Close()
	clock := time.Unix(5000, 0)
	s := newSampler(time.Second, func() []string { return []string{inst.URL, hello.URL, inst.URL} })
	s.now = func() time.Time { return clock }
	s.tl = timeline{start: clock}
	s.tick(t.Context())
	for i := 1; i <= 3; i++ {
		mu.Lock()
		created += 100 * float64(i)
		mu.Unlock()
		clock = clock.Add(time.Second)
		s.tick(t.Context())
	}
	// While the harness counts the database's statements, and half an interval after a tick,
	// a tick reads nothing.
	release := quietSampling()
	clock = clock.Add(time.Second)
	s.tick(t.Context())
	release()
	if s.reads != 5 || len(s.tl.points) != 3 { // 4 of the instance, 1 of the hello server
		t.Errorf("a quiet tick read: %d reads, %d points", s.reads, len(s.tl.points))
	}
	clock = clock.Add(time.Second)
	s.tick(t.Context())
	clock = clock.Add(400 * time.Millisecond)
	s.tick(t.Context())
	if s.reads != 6 || len(s.tl.points) != 4 || s.tl.points[3].dt != 2 {
		t.Errorf("after the quiet tick: %d reads, %d points (want 6 and 4, the last over 2 s), and a tick 0.4 s later read nothing", s.reads, len(s.tl.points))
	}
	s.tl.points = s.tl.points[:3]
	if !s.ignore[hello.URL] {
		t.Error("the hello server is still read")
	}
	if len(s.tl.points) != 3 {
		t.Fatalf("%d points, want 3", len(s.tl.points))
	}
	for i, p := range s.tl.points {
		if want := 100 * float64(i+1); p.rates["201 created"] != want || p.at != float64(i+1) {
			t.Errorf("point %d: %g created/s at %gs, want %g at %ds (a URL listed twice is read once)", i, p.rates["201 created"], p.at, want, i+1)
		}
		if p.p50 != 0.0005 {
			t.Errorf("point %d: p50 %g, want 0.0005 (all in the first bucket)", i, p.p50)
		}
	}
}

func TestWatchLoadListsTheURLsWhileTheirLoadRuns(t *testing.T) {
	stopA := watchLoad("http://a")
	stopA2 := watchLoad("http://a")
	stopB := watchLoad("http://b")
	has := func(u string) bool {
		for _, x := range loadedURLs() {
			if x == u {
				return true
			}
		}
		return false
	}
	if !has("http://a") || !has("http://b") {
		t.Fatalf("loaded: %v", loadedURLs())
	}
	stopA()
	stopB()
	if !has("http://a") || has("http://b") {
		t.Fatalf("after one of a's two loads and b's ended: %v", loadedURLs())
	}
	stopA2()
	if has("http://a") {
		t.Fatalf("after both of a's loads ended: %v", loadedURLs())
	}
	if time.Since(lastLoadEnd()) > time.Minute {
		t.Errorf("the last load's end is %s", lastLoadEnd())
	}
}

func TestPausesAreListedFromTheSamplersStart(t *testing.T) {
	before := time.Now()
	quietSampling()()
	start := time.Now()
	release := quietSampling()
	release()
	got := pausedSince(before.Add(-time.Hour))
	if len(got) < 2 {
		t.Fatalf("pauses since an hour ago: %v, want both", got)
	}
	got = pausedSince(start)
	if len(got) != 1 || got[0][0] < 0 || got[0][1] < got[0][0] {
		t.Fatalf("pauses since the second began: %v, want it alone, from ≥ 0", got)
	}
}

func TestTrimAfterKeepsTheIntervalThatHoldsTheEnd(t *testing.T) {
	var ps []point
	for i := 1; i <= 6; i++ {
		ps = append(ps, point{at: float64(i) / 2})
	}
	if got := trimAfter(ps, 1.7); len(got) != 4 || got[3].at != 2 {
		t.Errorf("trimmed to %v, want the points up to 2 s", got)
	}
	if got := trimAfter(ps, 9); len(got) != 6 {
		t.Errorf("an end after the last point dropped %d", 6-len(got))
	}
}
