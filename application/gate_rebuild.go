package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cardshop/domain"
)

// rebuildFence is how long a rebuild may keep a product's gate fenced. A rebuild that takes
// longer (a stalled database) finds its fence gone and gives up, writing nothing; the sale
// resumes on the old counters.
const rebuildFence = 30 * time.Second

// maxUnsentChanges bounds the unsent gate changes a rebuild reads in its snapshot: after the
// drain that precedes it there are only the changes committed since.
const maxUnsentChanges = 100_000

// RebuildGate sets a product's gate from the ledger so that every unit is counted exactly
// once, while orders, payments, closes and refunds go on: BeginRebuild fences the product and
// lists its holds, one ledger Snapshot is read, and FinishRebuild writes the counters, the sale
// rules and the buyers' holding counts only if the fence is still this rebuild's. While fenced,
// new orders wait up to Config.ReplayWait, then answer ErrGateNotReady. The steps and their
// guarantee are docs/DESIGN.md, "Design decisions" (repair).
//
// Errors: ErrGateRebuilding (another rebuild holds the fence, or this one outlived it),
// ErrUnavailable.
func (s *Catalogue) RebuildGate(ctx context.Context, p domain.Product) error {
	return s.rebuildGate(ctx, p)
}

func (s *stock) rebuildGate(ctx context.Context, p domain.Product) error {
	token := attemptToken("rebuild")
	holds, err := s.gate.BeginRebuild(ctx, p.ID(), token, rebuildFence)
	if err != nil {
		return fmt.Errorf("rebuild gate: fence: %w", err)
	}
	plan, err := s.rebuildPlan(ctx, p.ID(), holds)
	if err == nil {
		plan.Token = token
		err = s.gate.FinishRebuild(ctx, p.ID(), plan)
	}
	if err != nil {
		actx, cancel := detached(ctx)
		defer cancel()
		if aerr := s.gate.AbortRebuild(actx, p.ID(), token); aerr != nil {
			s.log.WarnContext(ctx, "rebuild fence not lifted; it expires by itself", "product", p.ID(), "err", aerr)
		}
		return fmt.Errorf("rebuild gate: %w", err)
	}
	s.log.InfoContext(ctx, "gate rebuilt from the ledger", "product", p.ID(), "stock", plan.Levels.Stock,
		"sold", plan.Levels.Sold, "holds_in_flight", len(holds)-len(plan.Drop), "changes_counted", len(plan.Counted))
	return nil
}

// rebuildPlan reads, in one snapshot of the ledger, what the product's gate must hold (see
// RebuildGate), with the holds whose orders the snapshot already counts in Drop.
func (s *stock) rebuildPlan(ctx context.Context, id domain.ProductID, holds []domain.Hold) (domain.RebuildPlan, error) {
	var plan domain.RebuildPlan
	err := s.ledger.Snapshot(ctx, func(tx domain.Store) error {
		plan = domain.RebuildPlan{}
		p, err := tx.Products().Product(ctx, id)
		if err != nil {
			return err
		}
		counts, err := tx.Cards().Counts(ctx, id)
		if err != nil {
			return err
		}
		totals, err := tx.Orders().Totals(ctx, id)
		if err != nil {
			return err
		}
		unsent, err := tx.Outbox().Pending(ctx, s.clock.Now().AddDate(100, 0, 0), maxUnsentChanges, domain.TopicGateChange)
		if err != nil {
			return err
		}
		if len(unsent) == maxUnsentChanges {
			return fmt.Errorf("%d or more unsent gate changes: %w", maxUnsentChanges, domain.ErrUnavailable)
		}
		for _, m := range unsent {
			c, err := DecodeGateChange(m.Payload)
			if err != nil {
				return fmt.Errorf("outbox message %d: %w", m.ID, err)
			}
			if c.Product == id {
				plan.Counted = append(plan.Counted, c.Ref)
			}
		}
		settled, err := settledIn(ctx, tx, holds)
		if err != nil {
			return err
		}
		if plan.Coupons, err = tx.Orders().CouponUses(ctx, id); err != nil {
			return err
		}
		var inFlight int64
		for _, h := range holds {
			if settled[h.OrderNo] {
				plan.Drop = append(plan.Drop, h.OrderNo)
				continue
			}
			inFlight += int64(h.Qty)
			if h.Coupon != "" {
				// A reservation whose order is not written yet holds its coupon's use too.
				c := plan.Coupons[h.Coupon]
				if c.Buyers == nil {
					c.Buyers = map[domain.BuyerID]int64{}
				}
				c.Uses++
				if h.Buyer != "" {
					c.Buyers[h.Buyer]++
				}
				plan.Coupons[h.Coupon] = c
			}
		}
		plan.Rules = p.Sale()
		if plan.Rules.BuyerLimit > 0 {
			if plan.Held, err = tx.Orders().HeldByBuyer(ctx, id, !p.RefundReleasesLimit()); err != nil {
				return err
			}
		}
		sold := totals[domain.StatusPending].Qty + totals[domain.StatusPaid].Qty + inFlight
		live := counts[domain.CardUnsold] + counts[domain.CardSold] + counts[domain.CardRecycled]
		// More held than the pool has: the gate never goes negative; the report shows it.
		plan.Levels = domain.GateLevels{Stock: max(live-sold, 0), Sold: sold, Frozen: p.Frozen()}
		return nil
	})
	if err != nil && !errors.Is(err, domain.ErrUnavailable) && !errors.Is(err, domain.ErrProductNotFound) {
		err = fmt.Errorf("read the ledger: %w", err)
	}
	return plan, err
}

