package redisgate

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

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

// reserveDigest is reserve.lua's SHA1, the name EVALSHA runs it by.
var reserveDigest = reserveScript.Hash()

// reservePipelined runs reserve.lua through g.ap as Script.Run would (EVALSHA, and EVAL when
// Redis answers NOSCRIPT), but waits for each reply only while ctx lasts. go-redis ignores the
// deadline of a command in a batch: without this, a stalled link would keep the caller until
// the client's socket timeouts (and its retries) ended the batch.
//
// The wait is all that ends: the script is in a batch already, and runs if the batch reaches
// Redis, its reply dropped. That is a reservation of unknown outcome, as a timeout on the
// plain client leaves, and it is answered the same (an error wrapping domain.ErrUnavailable):
// the application then tries to give it back (Cancel, which changes nothing if the script has
// not run yet), and if the script runs after that, the hold it makes (every reservation makes
// one) is what the orphan sweep finds and releases.
func (g *Gate) reservePipelined(ctx context.Context, keys []string, args []any) ([]any, error) {
	// A request that has already ended sends nothing: what it reserved would only be an orphan.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd, err := g.evalPipelined(ctx, "evalsha", reserveDigest, keys, args)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd, err = g.evalPipelined(ctx, "eval", lua.Reserve, keys, args)
	}
	if err != nil {
		return nil, err
	}
	return cmd.Slice()
}

// evalPipelined queues EVALSHA or EVAL (name) of script on g.ap and waits for the reply while
// ctx lasts. It builds the command as go-redis's own EvalSha and Eval do, because Submit, the
// one way to get a wait that ends with ctx, takes a command rather than making one.
func (g *Gate) evalPipelined(ctx context.Context, name, script string, keys []string, args []any) (*redis.Cmd, error) {
	cmdArgs := make([]any, 3, 3+len(keys)+len(args))
	cmdArgs[0], cmdArgs[1], cmdArgs[2] = name, script, len(keys)
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewCmd(ctx, cmdArgs...)
	cmd.SetFirstKeyPos(3) // a Cluster routes it by its first key, the product's
	if err := g.ap.Submit(ctx, cmd).WaitContext(ctx); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, fmt.Errorf("stopped waiting for the reply, the script may still run: %w", err)
		}
		return nil, err
	}
	return cmd, nil
}
