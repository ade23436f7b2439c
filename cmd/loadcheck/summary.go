package main

import (
	"fmt"
	"strings"
	"time"
)

// printSummary prints one line per scenario and the targets of the load-proof issue, each with
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
	for _, r := range results {
		if r.soldOut != nil {
			target("sold-out answers vs the Fiber hello-world ceiling", r.soldOut.RPS, e.ceil.hello.RPS, 0.5, "req/s")
			per := float64(r.soldOutDB.total()-r.idleDB.total()) / float64(max(r.soldOut.Requests, 1))
			verdict := "PASS"
			if per > 0.001 {
				verdict = "MISS"
			}
			fmt.Printf("   %-4s sold-out answers touch no database: %.5f MariaDB statements per request beyond the idle baseline\n", verdict, per)
		}
		if st := r.storm; st != nil {
			target("catalogue reads alone (refresh storm) vs the Fiber hello-world ceiling", st.alone.RPS, e.ceil.hello.RPS, stormShare, "req/s")
		}
		if r.sc.num == 2 {
			ordersPerSec := float64(r.created) / e.o.duration.Seconds()
			target("successful orders (deep stock) vs MariaDB's single-row INSERT ceiling", ordersPerSec, e.ceil.insert, 0.4, "orders/s")
		}
		if r.sc.num == 2 || r.sc.num == 1 {
			target(fmt.Sprintf("payment callbacks on one hot product (scenario %d) vs the raw pay-transaction ceiling", r.sc.num),
				r.payRate, e.ceil.payTx, 0.8, "callbacks/s")
		}
	}
	fails := 0
	for _, r := range results {
		fails += r.failed()
	}
	fmt.Printf("   %-4s invariants: %d checks failed across %d scenarios (oversold, duplicates, lost, leaked all counted there)\n",
		verdictWord(map[bool]string{true: "PASS", false: "FAIL"}[fails == 0]), fails, len(results))
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
