package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cardshop/domain"
)

// FulfilOrder retries an UNFULFILLED order once stock is there again (after an import, or a
// repaired inconsistency): it reserves at the gate and allocates codes like a late payment,
// under the same sale rules: the buyer's limit counting what the buyer holds now, and the
// sale's end judged at the instant the payment was accepted.
//
// An order whose money is being returned, or was (its payment REFUNDING or REFUNDED), is not
// fulfilled: the buyer would read working codes and get the money back.
//
// Errors: ErrOrderNotFound, ErrInvalidTransition (not UNFULFILLED), ErrRefundInProgress,
// ErrSoldOut, ErrProductFrozen, ErrPaidAfterSaleEnded (wrapping ErrSaleEnded),
// ErrFulfilOverLimit (wrapping ErrBuyerHoldingLimit), ErrGateNotReady, ErrUnavailable.
func (s *Sales) FulfilOrder(ctx context.Context, no domain.OrderNo) (domain.Order, error) {
	o, err := s.fulfilWaiting(ctx, no)
	if err == nil {
		s.resolveFilled(ctx, o.Product(), []domain.OrderNo{o.No()}, FulfilNote)
	}
	return o, err
}

// fulfilWaiting is FulfilOrder's core, shared with the fill of waiting orders on restock
// (fillWaiting): one code path, so a fill has an operator's fulfil's guarantees.
func (s *core) fulfilWaiting(ctx context.Context, no domain.OrderNo) (domain.Order, error) {
	return settle(ctx, s.cfg.ReplayWait, "fulfil", func() (domain.Order, error) {
		o, err := s.ledger.Orders().Order(ctx, no)
		if err != nil {
			return domain.Order{}, fmt.Errorf("load order: %w", err)
		}
		if err := s.FulfilRefusal(ctx, o); err != nil {
			return o, err
		}
		n := domain.PaymentNotice{OrderNo: no, Paid: true, Amount: o.Amount(), PaymentRef: o.PaymentRef()}
		return s.fulfil(ctx, o, n, true)
	})
}

// FulfilRefusal says why FulfilOrder refuses o before trying: ErrInvalidTransition when it is
// not UNFULFILLED, ErrRefundInProgress when its payment is REFUNDING or REFUNDED; nil when a
// fulfil may be tried (whether stock is there is found by trying). The console's confirmation
// page shows it instead of the button.
//
// Errors: also ErrUnavailable (the payments could not be read).
func (s *core) FulfilRefusal(ctx context.Context, o domain.Order) error {
	if o.Status() != domain.StatusUnfulfilled {
		return fmt.Errorf("%w: order is %s", domain.ErrInvalidTransition, o.Status())
	}
	p, ok, err := s.paidPayment(ctx, o)
	if err != nil {
		return err
	}
	if ok && (p.Status == domain.PaymentRefunding || p.Status == domain.PaymentRefunded) {
		return fmt.Errorf("fulfil: %w: its payment at %s is %s", domain.ErrRefundInProgress, p.Provider, p.Status)
	}
	return nil
}

// keepRefundOut makes a fulfil of o and a refund of its money exclude each other, in the
// fulfil's transaction: FulfilRefusal read the payment before, and a refund may have taken it
// (PAID → REFUNDING) since. It reads the payment again and moves it to the status it holds,
// conditionally: the move loses to a refund that took it meanwhile (ErrRefundInProgress), and
// holds the payment until the fulfil commits, so a refund that comes after finds a PAID order.
func keepRefundOut(ctx context.Context, tx domain.Store, o domain.Order) error {
	if o.PaymentRef() == "" {
		return nil
	}
	ps, err := tx.Payments().OfOrder(ctx, o.No())
	if err != nil {
		return fmt.Errorf("load payments: %w", err)
	}
	for _, p := range ps {
		if paymentRef(p) != o.PaymentRef() {
			continue
		}
		if p.Status == domain.PaymentRefunding || p.Status == domain.PaymentRefunded {
			return fmt.Errorf("fulfil: %w: its payment at %s is %s", domain.ErrRefundInProgress, p.Provider, p.Status)
		}
		won, err := tx.Payments().Transition(ctx, p, p.Status)
		if err != nil {
			return err
		}
		if !won {
			return fmt.Errorf("fulfil: %w: its payment at %s moved meanwhile", domain.ErrRefundInProgress, p.Provider)
		}
	}
	return nil
}

