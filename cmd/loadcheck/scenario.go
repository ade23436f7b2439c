package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"cardshop/adapters/paysig"
)

// scenario is one load shape.
type scenario struct {
	num       int
	name      string
	codes     int
	qtyMax    int
	dup       int
	instances int
	soldOut   bool // also measure the pure sold-out path after the sale
	// insertAround measures MariaDB's single-row INSERT ceiling again right before the order
	// load (full form only), so that the successful orders are compared with a ceiling of the
	// same minute: the machine's disk and CPU drift over minutes (see insertBefore).
	insertAround bool
	kill         bool // SIGKILL the instance under load half-way, then restart it
	repair       bool // run reconcile?repair=true half-way through the load (the fenced rebuild)
	// provider is the payment provider the buyers pay through, by its simulator ("stripe"),
	// instead of the signed callback.
	provider string

	// The storefront scenarios (storm.go, salestart.go, buyerlimit.go).
	storm bool // a storm of public catalogue reads of the product, alone and during the sale
	// startsIn opens the product's sale window this long after it is created (by Redis's
	// clock); the orders start before it, against instances of their own whose clocks are
	// shifted by clockOffsets (CARDSHOP_CLOCK_OFFSET), one instance each.
	startsIn     time.Duration
	clockOffsets []string
	buyerLimit   int // the product's buyer_limit: units one buyer may hold in PENDING+PAID orders

	// fault is the chaos scenario's fault (chaos.go), injected a third of the way into the load.
	fault string
	// pace, when set, holds the orders to about this many a second (each connection pauses
	// before each request, see pauseFor) instead of as many as the service answers.
	pace int
	// guest runs the guest-checkout scenario (guest.go): buyers walk the shop's forms on two
	// instances of its own that mail a Mailpit of its own, and pay through the dev provider.
	guest bool
	// couponStorm runs the coupon storm (coupons.go). coupon is the coupon code a run's orders
	// give ("" none) and tally makes the script tally refusals by code (tallyCodes): both are set
	// on copies of the scenario for one run.
	couponStorm bool
	coupon      string
	tally       bool
}

// pacedAppendix turns the order script into its paced form: wrk calls delay before each
// request, and waits that many milliseconds (the script's 8th argument). A separate script,
// because wrk arms a timer for every request of a script that has delay at all.
const pacedAppendix = `
function delay()
  return pause
end
`

// pauseFor is the pause, in milliseconds, that holds conns connections to about perSecond
// requests a second: each connection sends one request per pause plus its answer's latency,
// so the rate stays a little under perSecond.
func pauseFor(conns, perSecond int) int { return max(1, conns*1000/perSecond) }

// tallyCodes says whether the wrk script tallies refusals by error code and Retry-After:
// the scenarios whose checks read them.
func (sc scenario) tallyCodes() bool { return sc.startsIn > 0 || sc.buyerLimit > 0 || sc.tally }

func scenarios(o options) []scenario {
	scale := func(full, short int) int {
		if o.short {
			return short
		}
		return full
	}
	return []scenario{
		{num: 1, name: "flash sale: 1,000 codes, sells out", codes: 1000, qtyMax: 1, dup: 1, instances: 1, soldOut: true},
		{num: 2, name: "deep stock: never sells out", codes: scale(120000, 30000), qtyMax: 1, dup: 1, instances: 1, insertAround: true},
		{num: 3, name: "bulk buyers: qty 1-10, a repair half-way", codes: scale(150000, 40000), qtyMax: 10, dup: 1, instances: 1, repair: true},
		{num: 4, name: "double submit ×4 at once, paid through Stripe", codes: scale(60000, 20000), qtyMax: 1, dup: 4, instances: 1,
			provider: "stripe"},
		{num: 5, name: "two instances behind the same Redis, MariaDB, RabbitMQ", codes: scale(120000, 30000), qtyMax: 1, dup: 1, instances: 2},
		{num: 6, name: "kill -9 under load, restart, sweep", codes: scale(60000, 20000), qtyMax: 1, dup: 1, instances: 1, kill: true},
		// The CI form's stock lasts about its 3 s of orders: paying more orders than that made
		// the scenario take up to 40 s on a busy machine.
		{num: 7, name: "refresh storm: catalogue GETs and the shop's pages, alone and during the sale", codes: scale(60000, 6000), qtyMax: 1, dup: 1,
			instances: 2, storm: true},
		{num: 8, name: "start instant: orders from before starts_at, clocks −3s/+2s", codes: 1000, qtyMax: 1, dup: 1, instances: 1,
			startsIn: time.Duration(scale(8, 6)) * time.Second, clockOffsets: []string{"-3s", "+2s"}},
		{num: 9, name: "per-buyer limit: buyer_limit 2, qty 1-2, each key ×3", codes: scale(8000, 6000), qtyMax: 2, dup: 3,
			instances: 2, buyerLimit: 2},
		// One instance is the shared one that creates the product; the buyers walk two of the
		// scenario's own (guest.go).
		{num: 10, name: "guest checkout through the shop's forms, paid, mailed (Mailpit)", codes: scale(40000, 20000), qtyMax: 2,
			dup: 1, instances: 1, guest: true},
		// Numbered after the chaos mode's 11-19.
		{num: 20, name: "coupon storm: 2,000 buyers, a coupon of 100 uses, 1 per buyer", codes: scale(150000, 60000), qtyMax: 2,
			dup: 1, instances: 2, couponStorm: true},
	}
}

