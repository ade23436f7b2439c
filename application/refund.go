package application

import (
	"context"
	"errors"
	"fmt"

	"cardshop/domain"
)

// Refund is an operator's refund of an order.
type Refund struct {
	OrderNo domain.OrderNo
	// Void keeps the codes out of the pool for good (the buyer has seen them); otherwise they
	// are RECYCLED and sold again.
	Void   bool
	Reason string
}

// RefundOrder refunds a PAID order (codes RECYCLED or VOID, stock back to the gate unless
// voided, flow refund-restore or refund-void) or an UNFULFILLED one (no codes, no stock). A
// refund of a REFUNDED order answers it unchanged; of two racing refunds one does the work.
//
// Errors: ErrOrderNotFound, ErrInvalidTransition, ErrUnavailable.
func (s *Shop) RefundOrder(ctx context.Context, cmd Refund) (domain.Order, error) {
	for attempt := 0; attempt < maxRaceRetries; attempt++ {
		o, err := s.ledger.Orders().Order(ctx, cmd.OrderNo)
		if err != nil {
			return domain.Order{}, fmt.Errorf("load order: %w", err)
		}
		if o.Status() == domain.StatusRefunded {
			return o, nil
		}
		out, err := s.refund(ctx, o, cmd)
		if errors.Is(err, errLostRace) {
			continue
		}
		return out, err
	}
	return domain.Order{}, fmt.Errorf("refund: %w", domain.ErrUnavailable)
}

func (s *Shop) refund(ctx context.Context, o domain.Order, cmd Refund) (domain.Order, error) {
	now := s.clock.Now()
	from := o.Status()
	reason := cmd.Reason
	if reason == "" {
		reason = "refunded by operator"
	}
	refunded := o
	if err := refunded.Refund(now, reason); err != nil {
		return o, err
	}
	holdsCodes := from == domain.StatusPaid
	flowType, to := domain.FlowRefundRestore, domain.CardRecycled
	change := releaseChange(o, domain.FlowRefundRestore)
	if cmd.Void {
		flowType, to = domain.FlowRefundVoid, domain.CardVoid
		change = domain.GateChange{Product: o.Product(), Ref: flowRef(o.No(), domain.FlowRefundVoid), Sold: -int64(o.Qty())}
	}
	err := s.ledger.Atomically(ctx, func(tx domain.Store) error {
		won, err := tx.Orders().Transition(ctx, refunded, from)
		if err != nil {
			return err
		}
		if !won {
			return errLostRace
		}
		if !holdsCodes {
			return nil
		}
		n, err := tx.Cards().Reclaim(ctx, o.No(), to)
		if err != nil {
			return err
		}
		if n != o.Qty() {
			return fmt.Errorf("refund %s: order holds %d codes, expected %d: %w", o.No(), n, o.Qty(), domain.ErrInsufficientCards)
		}
		return recordStockReturn(ctx, tx, o, flowType, change, now)
	})
	if err != nil {
		if errors.Is(err, errLostRace) {
			return o, err
		}
		return o, fmt.Errorf("record refund: %w", err)
	}
	if holdsCodes {
		s.applyGate(ctx, change)
	}
	return refunded, nil
}

// FulfilOrder retries an UNFULFILLED order once stock is there again (after an import, or a
// repaired inconsistency): it reserves at the gate and allocates codes like a late payment.
//
// Errors: ErrOrderNotFound, ErrInvalidTransition (not UNFULFILLED), ErrSoldOut,
// ErrProductFrozen, ErrGateNotReady, ErrUnavailable.
func (s *Shop) FulfilOrder(ctx context.Context, no domain.OrderNo) (domain.Order, error) {
	return s.settle(ctx, "fulfil", func() (domain.Order, error) {
		o, err := s.ledger.Orders().Order(ctx, no)
		if err != nil {
			return domain.Order{}, fmt.Errorf("load order: %w", err)
		}
		if o.Status() != domain.StatusUnfulfilled {
			return o, fmt.Errorf("%w: order is %s", domain.ErrInvalidTransition, o.Status())
		}
		n := domain.PaymentNotice{OrderNo: no, Paid: true, Amount: o.Amount(), PaymentRef: o.PaymentRef()}
		return s.fulfil(ctx, o, n, true)
	})
}
