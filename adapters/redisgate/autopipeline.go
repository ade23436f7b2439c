package redisgate

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/redispipe"
	"cardshop/lua"
)

// WithAutoPipeline makes Reserve, the hot path, run through ap (see AutoPipeliner): concurrent
// reservations share one pipelined round trip instead of a write and a read syscall each. The
// other operations keep the plain client. Through the deferred auto-pipeliner that
// AutoPipeliner returns, Reserve answers by its caller's deadline; a blocking one
// (Client.AutoPipeline) still works, but keeps each caller until its batch ends, which on a
// stalled link is the client's socket timeouts and retries, whatever the caller's deadline.
func (g *Gate) WithAutoPipeline(ap *redis.AutoPipeliner) *Gate {
	if ap.IsBlocking() {
		g.hot, g.ap = ap, nil
	} else {
		g.ap = ap
	}
	return g
}

// AutoPipeliner returns the deferred auto-pipeliner of a standalone or cluster client, the one
// go-redis keeps per client and hands to everyone who asks for it (go-redis marks it
// experimental; the gate's contract suite runs through it too).
//
// Deferred rather than blocking because only with it can a caller stop waiting: go-redis runs
// a batch on a context of its own, so the blocking one keeps its caller until the batch ends.
// It is set up as go-redis sets up the blocking one: one batch in flight at a time, batches of
// up to 300 commands, and several queues to add to (Unordered: each caller waits for its own
// command before sending another, so there is no order between callers to keep).
func AutoPipeliner(c redis.UniversalClient) (*redis.AutoPipeliner, error) {
	opts := &redis.AutoPipelineOptions{MaxBatchSize: 300, MaxConcurrentBatches: 1, Unordered: true}
	switch cc := c.(type) {
	case *redis.Client:
		return cc.AsyncAutoPipelineWithOptions(opts)
	case *redis.ClusterClient:
		return cc.AsyncAutoPipelineWithOptions(opts)
	default:
		return nil, fmt.Errorf("auto-pipelining needs a *redis.Client or *redis.ClusterClient, got %T", c)
	}
}

// reservePipelined is reserve.lua to run through the auto-pipeliner (redispipe).
var reservePipelined = redispipe.NewScript(lua.Reserve)

// reserveThrough runs reserve.lua through g.ap, waiting for the reply only while ctx lasts
// (redispipe.Run); a request that has already ended sends nothing, since what it reserved
// would only be an orphan.
//
// The wait is all that ends: the script is in a batch already, and runs if the batch reaches
// Redis, its reply dropped. That is a reservation of unknown outcome, as a timeout on the
// plain client leaves, and it is answered the same (an error wrapping domain.ErrUnavailable):
// the application then tries to give it back (Cancel, which changes nothing if the script has
// not run yet), and if the script runs after that, the hold it makes (every reservation makes
// one) is what the orphan sweep finds and releases.
func (g *Gate) reserveThrough(ctx context.Context, keys []string, args []any) ([]any, error) {
	cmd, err := redispipe.Run(ctx, g.ap, reservePipelined, keys, args...)
	if err != nil {
		return nil, err
	}
	return cmd.Slice()
}
