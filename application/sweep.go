package application

import (
	"context"
	"fmt"
)

// Sweep closes every PENDING order past its expiry, whatever happened to its timeout message
// (lost, broker down, service restarted), so that no reservation leaks. It returns how many
// orders it looked at.
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
			return seen, nil
		}
	}
}
