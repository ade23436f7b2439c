package main

// Chaos scenario 19: two instances behind a load balancer that retries, as nginx's
// proxy_next_upstream (with non_idempotent) or Envoy's retry policy do: a request that got no
// answer within the try timeout, or whose connection failed, is sent again, with the same
// Idempotency-Key, to the other instance. One instance is stalled (SIGSTOP: its sockets accept,
// nothing answers), later the other is SIGKILLed and a new process takes its place. The same
// key then reaches both instances, the stalled one answering long after the other did; the
// shop must still place one order per key, and every answer a key got must name that order.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// faultLB is scenario 19's fault (scenario.fault).
const faultLB = "lb-stall-kill"

// lbTryTimeout is the load balancer's timeout of one try (nginx's proxy_read_timeout).
const lbTryTimeout = time.Second

// lbScenario is the chaos scenario of the retrying load balancer.
func lbScenario(codes int) scenario {
	return scenario{num: 19, name: "two instances behind a retrying load balancer: one stalled (SIGSTOP), then the other SIGKILLed",
		codes: codes, qtyMax: 1, dup: 1, instances: 1, fault: faultLB}
}

// lbAnswer is one answer an instance gave to a request the load balancer sent it.
type lbAnswer struct {
	status  int
	orderNo string // the order the answer names ("" if none)
	late    bool   // it came after the load balancer had given up on the try
}

// retryingLB is the load balancer of scenario 19. It records every answer each idempotency
// key got, including those of tries it gave up on, which it leaves running.
type retryingLB struct {
	srv      *http.Server
	url      string
	client   *http.Client
	backends atomic.Pointer[[2]string]
	next     atomic.Uint64

	mu      sync.Mutex
	answers map[string][]lbAnswer // idempotency key → every answer it got
	retried atomic.Int64          // requests sent again to the other instance
	failed  atomic.Int64          // requests neither instance answered (502 to the client)
	pending sync.WaitGroup        // tries still running
}

func startRetryingLB(a, b string) (*retryingLB, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	lb := &retryingLB{url: "http://" + ln.Addr().String(), answers: map[string][]lbAnswer{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute}}}
	lb.backends.Store(&[2]string{a, b})
	lb.srv = &http.Server{Handler: lb, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = lb.srv.Serve(ln) }()
	return lb, nil
}

// setBackend replaces backend i (a new process took the place of a killed one).
func (lb *retryingLB) setBackend(i int, base string) {
	b := *lb.backends.Load()
	b[i] = base
	lb.backends.Store(&b)
}

// close stops serving and waits (up to 30 s) for the tries still running, so that every late
// answer is recorded before the checks read them.
func (lb *retryingLB) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = lb.srv.Shutdown(ctx)
	done := make(chan struct{})
	go func() { lb.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
}

type tryResult struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// ServeHTTP sends the request to one instance, round robin, and to the other one when the
// first gives no answer within lbTryTimeout or its connection fails. A try given up on keeps
// running; its answer is recorded as late.
func (lb *retryingLB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "bad request body", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	first := int(lb.next.Add(1) % 2)
	for try := range 2 {
		i := (first + try) % 2
		if try > 0 {
			lb.retried.Add(1)
		}
		res := make(chan tryResult, 1)
		var given atomic.Bool
		lb.pending.Add(1)
		go func() {
			defer lb.pending.Done()
			tr := lb.send(r, lb.backends.Load()[i], body)
			if key != "" && tr.err == nil {
				lb.record(key, tr, given.Load())
			}
			res <- tr
		}()
		timer := time.NewTimer(lbTryTimeout)
		select {
		case tr := <-res:
			timer.Stop()
			if tr.err != nil {
				continue // connection refused or reset: the other instance
			}
			for k, vs := range tr.header {
				for _, v := range vs {
					w.Header().Add(k, v)
				}
			}
			w.WriteHeader(tr.status)
			_, _ = w.Write(tr.body)
			return
		case <-timer.C:
			given.Store(true)
		case <-r.Context().Done():
			timer.Stop()
			given.Store(true)
			return
		}
	}
	lb.failed.Add(1)
	http.Error(w, `{"code":"bad_gateway","message":"no instance answered"}`, http.StatusBadGateway)
}

