package main

// The chaos mode (-chaos, `make chaos`): the load check on MariaDB and Redis instances of its
// own, with one fault injected into a dependency in the middle of each scenario's sale.

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The faults of the chaos scenarios (scenario.fault).
const (
	faultRedisEmpty  = "redis-empty"  // SIGKILL the gate's Redis, restart it empty
	faultMariaDBKill = "mariadb-kill" // SIGKILL MariaDB, restart it (InnoDB crash recovery)
)

func chaosScenarios(o options) []scenario {
	// Deep enough that the sale is still selling when the fault comes and after it (a
	// sold-out product's answers need neither MariaDB nor, under a lease, Redis).
	codes := 250000
	if o.short {
		codes = 100000
	}
	more := append(stallScenarios(codes), rabbitScenario(codes), lbScenario(codes))
	return append([]scenario{
		{num: 11, name: "Redis SIGKILLed mid-sale and restarted empty", codes: codes, qtyMax: 1, dup: 1, instances: 1, fault: faultRedisEmpty},
		{num: 12, name: "MariaDB SIGKILLed mid-sale and restarted (crash recovery)", codes: codes, qtyMax: 1, dup: 1, instances: 1, fault: faultMariaDBKill},
		{num: 13, name: "Redis primary SIGKILLed mid-sale, Sentinel promotes a replica", codes: codes, qtyMax: 1, dup: 1, instances: 1,
			fault: faultRedisFailover},
	}, more...)
}

// ownServices are the MariaDB and Redis processes the chaos mode starts for itself (own data
// directory, own ports), so that killing them harms nothing else on the machine.
type ownServices struct {
	dir                  string
	redisAddr, mariaAddr string
	redis, maria         *exec.Cmd
	redisExit, mariaExit chan struct{}
	mariaData, mariaSock string
	// rabbit is the own RabbitMQ node while the RabbitMQ scenario runs (chaos_rabbit.go), else nil.
	rabbit *ownRabbit
}

