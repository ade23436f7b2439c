package application

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"cardshop/domain"
)

// PlaceOrder is a buyer's request for qty codes of a product.
type PlaceOrder struct {
	Buyer          domain.BuyerID
	Product        domain.ProductID
	Qty            int
	IdempotencyKey string
	// Coupon, when not empty, is a coupon code the buyer gives (any case; see
	// domain.ParseCouponCode).
	Coupon string
}

// PlacedOrder is the answer to PlaceOrder. Replayed is true when the key had already been
// used with the same request and Order is the original order.
type PlacedOrder struct {
	Order    domain.Order
	Replayed bool
}

// Currency is the shop's currency: every price, order and payment is an amount of its minor
// unit.
func (s *Sales) Currency() domain.Currency { return s.cfg.Currency }

// PlaceOrder validates the request, claims the idempotency key and reserves the stock at the
// gate in one step, then writes the PENDING order and its reserve flow row in one transaction
// and schedules its timeout. If the ledger write fails, the reservation is cancelled before
// answering, so a failed request holds no stock and no key.
//
// With Config.BuyerCap set, a buyer who has reserved that many units of the product within
// Config.BuyerWindow is refused (ErrBuyerLimit) until the window ends; replays do not count.
//
// The product's sale rules are enforced by the gate in the same atomic step, by the gate's
// clock: before the window a SaleNotStartedError (ErrSaleNotStarted, with the time left), after
// it ErrSaleEnded, and ErrBuyerHoldingLimit when the buyer would hold more units of the product
// in PENDING and PAID orders than its limit. This instance refuses on its own only when its
// clock is more than Config.SaleStartMargin before the start.
//
// A coupon is checked against the order (product, time, amount) before anything is reserved,
// and its use is claimed by the gate in the same atomic step as the stock: an order over the
// coupon's uses on the product (or the buyer's) is refused and reserves nothing. The order's
// amount is the discounted one, fixed from then on. A re-sent request with its key replays the
// order even when the coupon has since been used up, disabled or expired.
//
// Errors: ErrInvalidIdempotencyKey, ErrInvalidInput, ErrProductNotFound, ErrQtyOutOfRange,
// ErrSoldOut, ErrProductFrozen, ErrBuyerLimit, ErrBuyerHoldingLimit, ErrSaleNotStarted,
// ErrSaleEnded, ErrGateNotReady, ErrIdempotencyMismatch, ErrRequestInProgress, ErrUnavailable,
// ErrCouponNotFound, ErrCouponNotApplicable, ErrCouponUsedUp, ErrCouponBuyerLimit.
func (s *Sales) PlaceOrder(ctx context.Context, cmd PlaceOrder) (PlacedOrder, error) {
	return s.place(ctx, cmd, nil)
}

// RefusedFromMemory returns the refusal PlaceOrder would answer cmd with when this instance
// can tell it from what it holds in memory, without the gate or the ledger: a
// SaleNotStartedError while this instance's clock is clearly before the product's start (the
// check PlaceOrder makes first), ErrSoldOut while the gate's sold-out lease covers the request
// (domain.SoldOutLeases: the gate's own first step, so the key has no claim). Neither
// reserves anything. It returns nil whenever it cannot tell, and PlaceOrder decides: an
// invalid request, a product not in the product cache, an order with a coupon (its checks
// come before the gate's answer), a gate without leases. So a re-sent request whose key has an
// order is never refused here: its claim keeps the lease from covering it, and PlaceOrder
// replays it. The sale's end is not judged here: the gate replays a claimed key after the
// end, and only the gate knows the claims.
//
// A driving adapter asks it before charging a rate limiter (adapters/httpapi): such an answer
// costs less than the limiter's check, and the limiter is kept for requests that can reserve.
// An ErrSoldOut it returns is counted in SoldOutAnswers, as PlaceOrder's are.
func (s *Sales) RefusedFromMemory(cmd PlaceOrder) error {
	key, err := domain.ParseIdempotencyKey(cmd.IdempotencyKey)
	if err != nil {
		return nil
	}
	if _, err := domain.ParseBuyerID(string(cmd.Buyer)); err != nil {
		return nil
	}
	p, ok := s.cachedProduct(cmd.Product)
	if !ok || p.CheckQty(cmd.Qty) != nil {
		return nil
	}
	if err := s.clearlyBeforeStart(p); err != nil {
		return err
	}
	if cmd.Coupon != "" {
		return nil
	}
	if _, err := p.Amount(cmd.Qty); err != nil {
		return nil // domain.NewOrder refuses it before the gate is asked
	}
	leases, ok := s.gate.(domain.SoldOutLeases)
	if !ok || !leases.SoldOutByLease(domain.Reservation{Product: p.ID(), Buyer: cmd.Buyer, Key: key, Qty: cmd.Qty}) {
		return nil
	}
	s.rates.countSoldOut(p.ID(), s.clock.Now())
	return domain.ErrSoldOut
}

