package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/lab/netfault"
	"cardshop/adapters/porttest"
	"cardshop/adapters/ratelimit"
	"cardshop/adapters/redisgate"
	"cardshop/domain"
)

// pipelinedLimiter returns a limiter through the deferred auto-pipeliner of c, as production
// runs it with CARDSHOP_REDIS_AUTOPIPELINE.
func pipelinedLimiter(t *testing.T, c redis.UniversalClient) *ratelimit.Redis {
	t.Helper()
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		t.Fatal(err)
	}
	return ratelimit.NewRedis(c).WithAutoPipeline(ap)
}

// uniqueKey is a limit key no other test or run uses.
func uniqueKey(t *testing.T) string { return t.Name() + ":" + time.Now().Format(time.RFC3339Nano) }

// A Redis that stops answering (a stalled link: no error, only silence) must not keep a rate
// limit check past its caller's deadline, or past its cancellation, when it goes through the
// auto-pipeliner: go-redis runs a batch on a context of its own, which only the socket
// timeouts end (3 s here, then its retries). The answer is ErrUnavailable (the edge lets the
// request through, and the request's own deadline then ends what follows) wrapping the
// context's error; once the link moves again the limiter answers as before.
func TestAllowThroughTheAutoPipelinerAnswersByTheCallersDeadline(t *testing.T) {
	standalone(t) // skips or fails as RequireService says when Redis is down
	proxy := netfault.NewProxy(t, porttest.RedisAddr)
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: standaloneDB,
		ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	l := pipelinedLimiter(t, c)
	const wait = 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), wait)
		}, context.DeadlineExceeded},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(wait, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := uniqueKey(t)
			// The script cached and a connection open before the stall.
			if ok, _, err := l.Allow(t.Context(), key, 10, time.Minute); !ok || err != nil {
				t.Fatalf("Allow before the stall = %v, %v", ok, err)
			}

			proxy.Stall()
			defer proxy.Resume() // a failed check must not leave the link stalled for the others
			ctx, cancel := tc.ctx()
			start := time.Now()
			ok, _, err := l.Allow(ctx, key, 10, time.Minute)
			took := time.Since(start)
			cancel()
			proxy.Resume()
			t.Logf("answered in %v: %v", took, err)
			if took > wait+700*time.Millisecond {
				t.Errorf("Allow on a stalled Redis answered after %v, want by its %v %s", took, wait, tc.name)
			}
			if ok || !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, tc.want) {
				t.Errorf("Allow on a stalled Redis = %v, %v; want ErrUnavailable and %v", ok, err, tc.want)
			}

			// The limiter answers again through the same auto-pipeliner, and the budget is
			// the limit's: 10 per minute, one taken before the stall and at most one by the
			// stalled check (its script still runs when the batch reaches Redis).
			ctx, cancel = context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			allowed := 0
			for range 10 {
				ok, _, err := l.Allow(ctx, key, 10, time.Minute)
				if err != nil {
					t.Fatalf("Allow after the stall: %v", err)
				}
				if ok {
					allowed++
				}
			}
			if allowed != 8 && allowed != 9 {
				t.Fatalf("after the stall %d of 10 checks allowed, want 9 (or 8 if the stalled one ran)", allowed)
			}
		})
	}
}

// A request that has already given up sends nothing: it would only charge the buyer's budget.
func TestAllowThroughTheAutoPipelinerSendsNothingForAnEndedRequest(t *testing.T) {
	c := standalone(t)
	l, key := pipelinedLimiter(t, c), uniqueKey(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ok, _, err := l.Allow(ctx, key, 10, time.Minute)
	if ok || !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Allow with a cancelled context = %v, %v; want ErrUnavailable and context.Canceled", ok, err)
	}
	time.Sleep(50 * time.Millisecond) // what was sent has run by now
	if n, err := c.Exists(t.Context(), ratelimit.RedisKey(key)).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s = %d, %v; want 0: an ended request charged the budget", ratelimit.RedisKey(key), n, err)
	}
}

// After the script cache is emptied (a restart, a failover, SCRIPT FLUSH), a check through the
// deferred auto-pipeliner still runs: EVALSHA answers NOSCRIPT and the script is sent whole.
func TestAllowThroughTheAutoPipelinerAfterTheScriptCacheIsFlushed(t *testing.T) {
	c := standalone(t)
	l, key := pipelinedLimiter(t, c), uniqueKey(t)
	for i := range 3 {
		if err := c.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := l.Allow(t.Context(), key, 2, time.Minute); ok != (i < 2) || err != nil {
			t.Fatalf("check %d after SCRIPT FLUSH = %v, %v; want %v", i+1, ok, err, i < 2)
		}
	}
}
