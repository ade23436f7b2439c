package redisgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/domain"
)

// WithReplicaAcks makes every reservation durable on n replicas before Reserve answers
// Reserved: the script and a WAIT n timeout run on one connection, in one round trip, and a
// reservation that fewer than n replicas acknowledged within timeout is an error wrapping
// domain.ErrUnavailable (the application gives it back, as for any reservation whose reply
// is in doubt). Redis replicates asynchronously: without it, a primary that dies takes its
// last acknowledged reservations with it, and the replica Sentinel promotes has more stock
// than the ledger allows (docs/DESIGN.md, "Redis failover"). n = 0 turns it off. It needs a
// standalone or failover client: WAIT names no key, so a Cluster client cannot route it.
func (g *Gate) WithReplicaAcks(n int, timeout time.Duration) *Gate {
	g.replicas, g.replicaWait = n, timeout
	return g
}

// ErrNotReplicated is what a reservation that its replicas did not acknowledge in time wraps,
// with domain.ErrUnavailable.
var ErrNotReplicated = errors.New("reservation not acknowledged by the replicas in time")

// reserveReplicated runs reserve.lua and WAIT on one connection (a pipeline), the script by
// its digest and, if Redis does not have it (NOSCRIPT: a restarted or new primary), by its
// source. It returns the script's reply and how many replicas acknowledged.
func (g *Gate) reserveReplicated(ctx context.Context, keys []string, args []any) ([]any, int64, error) {
	run := func(bySource bool) (*redis.Cmd, *redis.Cmd, error) {
		var ev *redis.Cmd
		var wait *redis.Cmd
		_, err := g.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if bySource {
				ev = reserveScript.Eval(ctx, p, keys, args...)
			} else {
				ev = reserveScript.EvalSha(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "wait", g.replicas, g.replicaWait.Milliseconds())
			return nil
		})
		if err != nil && ev.Err() == nil {
			err = nil // WAIT's own error is judged below, from its count
		}
		return ev, wait, err
	}
	ev, wait, err := run(false)
	if err != nil && redis.HasErrorPrefix(ev.Err(), "NOSCRIPT") {
		ev, wait, err = run(true)
	}
	if err != nil {
		return nil, 0, err
	}
	reply, err := ev.Slice()
	if err != nil {
		return nil, 0, err
	}
	acked, _ := wait.Int64() // an error reply counts no acknowledgement
	return reply, acked, nil
}

// checkReplicated turns a reservation that wrote without enough acknowledgements into an
// error; replies that wrote nothing pass. A replay of r's own claim (go-redis re-sent the
// pipeline after a lost reply: the first run reserved) is an error too, whatever WAIT said:
// WAIT covers the writes of its own connection, and the re-sent pipeline's connection wrote
// nothing, so its count says nothing of the first run's reservation, which the application
// would otherwise carry on with as reserved.
func (g *Gate) checkReplicated(r domain.Reservation, res domain.ReserveResult, acked int64) error {
	switch {
	case g.replicas == 0:
		return nil
	case res.Outcome == domain.Reserved && acked < int64(g.replicas):
		return fmt.Errorf("redis gate reserve: %w (%d of %d within %s): %w", ErrNotReplicated, acked, g.replicas, g.replicaWait, domain.ErrUnavailable)
	case res.Outcome == domain.Replayed && res.ExistingOrder == r.OrderNo:
		return fmt.Errorf("redis gate reserve: %w (a re-sent reservation found its own claim): %w", ErrNotReplicated, domain.ErrUnavailable)
	}
	return nil
}
