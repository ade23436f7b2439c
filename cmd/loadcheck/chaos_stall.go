package main

// The stall faults of the chaos mode: the instance reaches its Redis and MariaDB through TCP
// proxies (netfault.Proxy) that the fault slows, stalls or cuts, with the servers themselves
// untouched. What they show: a request whose dependency does not answer ends at its deadline
// (CARDSHOP_REQUEST_TIMEOUT) with 503 and Retry-After, goroutines and connections do not pile
// up, and the service serves normally again within seconds of the fault's end.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"cardshop/adapters/lab/netfault"
)

// The stall faults (scenario.fault).
const (
	faultRedisSlow    = "redis-slow"    // every Redis reply 200 ms late
	faultMariaDBStall = "mariadb-stall" // MariaDB answers nothing, connections open
	faultRedisCut     = "redis-cut"     // the network to Redis cut: connections closed, refused
	faultMariaDBCut   = "mariadb-cut"   // the network to MariaDB cut
)

// stallDeadline is the stall scenarios' instance's CARDSHOP_REQUEST_TIMEOUT: the service's
// default (5 s) in the full form, 2 s in the short one, so that the short form's 3 s faults
// outlast it too.
func (e *env) stallDeadline() time.Duration {
	if e.o.short {
		return 2 * time.Second
	}
	return 5 * time.Second
}

// redisSlowBy is the Redis latency of faultRedisSlow.
const redisSlowBy = 200 * time.Millisecond

func stallFault(f string) bool {
	switch f {
	case faultRedisSlow, faultMariaDBStall, faultRedisCut, faultMariaDBCut:
		return true
	}
	return false
}

// faultFor is how long a stall fault lasts: 5 s (the MariaDB stall 10 s) in the full form, 3 s
// in the short one. The scenario's load runs that much longer, so that the fault, which starts
// a third of the way in, ends with load still running after it.
func (e *env) faultFor(f string) time.Duration {
	switch {
	case f == faultLB:
		// the stall, a second, and a new process in the killed one's place (about 2 s)
		return e.lbStallFor() + 3*time.Second
	case f == faultRabbitRestart:
		return e.rabbitFaultFor()
	case e.o.short && (f == faultRedisFailover || f == faultMariaDBKill || f == faultRedisEmpty):
		// A restart or a promotion (2-3.3 s in CI) and the orders' return after it (~2 s)
		// outlast the short form's 4 s after the fault: without more, "placed again" could
		// fall past the end of the run (seen for scenarios 12 and 13).
		return 3 * time.Second
	case !stallFault(f):
		return 0
	case e.o.short:
		return 3 * time.Second
	case f == faultMariaDBStall:
		return 10 * time.Second
	}
	return 5 * time.Second
}

// stallScenarios are the chaos scenarios of the stall faults.
func stallScenarios(codes int) []scenario {
	return []scenario{
		{num: 14, name: "Redis answering 200 ms late for a while", codes: codes, qtyMax: 1, dup: 1, instances: 1, fault: faultRedisSlow},
		{num: 15, name: "MariaDB stalled (connections open, no answer)", codes: codes, qtyMax: 1, dup: 1, instances: 1, fault: faultMariaDBStall},
		{num: 16, name: "network to Redis cut", codes: codes, qtyMax: 1, dup: 1, instances: 1, fault: faultRedisCut},
		{num: 17, name: "network to MariaDB cut", codes: codes, qtyMax: 1, dup: 1, instances: 1, fault: faultMariaDBCut},
	}
}

// proxies are the TCP proxies between the stall scenarios' instance and the own services.
type proxies struct{ redis, maria *netfault.Proxy }

// useProxiedInstance stops the shared instances and starts one that reaches the chaos mode's
// own Redis and MariaDB through proxies; restore stops it and the proxies.
func (e *env) useProxiedInstance(ctx context.Context) (*instance, func(), error) {
	for len(e.instances) > 0 {
		e.stopInstance(e.instances[len(e.instances)-1])
	}
	r, err := netfault.StartProxy(e.own.redisAddr)
	if err != nil {
		return nil, nil, err
	}
	m, err := netfault.StartProxy(e.own.mariaAddr)
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	e.proxies = &proxies{redis: r, maria: m}
	restore := func() {
		for len(e.instances) > 0 {
			e.stopInstance(e.instances[len(e.instances)-1])
		}
		r.Close()
		m.Close()
		e.proxies = nil
	}
	if !strings.Contains(e.dsn, e.own.mariaAddr) {
		restore()
		return nil, nil, fmt.Errorf("the load DSN %q does not name the own MariaDB %s", e.dsn, e.own.mariaAddr)
	}
	in, err := e.startInstance(ctx, "proxied-instance", "127.0.0.1:6092", "CARDSHOP_REDIS_ADDRS="+r.Addr(),
		"CARDSHOP_REQUEST_TIMEOUT="+e.stallDeadline().String(),
		"CARDSHOP_MYSQL_DSN="+strings.Replace(e.dsn, e.own.mariaAddr, m.Addr(), 1))
	if err != nil {
		restore()
		return nil, nil, err
	}
	return in, restore, nil
}

// injectStall applies a stall fault for faultFor, sampling the instance's goroutines and open
// files half-way through, then lifts it.
func (e *env) injectStall(ctx context.Context, fault string, cr *chaosResult, in *instance) error {
	p := e.proxies
	if p == nil {
		return fmt.Errorf("%s: no proxies (the scenario's instance was not started behind them)", fault)
	}
	var start, end func()
	switch fault {
	case faultRedisSlow:
		start, end = func() { p.redis.SetDelay(redisSlowBy) }, func() { p.redis.SetDelay(0) }
	case faultMariaDBStall:
		start, end = p.maria.Stall, p.maria.Resume
	case faultRedisCut:
		start, end = p.redis.Cut, p.redis.Restore
	case faultMariaDBCut:
		start, end = p.maria.Cut, p.maria.Restore
	default:
		return fmt.Errorf("unknown stall fault %q", fault)
	}
	d := e.faultFor(fault)
	start()
	sleepCtx(ctx, d/2)
	cr.goroutines[1], cr.fds[1] = e.instanceLoad(ctx, in)
	sleepCtx(ctx, d-d/2)
	end()
	return nil
}

// stallChecks are the stall scenarios' own checks: every answer came within the request's
// deadline (a second of slack for the machine's scheduling), and the goroutines after the
// fault are back near their number before it.
func stallChecks(cr *chaosResult, max time.Duration, deadline time.Duration) []Check {
	g := cr.goroutines
	return []Check{
		{Name: "chaos: every answer within the request's deadline (CARDSHOP_REQUEST_TIMEOUT)",
			Detail: fmt.Sprintf("slowest answer %s, deadline %s (+1 s slack)", max.Round(time.Millisecond), deadline),
			OK:     max > 0 && max <= deadline+time.Second},
		{Name: "chaos: no goroutine pile-up after the fault",
			Detail: fmt.Sprintf("goroutines %d before, %d during, %d after (at most 2× before + 100)", g[0], g[1], g[2]),
			OK:     g[0] > 0 && g[2] > 0 && g[2] <= 2*g[0]+100},
	}
}
