package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/redispipe"
	"cardshop/domain"
	"cardshop/lua"
)

// script is ratelimit.lua. Script.Run sends EVALSHA and falls back to EVAL when the server
// answers NOSCRIPT (an empty script cache: a restart, a failover, SCRIPT FLUSH).
var script = redis.NewScript(lua.RateLimit)

// Redis is a GCRA rate limiter whose state lives in Redis (standalone or Cluster), so every
// service instance on the same Redis shares each limit. One key per limit key, rl:{<key>}: the
// braces are a Cluster hash tag, which keeps the key whole in one slot whatever <key> holds;
// WithKeyPrefix(p) names it p:rl:{<key>}, so shops that share one Redis keep their own limits.
// Each Allow is one run of ratelimit.lua, atomic on the server and judged by Redis's clock. It
// is safe for concurrent use.
type Redis struct {
	run redis.Scripter
	// ap is the deferred auto-pipeliner Allow queues its script on (WithAutoPipeline), waiting
	// for the reply only while its caller's context lasts; nil runs it on run.
	ap *redis.AutoPipeliner
	// ns starts every key name: "" or a namespace and ':' (WithKeyPrefix).
	ns string
}

// NewRedis returns a limiter on c, a standalone, failover or Cluster client. It does not own c:
// closing it is the caller's business.
func NewRedis(c redis.UniversalClient) *Redis { return &Redis{run: c} }

// WithAutoPipeline makes Allow run through ap (the client's auto-pipeliner, see
// redisgate.AutoPipeliner): under load, concurrent checks share round trips instead of costing
// a write and a read syscall each, as the gate's reservations do. Through a deferred
// auto-pipeliner Allow answers by its caller's deadline or cancellation; a blocking one works
// too, but keeps each caller until its batch ends (go-redis runs a batch on a context of its
// own), which on a stalled link is the client's socket timeouts and retries.
func (r *Redis) WithAutoPipeline(ap *redis.AutoPipeliner) *Redis {
	if ap.IsBlocking() {
		r.run, r.ap = ap, nil
	} else {
		r.ap = ap
	}
	return r
}

// WithKeyPrefix puts every limit of r under the namespace prefix: p:rl:{<key>} instead of
// rl:{<key>} ("" keeps the names without a namespace). The prefix goes before the hash tag and
// must hold no '{' or '}': WithKeyPrefix panics on one, as regexp.MustCompile does on a bad
// expression (the configuration refuses such a prefix first). Call it before r's first use.
func (r *Redis) WithKeyPrefix(prefix string) *Redis {
	if strings.ContainsAny(prefix, "{}") {
		panic(fmt.Sprintf("ratelimit: key prefix %q holds a hash tag brace", prefix))
	}
	r.ns = ""
	if prefix != "" {
		r.ns = prefix + ":"
	}
	return r
}

// pipelined is ratelimit.lua to run through the auto-pipeliner (redispipe).
var pipelined = redispipe.NewScript(lua.RateLimit)

// runScript runs ratelimit.lua with keys and args: on the plain client (or a blocking
// auto-pipeliner) through Script.Run, which honours ctx as the client does; through the
// deferred auto-pipeliner with redispipe.Run, which waits for the reply only while ctx lasts
// and sends nothing for a request that has already ended (it would only charge the budget).
// A script already in a batch still runs when the batch reaches Redis, and charges its
// request, which did not go ahead (the limiter failed open for it or the request ended): one
// request's worth of a buyer's budget, the same as a reply lost on the plain client.
func (r *Redis) runScript(ctx context.Context, keys []string, args ...any) ([]int64, error) {
	if r.ap == nil {
		return script.Run(ctx, r.run, keys, args...).Int64Slice()
	}
	cmd, err := redispipe.Run(ctx, r.ap, pipelined, keys, args...)
	if err != nil {
		return nil, err
	}
	return cmd.Int64Slice()
}

// redisKey names the Redis key that holds the limit of key.
func (r *Redis) redisKey(key string) string { return r.ns + "rl:{" + key + "}" }

// Allow charges one request to key against limit requests per window, atomically for every
// instance on this Redis. It reports whether the request may go ahead and, when not, how long
// until one would be allowed. A limit below 1 or a window under a microsecond per request is an
// error; every failure to get an answer from Redis wraps domain.ErrUnavailable (the caller
// cannot act differently on "unreachable" and "answered with an error": either way it has no
// verdict). It answers by ctx's deadline or cancellation, through the deferred auto-pipeliner
// too (then the error wraps ctx's error as well).
func (r *Redis) Allow(ctx context.Context, key string, limit int, window time.Duration) (bool, time.Duration, error) {
	interval, burst, err := rate(limit, window)
	if err != nil {
		return false, 0, err
	}
	reply, err := r.runScript(ctx, []string{r.redisKey(key)}, interval.Microseconds(), burst.Microseconds())
	if err != nil {
		return false, 0, fmt.Errorf("redis rate limit: %w: %w", domain.ErrUnavailable, err)
	}
	if len(reply) != 2 || reply[0] != 0 && reply[0] != 1 || reply[1] < 0 {
		return false, 0, fmt.Errorf("redis rate limit: %w: reply %v, want {0 or 1, wait}", domain.ErrUnavailable, reply)
	}
	if reply[0] == 1 {
		return true, 0, nil
	}
	return false, time.Duration(reply[1]) * time.Microsecond, nil
}