type scenarioResult struct {
	sc          scenario
	skipped     bool
	load        WrkResult
	soldOut     *WrkResult
	soldOutDB   dbDelta
	idleDB      dbDelta
	created     int64
	paid        int
	dupSent     int
	payRate     float64
	payErrors   int
	stripe      *stripeRun // the Stripe payment phase, when the scenario paid through it
	expired     int64
	unfulfilled int64
	codesSold   int64
	storm       *stormResult // the catalogue storm's numbers, in the storm scenario
	extra       []Check      // the storefront scenarios' own checks, listed after the invariants
	checks      []Check
	// loadCPU and soldOutCPU are the service instances' own CPU time over the measured load
	// and over the sold-out run (not measured in the kill and storm scenarios, whose load also
	// goes to a process or an endpoint the figure would not be about, nor with -target).
	loadCPU, soldOutCPU cpuUse
	// chaos is what a chaos scenario measured around its fault; nil in the others.
	chaos *chaosResult
	// helloAround is the hello ceiling measured again right before and right after the
	// sold-out run, or the refresh storm's catalogue-only run: the machine's speed drifts over
	// minutes, so those answers are compared with a hello measured under the same conditions
	// (the run's first ceiling is minutes older).
	// Empty in the short form, whose 12 s order timeout leaves no room for them before the
	// payments (the comparison then falls back to the first ceiling).
	helloAround []helloResult
	// guest is the guest-checkout scenario's walks and Mailpit; nil in the others.
	guest *guestRun
	// coupons is the coupon storm's measures; nil in the others.
	coupons *couponRun
	// limiterAB is the sold-out answer with the per-buyer limiter on and off (limiter_ab.go),
	// in the sold-out scenario; nil in the others and with -target.
	limiterAB *limiterABRun
	// loadRuns is how many wrk runs one after the other made the load (0 counts as 1): each may
	// leave up to -conns requests in flight when it stops.
	loadRuns int
	// insertBefore is MariaDB's single-row INSERT ceiling (rows/s) measured right before the
	// order load, as the run's first one is (64 connections, the scenario's duration), in the
	// scenarios with insertAround; 0 when not measured. The run's first ceiling is minutes
	// older, and the INSERT rate is the most changeable of the ceilings here: 3,800 to 7,300
	// rows/s from one run to the next in the same week.
	insertBefore float64
	// idleCPUPerSec is the instances' CPU seconds per second while idle, right before the
	// load (sweeper, relay, stock watch, runtime): measured in the sold-out scenario only.
	idleCPUPerSec float64
	// peakRSS is each instance's peak RSS (VmHWM, reset when the scenario began) in bytes, in
	// the order of rssNames; rssReset says whether the reset took (else it is the peak since
	// the process started).
	peakRSS  []int64
	rssNames []string
	// liveHeap is each instance's live Go heap after a garbage collection at the scenario's
	// end, in the order of rssNames; -1 where it could not be read.
	liveHeap []int64
	rssReset bool
}

// pidsOf returns the process ids of the instances the harness started (none with -target).
func pidsOf(insts []*instance) []int {
	var pids []int
	for _, in := range insts {
		if in.cmd != nil && in.cmd.Process != nil {
			pids = append(pids, in.cmd.Process.Pid)
		}
	}
	return pids
}

// cpuLine formats a run's service CPU for the scenario's output.
func cpuLine(u cpuUse) string {
	if !u.measured {
		return "not measured"
	}
	return fmt.Sprintf("%.1f µs of service CPU per answer (%.2f s over %s answers)", u.perRequest(), u.seconds, num(float64(u.requests)))
}

func (r scenarioResult) failed() int {
	n := 0
	for _, c := range r.checks {
		if !c.OK {
			n++
		}
	}
	return n
}

