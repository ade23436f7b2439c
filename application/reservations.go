package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cardshop/domain"
)

// reserve asks the gate for r, asking again while a rebuild fences the product, for up to
// Config.ReplayWait; after that the Rebuilding outcome is the answer.
func (s *core) reserve(ctx context.Context, r domain.Reservation) (domain.ReserveResult, error) {
	deadline := time.Now().Add(s.cfg.ReplayWait)
	pause := 5 * time.Millisecond
	for {
		res, err := s.gate.Reserve(ctx, r)
		if err != nil || res.Outcome != domain.Rebuilding || !time.Now().Before(deadline) {
			return res, err
		}
		if sleep(ctx, pause) != nil {
			return res, nil
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// cancelReservation gives a reservation back after its order could not be written. It retries
// briefly (and while a rebuild fences the product, up to a few seconds); a reservation it
// cannot give back is alerted, and the orphan sweep returns it once it is Config.OrphanAfter
// old.
func (s *core) cancelReservation(ctx context.Context, r domain.Reservation) {
	ctx, cancel := detached(ctx)
	defer cancel()
	var err error
	for i, fenced := 0, 0; i < 3; i++ {
		if _, err = s.gate.Cancel(ctx, r); err == nil {
			return
		}
		if errors.Is(err, domain.ErrGateRebuilding) && fenced < 40 {
			fenced, i = fenced+1, i-1 // a rebuild is short: wait for it without using up a try
		}
		time.Sleep(time.Duration(max(i, 0)+1) * 50 * time.Millisecond)
	}
	s.alerts.Alert(ctx, domain.Alert{Kind: "reservation_not_returned", Product: r.Product, OrderNo: r.OrderNo,
		Message: fmt.Sprintf("could not cancel a reservation of %d units (the orphan sweep returns a keyed one after %v): %v",
			r.Qty, s.cfg.OrphanAfter, err)})
}

// tryCancelReservation makes one attempt to give back a reservation whose outcome is unknown.
// Unlike cancelReservation it neither waits nor alerts: the gate is probably down, and the
// orphan sweep (or a rebuild from the ledger) returns anything left behind. It ends by the
// request's deadline: a stalled or unreachable gate must not keep the buyer past it.
func (s *core) tryCancelReservation(ctx context.Context, r domain.Reservation) {
	ctx, cancel := withinDeadline(ctx)
	defer cancel()
	if _, err := s.gate.Cancel(ctx, r); err != nil {
		s.log.WarnContext(ctx, "reservation of unknown outcome not given back; the orphan sweep returns it",
			"product", r.Product, "order_no", r.OrderNo, "err", err)
	}
}

// endReservation moves a PENDING order to its new state (CLOSED or FAILED), writes the restore
// flow row and the gate change in one transaction, then applies the gate change.
func (s *core) endReservation(ctx context.Context, o, ended domain.Order, t domain.FlowType, now time.Time) error {
	change := releaseChange(o, t)
	err := s.ledger.Atomically(ctx, func(tx domain.Store) error {
		won, err := tx.Orders().Transition(ctx, ended, domain.StatusPending)
		if err != nil {
			return err
		}
		if !won {
			return errLostRace
		}
		return recordStockReturn(ctx, tx, o, t, change, now)
	})
	if err != nil {
		if errors.Is(err, errLostRace) {
			return err
		}
		return fmt.Errorf("record %s: %w", t, err)
	}
	s.applyGate(ctx, change)
	return nil
}
