package redisgate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/lab/netfault"
	"cardshop/adapters/porttest"
	"cardshop/adapters/redisgate"
	"cardshop/domain"
)

// A Redis that stops answering (a stalled link: no error, only silence) must not keep a
// reservation past its caller's deadline, or past its cancellation, when it goes through the
// auto-pipeliner: go-redis runs a batch on a context of its own, which only the socket
// timeouts end (3 s here, then its retries). The answer is ErrUnavailable, as for a timeout on
// the plain client, so the application gives the reservation back or leaves it to the orphan
// sweep. The script held in the stalled link still runs once the link moves again: its units
// must then be held by a hold the sweep finds and can release, and the gate must serve again.
func TestReserveThroughTheAutoPipelinerAnswersByTheCallersDeadline(t *testing.T) {
	standalone(t) // skips or fails as RequireService says when Redis is down
	proxy := netfault.NewProxy(t, porttest.RedisAddr)
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: standaloneDB,
		ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		t.Fatal(err)
	}
	g := redisgate.New(c).WithAutoPipeline(ap)
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
			p := porttest.NewProductID()
			rebuild(t, g, p, domain.GateLevels{Stock: 10})
			reserve(t, g, newReservation(p, 1), domain.Reserved) // the script cached, a connection open

			r := newReservation(p, 2)
			proxy.Stall()
			defer proxy.Resume() // a failed check must not leave the link stalled for the others
			ctx, cancel := tc.ctx()
			start := time.Now()
			_, err := g.Reserve(ctx, r)
			took := time.Since(start)
			cancel()
			proxy.Resume()
			t.Logf("answered in %v: %v", took, err)
			if took > wait+700*time.Millisecond {
				t.Errorf("Reserve on a stalled Redis answered after %v, want by its %v %s", took, wait, tc.name)
			}
			if !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, tc.want) {
				t.Errorf("Reserve on a stalled Redis: err = %v; want ErrUnavailable and %v", err, tc.want)
			}

			// The stalled script runs now: every unit taken is held, the late reservation's
			// among them, and releasing it (what the orphan sweep does once it is OrphanAfter
			// old) gives its units back.
			waitFor(t, "the stalled reservation to run", func() bool {
				l, ok, err := g.Levels(t.Context(), p)
				return err == nil && ok && l.Sold == 3
			})
			holds, err := g.Holds(t.Context(), p, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			held, late := 0, domain.Hold{}
			for _, h := range holds {
				held += h.Qty
				if h.OrderNo == r.OrderNo {
					late = h
				}
			}
			if held != 3 || late.Qty != 2 {
				t.Fatalf("holds %+v: %d units held, want the 3 sold, 2 of them by %s", holds, held, r.OrderNo)
			}
			if ok, err := g.ReleaseOrphan(t.Context(), late); err != nil || !ok {
				t.Fatalf("ReleaseOrphan of the late reservation = %v, %v; want true", ok, err)
			}
			wantLevels(t, g, p, domain.GateLevels{Stock: 9, Sold: 1})

			// The gate serves again through the same auto-pipeliner.
			ctx, cancel = context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			if res, err := g.Reserve(ctx, newReservation(p, 1)); err != nil || res.Outcome != domain.Reserved || res.Left != 8 {
				t.Fatalf("Reserve after the stall = %+v, %v; want Reserved with 8 left", res, err)
			}
		})
	}
}

// A request that has already given up sends nothing: a reservation made for it would only be
// an orphan to sweep.
func TestReserveThroughTheAutoPipelinerSendsNothingForAnEndedRequest(t *testing.T) {
	c := standalone(t)
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		t.Fatal(err)
	}
	g, p := redisgate.New(c).WithAutoPipeline(ap), porttest.NewProductID()
	rebuild(t, g, p, domain.GateLevels{Stock: 10})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = g.Reserve(ctx, newReservation(p, 1))
	if !errors.Is(err, domain.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve with a cancelled context: err = %v; want ErrUnavailable and context.Canceled", err)
	}
	time.Sleep(50 * time.Millisecond) // what was sent has run by now
	wantLevels(t, g, p, domain.GateLevels{Stock: 10})
}