// place is PlaceOrder's path for an API order (guest nil) and a guest order alike.
func (s *Sales) place(ctx context.Context, cmd PlaceOrder, guest *guestPart) (PlacedOrder, error) {
	key, err := domain.ParseIdempotencyKey(cmd.IdempotencyKey)
	if err != nil {
		return PlacedOrder{}, err
	}
	if _, err := domain.ParseBuyerID(string(cmd.Buyer)); err != nil {
		return PlacedOrder{}, err
	}
	if cmd.Product <= 0 {
		return PlacedOrder{}, domain.ErrProductNotFound
	}
	p, err := s.product(ctx, cmd.Product)
	if err != nil {
		return PlacedOrder{}, err
	}
	if err := p.CheckQty(cmd.Qty); err != nil {
		return PlacedOrder{}, err
	}
	if err := s.clearlyBeforeStart(p); err != nil {
		return PlacedOrder{}, err
	}
	var coupon *domain.Coupon
	if cmd.Coupon != "" {
		code, err := domain.ParseCouponCode(cmd.Coupon)
		if err != nil {
			return PlacedOrder{}, err
		}
		c, err := s.couponFor(ctx, code)
		if err != nil {
			return s.replayOr(ctx, cmd.Buyer, key, domain.CouponFingerprint(p.ID(), cmd.Qty, code), err)
		}
		coupon = &c
	}
	for attempt := 0; ; attempt++ {
		out, err := s.placeOnce(ctx, cmd, p, key, guest, coupon)
		if errors.Is(err, domain.ErrDuplicateOrder) && attempt == 0 {
			// A random order number collided (its reservation was given back): draw another.
			continue
		}
		return out, err
	}
}

// clearlyBeforeStart refuses an order this instance's clock places more than
// Config.SaleStartMargin before the product's sale starts: the pre-start storm then costs no
// gate round trip. Within the margin (and after the start) the gate decides, by its own clock,
// so instances whose clocks disagree by less than the margin still agree on the start.
func (s *core) clearlyBeforeStart(p domain.Product) error {
	starts := p.Sale().StartsAt
	if starts.IsZero() || s.cfg.SaleStartMargin <= 0 {
		return nil
	}
	if wait := starts.Sub(s.clock.Now()); wait > s.cfg.SaleStartMargin {
		return &domain.SaleNotStartedError{StartsIn: wait}
	}
	return nil
}

// replayOr answers a coupon that cannot be used (err): with the buyer's order of key when one
// was placed with this very request (a re-send after the coupon was used up, disabled or
// expired), else err. Only this refusal path reads the ledger.
func (s *core) replayOr(ctx context.Context, buyer domain.BuyerID, key domain.IdempotencyKey, fingerprint string, err error) (PlacedOrder, error) {
	if !errors.Is(err, domain.ErrCouponNotFound) && !errors.Is(err, domain.ErrCouponNotApplicable) {
		return PlacedOrder{}, err
	}
	if o, lerr := s.ledger.Orders().OrderByKey(ctx, buyer, key); lerr == nil && o.Fingerprint() == fingerprint {
		return PlacedOrder{Order: o, Replayed: true}, nil
	}
	return PlacedOrder{}, err
}

