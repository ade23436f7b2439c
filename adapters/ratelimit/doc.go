// Package ratelimit holds the rate limiters of the HTTP edge (webkit.Limiter): Memory for one
// process (the memory adapter set and tests) and Redis for limits that hold across every
// service instance, because they share their state in Redis and change it atomically.
//
// Both run the same algorithm, GCRA (the generic cell rate algorithm, a leaky bucket kept as
// one timestamp per key). A limit of n per window w lets n requests through at once and then one
// every w/n (the interval); a key that stayed quiet for w has its whole burst back. Per key it
// stores a single time, the "theoretical arrival time" (TAT) at which the bucket is empty again:
// a request is allowed when max(TAT, now) + interval is at most n·interval ahead of now, and
// then moves the TAT there. What that buys over a fixed window: a fixed window lets 2n through
// in an instant at its edge (n at the end of one window, n at the start of the next); GCRA
// never lets more than n through at once, and a refused request learns exactly how long to
// wait. What it does not promise: over a span of length d at most n + d/interval requests pass,
// so a client that spends its burst and then keeps the sustained pace gets up to 2n−1 in one
// window's length — the price of keeping O(1) state per key instead of a log of n timestamps.
//
// The interval is counted in whole microseconds (window/limit rounded down, so the limit is
// never looser than asked); a window shorter than a microsecond per request is an error.
//
// It imports the domain (ErrUnavailable), package lua (the script), adapters/redispipe and
// go-redis.
package ratelimit

import (
	"fmt"
	"time"
)

// rate returns GCRA's interval (window/limit, in whole microseconds so that Memory and the
// Redis script compute the same answers) and its burst, limit intervals: exactly limit
// requests fit at once, and a key left alone for the window (burst <= window) is empty again.
func rate(limit int, window time.Duration) (interval, burst time.Duration, err error) {
	if limit < 1 {
		return 0, 0, fmt.Errorf("rate limit: limit must be at least 1, got %d", limit)
	}
	interval = (window / time.Duration(limit)).Truncate(time.Microsecond)
	if interval < time.Microsecond {
		return 0, 0, fmt.Errorf("rate limit: %d per %v is under a microsecond per request", limit, window)
	}
	return interval, interval * time.Duration(limit), nil
}
