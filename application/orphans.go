package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cardshop/domain"
)

// SweepOrphans returns the stock of reservations whose orders were never written: the service
// stopped (crash, kill, deploy) after the gate reserved and before the ledger transaction, so
// nothing else would ever give the units back — no order means no timeout, no close, no
// compensation. The gate tracks every keyed reservation as a hold; for each product of the
// catalogue, holds older than Config.OrphanAfter are checked against the ledger in batches of
// Config.SweepBatch (one Existing query per batch): a written order's hold is forgotten (its
// units now follow the order's life cycle), a missing order's hold is released — units back to
// the stock, the buyer's key freed — and an "orphan_reservation_released" alert raised. The
// sweeper runs it after closing expired orders (Sweep).
//
// It returns how many holds it released. A product whose pass fails does not stop the others;
// the errors are joined. Errors: ErrUnavailable (the next pass tries again; releasing is
// atomic and idempotent at the gate, so a pass cut short is harmless).
func (s *Shop) SweepOrphans(ctx context.Context) (int, error) {
	products, err := s.ledger.Products().Products(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep orphans: list products: %w", err)
	}
	now := s.clock.Now()
	cutoff := now.Add(-s.cfg.OrphanAfter)
	released := 0
	var errs []error
	for _, p := range products {
		n, err := s.sweepOrphansOf(ctx, p.ID(), cutoff, now)
		released += n
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	return released, errors.Join(errs...)
}

// sweepOrphansOf settles the product's holds taken at or before cutoff, a batch at a time.
func (s *Shop) sweepOrphansOf(ctx context.Context, p domain.ProductID, cutoff, now time.Time) (int, error) {
	released := 0
	for {
		holds, err := s.gate.Holds(ctx, p, cutoff, s.cfg.SweepBatch)
		if err != nil {
			return released, fmt.Errorf("sweep orphans of product %d: list holds: %w", p, err)
		}
		if len(holds) == 0 {
			return released, nil
		}
		nos := make([]domain.OrderNo, len(holds))
		for i, h := range holds {
			nos[i] = h.OrderNo
		}
		exists, err := s.ledger.Orders().Existing(ctx, nos)
		if err != nil {
			return released, fmt.Errorf("sweep orphans of product %d: look orders up: %w", p, err)
		}
		var written []domain.OrderNo
		for _, no := range nos {
			if exists[no] {
				written = append(written, no)
			}
		}
		if len(written) > 0 {
			if err := s.gate.Forget(ctx, p, written); err != nil {
				return released, fmt.Errorf("sweep orphans of product %d: forget written orders: %w", p, err)
			}
		}
		for _, h := range holds {
			if exists[h.OrderNo] {
				continue
			}
			ok, err := s.gate.ReleaseOrphan(ctx, h)
			if err != nil {
				return released, fmt.Errorf("sweep orphans of product %d: release %s: %w", p, h.OrderNo, err)
			}
			if !ok {
				continue // a late Cancel (or another sweeper) gave it back first
			}
			released++
			s.alerts.Alert(ctx, domain.Alert{Kind: "orphan_reservation_released", Product: p, OrderNo: h.OrderNo,
				Message: fmt.Sprintf("a reservation of %d units made %s ago has no order (the service stopped between the gate and the ledger); its units were returned to the stock",
					h.Qty, now.Sub(h.At).Round(time.Second))})
		}
		if len(holds) < s.cfg.SweepBatch {
			return released, nil
		}
	}
}
