package main

// The sampler: a goroutine that reads the loaded instances' own Prometheus exposition
// (GET /metrics) every few hundred milliseconds while a scenario's load runs, and turns the
// differences between two reads into a time series: answers per second by status and latency
// percentiles per interval. charts.go draws it.
//
// Why the service's metrics and not wrk: wrk reports its latency percentiles once, for the
// whole run, and its Lua hooks see no request's latency; the service counts every answer by
// outcome and times it in a histogram, and one read of that costs the instance about what one
// answer does, a few times a second against thousands of answers.

import (
	"bufio"
	"context"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The series the sampler reads.
const (
	seriesOrders   = "cardshop_orders_total"
	seriesDuration = "cardshop_http_request_duration_seconds"
)

// answerKinds are the kinds of answers a chart shows, in legend order: the outcomes of
// POST /api/order (cardshop_orders_total) with the status each answers with, then the other
// routes' answers by status class (cardshop_http_request_duration_seconds_count).
var answerKinds = []string{
	"201 created", "200 replayed", "409 sold out", "423 frozen", "4xx refused", "5xx error",
	"other routes 2xx", "other routes 3xx", "other routes 4xx", "other routes 5xx",
}

// orderOutcomeKinds maps cardshop_orders_total's outcome label to its answer kind.
var orderOutcomeKinds = map[string]string{
	"created": "201 created", "replayed": "200 replayed", "sold_out": "409 sold out",
	"frozen": "423 frozen", "rejected": "4xx refused", "error": "5xx error",
}

// unsampledRoutes are the routes left out of the answers and the latency: the probes and the
// exposition itself, which the harness and the sampler call, not the load.
var unsampledRoutes = map[string]bool{"/metrics": true, "/healthz": true, "/readyz": true}

// metricsRead is one read of one instance's exposition: cumulative counters.
type metricsRead struct {
	at time.Time
	// answers are the answers so far by kind (answerKinds).
	answers map[string]float64
	// buckets are the latency histogram's cumulative buckets summed over the sampled routes,
	// by upper bound (+Inf included).
	buckets map[float64]float64
}

// parseMetricsRead reads the series the sampler needs from a Prometheus text exposition. ok is
// false when the exposition holds none of them (not a cardshop instance: the hello server).
func parseMetricsRead(r io.Reader, at time.Time) (s metricsRead, ok bool, err error) {
	s = metricsRead{at: at, answers: map[string]float64{}, buckets: map[float64]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "cardshop_") {
			continue
		}
		name, labels, value, good := splitSample(line)
		if !good {
			continue
		}
		switch name {
		case seriesOrders:
			if kind, known := orderOutcomeKinds[labels["outcome"]]; known {
				s.answers[kind] += value
				ok = true
			}
		case seriesDuration + "_count":
			ok = true
			if labels["route"] == "/api/order" || unsampledRoutes[labels["route"]] {
				continue
			}
			if class := labels["status_class"]; class >= "2xx" && class <= "5xx" {
				s.answers["other routes "+class] += value
			}
		case seriesDuration + "_bucket":
			if unsampledRoutes[labels["route"]] {
				continue
			}
			le, perr := strconv.ParseFloat(labels["le"], 64)
			if perr != nil {
				continue
			}
			s.buckets[le] += value
		}
	}
	return s, ok, sc.Err()
}

// splitSample splits an exposition line `name{a="x",b="y"} value [timestamp]`.
func splitSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	labels = map[string]string{}
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return "", nil, 0, false
	} else {
		name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return "", nil, 0, false
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				c := rest[i]
				if c == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[i])
					}
					continue
				}
				if c == '"' {
					rest, closed = rest[i+1:], true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return "", nil, 0, false
			}
			labels[key] = val.String()
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, v, true
}

// point is one interval of a timeline.
type point struct {
	// at is the interval's end in seconds since the sampler started; dt its length in seconds.
	at, dt float64
	// rates are the answers per second by kind over the interval.
	rates map[string]float64
	// answered is how many answers the latency quantiles are of; p50 and p99 are in seconds,
	// NaN when answered is 0.
	answered float64
	p50, p99 float64
}

// timeline is what a sampler measured: its start and one point per interval.
type timeline struct {
	start    time.Time
	interval time.Duration
	points   []point
	// reads is how many reads of /metrics the sampler made, readTime their time in all.
	reads    int
	readTime time.Duration
	// paused are the stretches (from, to, in seconds) the sampler was paused (quietSampling).
	paused [][2]float64
}

// seconds is t as seconds since the timeline's start.
func (tl *timeline) seconds(t time.Time) float64 { return t.Sub(tl.start).Seconds() }

