package application

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"cardshop/domain"
)

// errLostRace tells a use case that a conditional update lost to a concurrent one: re-read
// the order and decide again.
var errLostRace = errors.New("lost a race on the order's status")

// maxRaceRetries bounds how often a use case re-reads an order after losing a race.
const maxRaceRetries = 5

// errInFlight tells a use case that another attempt holds the order's late reservation and is
// settling the order: wait, then re-read the order and decide again.
var errInFlight = errors.New("another attempt is settling the order")

// settle is the optimistic-concurrency loop of every use case that changes an order: step
// reads the order, decides, and makes one conditional change. settle runs step again until it
// neither loses a race nor finds another attempt in flight:
//
//   - a lost race (errLostRace) is retried at once, up to maxRaceRetries times;
//   - an attempt in flight (errInFlight) is waited for with a growing pause, up to wait.
//
// When either limit is reached the answer is ErrUnavailable, always: the order keeps being
// changed by others, so the caller (a provider's retry, the timeout consumer's requeue, an
// operator) tries again later and finds it as the others left it.
func settle[T any](ctx context.Context, wait time.Duration, what string, step func() (T, error)) (T, error) {
	deadline := time.Now().Add(wait)
	pause := 5 * time.Millisecond
	for races := 0; ; {
		out, err := step()
		switch {
		case errors.Is(err, errLostRace):
			races++
			if races >= maxRaceRetries {
				var zero T
				return zero, fmt.Errorf("%s: lost %d races for the order: %w", what, races, domain.ErrUnavailable)
			}
		case errors.Is(err, errInFlight):
			if !time.Now().Before(deadline) {
				var zero T
				return zero, fmt.Errorf("%s: %w: %w", what, err, domain.ErrUnavailable)
			}
			if err := sleep(ctx, pause); err != nil {
				var zero T
				return zero, fmt.Errorf("%s: %w: %w", what, err, domain.ErrUnavailable)
			}
			pause = min(2*pause, 100*time.Millisecond)
		default:
			return out, err
		}
	}
}

// sleep waits d, or less when ctx ends (then it returns ctx's error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attemptToken is a random token naming one attempt (a late reservation's fingerprint, a
// rebuild's fence).
func attemptToken(kind string) string {
	return fmt.Sprintf("%s:%016x%016x", kind, rand.Uint64(), rand.Uint64())
}