func (e *env) runScenario(ctx context.Context, sc scenario) (scenarioResult, error) {
	res := scenarioResult{sc: sc}
	fmt.Printf("== scenario %d: %s\n", sc.num, sc.name)
	if e.o.targets != "" && len(e.instances) < sc.instances {
		fmt.Printf("   skipped: needs %d instances, -target gave %d\n\n", sc.instances, len(e.instances))
		res.skipped = true
		return res, nil
	}
	if e.o.targets != "" && sc.guest {
		fmt.Printf("   skipped: needs instances started with this run's Mailpit, which -target cannot give\n\n")
		res.skipped = true
		return res, nil
	}
	if e.o.targets != "" && len(sc.clockOffsets) > 0 {
		fmt.Printf("   skipped: needs instances started with CARDSHOP_CLOCK_OFFSET, which -target cannot give\n\n")
		res.skipped = true
		return res, nil
	}
	for len(e.instances) < sc.instances {
		in, err := e.startInstance(ctx, fmt.Sprintf("instance-%d", len(e.instances)+1), fmt.Sprintf("127.0.0.1:%d", 6061+len(e.instances)))
		if err != nil {
			return res, err
		}
		_ = in
	}
	insts := e.instances[:sc.instances]
	if sc.fault == faultRedisFailover {
		in, restore, err := e.useSentinelSet(ctx)
		if err != nil {
			return res, err
		}
		defer restore()
		insts = []*instance{in}
	}
	if sc.fault == faultLB {
		in, restore, err := e.useLBPair(ctx)
		if err != nil {
			return res, err
		}
		defer restore()
		insts = []*instance{in}
	}
	if stallFault(sc.fault) {
		in, restore, err := e.useProxiedInstance(ctx)
		if err != nil {
			return res, err
		}
		defer restore()
		insts = []*instance{in}
	}
	if sc.fault == faultRabbitRestart {
		in, restore, err := e.useOwnRabbit(ctx)
		if err != nil {
			return res, err
		}
		defer restore()
		insts = []*instance{in}
	}
	if len(sc.clockOffsets) > 0 {
		// The shared instances this scenario does not load are stopped first (a later scenario
		// starts them again): each keeps its MariaDB pool open for minutes after a load, up to
		// 48 connections after 128 callbacks at once, and with the clock instances beside them
		// MariaDB's 151 connections ran out.
		for len(e.instances) > sc.instances {
			e.stopInstance(e.instances[len(e.instances)-1])
		}
		own, err := e.startClockInstances(ctx, sc.clockOffsets)
		defer func() {
			for _, in := range own {
				e.stopInstance(in)
			}
		}()
		if err != nil {
			return res, err
		}
		insts = own
	}
	if sc.guest {
		shop, err := e.startGuestShop(ctx)
		if errors.Is(err, errNoMailpit) && os.Getenv("CI") != "true" {
			fmt.Printf("   skipped: %v (set CI=true to fail instead)\n\n", err)
			res.skipped = true
			return res, nil
		}
		if err != nil {
			return res, err
		}
		defer shop.stop()
		insts, res.guest = shop.insts, &guestRun{shop: shop}
	}
	res.rssReset = len(pidsOf(insts)) > 0
	for _, p := range pidsOf(insts) {
		res.rssReset = resetPeakRSS(p) && res.rssReset
	}
	pid := 1_000_000 + rand.Int64N(8_000_000_000)
	rules, startsAt, err := e.saleRules(ctx, sc)
	if err != nil {
		return res, err
	}
	if err := e.createProduct(ctx, pid, sc.codes, rules); err != nil {
		return res, err
	}
	// Warm up: a short run on a sold-out product fills the HTTP, Redis and DB pools.
	warm := pid + 1
	if err := e.createProduct(ctx, warm, 0, ""); err != nil {
		return res, err
	}
	if _, err := e.load(ctx, sc, insts, warm, 1*time.Second, "warm"); err != nil {
		return res, err
	}

	if sc.soldOut {
		// What the idle service issues by itself (sweeper, relay) over the same time, before load,
		// and the CPU it spends meanwhile.
		idlePIDs := pidsOf(insts)
		idleBefore, idleStart := sampleCPU(idlePIDs), time.Now()
		idle, err := e.dbCounters(ctx, e.o.duration)
		if err != nil {
			return res, err
		}
		res.idleDB = idle
		if u := cpuBetween(idleBefore, sampleCPU(idlePIDs), idlePIDs, 0); u.measured {
			res.idleCPUPerSec = u.seconds / time.Since(idleStart).Seconds()
		}
	}
	if sc.insertAround && !e.o.short {
		if res.insertBefore, err = e.measureInsert(ctx, e.o.duration); err != nil {
			return res, err
		}
		fmt.Printf("   ceiling   MariaDB single-row INSERT right before the load, 64 connections: %s rows/s (the run's first: %s)\n",
			num(res.insertBefore), num(e.ceil.insert))
	}
	var load WrkResult
	pids := pidsOf(insts)
	cpuBefore := sampleCPU(pids)
	var repaired chan Check
	if sc.repair {
		repaired = make(chan Check, 1)
		go func() { repaired <- e.repairMidLoad(ctx, pid, e.o.duration/2) }()
	}
	samples := e.startSampler(ctx, sc, insts)
	switch {
	case sc.kill:
		load, err = e.loadAndKill(ctx, sc, pid)
	case sc.storm:
		load, err = e.refreshStorm(ctx, sc, insts, pid, &res)
	case sc.fault != "":
		load, err = e.loadWithFault(ctx, sc, insts, pid, &res)
	case !startsAt.IsZero():
		load, err = e.loadAcrossStart(ctx, sc, insts, pid, startsAt, &res)
	case sc.guest:
		load, err = e.guestLoad(ctx, sc, insts, pid, &res)
	case sc.couponStorm:
		load, err = e.couponStorm(ctx, sc, insts, pid, &res)
	default:
		load, err = e.load(ctx, sc, insts, pid, e.o.duration, "load")
	}
	tl := samples.stop(ctx)
	if err != nil {
		return res, err
	}
	if !sc.kill && !sc.storm {
		res.loadCPU = cpuBetween(cpuBefore, sampleCPU(pids), pids, load.Requests)
	}
	var repairCheck *Check
	if repaired != nil {
		c := <-repaired
		repairCheck = &c
		fmt.Printf("   repair    %s\n", c.Detail)
	}
	res.load = load
	res.created = load.Status[201]
	if sc.guest {
		g := res.guest
		res.created = int64(len(g.orders()))
		fmt.Printf("   checkout  %d buyers at once over %s: %d walks, %s checkouts/s (orders confirmed) · POST /checkout p50 %s · p99 %s · answers to the order forms' POSTs %s\n",
			guestBuyers, g.elapsed.Round(100*time.Millisecond), len(g.walks), num(float64(res.created)/g.elapsed.Seconds()),
			ms(load.P50), ms(load.P99), statusMix(load.Status))
		if p50, p99, n := g.reviewLatency(); n > 0 {
			fmt.Printf("             the review step before it: %d POSTs to the product page's form, p50 %s · p99 %s\n", n, ms(p50), ms(p99))
		}
	} else {
		fmt.Printf("   load      %s req/s (%.2f of the hello ceiling) · p50 %s · p90 %s · p99 %s · %s\n",
			num(load.RPS), load.RPS/e.ceil.hello.RPS, ms(load.P50), ms(load.P90), ms(load.P99), statusMix(load.Status))
	}
	if load.SocketErrors != "" {
		fmt.Printf("   wrk       %s\n", load.SocketErrors)
	}
	if sc.tallyCodes() {
		fmt.Printf("   refusals  %s\n", refusalMix(load.Counts))
	}
	if !sc.kill && !sc.storm {
		fmt.Printf("   cpu       %s\n", cpuLine(res.loadCPU))
	}
	if sc.guest {
		fmt.Printf("             (the answers counted are the checkout POSTs; the CPU is also the walks' pages, pay forms and dev pay pages, and the mail sent meanwhile)\n")
	}
	if sc.buyerLimit > 0 {
		c, err := e.holdingCheck(ctx, pid, sc.buyerLimit, "right after the load (every order PENDING)")
		if err != nil {
			return res, err
		}
		res.extra = append(res.extra, c, buyerLimitRefusals(load))
	}

	if sc.soldOut {
		// Let the sale's own follow-ups (outbox relay) finish before counting the sold-out run.
		time.Sleep(2 * time.Second)
		before, err := readCounters(ctx, e.db)
		if err != nil {
			return res, err
		}
		leasedBefore, err := leaseAnswers(ctx, insts)
		if err != nil {
			return res, err
		}
		if err := e.helloAround(ctx, &res); err != nil {
			return res, err
		}
		soBefore := sampleCPU(pids)
		so, err := e.load(ctx, sc, insts, pid, e.o.duration, "soldout")
		if err != nil {
			return res, err
		}
		res.soldOutCPU = cpuBetween(soBefore, sampleCPU(pids), pids, so.Requests)
		if err := e.helloAround(ctx, &res); err != nil {
			return res, err
		}
		leasedAfter, err := leaseAnswers(ctx, insts)
		if err != nil {
			return res, err
		}
		after, err := readCounters(ctx, e.db)
		if err != nil {
			return res, err
		}
		res.soldOut, res.soldOutDB = &so, after.minus(before)
		fmt.Printf("   sold out  %s req/s (%.2f of the hello ceiling) · p50 %s · p99 %s · %s\n",
			num(so.RPS), so.RPS/e.ceil.hello.RPS, ms(so.P50), ms(so.P99), statusMix(so.Status))
		fmt.Printf("             MariaDB statements during it: %s (idle baseline over the same time: %s) → %.5f per request\n",
			res.soldOutDB, res.idleDB, float64(res.soldOutDB.total()-res.idleDB.total())/float64(max(so.Requests, 1)))
		fmt.Printf("             answered under a sold-out lease (no Redis round trip): %s of %s\n",
			num(float64(leasedAfter-leasedBefore)), num(float64(so.Requests)))
		fmt.Printf("             %s\n", cpuLine(res.soldOutCPU))
		if len(res.helloAround) == 2 {
			h := pooledHello(res.helloAround, e.ceil.hello)
			fmt.Printf("             the hello server right before and after it: %s and %s req/s · %s\n",
				num(res.helloAround[0].RPS), num(res.helloAround[1].RPS), cpuLine(h.cpu))
		}
		if u := res.soldOutCPU; u.measured && u.requests > 0 {
			fmt.Printf("             idle before the load: %.1f ms of CPU per second → %.1f µs per answer over the run's %s is the idle share\n",
				res.idleCPUPerSec*1e3, res.idleCPUPerSec*e.o.duration.Seconds()/float64(u.requests)*1e6, e.o.duration)
		}
	}

	provider := sc.provider
	if provider != "" && e.stripe == nil {
		fmt.Printf("   payments  through signed callbacks: -target instances are not configured with this run's %s simulator\n", provider)
		provider = ""
	}
	var accepted map[string]bool
	if sc.guest {
		// The buyers paid as they went, through the dev provider's pay page.
		provider, accepted = "dev", res.guest.accepted()
		res.paid = len(accepted)
		fmt.Printf("   payments  %d paid through the shop's pay form and the dev provider's pay page\n", res.paid)
	} else if provider == "stripe" {
		if accepted, err = e.payStripe(ctx, pid, &res); err != nil {
			return res, err
		}
		r := res.stripe
		fmt.Printf("   checkout  %d payments asked for by their buyers (%d of them twice at once) · %s requests/s · %d failed%s\n",
			len(r.orders), r.dupN, num(r.createRate), r.createErrs, firstErr(r.firstErr))
		fmt.Printf("   stripe    %d paid via the simulator's webhooks (%d events sent twice at once) · %s callbacks/s (%.2f of the pay-tx ceiling) · %d refused · %d sessions closed before paid\n",
			res.paid, res.dupSent, num(res.payRate), res.payRate/e.ceil.payTx, res.payErrors, r.gone)
	} else {
		if accepted, err = e.pay(ctx, pid, &res); err != nil {
			return res, err
		}
		fmt.Printf("   payments  %d paid (%d callbacks sent twice at once) · %s callbacks/s (%.2f of the pay-tx ceiling) · %d refused\n",
			res.paid, res.dupSent, num(res.payRate), res.payRate/e.ceil.payTx, res.payErrors)
		if res.chaos != nil && res.chaos.live != nil {
			// The payments made while the orders ran are accepted payments too.
			for no := range res.chaos.live.accepted {
				accepted[no] = true
			}
			res.paid = len(accepted)
		}
	}
	if err := e.settle(ctx, pid); err != nil {
		return res, err
	}
	if sc.guest {
		cs, err := e.guestChecks(ctx, pid, res.guest)
		if err != nil {
			return res, err
		}
		res.extra = append(res.extra, cs...)
	}
	if res.coupons != nil {
		cs, err := e.couponChecks(ctx, pid, res.coupons)
		if err != nil {
			return res, err
		}
		res.extra = append(res.extra, cs...)
	}
	var stripeCheck *Check
	if res.stripe != nil {
		c := res.stripe.afterSettle(ctx, e.stripe.sim)
		stripeCheck = &c
	}
	if err := e.db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(status='CLOSED'),0), COALESCE(SUM(status='UNFULFILLED'),0)
		FROM orders WHERE product_id=?`, pid).Scan(&res.expired, &res.unfulfilled); err != nil {
		return res, err
	}
	if err := e.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM card_stock WHERE product_id=? AND status='SOLD'`, pid).Scan(&res.codesSold); err != nil {
		return res, err
	}
	fmt.Printf("   orders    %d created · %d paid · %d closed unpaid · %d unfulfilled · %d codes sold of %d\n",
		res.created, res.paid, res.expired, res.unfulfilled, res.codesSold, sc.codes)
	if sc.kill {
		fmt.Printf("   orphans   %d reservations without an order (the process died between Redis and MariaDB) returned by the sweepers\n",
			e.countLogLines("orphan_reservation_released"))
	}

	var commitUnknown int64
	switch {
	case sc.fault == faultLB:
		// Orders whose buyer got no 201 for them: answered 200 (a replay) to a retry while the
		// try that placed the order was given up on, or placed by a stalled instance's late run
		// after the buyer was answered 409 or 502. Every answer, late ones too, names its order.
		commitUnknown = max(int64(len(e.lb.tally().orders))-res.created, 0)
	case res.chaos != nil:
		// An order whose request was answered 5xx or not at all may be stored: a COMMIT whose
		// reply the fault swallowed (held by a stalled link and passed on after the client gave
		// up, or cut after it ran), or one that landed after the request's deadline (a slow
		// Redis or MariaDB used it up) and was answered 503, outcome unknown. The chaos check
		// "found by a retry with its key" holds each of them to the buyer's retry.
		for status, n := range res.load.Status {
			if status >= 500 {
				commitUnknown += n
			}
		}
		commitUnknown += res.chaos.hung
	}
	res.checks, err = checkInvariants(ctx, e.db, e.rdb, Expect{ProductID: pid, Created: res.created, InFlight: int64(e.o.conns * max(res.loadRuns, 1)),
		CommitUnknown:    commitUnknown,
		AcceptedPayments: accepted, ExpiryGrace: 5 * time.Second, Provider: provider})
	if err != nil {
		return res, err
	}
	holds, err := e.holdsLeft(ctx, pid)
	if err != nil {
		return res, err
	}
	res.checks = append(res.checks, Check{Name: "no leak: every gate reservation became an order or was returned",
		Detail: fmt.Sprintf("reservation holds left in Redis: %d", holds), OK: holds == 0})
	if repairCheck != nil {
		res.checks = append(res.checks, *repairCheck)
	}
	if stripeCheck != nil {
		res.checks = append(res.checks, *stripeCheck)
	}
	if res.chaos != nil {
		res.checks = append(res.checks, chaosChecks(res.chaos)...)
	}
	if res.chaos != nil && res.chaos.live != nil {
		res.checks = append(res.checks, res.chaos.live.checks()...)
	}
	if sc.fault == faultLB {
		cs, err := e.lbChecks(ctx)
		if err != nil {
			return res, err
		}
		res.checks = append(res.checks, cs...)
	}
	if res.chaos != nil && stallFault(sc.fault) {
		res.checks = append(res.checks, stallChecks(res.chaos, res.chaos.slowest, e.stallDeadline())...)
	}
	if sc.fault == faultRabbitRestart {
		cs, err := e.rabbitChecks(ctx, pid, res.chaos)
		if err != nil {
			return res, err
		}
		res.checks = append(res.checks, cs...)
	}
	if sc.buyerLimit > 0 {
		c, err := e.holdingCheck(ctx, pid, sc.buyerLimit, "after the payments and the expiry")
		if err != nil {
			return res, err
		}
		held, err := e.heldMatch(ctx, pid)
		if err != nil {
			return res, err
		}
		res.extra = append(res.extra, c, held)
	}
	res.checks = append(res.checks, res.extra...)
	for _, in := range insts {
		if in.cmd == nil || in.cmd.Process == nil {
			continue
		}
		if rss, err := procPeakRSS(in.cmd.Process.Pid); err == nil {
			res.peakRSS, res.rssNames = append(res.peakRSS, rss), append(res.rssNames, in.name)
			live := int64(-1)
			if in.pprof != "" {
				if n, err := liveHeap(ctx, in.pprof); err == nil {
					live = n
				}
			}
			res.liveHeap = append(res.liveHeap, live)
		}
	}
	if len(res.peakRSS) > 0 {
		since := "since the scenario began"
		if !res.rssReset {
			since = "since the process started (the reset of VmHWM was refused)"
		}
		parts := make([]string, len(res.peakRSS))
		for i, b := range res.peakRSS {
			parts[i] = fmt.Sprintf("%s %s%s", res.rssNames[i], mib(b), liveNote(res.liveHeap[i]))
		}
		fmt.Printf("   rss       peak (VmHWM) %s: %s\n", since, strings.Join(parts, " · "))
	}
	if sc.soldOut && e.o.targets == "" && e.o.ab == 0 {
		// On the warm-up's product: sold out from the start, so the A/B places no order and
		// comes after the sale's checks. Not in an -ab run, which compares settings itself.
		if res.limiterAB, err = e.limiterAB(ctx, sc, insts, warm); err != nil {
			return res, err
		}
		res.limiterAB.print()
	}
	for _, c := range res.checks {
		verdict := "PASS"
		if !c.OK {
			verdict = "FAIL"
		}
		fmt.Printf("   %s  %s: %s\n", verdict, c.Name, c.Detail)
	}
	if err := e.drawScenario(tl, res); err != nil {
		return res, err
	}
	fmt.Println()
	return res, nil
}

