package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The instances run in the production defaults behind a load balancer: the per-buyer limit on,
// with a budget the load never reaches (all of it comes from 2,000 buyers), and the per-IP
// limit off (every request comes from the balancer's address, here the harness's). Scenario 1
// then measures the sold-out answer with the per-buyer limiter on against the same answer on an
// instance started with the rate limits off, in alternating rounds of one run: the sold-out
// answer is given before the limiter is charged (httpapi.placeOrder), so the two should match.
const (
	// prodBuyerBudget is the instances' CARDSHOP_RATE_PER_BUYER: a million orders a minute per
	// buyer (CARDSHOP_RATE_WINDOW's default), out of the load's reach.
	prodBuyerBudget = 1_000_000
	limiterABRounds = 3    // rounds of each arm, alternating (on, off, off, on, on, off)
	limiterABShare  = 0.95 // the target: sold-out answers/s with the limiter on ≥ 0.95 of off
)

// limiterABRun is the A/B's measures: each arm's answers per second over its rounds, and
// what the service did for them.
type limiterABRun struct {
	round             time.Duration
	onRate, offRate   float64 // answers/s, over every round of the arm
	on, off           WrkResult
	onCPU, offCPU     cpuUse
	onLease, offLease int64 // answers given under a sold-out lease
}

// limiterAB measures the sold-out answer on product pid (sold out, no order is ever placed
// on it) with insts[0] (the production defaults) and with an instance of its own started with
// both rate limits off, alternately, limiterABRounds rounds each, and stops that instance.
func (e *env) limiterAB(ctx context.Context, sc scenario, insts []*instance, pid int64) (*limiterABRun, error) {
	off, err := e.startInstance(ctx, "instance-limits-off", "", "CARDSHOP_RATE_PER_BUYER=0", "CARDSHOP_RATE_PER_IP=0")
	if err != nil {
		return nil, err
	}
	defer e.stopInstance(off)
	on := insts[0]
	if _, err := e.load(ctx, sc, []*instance{off}, pid, time.Second, "abwarm"); err != nil {
		return nil, err
	}
	// wrk takes whole seconds.
	ab := &limiterABRun{round: max((e.o.duration / (2 * limiterABRounds)).Round(time.Second), time.Second)}
	var onRuns, offRuns []WrkResult
	for i := 0; i < limiterABRounds; i++ {
		arms := []*instance{on, off}
		if i%2 == 1 {
			arms = []*instance{off, on}
		}
		for _, in := range arms {
			pids := pidsOf([]*instance{in})
			leased, err := leaseAnswers(ctx, []*instance{in})
			if err != nil {
				return nil, err
			}
			before := sampleCPU(pids)
			r, err := e.load(ctx, sc, []*instance{in}, pid, ab.round, "ab"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			u := cpuBetween(before, sampleCPU(pids), pids, r.Requests)
			after, err := leaseAnswers(ctx, []*instance{in})
			if err != nil {
				return nil, err
			}
			if in == on {
				onRuns, ab.onCPU, ab.onLease = append(onRuns, r), addCPU(ab.onCPU, u, i == 0), ab.onLease+after-leased
			} else {
				offRuns, ab.offCPU, ab.offLease = append(offRuns, r), addCPU(ab.offCPU, u, i == 0), ab.offLease+after-leased
			}
		}
	}
	ab.on, ab.off = mergeRuns(onRuns), mergeRuns(offRuns)
	total := ab.round.Seconds() * limiterABRounds
	ab.onRate, ab.offRate = float64(ab.on.Requests)/total, float64(ab.off.Requests)/total
	return ab, nil
}

// addCPU adds u to sum; first starts the sum.
func addCPU(sum, u cpuUse, first bool) cpuUse {
	if first {
		return u
	}
	return cpuUse{seconds: sum.seconds + u.seconds, requests: sum.requests + u.requests, measured: sum.measured && u.measured}
}

// print writes the A/B's lines under the scenario.
func (ab *limiterABRun) print() {
	fmt.Printf("   limiter   sold-out answers, %d alternating rounds of %s per arm:\n", limiterABRounds, ab.round)
	for _, a := range []struct {
		name  string
		rate  float64
		r     WrkResult
		cpu   cpuUse
		lease int64
	}{
		{"per-buyer limit on (production) ", ab.onRate, ab.on, ab.onCPU, ab.onLease},
		{"rate limits off                ", ab.offRate, ab.off, ab.offCPU, ab.offLease},
	} {
		fmt.Printf("             %s %s req/s · p50 %s · p99 %s · %s · under a lease %s of %s · %s\n", a.name, num(a.rate),
			ms(a.r.P50), ms(a.r.P99), statusMix(a.r.Status), num(float64(a.lease)), num(float64(a.r.Requests)), cpuLine(a.cpu))
	}
	fmt.Printf("             on/off %.2f\n", ratio(ab.onRate, ab.offRate))
}