// After the script cache is emptied (a restart, a failover, SCRIPT FLUSH), a reservation through
// the auto-pipeliner still runs: EVALSHA answers NOSCRIPT and the script is sent whole. So it
// does through a blocking auto-pipeliner, which the gate still takes (without the deadline).
func TestReserveThroughTheAutoPipelinerAfterTheScriptCacheIsFlushed(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		log := &commandLog{}
		c.AddHook(log)
		for _, face := range []struct {
			name string
			get  func(redis.UniversalClient) (*redis.AutoPipeliner, error)
		}{{"deferred", redisgate.AutoPipeliner}, {"blocking", redis.UniversalClient.AutoPipeline}} {
			ap, err := face.get(c)
			if err != nil {
				t.Fatal(err)
			}
			g, p := redisgate.New(c).WithAutoPipeline(ap), porttest.NewProductID()
			rebuild(t, g, p, domain.GateLevels{Stock: 10})
			flushScripts(t, c)
			for i, want := range []string{"evalsha NOSCRIPT, eval ok", "evalsha ok"} { // flushed, then cached again
				log.take()
				if res := reserve(t, g, newReservation(p, 2), domain.Reserved); res.Left != int64(8-2*i) {
					t.Fatalf("%s: Reserve #%d left %d, want %d", face.name, i+1, res.Left, 8-2*i)
				}
				// One reservation at a time: each command is a batch of its own, which go-redis
				// runs through the process hooks. Another test process running reserve.lua in the
				// instant after the flush would spare us the NOSCRIPT; this package runs its tests
				// one at a time.
				var sent []string
				for _, l := range log.take() {
					if strings.HasPrefix(l, "eval") { // not the HELLO of the pipeliner's own connection
						sent = append(sent, l)
					}
				}
				if got := strings.Join(sent, ", "); got != want {
					t.Fatalf("%s: Reserve #%d sent %q, want %q", face.name, i+1, got, want)
				}
			}
		}
	})
}

// BenchmarkReserveAutoPipelined is BenchmarkReserve through the auto-pipeliner, as the service
// reserves, with many requests in flight: "background" without a deadline, "request" with a
// deadline whose timer is made only when something waits on it, as the service's request
// context is (httpapi), so that the cost of waiting on the caller's deadline shows.
func BenchmarkReserveAutoPipelined(b *testing.B) {
	c := standalone(b)
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		b.Fatal(err)
	}
	g := redisgate.New(c).WithAutoPipeline(ap)
	for _, bc := range []struct {
		name     string
		deadline bool
	}{{"background", false}, {"request", true}} {
		b.Run(bc.name, func(b *testing.B) {
			p := porttest.NewProductID()
			if err := g.Rebuild(b.Context(), p, domain.GateLevels{Stock: 1 << 40}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetParallelism(32) // many requests in flight, as under a flash sale
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := newReservation(p, 1)
					r.KeyTTL = 30 * time.Second // the claims of a long run go away on their own
					ctx, release := context.Background(), func() {}
					if bc.deadline {
						l := newLazyDeadline(time.Second)
						ctx, release = l, l.release
					}
					res, err := g.Reserve(ctx, r)
					release()
					if err != nil || res.Outcome != domain.Reserved {
						b.Errorf("Reserve = %+v, %v", res, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// lazyDeadline is a context with a deadline whose timer is made by the first wait on it, as
// the service's request context is (httpapi's lazyDeadline, a copy cut to what the benchmark
// needs).
type lazyDeadline struct {
	at    time.Time
	once  sync.Once
	timed atomic.Pointer[context.Context]
	stop  context.CancelFunc
}

func newLazyDeadline(d time.Duration) *lazyDeadline { return &lazyDeadline{at: time.Now().Add(d)} }

func (l *lazyDeadline) Deadline() (time.Time, bool) { return l.at, true }

func (l *lazyDeadline) Done() <-chan struct{} {
	l.once.Do(func() {
		ctx, stop := context.WithDeadline(context.Background(), l.at)
		l.stop = stop
		l.timed.Store(&ctx)
	})
	return (*l.timed.Load()).Done()
}

func (l *lazyDeadline) Err() error {
	if ctx := l.timed.Load(); ctx != nil {
		return (*ctx).Err()
	}
	if !time.Now().Before(l.at) {
		return context.DeadlineExceeded
	}
	return nil
}

func (l *lazyDeadline) Value(any) any { return nil }

// release stops the timer, if one was made (by the goroutine that made it, after the call).
func (l *lazyDeadline) release() {
	if l.timed.Load() != nil {
		l.stop()
	}
}