// repairMidLoad waits, then rebuilds the product's gate from the ledger while wrk is ordering
// (POST …/reconcile?repair=true): the fenced rebuild must leave the gate equal to the ledger,
// which the scenario's invariants check once the sale is settled.
func (e *env) repairMidLoad(ctx context.Context, pid int64, after time.Duration) Check {
	c := Check{Name: "a repair during the load is accepted (the invariants check gate = ledger after it)"}
	select {
	case <-ctx.Done():
		c.Detail = ctx.Err().Error()
		return c
	case <-time.After(after):
	}
	start := time.Now()
	st, b, err := e.instances[0].admin(ctx, e.secrets.admin, "POST", fmt.Sprintf("/admin/products/%d/reconcile?repair=true", pid), nil)
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case err != nil:
		c.Detail = fmt.Sprintf("after %s: %v", after, err)
	case st != 200 || !bytes.Contains(b, []byte(`"repaired":true`)):
		c.Detail = fmt.Sprintf("after %s: %d %s", after, st, bytes.TrimSpace(b))
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("reconcile?repair=true %s into the load: 200 in %s", after, took)
	}
	return c
}

// createProduct creates a product and imports n codes through the admin API; rules are more
// fields of the product's JSON (`"buyer_limit":2`), or "".
func (e *env) createProduct(ctx context.Context, pid int64, n int, rules string) error {
	in := e.instances[0]
	if rules != "" {
		rules = "," + rules
	}
	body := fmt.Sprintf(`{"id":%d,"name":"load %d","price":1000,"max_per_order":10%s}`, pid, pid, rules)
	if st, b, err := in.admin(ctx, e.secrets.admin, "POST", "/admin/products", strings.NewReader(body)); err != nil || st != 201 {
		return fmt.Errorf("create product: %d %s %v", st, b, err)
	}
	if n == 0 {
		return nil
	}
	pr, pw := io.Pipe()
	go func() {
		var b bytes.Buffer
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "LC-%d-%08d\n", pid, i)
			if b.Len() > 64<<10 {
				if _, err := pw.Write(b.Bytes()); err != nil {
					return
				}
				b.Reset()
			}
		}
		_, _ = pw.Write(b.Bytes())
		_ = pw.Close()
	}()
	start := time.Now()
	st, b, err := in.admin(ctx, e.secrets.admin, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), pr)
	if err != nil || st != 200 {
		return fmt.Errorf("import codes: %d %s %v", st, b, err)
	}
	fmt.Printf("   stock     %d codes imported in %s: %s\n", n, time.Since(start).Round(10*time.Millisecond), bytes.TrimSpace(b))
	return nil
}