func (lb *retryingLB) send(r *http.Request, base string, body []byte) tryResult {
	req, err := http.NewRequest(r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return tryResult{err: err}
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	resp, err := lb.client.Do(req)
	if err != nil {
		return tryResult{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return tryResult{err: err}
	}
	return tryResult{status: resp.StatusCode, header: resp.Header, body: b}
}

func (lb *retryingLB) record(key string, tr tryResult, late bool) {
	a := lbAnswer{status: tr.status, late: late}
	if tr.status/100 == 2 {
		var o struct {
			OrderNo string `json:"order_no"`
		}
		if json.Unmarshal(tr.body, &o) == nil {
			a.orderNo = o.OrderNo
		}
	}
	lb.mu.Lock()
	lb.answers[key] = append(lb.answers[key], a)
	lb.mu.Unlock()
}

// lbTally is what the answers the load balancer recorded show.
type lbTally struct {
	keys, twice, late int
	// conflicting are the keys whose answers name two different orders.
	conflicting []string
	// orders are the order numbers any 2xx answer named, on time or late.
	orders []string
	// unheard are the orders only a late answer named: placed, but the buyer was told
	// something else (409 while the stalled instance still held the request).
	unheard int
}

func (lb *retryingLB) tally() lbTally {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var t lbTally
	seen := map[string]bool{}
	for key, as := range lb.answers {
		t.keys++
		if len(as) > 1 {
			t.twice++
		}
		no, onTime := "", false
		for _, a := range as {
			if a.late {
				t.late++
			}
			if a.orderNo == "" {
				continue
			}
			if !a.late {
				onTime = true
			}
			if no != "" && a.orderNo != no {
				t.conflicting = append(t.conflicting, key)
			}
			no = a.orderNo
			if !seen[a.orderNo] {
				seen[a.orderNo] = true
				t.orders = append(t.orders, a.orderNo)
			}
		}
		if no != "" && !onTime {
			t.unheard++
		}
	}
	return t
}

// useLBPair stops the shared instances and starts two of the scenario's own behind a retrying
// load balancer; the returned instance stands for the load balancer (its base URL), which the
// load, the probe and the payments go through. restore stops them all.
func (e *env) useLBPair(ctx context.Context) (*instance, func(), error) {
	for len(e.instances) > 0 {
		e.stopInstance(e.instances[len(e.instances)-1])
	}
	restore := func() {
		if e.lb != nil {
			e.lb.close()
			e.lb = nil
		}
		for len(e.instances) > 0 {
			e.stopInstance(e.instances[len(e.instances)-1])
		}
	}
	a, err := e.startInstance(ctx, "lb-instance-a", "127.0.0.1:6093")
	if err != nil {
		restore()
		return nil, nil, err
	}
	b, err := e.startInstance(ctx, "lb-instance-b", "127.0.0.1:6094")
	if err != nil {
		restore()
		return nil, nil, err
	}
	lb, err := startRetryingLB(a.base, b.base)
	if err != nil {
		restore()
		return nil, nil, err
	}
	e.lb, e.lbPair = lb, [2]*instance{a, b}
	// The goroutines sampled around the fault are instance A's (the one stalled).
	return &instance{name: "load-balancer", base: lb.url, pprof: a.pprof}, restore, nil
}

// lbStallFor is how long instance A stays stopped: longer than the load balancer's try
// timeout, so that its requests are retried on B.
func (e *env) lbStallFor() time.Duration {
	if e.o.short {
		return 2 * time.Second
	}
	return 3 * time.Second
}

// injectLB stalls instance A (SIGSTOP, then SIGCONT), waits a second, then SIGKILLs instance B
// and starts a new process in its place, which the load balancer then sends to.
func (e *env) injectLB(ctx context.Context, cr *chaosResult) error {
	a, b := e.lbPair[0], e.lbPair[1]
	if a == nil || b == nil || e.lb == nil {
		return errors.New("lb fault: no load-balanced pair (the scenario's instances were not started)")
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP instance A: %w", err)
	}
	sleepCtx(ctx, e.lbStallFor())
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT instance A: %w", err)
	}
	sleepCtx(ctx, time.Second)
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	_ = b.cmd.Wait()
	e.dropInstance(b)
	cr.goroutines[1], cr.fds[1] = e.instanceLoad(ctx, a)
	nb, err := e.startInstance(ctx, "lb-instance-b-restarted", "127.0.0.1:6095")
	if err != nil {
		return err
	}
	e.lb.setBackend(1, nb.base)
	e.lbPair[1] = nb
	return nil
}

// lbChecks are scenario 19's own checks, on the answers the load balancer recorded.
func (e *env) lbChecks(ctx context.Context) ([]Check, error) {
	t := e.lb.tally()
	missing, err := e.notInLedger(ctx, t.orders)
	if err != nil {
		return nil, err
	}
	return []Check{
		{Name: "chaos: the load balancer retried requests on the other instance (the fault reached both)",
			Detail: fmt.Sprintf("%d requests sent again, %d keys answered more than once, %d answers after the try was given up, %d requests neither instance answered",
				e.lb.retried.Load(), t.twice, t.late, e.lb.failed.Load()),
			OK: e.lb.retried.Load() > 0 && t.late > 0},
		{Name: "idempotency: every answer a key got, on time or late, from either instance, names one order",
			Detail: fmt.Sprintf("%d keys, %d of them answered more than once; keys whose answers name two orders: %d%s",
				t.keys, t.twice, len(t.conflicting), examples(t.conflicting)),
			OK: len(t.conflicting) == 0 && t.keys > 0},
		{Name: "chaos: every order an answer named, on time or late, is in the ledger",
			Detail: fmt.Sprintf("%d orders named, %d missing from the ledger%s; %d named only by a late answer (placed while the buyer was told to retry)",
				len(t.orders), len(missing), examples(missing), t.unheard),
			OK: len(missing) == 0 && len(t.orders) > 0},
	}, nil
}
