package main

// Payments during the chaos load: a provider pays the buyers' orders while wrk is still
// ordering, so that the fault meets callbacks in flight as well as orders, and resends every
// callback the service did not acknowledge, as real providers do, until it is acknowledged.

import (
	"context"
	"database/sql"
	"fmt"
	"hash/crc32"
	"sync"
	"time"
)

// livePayConns is the number of callbacks the provider has in flight at once during the
// load: enough to keep up with the orders of the chaos rates, few enough to leave most of the
// machine to the orders.
const livePayConns = 32

// liveResendAfter is how long the provider waits before it resends a callback the service
// did not acknowledge (answered other than 200 success, or not at all).
const liveResendAfter = time.Second

// liveDrainFor bounds how long the provider keeps resending after the load has ended.
const liveDrainFor = 30 * time.Second

// livePayments is the provider's side of the payments made during the load.
type livePayments struct {
	e     *env
	pid   int64
	insts []*instance
	cb    *callbacks

	mu       sync.Mutex
	queue    []liveJob
	waiting  int           // resends scheduled and not yet queued
	wake     chan struct{} // a job was queued, or the run ended
	stopping bool
	given    bool // the drain ran out of time: the provider has given up

	seen     map[string]bool
	picked   []string // the orders whose buyers pay, in the order they were queued
	accepted map[string]bool
	perSec   map[int64][2]int64 // wall-clock second → {acknowledged, refused}
	refused  int64              // callbacks answered other than 200 success (each send counts)
	resentOK int64              // orders acknowledged after at least one refusal
	tried    map[string]bool    // orders whose callback was sent at least once
	gaveUp   []string           // orders sent, never acknowledged within liveDrainFor of the load's end
	unsent   int                // orders picked whose callback was never sent before the provider gave up
	sent     int64
}

type liveJob struct {
	d        due
	attempts int
}

// payShareOf decides, by the order number alone, whether the buyer of an order pays: the
// share e.o.payShare of the orders, the same answer every time it is asked.
func payShareOf(no string, share float64) bool {
	return float64(crc32.ChecksumIEEE([]byte(no))%1000) < share*1000
}

// startLivePayments starts the provider: every 250 ms it looks for the product's new PENDING
// orders and pays the share of them whose buyers pay; stop ends the polling and waits until
// every callback was acknowledged or liveDrainFor has passed.
func (e *env) startLivePayments(ctx context.Context, pid int64, insts []*instance) (*livePayments, func(), error) {
	cb, err := e.newCallbacks(livePayConns)
	if err != nil {
		return nil, nil, err
	}
	p := &livePayments{e: e, pid: pid, insts: insts, cb: cb, wake: make(chan struct{}, 1),
		seen: map[string]bool{}, tried: map[string]bool{}, accepted: map[string]bool{}, perSec: map[int64][2]int64{}}
	pollDone := make(chan struct{})
	stopPoll := make(chan struct{})
	go func() {
		defer close(pollDone)
		p.poll(ctx, stopPoll)
	}()
	var workers sync.WaitGroup
	for w := range livePayConns {
		workers.Go(func() { p.work(ctx, w) })
	}
	stop := func() {
		close(stopPoll)
		<-pollDone
		p.mu.Lock()
		p.stopping = true
		p.mu.Unlock()
		p.signal()
		drained := make(chan struct{})
		go func() { workers.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(liveDrainFor):
		case <-ctx.Done():
		}
		p.mu.Lock()
		p.given, p.queue = true, nil
		p.mu.Unlock()
		select { // the callbacks in flight when the provider gave up: their answers count
		case <-drained:
		case <-ctx.Done():
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, no := range p.picked {
			switch {
			case p.accepted[no]:
			case p.tried[no]:
				p.gaveUp = append(p.gaveUp, no)
			default:
				p.unsent++
			}
		}
	}
	return p, stop, nil
}

func (p *livePayments) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// poll queues the new PENDING orders whose buyers pay. An error (the fault may be MariaDB's)
// is retried at the next tick, as a provider's checkout keeps running while the shop is down.
func (p *livePayments) poll(ctx context.Context, stop chan struct{}) {
	// created_at as MariaDB writes it, compared as text: the load check's connection does not
	// parse times.
	since := "1970-01-01 00:00:00"
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var fresh []due
		latest := since
		err := query(ctx, p.e.db, "SELECT order_no, amount, buyer_id, created_at FROM orders "+
			"WHERE product_id=? AND status='PENDING' AND created_at >= ? ORDER BY created_at LIMIT 5000",
			[]any{p.pid, since}, func(r *sql.Rows) error {
				var d due
				var at string
				if err := r.Scan(&d.no, &d.amount, &d.buyer, &at); err != nil {
					return err
				}
				latest = at
				if !p.seen[d.no] {
					p.seen[d.no] = true
					if payShareOf(d.no, p.e.o.payShare) {
						fresh = append(fresh, d)
					}
				}
				return nil
			})
		if err != nil {
			continue
		}
		since = latest
		if len(fresh) == 0 {
			continue
		}
		p.mu.Lock()
		for _, d := range fresh {
			p.queue = append(p.queue, liveJob{d: d})
			p.picked = append(p.picked, d.no)
		}
		p.mu.Unlock()
		p.signal()
	}
}

