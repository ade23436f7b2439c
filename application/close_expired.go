package application

import (
	"context"
	"errors"
	"fmt"

	"cardshop/domain"
)

// CloseExpired closes an unpaid order whose time is up: PENDING -> CLOSED, flow
// timeout-restore and the reservation returned to the gate. The delay queue's consumer calls
// it; so does the sweeper. Redelivery is harmless: an order that is no longer PENDING, or
// unknown, is left alone and nil returned (ack). An order that is not due yet is rescheduled.
//
// An order with an open payment at a provider is closed there first (see settlePayments): if
// the provider says it was paid, the order is paid instead of closed.
//
// Errors: ErrUnavailable (requeue and try again), also when the order kept changing under it
// (settle's limit) or a provider could not close its payment yet: the next delivery finds it
// settled.
func (s *Sales) CloseExpired(ctx context.Context, no domain.OrderNo) error {
	return s.closeExpired(ctx, no, nil)
}

// closeExpired is CloseExpired with the order as the caller last read it (read, nil if it did
// not), which the first attempt uses instead of reading it again: the sweeper has just listed
// it. A stale copy is safe: the close is a conditional change from PENDING, which loses to any
// change made since (errLostRace), and the next attempt reads the order afresh.
func (s *Sales) closeExpired(ctx context.Context, no domain.OrderNo, read *domain.Order) error {
	_, err := settle(ctx, s.cfg.ReplayWait, "close expired order", func() (struct{}, error) {
		o := read
		read = nil
		return struct{}{}, s.closeOnce(ctx, no, o)
	})
	return err
}

// closeOnce reads the order unless o is given and, if it is PENDING and due, closes it with
// one conditional change (errLostRace when another change won).
func (s *Sales) closeOnce(ctx context.Context, no domain.OrderNo, known *domain.Order) error {
	if known != nil {
		return s.closeRead(ctx, *known)
	}
	o, err := s.ledger.Orders().Order(ctx, no)
	if errors.Is(err, domain.ErrOrderNotFound) {
		s.log.WarnContext(ctx, "timeout for an unknown order dropped", "order_no", no)
		return nil
	}
	if err != nil {
		return fmt.Errorf("load order: %w", err)
	}
	return s.closeRead(ctx, o)
}

// closeRead closes o, as read from the ledger, if it is PENDING and due.
func (s *Sales) closeRead(ctx context.Context, o domain.Order) error {
	no := o.No()
	if o.Status() != domain.StatusPending {
		return nil
	}
	now := s.clock.Now()
	closed := o
	if err := closed.Close(now); err != nil {
		if errors.Is(err, domain.ErrNotDue) {
			return s.queue.ScheduleClose(ctx, no, o.ExpiresAt())
		}
		return err
	}
	// The order's open payments are closed at their providers first: one the provider reports
	// paid pays the order instead, and a provider that cannot be reached keeps the close
	// waiting (up to Config.PaymentCloseGrace).
	if paid, err := s.settlePayments(ctx, o); err != nil || paid {
		return err
	}
	return s.endReservation(ctx, o, closed, domain.FlowTimeoutRestore, now)
}