func (s *Sales) placeOnce(ctx context.Context, cmd PlaceOrder, p domain.Product, key domain.IdempotencyKey, guest *guestPart, coupon *domain.Coupon) (PlacedOrder, error) {
	now := s.clock.Now()
	order, err := domain.NewOrder(domain.NewOrderNo(now, cmd.Buyer, rand.Uint64()), cmd.Buyer, p, cmd.Qty, key, now, s.cfg.OrderTimeout)
	if err != nil {
		return PlacedOrder{}, err
	}
	if coupon != nil {
		if order, err = order.WithCoupon(*coupon, now); err != nil {
			return s.replayOr(ctx, cmd.Buyer, key, domain.CouponFingerprint(p.ID(), cmd.Qty, coupon.Code), err)
		}
	}
	if guest != nil {
		order, err = order.WithGuest(domain.Guest{Email: guest.email, Lang: guest.lang,
			AccessHash: hashSecret(s.accessSecret(order.No()))})
		if err != nil {
			return PlacedOrder{}, err
		}
	}
	r := domain.Reservation{Product: p.ID(), Buyer: cmd.Buyer, Key: key, Qty: cmd.Qty, OrderNo: order.No(),
		Fingerprint: order.Fingerprint(), KeyTTL: s.cfg.IdempotencyTTL,
		BuyerCap: s.cfg.BuyerCap, BuyerWindow: s.cfg.BuyerWindow}
	if coupon != nil {
		r.Coupon, r.CouponUses, r.CouponPerBuyer = coupon.Code, coupon.UsesPerProduct, coupon.UsesPerBuyer
	}
	res, err := s.reserve(ctx, r)
	if err != nil {
		// The call may have failed after the gate ran it (a timeout): give back a claim made for
		// this order number, or the units stay held and the buyer's retry waits on an order that
		// is never written. Cancel changes nothing when Reserve did not run.
		s.tryCancelReservation(ctx, r)
		return PlacedOrder{}, fmt.Errorf("reserve stock: %w", err)
	}
	switch {
	case res.Outcome == domain.Reserved:
	case res.Outcome == domain.Replayed && res.ExistingOrder == order.No():
		// A client-level retry of the same call (a lost reply) ran the script twice: the claim
		// is ours and the units were taken once. Carry on as reserved.
	case res.Outcome == domain.Replayed:
		if res.ExistingFingerprint != order.Fingerprint() {
			return s.mismatch(ctx, cmd.Buyer, key, order.Fingerprint())
		}
		return s.replay(ctx, res.ExistingOrder, cmd.Buyer, order.Fingerprint())
	case res.Outcome == domain.SoldOut:
		s.rates.countSoldOut(p.ID(), now)
		return PlacedOrder{}, domain.ErrSoldOut
	case res.Outcome == domain.Frozen:
		return PlacedOrder{}, domain.ErrProductFrozen
	case res.Outcome == domain.BuyerLimit:
		return PlacedOrder{}, domain.ErrBuyerLimit
	case res.Outcome == domain.HoldingLimit:
		return PlacedOrder{}, domain.ErrBuyerHoldingLimit
	case res.Outcome == domain.CouponUsedUp:
		return PlacedOrder{}, domain.ErrCouponUsedUp
	case res.Outcome == domain.CouponBuyerLimit:
		return PlacedOrder{}, domain.ErrCouponBuyerLimit
	case res.Outcome == domain.NotStarted:
		return PlacedOrder{}, &domain.SaleNotStartedError{StartsIn: res.StartsIn}
	case res.Outcome == domain.Ended:
		return PlacedOrder{}, domain.ErrSaleEnded
	case res.Outcome == domain.GateMissing:
		s.rebuildGateLater(p.ID())
		return PlacedOrder{}, domain.ErrGateNotReady
	case res.Outcome == domain.Rebuilding:
		return PlacedOrder{}, domain.ErrGateNotReady
	default:
		return PlacedOrder{}, fmt.Errorf("reserve stock: unknown outcome %d", res.Outcome)
	}

	err = s.ledger.Atomically(ctx, func(tx domain.Store) error {
		if err := tx.Orders().Insert(ctx, order); err != nil {
			return err
		}
		return tx.Flows().Append(ctx, orderFlow(order, domain.FlowReserve, now))
	})
	if err != nil && errors.Is(err, domain.ErrCommitUnknown) {
		// The commit's answer was lost: the order may be stored. Giving the stock back for a
		// stored order would let the gate sell it twice, so read back first.
		if stored, known := s.orderStored(ctx, order.No()); known && stored {
			err = nil
		} else if !known {
			s.log.WarnContext(ctx, "order outcome unknown; its reservation is kept (the orphan sweep returns it if the order was not stored)",
				"order_no", order.No(), "product", p.ID())
			return PlacedOrder{}, fmt.Errorf("record order: %w", err)
		}
	}
	if err != nil {
		s.cancelReservation(ctx, r)
		if errors.Is(err, domain.ErrDuplicateIdempotencyKey) {
			// The gate forgot the key (it expired, or Redis lost it) but the ledger did not.
			return s.replayFromLedger(ctx, cmd.Buyer, key, order.Fingerprint())
		}
		return PlacedOrder{}, fmt.Errorf("record order: %w", err)
	}
	if err := s.queue.ScheduleClose(ctx, order.No(), order.ExpiresAt()); err != nil {
		// The order stands: the sweeper closes it on time without the message.
		s.log.WarnContext(ctx, "timeout not scheduled; the sweeper will close the order", "order_no", order.No(), "err", err)
	}
	return PlacedOrder{Order: order}, nil
}