// work sends queued callbacks until the run has ended and nothing is queued or waiting.
func (p *livePayments) work(ctx context.Context, w int) {
	for {
		p.mu.Lock()
		if p.given {
			p.mu.Unlock()
			return
		}
		if len(p.queue) == 0 {
			done := p.stopping && p.waiting == 0
			p.mu.Unlock()
			if done || ctx.Err() != nil {
				p.signal() // pass the news on to the next idle worker
				return
			}
			select {
			case <-p.wake:
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		j := p.queue[0]
		p.queue = p.queue[1:]
		more := len(p.queue) > 0
		p.mu.Unlock()
		if more {
			p.signal()
		}

		status := p.cb.send(ctx, j.d, p.insts[(w+j.attempts)%len(p.insts)])
		sec := time.Now().Unix()
		p.mu.Lock()
		p.sent++
		p.tried[j.d.no] = true
		c := p.perSec[sec]
		if status == 200 {
			c[0]++
			p.accepted[j.d.no] = true
			if j.attempts > 0 {
				p.resentOK++
			}
		} else {
			c[1]++
			p.refused++
			p.waiting++
		}
		p.perSec[sec] = c
		p.mu.Unlock()
		if status != 200 && ctx.Err() == nil {
			j.attempts++
			time.AfterFunc(liveResendAfter, func() {
				p.mu.Lock()
				p.waiting--
				if !p.given {
					p.queue = append(p.queue, j)
				}
				p.mu.Unlock()
				p.signal()
			})
		}
	}
}

// rates splits the acknowledged callbacks per second into before, during and after the fault,
// leaving out the seconds the fault started and ended in, as chaosResult.split does for
// orders; refused is the callbacks refused from the fault's start on.
func (p *livePayments) rates(injected, back time.Time) (before, during, after rate, refused int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in, out := injected.Unix(), back.Unix()
	for sec, c := range p.perSec {
		switch {
		case sec < in:
			before.seconds++
			before.answers += c[0]
		case sec > in && sec < out:
			during.seconds++
			during.answers += c[0]
		case sec > out:
			after.seconds++
			after.answers += c[0]
		}
		if sec >= in {
			refused += c[1]
		}
	}
	return before, during, after, refused
}

// summary is the printed line of the payments made during the load.
func (p *livePayments) summary(cr *chaosResult) string {
	before, during, after, refused := p.rates(cr.injected, cr.back)
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d paid while the orders ran (%s/s before · %s during · %s after the fault) · %d callbacks refused from the fault on, "+
		"%d orders paid on a resend · %d never acknowledged · %d not reached before the provider stopped",
		len(p.accepted), before, during, after, refused, p.resentOK, len(p.gaveUp), p.unsent)
}

// checks are the chaos checks of the payments made during the load.
func (p *livePayments) checks() []Check {
	p.mu.Lock()
	defer p.mu.Unlock()
	// An order the provider never reached (its connections busy with the others until it gave
	// up, liveDrainFor after the load) is a buyer who did not pay in time, not a callback the
	// service refused: it is counted, not failed. Every callback sent must be acknowledged.
	return []Check{{Name: "chaos: every callback the fault refused was acknowledged when the provider resent it",
		Detail: fmt.Sprintf("%d callbacks sent for %d orders, %d refused, %d orders paid on a resend, %d sent and never acknowledged%s; "+
			"%d orders not reached before the provider stopped (%d connections, %s after the load)",
			p.sent, len(p.picked), p.refused, p.resentOK, len(p.gaveUp), examples(p.gaveUp), p.unsent, livePayConns, liveDrainFor),
		OK: len(p.gaveUp) == 0 && len(p.accepted) > 0}}
}
