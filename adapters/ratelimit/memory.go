package ratelimit

import (
	"context"
	"sync"
	"time"
)

// sweepEvery is how often (by the limiter's clock) Memory drops the keys whose TAT has passed,
// at the latest; it also sweeps whenever the map has doubled since the last sweep, so a flood
// of one-off keys (scanned IPs) cannot grow it without bound between two sweeps.
const sweepEvery = time.Minute

// minSweepSize is the map size below which growth alone never triggers a sweep.
const minSweepSize = 1024

// Memory is a GCRA rate limiter in this process's memory: a limit holds per instance only. It
// is safe for concurrent use. Keys whose TAT has passed are purged (they mean the same as a key
// never seen), so its size follows the keys active within their window.
type Memory struct {
	clock func() time.Time

	mu        sync.Mutex
	tats      map[string]time.Time
	nextSweep time.Time
	sweepSize int
}

// NewMemory returns an empty limiter reading the time from clock (time.Now when nil).
func NewMemory(clock func() time.Time) *Memory {
	if clock == nil {
		clock = time.Now
	}
	return &Memory{clock: clock, tats: map[string]time.Time{}, sweepSize: minSweepSize}
}

// Allow charges one request to key against limit requests per window. It reports whether the
// request may go ahead and, when not, how long until one would be allowed. Only a limit below 1
// or a window under a microsecond per request is an error; ctx is not used.
func (m *Memory) Allow(_ context.Context, key string, limit int, window time.Duration) (bool, time.Duration, error) {
	interval, burst, err := rate(limit, window)
	if err != nil {
		return false, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The clock is read under the lock, so the TATs move in the order the requests are judged.
	now := m.clock()
	m.sweep(now)
	tat, ok := m.tats[key]
	if !ok || tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	if wait := next.Sub(now) - burst; wait > 0 {
		return false, wait, nil
	}
	m.tats[key] = next
	return true, 0, nil
}

// sweep drops the keys whose TAT has passed, when it is time to (see sweepEvery). The cost is
// amortised: a growth sweep runs only after as many insertions as the map held.
func (m *Memory) sweep(now time.Time) {
	if now.Before(m.nextSweep) && len(m.tats) < m.sweepSize {
		return
	}
	for k, tat := range m.tats {
		if !tat.After(now) {
			delete(m.tats, k)
		}
	}
	m.nextSweep = now.Add(sweepEvery)
	m.sweepSize = max(2*len(m.tats), minSweepSize)
}
