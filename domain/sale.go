package domain

import (
	"errors"
	"fmt"
	"time"
)

// SaleRules are the product rules the gate enforces inside the reserve step, so that every
// instance agrees whatever its own clock says: the sale window, judged by the gate's clock
// (Redis's TIME), and the per-buyer holding limit.
type SaleRules struct {
	// StartsAt and EndsAt bound the sale: an order before StartsAt is refused as not started,
	// one at or after EndsAt as ended. The zero time is no bound. Millisecond precision.
	StartsAt time.Time
	EndsAt   time.Time
	// BuyerLimit, when above 0, is the most units one buyer may hold in PENDING and PAID
	// orders of the product (and REFUNDED ones unless refunds release the limit).
	BuyerLimit int
}

// MaxBuyerLimit bounds a product's per-buyer holding limit.
const MaxBuyerLimit = 1_000_000

// MaxStockThreshold bounds a product's low-stock threshold.
const MaxStockThreshold = 1_000_000

// Check validates the rules: a window that ends after it starts, a limit from 0 to
// MaxBuyerLimit.
func (r SaleRules) Check() error {
	switch {
	case !r.StartsAt.IsZero() && !r.EndsAt.IsZero() && !r.EndsAt.After(r.StartsAt):
		return Invalid("ends_at", "must be after starts_at")
	case r.BuyerLimit < 0 || r.BuyerLimit > MaxBuyerLimit:
		return Invalid("buyer_limit", "must be between 0 (no limit) and 1000000")
	case outOfRange(r.StartsAt) || outOfRange(r.EndsAt):
		return Invalid("starts_at", "must be between the years 2000 and 2999")
	}
	return nil
}

func outOfRange(t time.Time) bool {
	return !t.IsZero() && (t.Year() < 2000 || t.Year() > 2999)
}

// normal returns r at the millisecond precision the gate and the ledger keep, in UTC.
func (r SaleRules) normal() SaleRules {
	if !r.StartsAt.IsZero() {
		r.StartsAt = r.StartsAt.UTC().Truncate(time.Millisecond)
	}
	if !r.EndsAt.IsZero() {
		r.EndsAt = r.EndsAt.UTC().Truncate(time.Millisecond)
	}
	return r
}

// Phase is where now falls in the window: SaleUpcoming, SaleOpen or SaleOver.
func (r SaleRules) Phase(now time.Time) SalePhase {
	switch {
	case !r.StartsAt.IsZero() && now.Before(r.StartsAt):
		return SaleUpcoming
	case !r.EndsAt.IsZero() && !now.Before(r.EndsAt):
		return SaleOver
	}
	return SaleOpen
}

// SalePhase is a moment's place in a sale window.
type SalePhase int

// The sale phases.
const (
	SaleOpen SalePhase = iota
	SaleUpcoming
	SaleOver
)

// ErrSaleNotStarted means the product's sale window has not opened yet (by the gate's clock).
// It comes inside a SaleNotStartedError that says how long until it opens.
var ErrSaleNotStarted = errors.New("the sale has not started")

// ErrSaleEnded means the product's sale window is over.
var ErrSaleEnded = errors.New("the sale has ended")

// ErrBuyerHoldingLimit means the order would give the buyer more units of the product than
// its per-buyer limit allows; nothing was reserved.
var ErrBuyerHoldingLimit = errors.New("the buyer already holds as many units of this product as one buyer may")

// ErrFulfilOverLimit means fulfilling an UNFULFILLED order would give its buyer more units of
// the product than its per-buyer limit allows, counting what the buyer holds now; it wraps
// ErrBuyerHoldingLimit.
var ErrFulfilOverLimit = fmt.Errorf("%w: fulfilling the order would pass the limit", ErrBuyerHoldingLimit)

// ErrPaidAfterSaleEnded means an UNFULFILLED order's payment was accepted at or after the end
// of the product's sale, so it is never fulfilled; it wraps ErrSaleEnded.
var ErrPaidAfterSaleEnded = fmt.Errorf("%w: the order was paid after it", ErrSaleEnded)

// SaleNotStartedError is ErrSaleNotStarted with the time left until the start.
type SaleNotStartedError struct {
	StartsIn time.Duration
}

func (e *SaleNotStartedError) Error() string {
	return fmt.Sprintf("%s (starts in %s)", ErrSaleNotStarted, e.StartsIn.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrSaleNotStarted) true.
func (e *SaleNotStartedError) Is(target error) bool { return target == ErrSaleNotStarted }

// StockState is where a product's stock stood at its last stock event: the events fire once
// per crossing (see NextStockState).
type StockState string

// The stock states.
const (
	StockStateNone    StockState = "" // no event evaluated yet
	StockStateNormal  StockState = "normal"
	StockStateLow     StockState = "low"
	StockStateSoldOut StockState = "sold_out"
)

// The stock events, published through the outbox (TopicProductStock).
const (
	EventLowStock  = "product.low_stock"
	EventSoldOut   = "product.sold_out"
	EventRestocked = "product.restocked"
)

// StockBand is the hysteresis of the stock events for a threshold: stock must climb above
// threshold+StockBand(threshold) to count as restocked, so stock that hovers around the
// threshold (reservations taken and given back) never makes a storm of events.
func StockBand(threshold int) int64 { return max(1, int64(threshold)/10) }

// NextStockState says where stock left puts a product whose last state was from, with the
// events that crossing fires, in order. The rules, with t the low-stock threshold and b its
// band:
//   - from none (the first evaluation), the state is set without events;
//   - stock 0 is sold out: product.sold_out, preceded by product.low_stock when coming from
//     normal with t > 0 (the crossing passed through low even if no sample saw it);
//   - from normal, stock at or below t (t > 0) is low: product.low_stock;
//   - from low or sold out, stock above t+b is normal again: product.restocked;
//   - otherwise the state stays (no event).
func NextStockState(from StockState, left int64, threshold int) (StockState, []string) {
	t := int64(threshold)
	at := func() StockState {
		switch {
		case left <= 0:
			return StockStateSoldOut
		case t > 0 && left <= t:
			return StockStateLow
		}
		return StockStateNormal
	}()
	switch from {
	case StockStateNone:
		return at, nil
	case StockStateNormal:
		switch at {
		case StockStateSoldOut:
			if t > 0 {
				return at, []string{EventLowStock, EventSoldOut}
			}
			return at, []string{EventSoldOut}
		case StockStateLow:
			return at, []string{EventLowStock}
		default: // none or normal: no event
		}
	case StockStateLow:
		switch {
		case left <= 0:
			return StockStateSoldOut, []string{EventSoldOut}
		case left > t+StockBand(threshold):
			return StockStateNormal, []string{EventRestocked}
		}
	case StockStateSoldOut:
		if left > t+StockBand(threshold) {
			return StockStateNormal, []string{EventRestocked}
		}
	}
	return from, nil
}
