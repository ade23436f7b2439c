package webkit

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// ReadinessCheck is one dependency GET /readyz and the console's dashboard ask: Check returns nil when the dependency
// answers and is usable. Name is what /readyz reports; the error text is only logged.
type ReadinessCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// DefaultReadinessTimeout is how long GET /readyz waits for each check.
const DefaultReadinessTimeout = time.Second

// CheckReadiness runs every check at once, each bounded by timeout (DefaultReadinessTimeout
// when not positive), and returns each check's state by name — "ok", "fail" or "timeout" — and
// the failing names, sorted. A check that ignores its context still answers "timeout" in time
// (its goroutine finishes on its own). Error texts go to log only. GET /readyz and the console's
// dashboard both answer with it.
func CheckReadiness(ctx context.Context, checks []ReadinessCheck, timeout time.Duration, log *slog.Logger) (map[string]string, []string) {
	if timeout <= 0 {
		timeout = DefaultReadinessTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	states := make(map[string]string, len(checks))
	var (
		failing []string
		mu      sync.Mutex
		wg      sync.WaitGroup
	)
	for _, rc := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan error, 1)
			go func() { done <- rc.Check(ctx) }()
			var err error
			select {
			case err = <-done:
			case <-ctx.Done():
				err = ctx.Err()
			}
			state := "ok"
			if err != nil {
				state = "fail"
				if errors.Is(err, context.DeadlineExceeded) {
					state = "timeout"
				}
				log.Warn("readiness check failed", "check", rc.Name, "err", err.Error())
			}
			mu.Lock()
			states[rc.Name] = state
			if err != nil {
				failing = append(failing, rc.Name)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Strings(failing)
	return states, failing
}
