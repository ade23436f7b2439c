// Package redispipe runs a Lua script through go-redis's deferred auto-pipeliner as
// Script.Run would (EVALSHA, and EVAL when Redis answers NOSCRIPT), but waits for each reply
// only while its caller's context lasts. go-redis runs a batch on a context of its own and
// ignores the deadline of a command in it: without this, a stalled link keeps the caller until
// the client's socket timeouts (and its retries) end the batch. The gate's reservations and
// the rate limiter's checks go through it.
//
// It imports go-redis and the standard library.
package redispipe

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script to run through an auto-pipeliner: its source and its SHA1, the name
// EVALSHA runs it by.
type Script struct {
	src, digest string
}

// NewScript returns src as a Script.
func NewScript(src string) Script { return Script{src: src, digest: redis.NewScript(src).Hash()} }

// Run queues s with keys and args on ap and waits for the reply while ctx lasts. A context
// that has already ended sends nothing and returns its error. When ctx ends during the wait,
// the error wraps ctx's and says so; what ends is the wait only: the script is in a batch
// already and runs if the batch reaches Redis, its reply dropped, so the caller must treat the
// outcome as unknown.
func Run(ctx context.Context, ap *redis.AutoPipeliner, s Script, keys []string, args ...any) (*redis.Cmd, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd, err := eval(ctx, ap, "evalsha", s.digest, keys, args)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd, err = eval(ctx, ap, "eval", s.src, keys, args)
	}
	return cmd, err
}

// eval queues EVALSHA or EVAL (name) of script on ap and waits for the reply while ctx lasts.
// It builds the command as go-redis's own EvalSha and Eval do, because Submit, the one way to
// get a wait that ends with ctx, takes a command rather than making one.
func eval(ctx context.Context, ap *redis.AutoPipeliner, name, script string, keys []string, args []any) (*redis.Cmd, error) {
	cmdArgs := make([]any, 3, 3+len(keys)+len(args))
	cmdArgs[0], cmdArgs[1], cmdArgs[2] = name, script, len(keys)
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewCmd(ctx, cmdArgs...)
	cmd.SetFirstKeyPos(3) // a Cluster routes it by its first key
	if err := ap.Submit(ctx, cmd).WaitContext(ctx); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, fmt.Errorf("stopped waiting for the reply, the script may still run: %w", err)
		}
		return nil, err
	}
	return cmd, nil
}
