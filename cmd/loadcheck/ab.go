package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Issue 16's targets for group commit, as shares of this run's ceilings: successful orders at
// least 1.5× MariaDB's single-row INSERT ceiling, payments on one hot product at least 2× the
// raw single pay transaction.
const (
	ordersShare = 1.5
	payShare    = 2.0
)

// abSample is one scenario run of one arm: its successful orders and paid callbacks per second.
type abSample struct {
	orders, pays float64
}

// runAB runs the selected scenarios o.ab rounds with group commit off and on in turn (off
// first in odd rounds, on first in even ones, so that neither arm always runs on a warmer
// database), each arm on instances of its own, checks every invariant of every run, and prints
// each scenario's orders/s and payments/s per arm: the median and the spread of its rounds.
func (e *env) runAB(ctx context.Context) (checks, failed int, err error) {
	samples := map[string]map[int][]abSample{"off": {}, "on": {}}
	names := map[int]string{}
	var order []int
	for round := 1; round <= e.o.ab; round++ {
		arms := []string{"off", "on"}
		if round%2 == 0 {
			arms = []string{"on", "off"}
		}
		for _, arm := range arms {
			e.stopInstances() // the arm's setting is read when an instance starts
			e.o.batch = arm
			fmt.Printf("== A/B round %d of %d: CARDSHOP_LEDGER_BATCH=%s\n", round, e.o.ab, arm)
			for _, sc := range scenarios(e.o) {
				if !strings.Contains(","+e.o.only+",", fmt.Sprintf(",%d,", sc.num)) {
					continue
				}
				if ctx.Err() != nil {
					return checks, failed, ctx.Err()
				}
				res, err := e.runScenario(ctx, sc)
				if err != nil {
					return checks, failed, fmt.Errorf("A/B round %d, batching %s, scenario %d: %w", round, arm, sc.num, err)
				}
				failed += res.failed()
				checks += len(res.checks)
				if _, ok := names[sc.num]; !ok {
					names[sc.num] = sc.name
					order = append(order, sc.num)
				}
				samples[arm][sc.num] = append(samples[arm][sc.num],
					abSample{orders: float64(res.created) / e.o.duration.Seconds(), pays: res.payRate})
			}
		}
	}
	e.stopInstances()
	fmt.Printf("== A/B of group commit: %d rounds per arm, alternating; median [min – max]\n", e.o.ab)
	fmt.Printf("   %-44s %-5s %-32s %-32s\n", "scenario", "batch", "successful orders/s", "payments/s")
	for _, n := range order {
		for _, arm := range []string{"off", "on"} {
			s := samples[arm][n]
			fmt.Printf("   %-44s %-5s %-32s %-32s\n", fmt.Sprintf("%d. %s", n, trim(names[n], 40)), arm,
				spread(s, func(x abSample) float64 { return x.orders }), spread(s, func(x abSample) float64 { return x.pays }))
		}
		on, off := median(samples["on"][n], func(x abSample) float64 { return x.orders }),
			median(samples["off"][n], func(x abSample) float64 { return x.orders })
		pon, poff := median(samples["on"][n], func(x abSample) float64 { return x.pays }),
			median(samples["off"][n], func(x abSample) float64 { return x.pays })
		fmt.Printf("   %-44s on/off: orders %.2f×, payments %.2f×\n", "", ratio(on, off), ratio(pon, poff))
		fmt.Printf("   %-44s on vs ceilings: orders %.2f of the INSERT ceiling (target ≥ %.1f), payments %.2f of the pay transaction (target ≥ %.1f)\n",
			"", on/max(e.ceil.insert, 1), ordersShare, pon/max(e.ceil.payTx, 1), payShare)
	}
	fmt.Printf("\n   invariants: %d checks, %d failed across every run of both arms\n", checks, failed)
	return checks, failed, nil
}

func median(s []abSample, f func(abSample) float64) float64 {
	v := make([]float64, len(s))
	for i, x := range s {
		v[i] = f(x)
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// spread is "median [min – max]" of one measure of the samples.
func spread(s []abSample, f func(abSample) float64) string {
	if len(s) == 0 {
		return "—"
	}
	lo, hi := f(s[0]), f(s[0])
	for _, x := range s {
		lo, hi = min(lo, f(x)), max(hi, f(x))
	}
	return fmt.Sprintf("%s [%s – %s]", num(median(s, f)), num(lo), num(hi))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
