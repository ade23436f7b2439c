package main

import (
	"fmt"
	"strings"
	"time"
)

// printSummary prints one line per scenario and the load proof's targets, each with
// its number, its ceiling and PASS or MISS (a miss says by how much; what limits it is in
// docs/BENCHMARKS.md).
func (e *env) printSummary(results []scenarioResult) {
	fmt.Println("== summary")
	fmt.Printf("   %-3s %-52s %10s %9s %9s %9s %8s %8s %6s\n", "#", "scenario", "req/s", "p50", "p90", "p99", "created", "sold", "checks")
	for _, r := range results {
		if r.skipped {
			fmt.Printf("   %-3d %-52s skipped\n", r.sc.num, trim(r.sc.name, 52))
			continue
		}
		verdict := "PASS"
		if r.failed() > 0 {
			verdict = fmt.Sprintf("%d FAIL", r.failed())
		}
		fmt.Printf("   %-3d %-52s %10s %9s %9s %9s %8d %8d %6s\n", r.sc.num, trim(r.sc.name, 52), num(r.load.RPS),
			ms(r.load.P50), ms(r.load.P90), ms(r.load.P99), r.created, r.codesSold, verdict)
	}
	if e.o.chaos {
		e.printChaos(results)
		return
	}
	fmt.Println()
	e.printResources(results)
	fmt.Println()
	fmt.Println("== targets (each measured in this run against this machine's ceilings)")
	target := func(name string, got, ceiling, share float64, unit string) {
		want := ceiling * share
		verdict := "PASS"
		if got < want {
			verdict = fmt.Sprintf("MISS by %.0f%%", (1-got/want)*100)
		}
		fmt.Printf("   %-4s %s: %s %s = %.2f of %s (target ≥ %.2f) %s\n", verdictWord(verdict), name, num(got), unit,
			got/ceiling, num(ceiling), share, strings.TrimPrefix(verdict, "PASS"))
	}
	// targetNear judges got against the ceiling measured next to it when there is one (c.rate >
	// 0), printing its ratio to the run's first ceiling under it, else against the first.
	targetNear := func(subject string, c nearCeiling, got, first, share float64, unit string) {
		if c.rate <= 0 {
			target(subject+" vs "+c.kind+" ceiling", got, first, share, unit)
			return
		}
		target(subject+" vs "+c.kind+" ceiling measured "+c.when, got, c.rate, share, unit)
		fmt.Printf("         (against the run's first %s ceiling, %s %s minutes earlier: %.2f)\n", c.short, num(first), c.unit, got/max(first, 1))
	}
	for _, r := range results {
		if r.soldOut != nil {
			around, adjacent, which := pooledHello(r.helloAround, e.ceil.hello), len(r.helloAround) > 0, "the hello server's"
			if adjacent {
				which = "the hello server's right before and after it"
			}
			targetNear("sold-out answers", helloNear(r), r.soldOut.RPS, e.ceil.hello.RPS, 0.5, "req/s")
			per := float64(r.soldOutDB.total()-r.idleDB.total()) / float64(max(r.soldOut.Requests, 1))
			verdict := "PASS"
			if per > 0.001 {
				verdict = "MISS"
			}
			fmt.Printf("   %-4s sold-out answers touch no database: %.5f MariaDB statements per request beyond the idle baseline\n", verdict, per)
			if h := around.cpu; r.soldOutCPU.measured && h.measured && h.perRequest() > 0 {
				got, limit := r.soldOutCPU.perRequest(), soldOutCPUShare*h.perRequest()
				verdict := "PASS"
				if got > limit {
					verdict = fmt.Sprintf("MISS by %.0f%%", (got/limit-1)*100)
				}
				fmt.Printf("   %-4s service CPU per sold-out answer vs %s: %.1f µs = %.2f× %.1f µs (target ≤ %.1f×) %s\n",
					verdictWord(verdict), which, got, got/h.perRequest(), h.perRequest(), soldOutCPUShare, strings.TrimPrefix(verdict, "PASS"))
				if first := e.ceil.hello.cpu; adjacent && first.measured && first.perRequest() > 0 {
					fmt.Printf("         (against the run's first hello ceiling, %.1f µs minutes earlier: %.2f×)\n", first.perRequest(), got/first.perRequest())
				}
			}
		}
		if st := r.storm; st != nil {
			targetNear("catalogue reads alone (refresh storm)", helloNear(r), st.alone.RPS, e.ceil.hello.RPS, stormShare, "req/s")
			for _, pg := range st.pages {
				targetNear(pg.name+" alone (refresh storm)", helloNear(r), pg.run.RPS, e.ceil.hello.RPS, stormShare, "req/s")
			}
		}
		if r.sc.num == 2 {
			ordersPerSec := float64(r.created) / e.o.duration.Seconds()
			targetNear("successful orders (deep stock)", nearCeiling{kind: "MariaDB's single-row INSERT", short: "INSERT",
				when: "right before them", rate: r.insertBefore, unit: "rows/s"}, ordersPerSec, e.ceil.insert, ordersShare, "orders/s")
		}
		if ab := r.limiterAB; ab != nil {
			target("sold-out answers with the per-buyer limiter on vs off (alternating rounds)", ab.onRate, ab.offRate, limiterABShare, "req/s")
			fmt.Printf("   info rate limits off vs the production defaults, sold-out answers: %s against %s req/s (%.2f×), p50 %s against %s, %.1f against %.1f µs of service CPU per answer\n",
				num(ab.offRate), num(ab.onRate), ratio(ab.offRate, ab.onRate), ms(ab.off.P50), ms(ab.on.P50), ab.offCPU.perRequest(), ab.onCPU.perRequest())
		}
		if cr := r.coupons; cr != nil {
			target("successful orders with a coupon claimed at the gate vs without (alternating rounds)", cr.couponRate, cr.plainRate, couponShare, "orders/s")
		}
		if r.sc.num == 2 || r.sc.num == 1 {
			target(fmt.Sprintf("payment callbacks on one hot product (scenario %d) vs the raw pay-transaction ceiling", r.sc.num),
				r.payRate, e.ceil.payTx, payShare, "callbacks/s")
		}
	}
	if name, lo, hi, ok := growthOf(results, func(r scenarioResult) []int64 { return r.peakRSS }); ok {
		verdict := "PASS"
		if float64(hi) > rssFlatShare*float64(lo) {
			verdict = fmt.Sprintf("MISS by %.0f%%", (float64(hi)/(rssFlatShare*float64(lo))-1)*100)
		}
		fmt.Printf("   %-4s peak RSS flat across the scenarios: the instance that grew most, %s, %s to %s (target: its largest ≤ %.1f× its smallest) %s\n",
			verdictWord(verdict), name, mib(lo), mib(hi), rssFlatShare, strings.TrimPrefix(verdict, "PASS"))
	}
	// The live heap is printed, not judged: it is mostly connection buffers (HTTP, Redis,
	// MariaDB), which grow with a scenario's concurrency and stay; what it shows is whether
	// anything grows with the number of orders (docs/BENCHMARKS.md).
	if name, lo, hi, ok := growthOf(results, func(r scenarioResult) []int64 { return r.liveHeap }); ok {
		fmt.Printf("   info live heap after a GC at each scenario's end: the instance that grew most, %s, %s to %s (%.2f×; per scenario in the table above)\n",
			name, mib(lo), mib(hi), float64(hi)/float64(lo))
	}
	fails := 0
	for _, r := range results {
		fails += r.failed()
	}
	fmt.Printf("   %-4s invariants: %d checks failed across %d scenarios (oversold, duplicates, lost, leaked all counted there)\n",
		verdictWord(map[bool]string{true: "PASS", false: "FAIL"}[fails == 0]), fails, len(results))
}