// load runs wrk against POST /api/order, split across insts, and sums the runs.
func (e *env) load(ctx context.Context, sc scenario, insts []*instance, pid int64, d time.Duration, tag string) (WrkResult, error) {
	runs, err := e.splitLoad(ctx, sc, insts, pid, d, tag)
	if err != nil {
		return WrkResult{}, err
	}
	return mergeRuns(runs), nil
}

// splitLoad runs one wrk per instance at once, the threads and connections shared out, and
// returns each instance's run.
func (e *env) splitLoad(ctx context.Context, sc scenario, insts []*instance, pid int64, d time.Duration, tag string) ([]WrkResult, error) {
	k := len(insts)
	runs := make([]WrkResult, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			args := []string{strconv.FormatInt(pid, 10), strconv.Itoa(sc.qtyMax), strconv.Itoa(sc.dup),
				e.tokensFile, fmt.Sprintf("%s%d-%d", tag, i, time.Now().UnixNano())}
			if sc.tallyCodes() {
				args = append(args, "codes")
			}
			if sc.coupon != "" {
				if len(args) == 5 {
					args = append(args, "none")
				}
				args = append(args, "", "0", sc.coupon)
			}
			run := WrkRun{Threads: max(e.o.threads/k, 1), Conns: e.o.conns / k, Duration: d, URL: insts[i].base,
				Script: e.orderLua, Args: args}
			runs[i], errs[i] = runWrk(ctx, run)
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// mergeRuns sums concurrent wrk runs: rates, requests and tallies add up ("max:" tallies take
// the largest), latency percentiles take the worst run's.
func mergeRuns(runs []WrkResult) WrkResult {
	out := WrkResult{Status: map[int]int64{}, Counts: map[string]int64{}}
	for _, r := range runs {
		out.RPS += r.RPS
		out.Requests += r.Requests
		out.P50, out.P90, out.P99, out.Max = maxDur(out.P50, r.P50), maxDur(out.P90, r.P90), maxDur(out.P99, r.P99), maxDur(out.Max, r.Max)
		for c, n := range r.Status {
			out.Status[c] += n
		}
		for name, n := range r.Counts {
			if strings.HasPrefix(name, "max:") {
				out.Counts[name] = max(out.Counts[name], n)
			} else {
				out.Counts[name] += n
			}
		}
		if r.SocketErrors != "" {
			out.SocketErrors = strings.TrimSpace(out.SocketErrors + " " + r.SocketErrors)
		}
	}
	return out
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func statusMix(m map[int]int64) string {
	codes := make([]int, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d: %s", c, num(float64(m[c]))))
	}
	return strings.Join(parts, " · ")
}

// due is an order to pay.
type due struct {
	no     string
	amount int64
	buyer  string
}

// pendingOrders lists the product's PENDING orders, oldest first.
func (e *env) pendingOrders(ctx context.Context, pid int64) ([]due, error) {
	var all []due
	err := query(ctx, e.db, "SELECT order_no, amount, buyer_id FROM orders WHERE product_id=? AND status='PENDING' ORDER BY created_at",
		[]any{pid}, func(r *sql.Rows) error {
			var d due
			if err := r.Scan(&d.no, &d.amount, &d.buyer); err != nil {
				return err
			}
			all = append(all, d)
			return nil
		})
	return all, err
}

// firstErr quotes the first failure of a phase, if any.
func firstErr(s string) string {
	if s == "" {
		return ""
	}
	return " (first: " + trim(s, 200) + ")"
}

// pay sends signed "paid" callbacks for a share of the product's PENDING orders (some twice at
// once), spread over the instances, and returns the orders whose payment was accepted.
func (e *env) pay(ctx context.Context, pid int64, res *scenarioResult) (map[string]bool, error) {
	all, err := e.pendingOrders(ctx, pid)
	if err != nil {
		return nil, err
	}
	n := int(float64(len(all)) * e.o.payShare)
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	toPay := all[:n]
	cb, err := e.newCallbacks(e.o.payConns)
	if err != nil {
		return nil, err
	}
	accepted := make(map[string]bool, n)
	var mu sync.Mutex
	var refused, dupSent atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	send := func(d due, inst *instance) bool { return cb.send(ctx, d, inst) == 200 }
	for w := 0; w < e.o.payConns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := range jobs {
				d := toPay[i]
				inst := e.instances[i%len(e.instances)]
				ok := false
				if float64(i) < float64(n)*e.o.dupCallbacks {
					// The provider sends the same callback twice at once (to both instances when
					// there are two): both must answer success, the codes are allocated once.
					var ok2 bool
					var inner sync.WaitGroup
					inner.Add(1)
					go func() { defer inner.Done(); ok2 = send(d, e.instances[(i+1)%len(e.instances)]) }()
					ok = send(d, inst)
					inner.Wait()
					ok = ok && ok2
					dupSent.Add(1)
				} else {
					ok = send(d, inst)
				}
				if ok {
					mu.Lock()
					accepted[d.no] = true
					mu.Unlock()
				} else {
					refused.Add(1)
				}
			}
		}(w)
	}
	// The callbacks' connections are opened before the clock starts, as the ceiling's are
	// (warmPool): the rate is the service's, not the TCP handshakes'.
	var warm sync.WaitGroup
	for w := range e.o.payConns {
		warm.Go(func() {
			if resp, err := cb.client.Get(e.instances[w%len(e.instances)].base + "/healthz"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	warm.Wait()
	start := time.Now()
	for i := range toPay {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	res.paid, res.dupSent, res.payErrors = len(accepted), int(dupSent.Load()), int(refused.Load())
	if elapsed > 0 {
		res.payRate = float64(n) / elapsed.Seconds()
	}
	return accepted, nil
}

// callbacks sends the signed "paid" callbacks of the signed-callback flow, as its provider
// does.
type callbacks struct {
	signer *paysig.Signer
	client *http.Client
}

// newCallbacks is a sender with connections for conns callbacks in flight at once.
func (e *env) newCallbacks(conns int) (*callbacks, error) {
	signer, err := paysig.New(e.secrets.payment, 0)
	if err != nil {
		return nil, err
	}
	return &callbacks{signer: signer, client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 2 * conns, MaxConnsPerHost: 2 * conns}}}, nil
}

// send delivers d's "paid" callback to inst and returns 200 when the service acknowledged it
// (200 with result success), the answer's status otherwise, or 0 when no answer came.
func (c *callbacks) send(ctx context.Context, d due, inst *instance) int {
	body, ts, sig, err := c.signer.SignedBody(paysig.Notice{OrderNo: d.no, Status: "paid", Amount: d.amount, PaymentRef: "lc-" + d.no}, time.Now())
	if err != nil {
		return 0
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", inst.base+"/api/payments/callback", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(paysig.HeaderTimestamp, ts)
	req.Header.Set(paysig.HeaderSignature, sig)
	resp, err := c.client.Do(req)
	if err != nil {
		return 0
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 200 && !bytes.Contains(b, []byte(`"result":"success"`)) {
		return 502 // a 200 that does not acknowledge: the provider would resend
	}
	return resp.StatusCode
}

// settle waits until the product has no PENDING order (the rest expired and were closed) and
// the outbox is drained (every gate change and delivery event relayed).
func (e *env) settle(ctx context.Context, pid int64) error {
	deadline := time.Now().Add(e.o.orderTimeout + 90*time.Second)
	start := time.Now()
	for {
		var pending, unsent int64
		if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE product_id=? AND status='PENDING'", pid).Scan(&pending); err != nil {
			return err
		}
		if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL").Scan(&unsent); err != nil {
			return err
		}
		holds, err := e.holdsLeft(ctx, pid)
		if err != nil {
			return err
		}
		if pending == 0 && unsent == 0 && holds == 0 {
			fmt.Printf("   settled   unpaid orders closed, outbox drained, every reservation hold resolved after %s\n",
				time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Printf("   settled   NOT within %s: %d PENDING, %d unsent outbox rows, %d holds (the invariants will say what leaked)\n",
				time.Since(start).Round(time.Second), pending, unsent, holds)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// loadAndKill loads a dedicated instance and SIGKILLs it half-way through the run: requests
// in flight die with it, some after their gate reservation and before their order row. A
// fresh process with the same configuration then takes over; the sweepers return the
// orphaned reservations after CARDSHOP_ORPHAN_AFTER.
func (e *env) loadAndKill(ctx context.Context, sc scenario, pid int64) (WrkResult, error) {
	victim, err := e.startInstance(ctx, "victim", "127.0.0.1:6071")
	if err != nil {
		return WrkResult{}, err
	}
	run := WrkRun{Threads: e.o.threads, Conns: e.o.conns, Duration: e.o.duration, URL: victim.base, Script: e.orderLua,
		Args: []string{strconv.FormatInt(pid, 10), strconv.Itoa(sc.qtyMax), strconv.Itoa(sc.dup), e.tokensFile,
			fmt.Sprintf("kill-%d", time.Now().UnixNano())}}
	killed := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		select {
		case <-time.After(e.o.duration / 2):
		case <-ctx.Done():
		}
		_ = victim.cmd.Process.Signal(syscall.SIGKILL)
		killed <- time.Since(start)
	}()
	res, err := runWrk(ctx, run)
	at := <-killed
	_ = victim.cmd.Wait()
	e.dropInstance(victim)
	if err != nil {
		return res, err
	}
	if _, err := e.startInstance(ctx, "victim-restarted", "127.0.0.1:6072"); err != nil {
		return res, err
	}
	fmt.Printf("   killed    the loaded instance with SIGKILL %s into the run; a new process took over\n", at.Round(100*time.Millisecond))
	return res, nil
}

func (e *env) dropInstance(gone *instance) {
	kept := e.instances[:0]
	for _, in := range e.instances {
		if in != gone {
			kept = append(kept, in)
		}
	}
	e.instances = kept
}

// holdsLeft counts the gate's reservation holds of the product (orders whose row the sweeper
// has not yet confirmed or released).
func (e *env) holdsLeft(ctx context.Context, pid int64) (int64, error) {
	return e.rdb.ZCard(ctx, fmt.Sprintf("holds:{%d}", pid)).Result()
}

// countLogLines counts the lines of every instance's log (this run's) that contain text.
func (e *env) countLogLines(text string) int {
	files, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n += strings.Count(string(b), text)
	}
	return n
}

// leaseAnswers sums the instances' count of new orders answered under a sold-out lease.
func leaseAnswers(ctx context.Context, insts []*instance) (int64, error) {
	var n int64
	for _, in := range insts {
		v, err := in.metric(ctx, "cardshop_gate_lease_answers_total", "")
		if err != nil {
			return 0, err
		}
		n += v
	}
	return n, nil
}

// helloAround measures the hello ceiling again (same wrk command, a quarter of the scenario's
// duration: the sale's orders are still to be paid, and the order timeout runs) and appends it
// to res.helloAround. It does nothing in the short form.
func (e *env) helloAround(ctx context.Context, res *scenarioResult) error {
	if e.o.short {
		return nil
	}
	h, err := helloCeiling(ctx, WrkRun{Threads: e.o.threads, Conns: e.o.conns, Duration: max(e.o.duration/4, time.Second), Script: e.helloLua})
	if err != nil {
		return err
	}
	res.helloAround = append(res.helloAround, h)
	return nil
}

// measureInsert measures MariaDB's single-row INSERT ceiling at 64 connections for d, with the
// harness's pool widened for it and put back: at the start of the run, and again right before
// the orders of a scenario with insertAround.
func (e *env) measureInsert(ctx context.Context, d time.Duration) (float64, error) {
	e.db.SetMaxOpenConns(64)
	e.db.SetMaxIdleConns(64)
	defer func() { e.db.SetMaxOpenConns(48); e.db.SetMaxIdleConns(harnessIdleConns) }()
	rate, err := insertCeiling(ctx, e.db, 64, d)
	if err != nil {
		return 0, fmt.Errorf("insert ceiling: %w", err)
	}
	return rate, nil
}

// pooledHello is the hello runs taken as one: the mean of their rates, and their CPU seconds
// over their answers; first (the run's first ceiling) when there are none.
func pooledHello(runs []helloResult, first helloResult) helloResult {
	if len(runs) == 0 {
		return first
	}
	var out helloResult
	out.cpu.measured = len(runs) > 0
	for _, h := range runs {
		out.RPS += h.RPS / float64(len(runs))
		out.cpu.seconds += h.cpu.seconds
		out.cpu.requests += h.cpu.requests
		out.cpu.measured = out.cpu.measured && h.cpu.measured
	}
	return out
}