// delta is the difference of two snapshots of one instance: cur minus prev, each counter
// taken as restarted from 0 when it went down (the process was replaced).
func delta(prev, cur metricsRead) (answers map[string]float64, buckets map[float64]float64) {
	answers, buckets = map[string]float64{}, map[float64]float64{}
	for k, v := range cur.answers {
		answers[k] = counterDelta(prev.answers[k], v)
	}
	for le, v := range cur.buckets {
		buckets[le] = counterDelta(prev.buckets[le], v)
	}
	return answers, buckets
}

func counterDelta(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// quantile estimates the q-quantile from cumulative histogram buckets (upper bound → count) as
// Prometheus's histogram_quantile does: linear interpolation inside the bucket that holds the
// rank, the first bucket starting at 0; a rank in the +Inf bucket gets the largest finite
// bound. NaN when the buckets count nothing.
func quantile(q float64, buckets map[float64]float64) float64 {
	bounds := make([]float64, 0, len(buckets))
	for le := range buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return math.NaN()
	}
	total := buckets[bounds[len(bounds)-1]]
	if !math.IsInf(bounds[len(bounds)-1], 1) || total <= 0 {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i, le := range bounds {
		n := buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				if i == 0 {
					return math.NaN()
				}
				return bounds[i-1]
			}
			if n == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(n-below)
		}
		lower, below = le, n
	}
	return bounds[len(bounds)-1]
}

// sampler reads the instances' expositions every interval until stopped.
type sampler struct {
	interval time.Duration
	client   *http.Client
	// targets returns the base URLs to read at a tick.
	targets func() []string
	// now is the clock (a test's own).
	now func() time.Time

	mu     sync.Mutex
	tl     timeline
	ticks  int       // ticks added so far; the first only sets the baselines
	prevAt time.Time // the previous tick's time
	last   map[string]metricsRead
	ignore map[string]bool // URLs whose exposition is not a cardshop instance's
	// reads and readTime are the reads made and their time (the sampler's cost, printed).
	reads    int
	readTime time.Duration
	cancel   context.CancelFunc
	done     chan struct{}
}

func newSampler(interval time.Duration, targets func() []string) *sampler {
	return &sampler{interval: interval, targets: targets, now: time.Now, last: map[string]metricsRead{}, ignore: map[string]bool{},
		client: &http.Client{Timeout: max(interval*2, time.Second)}}
}

// start takes a first read (the baseline) and reads again every interval in a goroutine.
func (s *sampler) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	s.tl = timeline{start: s.now(), interval: s.interval}
	s.tick(ctx)
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.tick(ctx)
			}
		}
	}()
}