// nearCeiling is a ceiling measured again next to what a target compares with it: its kind
// and short name, when it was measured, its rate (0: not measured, the run's first counts) and
// the rate's unit.
type nearCeiling struct {
	kind, short, when string
	rate              float64
	unit              string
}

// helloNear is the hello ceiling measured right before and after r's sold-out or catalogue-only
// run, their mean; rate 0 when it was not measured (the short form).
func helloNear(r scenarioResult) nearCeiling {
	c := nearCeiling{kind: "the Fiber hello world", short: "hello", when: "right before and after them", unit: "req/s"}
	if len(r.helloAround) > 0 {
		c.rate = pooledHello(r.helloAround, helloResult{}).RPS
	}
	return c
}

// soldOutCPUShare is the bound on a sold-out answer's service CPU: at most this many
// times the hello server's CPU per answer, measured in the same run.
const soldOutCPUShare = 2.5

// rssFlatShare is how much the largest per-scenario peak RSS of an instance may exceed the
// smallest before the summary calls it not flat (no growth with the number of orders;
// the factor is this harness's, see docs/BENCHMARKS.md).
const rssFlatShare = 1.5

// growthOf returns, of the instances measured in more than one scenario, the one whose
// per-scenario value (vals: peak RSS or live heap, in the order of rssNames; negative =
// unknown) grew most from its smallest scenario to its largest: its name and those two values
// (a process's own values are compared: a fresh instance starts smaller than a warm one).
func growthOf(results []scenarioResult, vals func(scenarioResult) []int64) (name string, lo, hi int64, ok bool) {
	type span struct {
		lo, hi int64
		n      int
	}
	spans := map[string]*span{}
	var names []string
	for _, r := range results {
		for i, b := range vals(r) {
			if b < 0 || i >= len(r.rssNames) {
				continue
			}
			sp := spans[r.rssNames[i]]
			if sp == nil {
				sp = &span{lo: b, hi: b}
				spans[r.rssNames[i]] = sp
				names = append(names, r.rssNames[i])
			}
			sp.lo, sp.hi, sp.n = min(sp.lo, b), max(sp.hi, b), sp.n+1
		}
	}
	for _, n := range names {
		sp := spans[n]
		if sp.n < 2 {
			continue
		}
		if !ok || float64(sp.hi)/float64(sp.lo) > float64(hi)/float64(lo) {
			name, lo, hi, ok = n, sp.lo, sp.hi, true
		}
	}
	return name, lo, hi, ok
}

