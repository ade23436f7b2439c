package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/adapters/ratelimit"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func TestMemoryContract(t *testing.T) {
	runContract(t, func(*testing.T) backend {
		clock := memory.NewFakeClock(start)
		m := ratelimit.NewMemory(clock.Now)
		return backend{a: m, b: m, window: time.Minute, wait: func(d time.Duration) { clock.Advance(d) }}
	})
}

// The GCRA arithmetic, step by step on a fake clock: 3 per 30s is a burst of 3, then one
// every 10s.
func TestMemoryGCRA(t *testing.T) {
	clock := memory.NewFakeClock(start)
	m := ratelimit.NewMemory(clock.Now)
	const limit, window = 3, 30 * time.Second
	steps := []struct {
		advance time.Duration
		ok      bool
		wait    time.Duration
	}{
		{0, true, 0},
		{0, true, 0},
		{0, true, 0},
		{0, false, 10 * time.Second}, // the bucket is full until start+30s; one slot frees at +10s
		{4 * time.Second, false, 6 * time.Second},
		{6 * time.Second, true, 0}, // +10s: one slot
		{0, false, 10 * time.Second},
		{25 * time.Second, true, 0}, // +35s: TAT was +40s, so 2.5 intervals have passed: two slots
		{0, true, 0},
		{0, false, 5 * time.Second},
		{time.Hour, true, 0}, // a long pause gives the burst back, never more
		{0, true, 0},
		{0, true, 0},
		{0, false, 10 * time.Second},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		ok, wait, err := m.Allow(t.Context(), "k", limit, window)
		if err != nil || ok != s.ok || wait != s.wait {
			t.Fatalf("step %d (+%v): Allow = %v, %v, %v; want %v, %v", i, clock.Now().Sub(start), ok, wait, err, s.ok, s.wait)
		}
	}
}

// No edge burst: a fixed window would let 2·limit through around its boundary; GCRA lets at
// most the limit through at any instant, wherever the boundary would be.
func TestMemoryNoBurstAtWindowEdge(t *testing.T) {
	clock := memory.NewFakeClock(start)
	m := ratelimit.NewMemory(clock.Now)
	const limit, window = 10, time.Minute
	count := func() int {
		n := 0
		for range 2 * limit {
			if ok, _, _ := m.Allow(t.Context(), "edge", limit, window); ok {
				n++
			}
		}
		return n
	}
	clock.Advance(window - time.Millisecond) // the end of a first window
	if n := count(); n != limit {
		t.Fatalf("first burst: %d allowed, want %d", n, limit)
	}
	clock.Advance(2 * time.Millisecond) // just past the edge
	if n := count(); n != 0 {
		t.Fatalf("%d more allowed just after the edge, want 0", n)
	}
}

func TestRateRoundsTheIntervalDown(t *testing.T) {
	interval, burst, err := ratelimit.Rate(3, time.Second)
	if err != nil || interval != 333333*time.Microsecond || burst != 999999*time.Microsecond {
		t.Fatalf("Rate(3, 1s) = %v, %v, %v", interval, burst, err)
	}
	if _, _, err := ratelimit.Rate(1_000_001, time.Second); err == nil {
		t.Fatal("a sub-microsecond interval was accepted")
	}
}

// Keys whose TAT has passed are dropped, so scanned one-off keys do not pile up.
func TestMemoryPurgesExpiredKeys(t *testing.T) {
	clock := memory.NewFakeClock(start)
	m := ratelimit.NewMemory(clock.Now)
	for i := range 3000 {
		if _, _, err := m.Allow(t.Context(), fmt.Sprintf("ip:%d", i), 10, time.Second); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			clock.Advance(200 * time.Millisecond) // each key's TAT is 100ms after its request
		}
	}
	// Growth sweeps keep the map near the keys of the last interval, never all 3000.
	if n := ratelimit.Len(m); n > 2048 {
		t.Fatalf("%d keys held after 3000 one-off keys, most long expired", n)
	}
	clock.Advance(2 * time.Minute)
	if _, _, err := m.Allow(t.Context(), "late", 10, time.Second); err != nil {
		t.Fatal(err)
	}
	if n := ratelimit.Len(m); n != 1 {
		t.Fatalf("%d keys held a minute after every other key expired, want 1", n)
	}
}

func TestMemoryNilClockIsTheWallClock(t *testing.T) {
	m := ratelimit.NewMemory(nil)
	if ok, _, err := m.Allow(t.Context(), "k", 1, time.Hour); !ok || err != nil {
		t.Fatalf("Allow = %v, %v", ok, err)
	}
	if ok, wait, _ := m.Allow(t.Context(), "k", 1, time.Hour); ok || wait <= 59*time.Minute {
		t.Fatalf("second Allow = %v, %v; want refused for about an hour", ok, wait)
	}
}