func startOwnServices(ctx context.Context, dir string) (*ownServices, error) {
	s := &ownServices{dir: dir, mariaData: filepath.Join(dir, "mariadb"), mariaSock: filepath.Join(dir, "mariadb.sock")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addrs, err := freeAddrs(2)
	if err != nil {
		return nil, err
	}
	s.redisAddr, s.mariaAddr = addrs[0], addrs[1]
	fmt.Printf("starting the chaos mode's own Redis (%s) and MariaDB (%s, datadir %s) …\n", s.redisAddr, s.mariaAddr, s.mariaData)
	if err := s.startRedis(ctx); err != nil {
		return nil, err
	}
	install := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--datadir="+s.mariaData, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		s.stop()
		return nil, fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	if err := s.startMaria(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// startRedis starts Redis with nothing on disk: a restart comes back empty.
func (s *ownServices) startRedis(ctx context.Context) error {
	var err error
	s.redis, s.redisExit, err = startRedisServer(ctx, filepath.Join(s.dir, "redis.log"), "own Redis", s.redisAddr,
		"--port", port(s.redisAddr), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir, "--maxclients", "10000")
	return err
}

// startRedisServer starts redis-server with args, its output appended to log, and waits until
// addr answers PING; exited is closed when the process ends.
func startRedisServer(ctx context.Context, log, name, addr string, args ...string) (cmd *exec.Cmd, exited chan struct{}, err error) {
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd = exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("redis-server (%s): %w", name, err)
	}
	exited = waitExit(cmd, logf)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	return cmd, exited, waitUntil(ctx, 20*time.Second, name+" on "+addr, func() error { return c.Ping(ctx).Err() })
}

// startMaria starts MariaDB on the chaos data directory: durable commits (the defaults), no
// grant tables (a throwaway instance on 127.0.0.1).
func (s *ownServices) startMaria(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "mariadb.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("mariadbd", "--no-defaults", "--datadir="+s.mariaData, "--port="+port(s.mariaAddr),
		"--bind-address=127.0.0.1", "--socket="+s.mariaSock, "--pid-file="+filepath.Join(s.dir, "mariadb.pid"),
		"--user=root", "--skip-grant-tables", "--max-connections=600", "--innodb-buffer-pool-size=256M",
		"--log-error="+filepath.Join(s.dir, "mariadb.err"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("mariadbd: %w", err)
	}
	s.maria, s.mariaExit = cmd, waitExit(cmd, logf)
	db, err := sql.Open("mysql", s.serverDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	return waitUntil(ctx, 90*time.Second, "own MariaDB "+s.mariaAddr, func() error { return db.PingContext(ctx) })
}

// serverDSN is the DSN of the own MariaDB server, without a database.
func (s *ownServices) serverDSN() string { return "root@tcp(" + s.mariaAddr + ")/" }

func waitExit(cmd *exec.Cmd, f *os.File) chan struct{} {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	return done
}

func kill(cmd *exec.Cmd, exited chan struct{}) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

func (s *ownServices) stop() {
	kill(s.redis, s.redisExit)
	kill(s.maria, s.mariaExit)
	s.rabbit.stop()
}

func waitUntil(ctx context.Context, limit time.Duration, what string, ok func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := ok()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w", what, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// chaosResult is what a chaos scenario measured around its fault.
type chaosResult struct {
	fault                 string
	injected, back        time.Time // the fault's start, and when the dependency answered again
	firstOK               time.Time // the first second after back with orders placed (201) and no refusal
	before, during, after rate
	refused               int64 // answers other than 201 and 409 from the fault's start to firstOK
	refusedMix            map[int]int64
	hung                  int64 // requests wrk gave up on (no answer within its 10 s timeout)
	created               []string
	missing               []string // order numbers answered 201 that the ledger does not hold
	// unanswered are the orders of the product no 201 named; retryBad those a retry with the
	// order's key did not answer 200 with the order.
	unanswered      []unanswered
	retryBad        []string
	goroutines, fds [3]int // the instance's, before, during and after the fault
	unready         time.Duration
	slowest         time.Duration // the slowest answer of the run (wrk)
	live            *livePayments // the payments made while the orders ran
}

// rate is the orders placed (201) per second over a stretch of the run.
type rate struct {
	seconds int
	answers int64
}

func (r rate) perSecond() float64 {
	if r.seconds == 0 {
		return 0
	}
	return float64(r.answers) / float64(r.seconds)
}

// String is the rate, or "—" when the stretch had no whole second (a short run's fault that
// ended near the run's end).
func (r rate) String() string {
	if r.seconds == 0 {
		return "—"
	}
	return num(r.perSecond())
}

// loadWithFault runs the scenario's wrk load and injects its fault a third of the way in.
func (e *env) loadWithFault(ctx context.Context, sc scenario, insts []*instance, pid int64, res *scenarioResult) (WrkResult, error) {
	in := insts[0]
	cr := &chaosResult{fault: sc.fault, refusedMix: map[int]int64{}}
	res.chaos = cr
	prefix := filepath.Join(e.dir, fmt.Sprintf("created-%d", sc.num))
	args := []string{strconv.FormatInt(pid, 10), strconv.Itoa(sc.qtyMax), strconv.Itoa(sc.dup), e.tokensFile,
		fmt.Sprintf("chaos%d-%d", sc.num, time.Now().UnixNano()), "seconds", prefix}
	d := e.o.duration + e.faultFor(sc.fault)
	run := WrkRun{Threads: e.o.threads, Conns: e.o.conns, Duration: d, URL: in.base, Script: e.orderLua, Args: args}
	if sc.pace > 0 {
		run.Script, run.Args = e.pacedLua, append(args, strconv.Itoa(pauseFor(e.o.conns, sc.pace)))
	}
	cr.goroutines[0], cr.fds[0] = e.instanceLoad(ctx, in)

	probe := startReadyProbe(ctx, in.base)
	live, stopPaying, err := e.startLivePayments(ctx, pid, insts)
	if err != nil {
		return WrkResult{}, err
	}
	cr.live = live
	faultDone := make(chan error, 1)
	go func() {
		select {
		case <-time.After(d / 3):
		case <-ctx.Done():
			faultDone <- ctx.Err()
			return
		}
		faultDone <- e.inject(ctx, sc.fault, cr, in)
	}()
	start := time.Now()
	w, err := runWrk(ctx, run)
	if ferr := <-faultDone; ferr != nil && err == nil {
		err = ferr
	}
	stopPaying()
	cr.unready = probe.stop()
	if err != nil {
		return w, err
	}
	cr.goroutines[2], cr.fds[2] = e.instanceLoad(ctx, in)
	cr.hung = wrkTimeouts(w.SocketErrors)
	cr.split(w.Counts, start, start.Add(d))
	cr.slowest = w.Max
	if cr.created, err = readLines(prefix + "-*"); err != nil {
		return w, err
	}
	if cr.missing, cr.unanswered, err = e.against201s(ctx, pid, cr.created); err != nil {
		return w, err
	}
	cr.retryBad = e.retryUnanswered(ctx, in.base, pid, cr.unanswered)
	fmt.Printf("   fault     %s %s into the run; the dependency answered again %s later; orders placed again, none refused, %s after that\n",
		sc.fault, cr.injected.Sub(start).Round(100*time.Millisecond), cr.back.Sub(cr.injected).Round(100*time.Millisecond),
		recovery(cr))
	fmt.Printf("   around it %s orders placed/s before · %s during · %s after · refused meanwhile: %d (%s) · /readyz not ready for %s\n",
		cr.before, cr.during, cr.after, cr.refused, statusMix(cr.refusedMix),
		cr.unready.Round(100*time.Millisecond))
	fmt.Printf("   no 201    %d orders placed whose request got no 201 (answered 5xx: outcome unknown, retry; or dropped at wrk's stop): a retry with the key found %d of them\n",
		len(cr.unanswered), len(cr.unanswered)-len(cr.retryBad))
	fmt.Printf("   paying    %s\n", live.summary(cr))
	fmt.Printf("   instance  goroutines %d → %d → %d · open files %d → %d → %d (before, during, after the fault)\n",
		cr.goroutines[0], cr.goroutines[1], cr.goroutines[2], cr.fds[0], cr.fds[1], cr.fds[2])
	return w, nil
}

func recovery(cr *chaosResult) string {
	if cr.firstOK.IsZero() {
		return "never (within the run)"
	}
	return max(cr.firstOK.Sub(cr.back), 0).Round(time.Second).String() + " (1 s resolution)"
}

// inject makes the fault happen, waits for the dependency to answer again and records when.
// The instance's goroutines and open files are sampled while the dependency is down.
func (e *env) inject(ctx context.Context, fault string, cr *chaosResult, in *instance) error {
	s := e.own
	// restartAfter kills a process, leaves it down for a second, then starts it again.
	restartAfter := func(stop func(), start func(context.Context) error) error {
		stop()
		sleepCtx(ctx, time.Second)
		cr.goroutines[1], cr.fds[1] = e.instanceLoad(ctx, in)
		return start(ctx)
	}
	cr.injected = time.Now()
	var err error
	switch fault {
	case faultRedisEmpty:
		err = restartAfter(func() { kill(s.redis, s.redisExit) }, s.startRedis)
	case faultMariaDBKill:
		err = restartAfter(func() { kill(s.maria, s.mariaExit) }, s.startMaria)
	case faultRedisSlow, faultMariaDBStall, faultRedisCut, faultMariaDBCut:
		err = e.injectStall(ctx, fault, cr, in)
	case faultLB:
		err = e.injectLB(ctx, cr)
	case faultRabbitRestart:
		err = e.injectRabbitRestart(ctx, cr, in)
	case faultRedisFailover:
		done := make(chan error, 1)
		go func() { done <- e.sentinels.failOver(ctx) }()
		sleepCtx(ctx, 500*time.Millisecond)
		cr.goroutines[1], cr.fds[1] = e.instanceLoad(ctx, in)
		err = <-done
	default:
		err = fmt.Errorf("unknown fault %q", fault)
	}
	cr.back = time.Now()
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// split sorts the run's per-second tallies into before, during and after the fault. wrk's first
// and last seconds, which are partial, and the seconds of the fault's start and end are left
// out of the rates; the refusals are counted from the fault's start to the first second that
// answered orders again.
func (cr *chaosResult) split(counts map[string]int64, start, end time.Time) {
	type sec struct {
		ok, other int64
		mix       map[int]int64
	}
	secs := map[int64]*sec{}
	for name, n := range counts {
		rest, found := strings.CutPrefix(name, "sec:")
		if !found {
			continue
		}
		ts, st, _ := strings.Cut(rest, ":")
		t, err1 := strconv.ParseInt(ts, 10, 64)
		status, err2 := strconv.Atoi(st)
		if err1 != nil || err2 != nil {
			continue
		}
		if secs[t] == nil {
			secs[t] = &sec{mix: map[int]int64{}}
		}
		switch status {
		case 201:
			secs[t].ok += n
		case 409: // sold out, or a key's copy in progress: neither placed nor refused
		case 200: // a replay: the key's order, placed by an earlier try (a retrying load balancer's)
		default:
			secs[t].other += n
			secs[t].mix[status] += n
		}
	}
	order := make([]int64, 0, len(secs))
	for t := range secs {
		order = append(order, t)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	first, last := start.Unix()+1, end.Unix()-1
	inj, back := cr.injected.Unix(), cr.back.Unix()
	for _, t := range order {
		if s := secs[t]; t > back && s.ok > 0 && s.other == 0 {
			cr.firstOK = time.Unix(t, 0)
			break
		}
	}
	recovered := func(t int64) bool { return !cr.firstOK.IsZero() && t >= cr.firstOK.Unix() }
	for _, t := range order {
		s := secs[t]
		if t >= inj && !recovered(t) {
			cr.refused += s.other
			for st, n := range s.mix {
				cr.refusedMix[st] += n
			}
		}
		switch {
		case t < first || t > last:
		case t < inj:
			cr.before.seconds++
			cr.before.answers += s.ok
		case t > inj && t < back:
			cr.during.seconds++
			cr.during.answers += s.ok
		case recovered(t):
			cr.after.seconds++
			cr.after.answers += s.ok
		}
	}
}

// wrkTimeouts is the "timeout N" of wrk's socket errors line.
func wrkTimeouts(line string) int64 {
	_, rest, found := strings.Cut(line, "timeout ")
	if !found {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(strings.SplitN(rest, ",", 2)[0]), 10, 64)
	return n
}

func readLines(glob string) ([]string, error) {
	files, err := filepath.Glob(glob)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				out = append(out, l)
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// notInLedger returns the order numbers of nos that the orders table does not hold.
func (e *env) notInLedger(ctx context.Context, nos []string) ([]string, error) {
	var missing []string
	for i := 0; i < len(nos); i += 500 {
		part := nos[i:min(i+500, len(nos))]
		q := "SELECT order_no FROM orders WHERE order_no IN (?" + strings.Repeat(",?", len(part)-1) + ")"
		args := make([]any, len(part))
		for j, no := range part {
			args[j] = no
		}
		rows, err := e.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		found := map[string]bool{}
		for rows.Next() {
			var no string
			if err := rows.Scan(&no); err != nil {
				rows.Close()
				return nil, err
			}
			found[no] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		for _, no := range part {
			if !found[no] {
				missing = append(missing, no)
			}
		}
	}
	return missing, nil
}

// instanceLoad is the instance's goroutine count (from its pprof endpoint) and its open file
// descriptors (sockets included); -1 where it cannot be read.
func (e *env) instanceLoad(ctx context.Context, in *instance) (goroutines, fds int) {
	goroutines, fds = -1, -1
	if in.cmd != nil && in.cmd.Process != nil {
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", in.cmd.Process.Pid)); err == nil {
			fds = len(ents)
		}
	}
	if in.pprof == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+in.pprof+"/debug/pprof/goroutine?debug=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
	if _, n, ok := strings.Cut(strings.TrimSpace(line), "total "); ok {
		goroutines, _ = strconv.Atoi(n)
	}
	return
}

// readyProbe polls GET /readyz every 100 ms and adds up the time it did not answer 200.
type readyProbe struct {
	stopc chan struct{}
	done  chan time.Duration
}

func startReadyProbe(ctx context.Context, base string) *readyProbe {
	p := &readyProbe{stopc: make(chan struct{}), done: make(chan time.Duration, 1)}
	client := &http.Client{Timeout: 2 * time.Second}
	go func() {
		var unready time.Duration
		last := time.Now()
		for {
			ok := false
			if resp, err := client.Get(base + "/readyz"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ok = resp.StatusCode == 200
			}
			now := time.Now()
			if !ok {
				unready += now.Sub(last)
			}
			last = now
			select {
			case <-p.stopc:
				p.done <- unready
				return
			case <-ctx.Done():
				p.done <- unready
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *readyProbe) stop() time.Duration { close(p.stopc); return <-p.done }

// printChaos prints the chaos scenarios' table: the load around each fault and what the
// invariants found.
func (e *env) printChaos(results []scenarioResult) {
	fmt.Println("\n== faults under load (each a fault injected a third of the way into the sale; invariants after it settled)")
	fmt.Printf("   %-3s %-14s %9s %9s %9s %8s %9s %7s %6s %8s %9s %5s %5s %6s %5s %8s %s\n",
		"#", "fault", "before/s", "during/s", "after/s", "refused", "recovery", "orders", "paid",
		"oversold", "duplicate", "lost", "leaked", "hung", "201s", "slowest", "goroutines")
	for _, r := range results {
		cr := r.chaos
		if cr == nil {
			continue
		}
		rec := "never"
		if !cr.firstOK.IsZero() {
			rec = max(cr.firstOK.Sub(cr.back), 0).Round(time.Second).String()
		}
		fmt.Printf("   %-3d %-14s %9s %9s %9s %8d %9s %7d %6d %8s %9s %5s %5s %6d %5s %8s %d→%d→%d\n",
			r.sc.num, cr.fault, cr.before, cr.during, cr.after,
			cr.refused, rec, r.created, r.paid, failedIn(r, "no oversell"), failedIn(r, "idempotency"),
			failedIn(r, "no lost order"), failedIn(r, "no leak"), cr.hung, fmt.Sprintf("%d/%d", len(cr.created)-len(cr.missing), len(cr.created)),
			cr.slowest.Round(10*time.Millisecond), cr.goroutines[0], cr.goroutines[1], cr.goroutines[2])
	}
	fmt.Println("   before/during/after: orders placed (201) per second; refused: other answers than 201, 200 (replay) and 409 from the fault")
	fmt.Println("   to the recovery; recovery: from the dependency answering again to the first second with orders placed and")
	fmt.Println("   none refused; oversold, duplicate, lost, leaked: invariant checks of that family that failed (0 = all PASS);")
	fmt.Println("   hung: requests with no answer within wrk's 10 s; 201s: order numbers answered 201 found in the ledger / answered;")
	fmt.Printf("   slowest: the slowest answer of the run (the stall scenarios check it against the request deadline, %s);\n", e.stallDeadline())
	fmt.Println("   goroutines: the instance's, before → during → after the fault")
}

// failedIn counts the scenario's failed checks whose name starts with family.
func failedIn(r scenarioResult, family string) string {
	n, of := 0, 0
	for _, c := range r.checks {
		if strings.HasPrefix(c.Name, family) {
			of++
			if !c.OK {
				n++
			}
		}
	}
	if of == 0 {
		return "—"
	}
	return strconv.Itoa(n)
}

// chaosChecks are the chaos scenario's own checks, beyond the load check's invariants.
func chaosChecks(cr *chaosResult) []Check {
	missing := strings.Join(cr.missing[:min(len(cr.missing), 5)], ", ")
	return []Check{
		{Name: "chaos: every request answered 201 has its order in the ledger",
			Detail: fmt.Sprintf("201 answers %d, their order numbers missing from the ledger: %d %s", len(cr.created), len(cr.missing), missing),
			OK:     len(cr.missing) == 0 && len(cr.created) > 0},
		{Name: "chaos: every order placed without a 201 answer is found by a retry with its key",
			Detail: fmt.Sprintf("orders without a 201: %d; answered 200 with their order to a retry with the same key and body: %d%s",
				len(cr.unanswered), len(cr.unanswered)-len(cr.retryBad), examples(cr.retryBad)),
			OK: len(cr.retryBad) == 0},
		{Name: "chaos: no request hung (each got an answer within wrk's 10 s timeout)",
			Detail: fmt.Sprintf("requests timed out: %d", cr.hung), OK: cr.hung == 0},
		{Name: "chaos: orders are placed again after the fault",
			Detail: fmt.Sprintf("orders placed again, none refused, %s after the dependency was back", recovery(cr)), OK: !cr.firstOK.IsZero()},
	}
}