// fulfil moves o to PAID with its codes. late means the order no longer holds a reservation
// (CLOSED, FAILED, UNFULFILLED), so one is taken again first.
//
// The late reservation is claimed by the order's Ref, so one order has at most one at a time,
// and carries a token of this attempt: an attempt that finds another's claim (a concurrent
// resend, a second operator pressing fulfil) neither uses nor cancels it, but answers
// errInFlight and reads the order again once the holder is done. Only the attempt that took the
// units gives them back, and only while its hold is tracked; after a crash or a lost COMMIT
// reply the orphan sweep returns them if the order did not become PAID.
func (s *core) fulfil(ctx context.Context, o domain.Order, n domain.PaymentNotice, late bool) (domain.Order, error) {
	now := s.clock.Now()
	from := o.Status()
	var lateRes domain.Reservation
	if late {
		lateRes = domain.Reservation{Product: o.Product(), Buyer: o.Buyer(), Ref: flowRef(o.No(), domain.FlowLateReserve),
			Qty: o.Qty(), OrderNo: o.No(), Fingerprint: attemptToken("late"), KeyTTL: 24 * time.Hour}
		if from == domain.StatusUnfulfilled {
			// The payment is on record: the sale's end is judged at the instant it was accepted,
			// so an order paid in time can be fulfilled after the end, and one paid late never.
			lateRes.PaidAt = o.PaidAt()
		}
		if o.Coupon() != "" {
			// The close that returned the stock returned the coupon's use: it is claimed again,
			// within the coupon's limits as they stand (disabled or expired since or not: the
			// order was placed with it).
			c, err := s.couponTerms(ctx, o.Coupon())
			if err != nil {
				return o, fmt.Errorf("load the order's coupon: %w", err)
			}
			lateRes.Coupon, lateRes.CouponUses, lateRes.CouponPerBuyer = c.Code, c.UsesPerProduct, c.UsesPerBuyer
		}
		res, err := s.reserve(ctx, lateRes)
		if err != nil {
			// The script may have run before the call failed: give back a claim this attempt made.
			s.tryCancelReservation(ctx, lateRes)
			return o, fmt.Errorf("reserve stock again: %w", err)
		}
		switch {
		case res.Outcome == domain.Reserved:
		case res.Outcome == domain.Replayed && res.ExistingFingerprint == lateRes.Fingerprint:
			// This attempt's own call ran twice (a client-level retry after a lost reply).
		case res.Outcome == domain.Replayed:
			return o, errInFlight
		case res.Outcome == domain.GateMissing:
			s.rebuildGateLater(o.Product())
			return o, domain.ErrGateNotReady // the provider retries once the gate is rebuilt
		case res.Outcome == domain.Rebuilding:
			return o, domain.ErrGateNotReady
		case res.Outcome == domain.Frozen && from == domain.StatusUnfulfilled:
			return o, fmt.Errorf("fulfil again: %w", domain.ErrProductFrozen)
		case res.Outcome == domain.Frozen:
			return s.unfulfilled(ctx, o, n, "late payment: product frozen", false)
		case res.Outcome == domain.Ended && from == domain.StatusUnfulfilled:
			return o, fmt.Errorf("fulfil again: %w", domain.ErrPaidAfterSaleEnded)
		case res.Outcome == domain.Ended:
			return s.unfulfilled(ctx, o, n, reasonLateAfterEnd, false)
		case res.Outcome == domain.HoldingLimit && from == domain.StatusUnfulfilled:
			return o, fmt.Errorf("fulfil again: %w", domain.ErrFulfilOverLimit)
		case res.Outcome == domain.HoldingLimit:
			return s.unfulfilled(ctx, o, n, reasonLateOverLimit, false)
		case (res.Outcome == domain.CouponUsedUp || res.Outcome == domain.CouponBuyerLimit) && from == domain.StatusUnfulfilled:
			return o, fmt.Errorf("fulfil again: %w", domain.ErrCouponUsedUp)
		case res.Outcome == domain.CouponUsedUp || res.Outcome == domain.CouponBuyerLimit:
			return s.unfulfilled(ctx, o, n, reasonLateCouponUsedUp, false)
		case from == domain.StatusUnfulfilled:
			return o, fmt.Errorf("fulfil again: %w", domain.ErrSoldOut)
		default:
			return s.unfulfilled(ctx, o, n, reasonLateNoStock, false)
		}
	}
	paid := o
	if err := paid.MarkPaid(now, n.Amount, n.PaymentRef); err != nil {
		return o, err
	}
	event, err := encodeDelivery(domain.DeliveryEvent{EventID: "delivered:" + string(o.No()), OrderNo: o.No(),
		Buyer: o.Buyer(), Product: o.Product(), Qty: o.Qty(), Amount: o.Amount(), PaidAt: now})
	if err != nil {
		return o, err
	}
	err = s.ledger.Atomically(ctx, func(tx domain.Store) error {
		won, err := tx.Orders().Transition(ctx, paid, from)
		if err != nil {
			return err
		}
		if !won {
			return errLostRace
		}
		if from == domain.StatusUnfulfilled {
			if err := keepRefundOut(ctx, tx, o); err != nil {
				return err
			}
		}
		if late {
			if err := tx.Flows().Append(ctx, orderFlow(o, domain.FlowLateReserve, now)); err != nil {
				return err
			}
		}
		// Allocation last but one: the FOR UPDATE row locks are held for as short as possible.
		if _, err := tx.Cards().Allocate(ctx, o.Product(), o.No(), o.Qty()); err != nil {
			return err
		}
		if err := tx.Flows().Append(ctx, orderFlow(o, domain.FlowPay, now)); err != nil {
			return err
		}
		if err := tx.Outbox().Add(ctx, domain.OutboxMessage{Topic: domain.TopicDelivered, Key: string(o.No()), Payload: event, At: now}); err != nil {
			return err
		}
		if err := s.addOrderMail(ctx, tx, o, now); err != nil {
			return err
		}
		if s.notifier == nil {
			return nil
		}
		return tx.Outbox().Add(ctx, domain.OutboxMessage{Topic: domain.TopicWebhook, Key: string(o.No()), Payload: event, At: now})
	})
	if err == nil {
		if late {
			s.forgetHold(ctx, o) // its units follow the PAID order now
		}
		return paid, nil
	}
	if late && !errors.Is(err, domain.ErrCommitUnknown) {
		// (With a commit of unknown outcome the reservation is kept: the orphan sweep forgets it
		// if the order is PAID and returns its units if not.)
		s.cancelReservation(ctx, lateRes)
		if from == domain.StatusUnfulfilled && !errors.Is(err, domain.ErrInsufficientCards) &&
			!errors.Is(err, domain.ErrTooFewDistinctCodes) {
			// The units were out of the stock while this attempt held them: a fill that found
			// too few meanwhile stopped, and runs again now that they are back.
			s.refill(ctx, o.Product())
		}
	}
	if errors.Is(err, domain.ErrTooFewDistinctCodes) {
		// A multi-use product's uses are there but on fewer codes than the order's quantity (an
		// order never gets a code twice): gate and ledger agree, so nothing is frozen; the order
		// waits, with its money visible, for more codes (a restock fills it) or a refund.
		if from == domain.StatusUnfulfilled {
			return o, fmt.Errorf("fulfil again: %w", domain.ErrSoldOut)
		}
		return s.unfulfilled(ctx, o, n, reasonTooFewCodes, !late)
	}
	if errors.Is(err, domain.ErrInsufficientCards) {
		// The gate promised codes the ledger does not have: stop selling, keep the money visible.
		s.freezeOnInconsistency(ctx, o)
		if from == domain.StatusUnfulfilled {
			return o, fmt.Errorf("fulfil again: %w", domain.ErrSoldOut)
		}
		return s.unfulfilled(ctx, o, n, "card pool short of the gate's stock", !late)
	}
	if errors.Is(err, errLostRace) {
		return o, err
	}
	return o, fmt.Errorf("record payment: %w", err)
}