// stop takes a last read and returns the timeline, which ends an interval after the last wrk
// run that ended while it sampled (a chaos scenario's retries and payments after its load are
// left out; a load without wrk, the guest checkout's, keeps every interval).
func (s *sampler) stop(ctx context.Context) timeline {
	s.cancel()
	<-s.done
	s.tick(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tl.reads, s.tl.readTime = s.reads, s.readTime
	s.tl.paused = pausedSince(s.tl.start)
	if end := lastLoadEnd(); end.After(s.tl.start) {
		s.tl.points = trimAfter(s.tl.points, s.tl.seconds(end)+s.interval.Seconds())
	}
	return s.tl
}

// trimAfter drops the points after the first one that ends at or after end.
func trimAfter(points []point, end float64) []point {
	for i, p := range points {
		if p.at >= end {
			return points[:i+1]
		}
	}
	return points
}

// quiet is held (write-locked) while the harness counts the database's statements over a
// phase (an idle baseline, the catalogue or a shop page read alone): a read of /metrics runs
// the service's scrape-time queries (the outbox backlog), which those counts would take for
// the phase's. Taking it waits for a read in flight. One quiet phase at a time.
var quiet sync.RWMutex

// quietSampling pauses every sampler until the returned function is called; the interval
// that spans the pause is drawn as one step, its average, and the pause is shaded.
func quietSampling() func() {
	quiet.Lock()
	began := time.Now()
	return func() {
		quietSpans.Lock()
		quietSpans.spans = append(quietSpans.spans, [2]time.Time{began, time.Now()})
		quietSpans.Unlock()
		quiet.Unlock()
	}
}

// quietSpans are the pauses so far, from and to.
var quietSpans struct {
	sync.Mutex
	spans [][2]time.Time
}

// pausedSince returns the pauses that ended after start, in seconds since start (from ≥ 0).
func pausedSince(start time.Time) [][2]float64 {
	quietSpans.Lock()
	defer quietSpans.Unlock()
	var out [][2]float64
	for _, sp := range quietSpans.spans {
		if sp[1].After(start) {
			out = append(out, [2]float64{max(sp[0].Sub(start).Seconds(), 0), sp[1].Sub(start).Seconds()})
		}
	}
	return out
}

// tick reads every target at once and adds the interval since the previous tick. It skips
// while the harness counts the database's statements (quietSampling), and when it comes less
// than half an interval after the previous one (a slow read delays the ticker, which then
// fires twice in a row: a short interval's rate would be mostly the reads' timing error).
func (s *sampler) tick(ctx context.Context) {
	if !quiet.TryRLock() {
		return
	}
	defer quiet.RUnlock()
	s.mu.Lock()
	soon := s.ticks > 0 && s.now().Sub(s.prevAt) < s.interval/2
	s.mu.Unlock()
	if soon {
		return
	}
	urls := slices.Compact(slices.Sorted(slices.Values(s.targets())))
	snaps := make([]*metricsRead, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		s.mu.Lock()
		skip := s.ignore[u]
		s.mu.Unlock()
		if skip {
			continue
		}
		wg.Go(func() {
			began := time.Now()
			snap, ok, err := s.read(ctx, u)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.reads, s.readTime = s.reads+1, s.readTime+time.Since(began)
			s.mu.Unlock()
			if !ok {
				s.mu.Lock()
				s.ignore[u] = true
				s.mu.Unlock()
				return
			}
			snaps[i] = &snap
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(s.now(), urls, snaps)
}

// add records one tick: snaps[i] is urls[i]'s read, nil when it failed. The answers per second
// are each instance's difference over the time since its own previous read, summed; the
// quantiles are of the instances' bucket differences summed. An instance read for the first
// time only sets its baseline. A tick at which no instance answered counts no answers (the
// killed instance of scenario 6), and has no latency.
func (s *sampler) add(at time.Time, urls []string, snaps []*metricsRead) {
	p := point{at: s.tl.seconds(at), dt: at.Sub(s.prevAt).Seconds(), rates: map[string]float64{}, p50: math.NaN(), p99: math.NaN()}
	first := s.ticks == 0
	s.ticks++
	s.prevAt = at
	buckets := map[float64]float64{}
	fresh := false
	for i, snap := range snaps {
		if snap == nil {
			continue
		}
		prev, seen := s.last[urls[i]]
		s.last[urls[i]] = *snap
		if !seen {
			continue
		}
		dt := snap.at.Sub(prev.at).Seconds()
		if dt <= 0 {
			continue
		}
		fresh = true
		answers, bk := delta(prev, *snap)
		for k, v := range answers {
			p.rates[k] += v / dt
		}
		for le, v := range bk {
			buckets[le] += v
		}
	}
	if first || p.dt <= 0 {
		return // the baselines: no interval yet
	}
	if fresh {
		p.answered = buckets[math.Inf(1)]
		p.p50, p.p99 = quantile(0.5, buckets), quantile(0.99, buckets)
	}
	s.tl.points = append(s.tl.points, p)
}

// read reads one instance's exposition.
func (s *sampler) read(ctx context.Context, base string) (metricsRead, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return metricsRead{}, false, err
	}
	sent := s.now()
	resp, err := s.client.Do(req)
	if err != nil {
		return metricsRead{}, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return metricsRead{}, false, nil
	}
	// The counters were read somewhere between the request's sending and its answer (the
	// service runs its scrape-time queries, the outbox backlog's, beside them, and under load
	// a read takes tens of milliseconds): the middle errs least either way.
	answered := s.now()
	return parseMetricsRead(resp.Body, sent.Add(answered.Sub(sent)/2))
}

// loadURLs are the base URLs wrk is loading right now (runWrk adds its own while it runs), so
// that the sampler also reads an instance a scenario starts inside its load (the kill
// scenario's victim).
var loadURLs = struct {
	sync.Mutex
	n       map[string]int
	lastEnd time.Time // when a wrk run last ended
}{n: map[string]int{}}

// watchLoad registers url as loaded until the returned function is called.
func watchLoad(url string) func() {
	loadURLs.Lock()
	loadURLs.n[url]++
	loadURLs.Unlock()
	return func() {
		loadURLs.Lock()
		defer loadURLs.Unlock()
		if loadURLs.n[url]--; loadURLs.n[url] <= 0 {
			delete(loadURLs.n, url)
		}
		loadURLs.lastEnd = time.Now()
	}
}

func lastLoadEnd() time.Time {
	loadURLs.Lock()
	defer loadURLs.Unlock()
	return loadURLs.lastEnd
}

func loadedURLs() []string {
	loadURLs.Lock()
	defer loadURLs.Unlock()
	out := make([]string, 0, len(loadURLs.n))
	for u := range loadURLs.n {
		out = append(out, u)
	}
	return out
}
