package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// limiter is webkit.Limiter, restated so that these tests need not import the web doors' kit.
type limiter interface {
	Allow(ctx context.Context, key string, limit int, window time.Duration) (bool, time.Duration, error)
}

// backend is one limiter implementation under the contract.
type backend struct {
	// a and b are two instances that must share every limit (two service instances on one
	// Redis; for Memory, the same limiter twice).
	a, b limiter
	// window is the window the cases use: long enough that a burst of calls finishes well
	// within one interval (window/limit) of a real clock.
	window time.Duration
	// wait lets at least d pass on the backend's clock.
	wait func(d time.Duration)
	// parallel runs the cases in parallel (they use distinct keys) to overlap real waits.
	parallel bool
}

// contractLimit is the limit the cases use; each race sends 5 times as many calls.
const contractLimit = 5

// runContract checks the behaviour every Limiter must have: exactly the limit of a concurrent
// burst goes through, with a Retry-After no longer than one interval for the rest; the window
// gives the whole burst back; one interval gives one request back; keys are independent; and
// instances share the budget.
func runContract(t *testing.T, newBackend func(t *testing.T) backend) {
	const n = contractLimit
	cases := []struct {
		name string
		run  func(t *testing.T, be backend, key string)
	}{
		{"a burst gets exactly the limit, and again after the window", func(t *testing.T, be backend, key string) {
			interval := be.window / n
			allowed, waits := race(t, []limiter{be.a}, key, 5*n, be.window)
			if allowed != n {
				t.Fatalf("%d of %d concurrent calls allowed, want exactly %d", allowed, 5*n, n)
			}
			for _, w := range waits {
				if w <= 0 || w > interval {
					t.Fatalf("refused with retry after %v, want within (0, %v]", w, interval)
				}
			}
			be.wait(be.window)
			if allowed, _ := race(t, []limiter{be.a}, key, 5*n, be.window); allowed != n {
				t.Fatalf("after the window: %d of %d concurrent calls allowed, want exactly %d", allowed, 5*n, n)
			}
		}},
		{"one interval gives one request back", func(t *testing.T, be backend, key string) {
			exhaust(t, be.a, key, n, be.window)
			ok, wait := allow(t, be.a, key, n, be.window)
			if ok {
				t.Fatal("allowed past the limit")
			}
			be.wait(wait)
			if ok, _ := allow(t, be.a, key, n, be.window); !ok {
				t.Fatalf("refused after waiting the retry after (%v)", wait)
			}
			if ok, _ := allow(t, be.a, key, n, be.window); ok {
				t.Fatal("two requests allowed after waiting one interval")
			}
		}},
		{"keys are independent", func(t *testing.T, be backend, key string) {
			exhaust(t, be.a, key, n, be.window)
			other := key + ":other"
			if allowed, _ := race(t, []limiter{be.a}, other, 5*n, be.window); allowed != n {
				t.Fatalf("another key got %d of %d, want %d", allowed, 5*n, n)
			}
			if ok, _ := allow(t, be.a, key, n, be.window); ok {
				t.Fatal("the first key was refilled by the second")
			}
		}},
		{"instances share the budget", func(t *testing.T, be backend, key string) {
			if allowed, _ := race(t, []limiter{be.a, be.b}, key, 5*n, be.window); allowed != n {
				t.Fatalf("two instances together allowed %d of %d, want exactly %d", allowed, 5*n, n)
			}
			for _, l := range []limiter{be.a, be.b} {
				if ok, _ := allow(t, l, key, n, be.window); ok {
					t.Fatal("an instance allowed past the shared limit")
				}
			}
		}},
		{"invalid limits are errors", func(t *testing.T, be backend, key string) {
			for _, c := range []struct {
				limit  int
				window time.Duration
			}{{0, time.Minute}, {-1, time.Minute}, {1, 0}, {1000, time.Millisecond / 2}} {
				if _, _, err := be.a.Allow(t.Context(), key, c.limit, c.window); err == nil {
					t.Errorf("Allow(limit %d, window %v) = nil error", c.limit, c.window)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := newBackend(t)
			if be.parallel {
				t.Parallel()
			}
			c.run(t, be, fmt.Sprintf("test:%016x", rand.Uint64()))
		})
	}
}

// race sends calls concurrent Allow calls for key, spread round-robin over the instances,
// released together, and returns how many were allowed and the waits of those refused.
func race(t *testing.T, instances []limiter, key string, calls int, window time.Duration) (int, []time.Duration) {
	t.Helper()
	var (
		start sync.WaitGroup
		done  sync.WaitGroup
		mu    sync.Mutex
		n     int
		waits []time.Duration
		errs  []error
	)
	start.Add(1)
	for i := range calls {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			ok, wait, err := instances[i%len(instances)].Allow(context.Background(), key, contractLimit, window)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case ok:
				n++
			default:
				waits = append(waits, wait)
			}
		}()
	}
	start.Done()
	done.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d calls failed, the first: %v", len(errs), errs[0])
	}
	return n, waits
}

func allow(t *testing.T, l limiter, key string, limit int, window time.Duration) (bool, time.Duration) {
	t.Helper()
	ok, wait, err := l.Allow(t.Context(), key, limit, window)
	if err != nil {
		t.Fatalf("Allow: %v", err)
	}
	if ok && wait != 0 || !ok && wait <= 0 {
		t.Fatalf("Allow = %v with retry after %v", ok, wait)
	}
	return ok, wait
}

// exhaust spends key's whole burst, one call after the other.
func exhaust(t *testing.T, l limiter, key string, limit int, window time.Duration) {
	t.Helper()
	for i := range limit {
		if ok, _ := allow(t, l, key, limit, window); !ok {
			t.Fatalf("call %d of %d refused", i+1, limit)
		}
	}
}
