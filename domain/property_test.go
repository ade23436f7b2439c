package domain_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"cardshop/domain"
)

// TestPropertyTransitionsStayOnTheGraph drives one order through random method calls at random
// times and amounts: every change it accepts is an edge of CanTransition, every call it
// refuses leaves the order exactly as it was.
func TestPropertyTransitionsStayOnTheGraph(t *testing.T) {
	targets := []domain.OrderStatus{domain.StatusPaid, domain.StatusClosed, domain.StatusFailed,
		domain.StatusUnfulfilled, domain.StatusRefunded}
	rapid.Check(t, func(t *rapid.T) {
		o := orderIn(domain.StatusPending)
		now := t0
		steps := rapid.IntRange(1, 30).Draw(t, "steps")
		for range steps {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(20*time.Minute)).Draw(t, "wait")))
			to := rapid.SampledFrom(targets).Draw(t, "to")
			amount := o.Amount()
			if rapid.IntRange(0, 4).Draw(t, "wrong amount") == 0 {
				amount += domain.Money(rapid.Int64Range(-5, 5).Draw(t, "delta"))
			}
			before := o.Record()
			var err error
			switch to {
			case domain.StatusPaid:
				err = o.MarkPaid(now, amount, "ref")
			case domain.StatusClosed:
				err = o.Close(now)
			case domain.StatusFailed:
				err = o.Fail(now, "declined")
			case domain.StatusUnfulfilled:
				err = o.MarkUnfulfilled(now, amount, "ref", "short")
			case domain.StatusRefunded:
				err = o.Refund(now, "asked")
			default: // pending: no move
			}
			if !slices.Contains(domain.AllOrderStatuses, o.Status()) {
				t.Fatalf("order left the closed set of states: %v", o.Status())
			}
			if err != nil {
				if !errors.Is(err, domain.ErrInvalidTransition) && !errors.Is(err, domain.ErrAmountMismatch) {
					t.Fatalf("%s -> %s: unexpected error %v", before.Status, to, err)
				}
				if errors.Is(err, domain.ErrAmountMismatch) && amount == before.Amount {
					t.Fatalf("ErrAmountMismatch for the right amount")
				}
				if o.Record() != before {
					t.Fatalf("a refused %s -> %s changed the order", before.Status, to)
				}
				continue
			}
			if !domain.CanTransition(before.Status, o.Status()) || o.Status() != to {
				t.Fatalf("accepted %s -> %s landing on %s, not an edge of the graph", before.Status, to, o.Status())
			}
			if to == domain.StatusClosed && now.Before(before.ExpiresAt) {
				t.Fatalf("closed before expiry")
			}
			if (to == domain.StatusPaid || to == domain.StatusUnfulfilled) && amount != before.Amount {
				t.Fatalf("accepted a payment of %d for %d", amount, before.Amount)
			}
			if o.Qty() != before.Qty || o.Amount() != before.Amount || o.No() != before.No || o.Buyer() != before.Buyer {
				t.Fatalf("a transition changed the order's identity or amount")
			}
		}
	})
}