// printResources prints the service's own CPU time per answer (utime + stime of its
// processes, /proc/<pid>/stat) for the hello server and each measured run, and each
// instance's peak RSS per scenario.
func (e *env) printResources(results []scenarioResult) {
	fmt.Println("== service CPU per answer (its processes' utime+stime over the wrk run) and peak RSS per scenario")
	fmt.Printf("   %-3s %-40s %12s %10s %12s   %s\n", "#", "run", "answers", "CPU s", "µs/answer", "peak RSS (VmHWM)")
	row := func(n, name string, u cpuUse, rss string) {
		if !u.measured {
			fmt.Printf("   %-3s %-40s %12s %10s %12s   %s\n", n, trim(name, 40), "", "", "—", rss)
			return
		}
		fmt.Printf("   %-3s %-40s %12s %10.2f %12.1f   %s\n", n, trim(name, 40), num(float64(u.requests)), u.seconds, u.perRequest(), rss)
	}
	row("", "Fiber hello world (child process)", e.ceil.hello.cpu, "")
	for _, r := range results {
		if r.skipped {
			continue
		}
		parts := make([]string, len(r.peakRSS))
		for i, b := range r.peakRSS {
			parts[i] = fmt.Sprintf("%s %s", r.rssNames[i], mib(b))
			if i < len(r.liveHeap) {
				parts[i] += liveNote(r.liveHeap[i])
			}
		}
		rss := strings.Join(parts, " · ")
		if len(parts) > 0 && !r.rssReset {
			rss += " (since start)"
		}
		row(fmt.Sprint(r.sc.num), r.sc.name, r.loadCPU, rss)
		if r.soldOut != nil {
			row("", "… sold-out answers", r.soldOutCPU, "")
			if len(r.helloAround) > 0 {
				row("", "… the hello server around them", pooledHello(r.helloAround, e.ceil.hello).cpu, "")
			}
		}
	}
}

func verdictWord(v string) string {
	if strings.HasPrefix(v, "PASS") {
		return "PASS"
	}
	if strings.HasPrefix(v, "FAIL") {
		return "FAIL"
	}
	return "MISS"
}

// trim shortens s to n characters (runes: a byte cut could split one, and fmt pads by runes).
func trim(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// ms formats a latency in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// liveNote is " (live heap N MiB)", or "" when the live heap is unknown (negative).
func liveNote(b int64) string {
	if b < 0 {
		return ""
	}
	return " (live heap " + mib(b) + ")"
}