// rebuildGateLater answers a gate that has lost a product (Redis restarted or was flushed:
// it keeps nothing on disk). Orders for the product are refused meanwhile (ErrGateNotReady,
// never "unlimited"); once per product at a time, after RebuildDelay lets the requests that
// reserved before the loss finish writing their orders, the gate is rebuilt from the ledger
// exactly as Reconcile with repair does (outbox drained first). A gate that lost one product
// has usually lost them all (a restart): every other catalogue product it lacks is then
// rebuilt too, one after the other, rather than when each is next ordered (until then the
// readiness check reports the gate not ready). An operator can do the same at once with
// POST /admin/products/{id}/reconcile?repair=true.
func (s *core) rebuildGateLater(p domain.ProductID) {
	if _, busy := s.rebuilding.LoadOrStore(p, true); busy {
		return
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		time.Sleep(s.cfg.RebuildDelay)
		rebuilt := s.rebuildLost(p)
		s.rebuilding.Delete(p)
		if !rebuilt {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		products, err := s.ledger.Products().Products(ctx)
		cancel()
		if err != nil {
			s.log.Error("listing the products to rebuild after a gate loss failed", "err", err)
			return
		}
		for _, q := range products {
			if q.ID() == p {
				continue
			}
			if _, busy := s.rebuilding.LoadOrStore(q.ID(), true); busy {
				continue
			}
			s.rebuildLost(q.ID())
			s.rebuilding.Delete(q.ID())
		}
	}()
}

// rebuildLost rebuilds p's gate from the ledger if the gate does not know p, with a
// gate_rebuilt alert, and reports whether it did.
func (s *core) rebuildLost(p domain.ProductID) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, ok, err := s.gate.Levels(ctx, p); err != nil || ok {
		return false // unreachable (a later request tries again) or rebuilt meanwhile
	}
	rep, err := s.reconcileID(ctx, p, true)
	if err != nil {
		s.log.ErrorContext(ctx, "automatic gate rebuild failed", "product", p, "err", err)
		return false
	}
	s.alerts.Alert(ctx, domain.Alert{Kind: "gate_rebuilt", Product: p,
		Message: "the gate had lost this product (Redis restart or flush) and was rebuilt from the ledger"})
	if !rep.OK() {
		s.log.WarnContext(ctx, "gate rebuilt, reconciliation still reports differences", "product", p, "differences", rep.Differences)
	}
	return true
}

// WaitBackground waits for background work started by use cases (automatic gate rebuilds).
func (a *App) WaitBackground() { a.core.background.Wait() }
