package application

import (
	"context"
	"fmt"
)

// Sweep closes every PENDING order past its expiry, whatever happened to its timeout message
// (lost, broker down, service restarted), and then returns orphan reservations (SweepOrphans),
// so that no reservation leaks. It returns how many orders it closed or looked at plus how many
// orphans it released.
func (s *Shop) Sweep(ctx context.Context) (int, error) {
	seen := 0
	for {
		due, err := s.ledger.Orders().Expired(ctx, s.clock.Now(), s.cfg.SweepBatch)
		if err != nil {
			return seen, fmt.Errorf("list expired orders: %w", err)
		}
		for _, o := range due {
			if err := s.CloseExpired(ctx, o.No()); err != nil {
				return seen, err
			}
		}
		seen += len(due)
		if len(due) < s.cfg.SweepBatch {
			break
		}
	}
	released, err := s.SweepOrphans(ctx)
	return seen + released, err
}