// forgetHold stops tracking the order's reservation at the gate, best effort: the orphan sweep
// forgets it later when this fails.
func (s *core) forgetHold(ctx context.Context, o domain.Order) {
	ctx, cancel := detached(ctx)
	defer cancel()
	if err := s.gate.Forget(ctx, o.Product(), []domain.OrderNo{o.No()}); err != nil {
		s.log.WarnContext(ctx, "hold not forgotten; the orphan sweep forgets it", "order_no", o.No(), "err", err)
	}
}

// The reasons of a late payment the product's sale rules refuse (the gate's Ended and
// HoldingLimit): the money is accepted and the order ends UNFULFILLED for an operator to refund.
const (
	reasonLateNoStock      = "late payment: no stock left"
	reasonLateAfterEnd     = "late payment: after the sale ended"
	reasonLateOverLimit    = "late payment: over the buyer's limit"
	reasonLateCouponUsedUp = "late payment: the coupon is used up"
	// reasonTooFewCodes: a multi-use product has the uses but on fewer distinct codes than the
	// order's quantity.
	reasonTooFewCodes = "too few distinct codes for the order's quantity"
)

// unfulfilled records an accepted payment that cannot be fulfilled. release says whether the
// order still holds a gate reservation to give back (it does when it was PENDING).
func (s *core) unfulfilled(ctx context.Context, o domain.Order, n domain.PaymentNotice, reason string, release bool) (domain.Order, error) {
	now := s.clock.Now()
	from := o.Status()
	u := o
	if err := u.MarkUnfulfilled(now, n.Amount, n.PaymentRef, reason); err != nil {
		return o, err
	}
	change := releaseChange(o, domain.FlowUnfulfilled)
	err := s.ledger.Atomically(ctx, func(tx domain.Store) error {
		won, err := tx.Orders().Transition(ctx, u, from)
		if err != nil {
			return err
		}
		if !won {
			return errLostRace
		}
		if !release {
			return nil
		}
		return recordStockReturn(ctx, tx, o, domain.FlowUnfulfilled, change, now)
	})
	if err != nil {
		if errors.Is(err, errLostRace) {
			return o, err
		}
		return o, fmt.Errorf("record unfulfilled payment: %w", err)
	}
	if release {
		s.applyGate(ctx, change)
	}
	advice := ": refund or fulfil the order"
	switch reason {
	case reasonLateAfterEnd:
		advice = ": refund the order (it can never be fulfilled)"
	case reasonLateOverLimit:
		advice = ": refund the order (fulfilling it is refused while the buyer holds the limit)"
	}
	s.alerts.Alert(ctx, domain.Alert{Kind: "paid_unfulfilled", Product: o.Product(), OrderNo: o.No(),
		Message: reason + advice})
	if now, err := s.ledger.Orders().Order(ctx, o.No()); err == nil && now.Status() == domain.StatusPaid {
		// A fill took the order between its UNFULFILLED and this alert, and acknowledged the
		// alerts it found before this one was raised.
		s.resolveFilled(ctx, o.Product(), []domain.OrderNo{o.No()}, RestockNote)
		return now, nil
	}
	if reason == reasonLateNoStock {
		// A restock may have committed between this payment's try at the gate and its
		// UNFULFILLED: that import's fill listed the waiting orders before this one was among
		// them. Filling now, after the commit, leaves no such gap (see fillWaiting).
		if filled := s.fillAfterLatePayment(ctx, o); filled.Status() == domain.StatusPaid {
			return filled, nil
		}
	}
	return u, nil
}

func (s *core) freezeOnInconsistency(ctx context.Context, o domain.Order) {
	ctx, cancel := detached(ctx)
	defer cancel()
	reason := "gate and ledger disagree: pool short while paying " + string(o.No())
	if err := s.setFrozen(ctx, o.Product(), true, reason); err != nil {
		s.log.ErrorContext(ctx, "could not freeze product", "product", o.Product(), "err", err)
	}
	s.alerts.Alert(ctx, domain.Alert{Kind: "stock_inconsistency", Product: o.Product(), OrderNo: o.No(),
		Message: "product frozen: the card pool has fewer codes than the gate reserved; reconcile it"})
}
