package application

import (
	"context"
	"errors"
	"fmt"
)

// Sweep closes every PENDING order past its expiry, whatever happened to its timeout message
// (lost, broker down, service restarted), and then returns orphan reservations (SweepOrphans),
// so that no reservation leaks. An order whose payment provider cannot be reached to close its
// open payment is skipped until the next sweep (see CloseExpired). It returns how many orders it closed or looked at plus how many
// orphans it released.
func (s *Shop) Sweep(ctx context.Context) (int, error) {
	seen := 0
	for {
		due, err := s.ledger.Orders().Expired(ctx, s.clock.Now(), s.cfg.SweepBatch)
		if err != nil {
			return seen, fmt.Errorf("list expired orders: %w", err)
		}
		waiting := 0
		for _, o := range due {
			err := s.CloseExpired(ctx, o.No())
			if errors.Is(err, errPaymentOpen) {
				waiting++ // its provider is unreachable: the next sweep tries it again
				continue
			}
			if err != nil {
				return seen, err
			}
		}
		seen += len(due)
		if len(due) < s.cfg.SweepBatch || waiting == len(due) {
			break
		}
	}
	released, err := s.SweepOrphans(ctx)
	return seen + released, err
}
