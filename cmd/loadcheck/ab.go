package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// The targets for group commit, as shares of this run's ceilings: successful orders at
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

// abSetting is -ab-var: the service setting an A/B compares and its two values.
type abSetting struct{ name, a, b string }

func (v *abSetting) String() string { return v.name + "=" + v.a + "," + v.b }

func (v *abSetting) Set(s string) error {
	name, values, ok := strings.Cut(s, "=")
	a, b, two := strings.Cut(values, ",")
	if !ok || !two || !strings.HasPrefix(name, "CARDSHOP_") || a == "" || b == "" || a == b || strings.Contains(b, ",") {
		return fmt.Errorf("want CARDSHOP_NAME=A,B with two different values, got %q", s)
	}
	*v = abSetting{name: name, a: a, b: b}
	return nil
}

// runAB runs the selected scenarios o.ab rounds with the A/B setting's two values in turn (A
// first in odd rounds, B first in even ones, so that neither arm always runs on a warmer
// database), each arm on instances of its own, checks every invariant of every run, and prints
// each scenario's orders/s and payments/s per arm: the median and the spread of its rounds.
func (e *env) runAB(ctx context.Context) (checks, failed int, err error) {
	v := e.o.abVar
	defer func(s string) { e.o.setting = s }(e.o.setting)
	samples := map[string]map[int][]abSample{v.a: {}, v.b: {}}
	names := map[int]string{}
	var order []int
	for round := 1; round <= e.o.ab; round++ {
		arms := []string{v.a, v.b}
		if round%2 == 0 {
			arms = []string{v.b, v.a}
		}
		for _, arm := range arms {
			e.stopInstances() // the arm's setting is read when an instance starts
			e.o.setting = v.name + "=" + arm
			fmt.Printf("== A/B round %d of %d: %s\n", round, e.o.ab, e.o.setting)
			for _, sc := range scenarios(e.o) {
				if !strings.Contains(","+e.o.only+",", fmt.Sprintf(",%d,", sc.num)) {
					continue
				}
				if ctx.Err() != nil {
					return checks, failed, ctx.Err()
				}
				res, err := e.runScenario(ctx, sc)
				if err != nil {
					return checks, failed, fmt.Errorf("A/B round %d, %s, scenario %d: %w", round, e.o.setting, sc.num, err)
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
	fmt.Printf("== A/B of %s: %d rounds per arm, alternating; median [min – max]\n", v.name, e.o.ab)
	fmt.Printf("   %-44s %-8s %-32s %-32s\n", "scenario", "value", "successful orders/s", "payments/s")
	for _, n := range order {
		for _, arm := range []string{v.a, v.b} {
			s := samples[arm][n]
			fmt.Printf("   %-44s %-8s %-32s %-32s\n", fmt.Sprintf("%d. %s", n, trim(names[n], 40)), arm,
				spread(s, func(x abSample) float64 { return x.orders }), spread(s, func(x abSample) float64 { return x.pays }))
		}
		ob, oa := median(samples[v.b][n], func(x abSample) float64 { return x.orders }),
			median(samples[v.a][n], func(x abSample) float64 { return x.orders })
		pb, pa := median(samples[v.b][n], func(x abSample) float64 { return x.pays }),
			median(samples[v.a][n], func(x abSample) float64 { return x.pays })
		fmt.Printf("   %-44s %s/%s: orders %.2f×, payments %.2f×\n", "", v.b, v.a, ratio(ob, oa), ratio(pb, pa))
		fmt.Printf("   %-44s %s vs ceilings: orders %.2f of the INSERT ceiling (target ≥ %.1f), payments %.2f of the pay transaction (target ≥ %.1f)\n",
			"", v.b, ob/max(e.ceil.insert, 1), ordersShare, pb/max(e.ceil.payTx, 1), payShare)
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
