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
// compensation. The gate tracks every reservation as a hold; for each product of the
// catalogue, holds older than Config.OrphanAfter are checked against the ledger in batches of
// Config.SweepBatch (one Existing query per batch): a written order's hold is forgotten (its
// units now follow the order's life cycle), a missing order's hold is released — units back to
// the stock, the buyer's key freed — and an "orphan_reservation_released" alert raised. A late
// payment's re-reservation (Hold.Late) belongs to an order that exists: it is forgotten once
// the order is PAID (or REFUNDED after that) and released when the order is still CLOSED,
// FAILED or UNFULFILLED (the payment attempt died, or its COMMIT reply was lost and the commit
// did not happen). The sweeper runs it after closing expired orders (Sweep).
//
// It returns how many holds it released. A product whose pass fails does not stop the others;
// the errors are joined. Errors: ErrUnavailable (the next pass tries again; releasing is
// atomic and idempotent at the gate, so a pass cut short is harmless).
func (s *Sales) SweepOrphans(ctx context.Context) (int, error) {
	products, err := s.ledger.Products().Products(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep orphans: list products: %w", err)
	}
	now := s.clock.Now()
	released := 0
	var errs []error
	for _, p := range products {
		n, err := s.sweepOrphansOf(ctx, p.ID(), now)
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

// sweepOrphansOf settles the product's holds at least Config.OrphanAfter old by the gate's
// clock, a batch at a time. (now only dates the alerts.)
func (s *core) sweepOrphansOf(ctx context.Context, p domain.ProductID, now time.Time) (int, error) {
	released := 0
	for {
		holds, err := s.gate.Holds(ctx, p, s.cfg.OrphanAfter, s.cfg.SweepBatch)
		if err != nil {
			return released, fmt.Errorf("sweep orphans of product %d: list holds: %w", p, err)
		}
		if len(holds) == 0 {
			return released, nil
		}
		settled, err := settledIn(ctx, s.ledger, holds)
		if err != nil {
			return released, fmt.Errorf("sweep orphans of product %d: look orders up: %w", p, err)
		}
		var written []domain.OrderNo
		for _, h := range holds {
			if settled[h.OrderNo] {
				written = append(written, h.OrderNo)
			}
		}
		if len(written) > 0 {
			if err := s.gate.Forget(ctx, p, written); err != nil {
				return released, fmt.Errorf("sweep orphans of product %d: forget written orders: %w", p, err)
			}
		}
		for _, h := range holds {
			if settled[h.OrderNo] {
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
			msg := fmt.Sprintf("a reservation of %d units made %s ago has no order (the service stopped between the gate and the ledger); its units were returned to the stock",
				h.Qty, now.Sub(h.At).Round(time.Second))
			if h.Late {
				msg = fmt.Sprintf("a late payment's reservation of %d units made %s ago did not end in a PAID order (the attempt stopped, or its commit was lost); its units were returned to the stock",
					h.Qty, now.Sub(h.At).Round(time.Second))
			}
			s.alerts.Alert(ctx, domain.Alert{Kind: "orphan_reservation_released", Product: p, OrderNo: h.OrderNo, Message: msg})
		}
		if len(holds) < s.cfg.SweepBatch {
			return released, nil
		}
	}
}

// settledIn reports, for each hold, whether its units already follow an order in st (the
// ledger, or a rebuild's snapshot): a keyed hold's order exists (one Existing query per chunk);
// a late hold's order is PAID, or REFUNDED after having been PAID. Read in the order given, a
// hold reported unsettled may have settled by the time it is released; the sweep's holds are
// Config.OrphanAfter old, far older than any request.
func settledIn(ctx context.Context, st domain.Store, holds []domain.Hold) (map[domain.OrderNo]bool, error) {
	out := make(map[domain.OrderNo]bool, len(holds))
	var keyed []domain.OrderNo
	for _, h := range holds {
		if !h.Late {
			keyed = append(keyed, h.OrderNo)
			continue
		}
		o, err := st.Orders().Order(ctx, h.OrderNo)
		if errors.Is(err, domain.ErrOrderNotFound) {
			out[h.OrderNo] = false
			continue
		}
		if err != nil {
			return nil, err
		}
		switch o.Status() {
		case domain.StatusPaid:
			out[h.OrderNo] = true
		case domain.StatusRefunded: // refunded after being PAID (it has a pay flow row), or from UNFULFILLED
			out[h.OrderNo], err = wasPaid(ctx, st, o.No())
			if err != nil {
				return nil, err
			}
		default:
			out[h.OrderNo] = false
		}
	}
	for start := 0; start < len(keyed); start += existingChunk {
		chunk := keyed[start:min(start+existingChunk, len(keyed))]
		exists, err := st.Orders().Existing(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for _, no := range chunk {
			out[no] = exists[no]
		}
	}
	return out, nil
}

// wasPaid reports whether the order has a pay flow row: it was PAID at some point.
func wasPaid(ctx context.Context, st domain.Store, no domain.OrderNo) (bool, error) {
	entries, err := st.Flows().Entries(ctx, string(no))
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.Type == domain.FlowPay {
			return true, nil
		}
	}
	return false, nil
}

// existingChunk bounds the order numbers of one Existing query.
const existingChunk = 1000