// replay answers a repeated submission with the original order, waiting a little for it to be
// written when the original request is still running.
func (s *core) replay(ctx context.Context, no domain.OrderNo, buyer domain.BuyerID, fingerprint string) (PlacedOrder, error) {
	waitCtx, cancel := context.WithTimeout(ctx, s.cfg.ReplayWait)
	defer cancel()
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		o, err := s.ledger.Orders().Order(ctx, no)
		if err == nil {
			if o.Buyer() != buyer || o.Fingerprint() != fingerprint {
				return PlacedOrder{}, domain.ErrIdempotencyMismatch
			}
			return PlacedOrder{Order: o, Replayed: true}, nil
		}
		if !errors.Is(err, domain.ErrOrderNotFound) {
			return PlacedOrder{}, fmt.Errorf("load original order: %w", err)
		}
		select {
		case <-waitCtx.Done():
			return PlacedOrder{}, domain.ErrRequestInProgress
		case <-time.After(wait):
		}
	}
}

// mismatch answers a key whose gate claim names another request. The ledger has the last
// word: once the claim of the key's order expired (Config.IdempotencyTTL), a request with the
// same key and another body may hold a fresh claim for a moment (until its order fails to be
// written as a duplicate and its reservation is given back); a re-send of the original request
// meanwhile is still answered with its order. Only this rare path reads the ledger.
func (s *core) mismatch(ctx context.Context, buyer domain.BuyerID, key domain.IdempotencyKey, fingerprint string) (PlacedOrder, error) {
	o, err := s.ledger.Orders().OrderByKey(ctx, buyer, key)
	if err == nil && o.Fingerprint() == fingerprint {
		return PlacedOrder{Order: o, Replayed: true}, nil
	}
	return PlacedOrder{}, domain.ErrIdempotencyMismatch
}

func (s *core) replayFromLedger(ctx context.Context, buyer domain.BuyerID, key domain.IdempotencyKey, fingerprint string) (PlacedOrder, error) {
	o, err := s.ledger.Orders().OrderByKey(ctx, buyer, key)
	if err != nil {
		return PlacedOrder{}, fmt.Errorf("load original order: %w", err)
	}
	if o.Fingerprint() != fingerprint {
		return PlacedOrder{}, domain.ErrIdempotencyMismatch
	}
	return PlacedOrder{Order: o, Replayed: true}, nil
}

// orderStored reads back whether an order was stored after a commit of unknown outcome,
// retrying briefly while the ledger is unreachable. known is false when it could not tell.
// The read-back ends by the request's deadline when it has one (a stalled database must not
// keep the buyer past it: unknown keeps the units held, and the orphan sweep settles them).
func (s *core) orderStored(ctx context.Context, no domain.OrderNo) (stored, known bool) {
	ctx, cancel := withinDeadline(ctx)
	defer cancel()
	for i := 0; i < 5 && ctx.Err() == nil; i++ {
		_, err := s.ledger.Orders().Order(ctx, no)
		switch {
		case err == nil:
			return true, true
		case errors.Is(err, domain.ErrOrderNotFound):
			return false, true
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(i+1) * 100 * time.Millisecond):
		}
	}
	return false, false
}
