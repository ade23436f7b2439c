package application

import (
	"context"
	"fmt"

	"cardshop/domain"
)

// Check is one reconciliation equation: what it compares, the two sides, and whether they
// agree.
type Check struct {
	Name string `json:"name"`
	Want int64  `json:"want"`
	Got  int64  `json:"got"`
	OK   bool   `json:"ok"`
}

// Reconciliation compares the gate, the card pool, the orders and the stock flow of one
// product (the invariants of docs/PRODUCT.md) and lists every equation with its numbers.
type Reconciliation struct {
	Product     domain.ProductID              `json:"product_id"`
	GateKnown   bool                          `json:"gate_known"`
	Gate        domain.GateLevels             `json:"-"`
	Cards       map[string]int64              `json:"cards"`
	Orders      map[string]domain.StatusTotal `json:"-"`
	Flow        domain.Derived                `json:"-"`
	Checks      []Check                       `json:"checks"`
	Differences int                           `json:"differences"`
	Repaired    bool                          `json:"repaired"`
}

// OK reports whether every check agrees.
func (r Reconciliation) OK() bool { return r.Differences == 0 }

// Reconcile reads a product's numbers from every side and checks the invariants of
// docs/PRODUCT.md. The report is exact when nothing is in flight for the product (no request
// running, outbox drained). With repair, the gate is rebuilt from the ledger first (the ledger wins) after
// applying every unsent gate change, waiting for a retry or not (a repair is refused with
// ErrUnavailable while one fails), and the report describes the repaired state.
//
// Errors: ErrProductNotFound, ErrUnavailable.
func (s *Catalogue) Reconcile(ctx context.Context, id domain.ProductID, repair bool) (Reconciliation, error) {
	return s.reconcileID(ctx, id, repair)
}

func (s *stock) reconcileID(ctx context.Context, id domain.ProductID, repair bool) (Reconciliation, error) {
	p, err := s.ledger.Products().Product(ctx, id)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile: %w", err)
	}
	if repair {
		if err := s.drainGateChanges(ctx); err != nil {
			return Reconciliation{}, fmt.Errorf("drain outbox before repair: %w", err)
		}
		if err := s.rebuildGate(ctx, p); err != nil {
			return Reconciliation{}, err
		}
	}
	rep, err := s.reconcile(ctx, p)
	rep.Repaired = repair
	return rep, err
}

// reconcile reads p's numbers from every side; p is the catalogue's product Reconcile read
// (a repair changes the gate, never the product).
func (s *stock) reconcile(ctx context.Context, p domain.Product) (Reconciliation, error) {
	id := p.ID()
	rep := Reconciliation{Product: id, Cards: map[string]int64{}, Orders: map[string]domain.StatusTotal{}}
	var err error
	if rep.Gate, rep.GateKnown, err = s.gate.Levels(ctx, id); err != nil {
		return rep, fmt.Errorf("reconcile gate: %w", err)
	}
	counts, err := s.ledger.Cards().Counts(ctx, id)
	if err != nil {
		return rep, fmt.Errorf("reconcile cards: %w", err)
	}
	totals, err := s.ledger.Orders().Totals(ctx, id)
	if err != nil {
		return rep, fmt.Errorf("reconcile orders: %w", err)
	}
	var ledgerHeld, gateHeld map[domain.BuyerID]int64
	if p.Sale().BuyerLimit > 0 && rep.GateKnown {
		if ledgerHeld, err = s.ledger.Orders().HeldByBuyer(ctx, id, !p.RefundReleasesLimit()); err != nil {
			return rep, fmt.Errorf("reconcile holdings: %w", err)
		}
		if gateHeld, err = s.gate.HeldCounts(ctx, id); err != nil {
			return rep, fmt.Errorf("reconcile gate holdings: %w", err)
		}
	}
	var ledgerCoupons, gateCoupons domain.CouponCounts
	if rep.GateKnown {
		if ledgerCoupons, err = s.ledger.Orders().CouponUses(ctx, id); err != nil {
			return rep, fmt.Errorf("reconcile coupon uses: %w", err)
		}
		if gateCoupons, err = s.gate.CouponCounts(ctx, id); err != nil {
			return rep, fmt.Errorf("reconcile gate coupon uses: %w", err)
		}
	}
	flows, err := s.ledger.Flows().Totals(ctx, id)
	if err != nil {
		return rep, fmt.Errorf("reconcile flow: %w", err)
	}
	for st, n := range counts {
		rep.Cards[st.String()] = n
	}
	for st, t := range totals {
		rep.Orders[st.String()] = t
	}
	rep.Flow = flows.Derive()

	sold := counts[domain.CardSold]
	sellable := counts[domain.CardUnsold] + counts[domain.CardRecycled]
	imported := sellable + sold + counts[domain.CardVoid]
	live := imported - counts[domain.CardVoid]
	paid := totals[domain.StatusPaid].Qty
	pending := totals[domain.StatusPending].Qty
	add := func(name string, want, got int64) {
		c := Check{Name: name, Want: want, Got: got, OK: want == got}
		if !c.OK {
			rep.Differences++
		}
		rep.Checks = append(rep.Checks, c)
	}
	add("codes SOLD = qty of PAID orders", paid, sold)
	add("codes SOLD + sellable = imported - voided", live, sold+sellable)
	if rep.GateKnown {
		add("gate stock + gate sold = imported - voided", live, rep.Gate.Stock+rep.Gate.Sold)
		add("gate sold = qty of PENDING and PAID orders", pending+paid, rep.Gate.Sold)
	} else {
		add("gate knows the product", 1, 0)
	}
	add("flow: imported", imported, rep.Flow.Imported)
	add("flow: voided", counts[domain.CardVoid], rep.Flow.Voided)
	add("flow: sold", sold, rep.Flow.Sold)
	add("flow: sellable", sellable, rep.Flow.Sellable)
	add("flow: held by PENDING and PAID", pending+paid, rep.Flow.Held)
	add("flow: pending", pending, rep.Flow.Pending)
	if rep.GateKnown {
		add("flow: gate stock", rep.Gate.Stock, rep.Flow.GateFree)
	}
	if ledgerHeld != nil {
		var want, got, differ int64
		for b, n := range ledgerHeld {
			want += n
			if gateHeld[b] != n {
				differ++
			}
		}
		for b, n := range gateHeld {
			got += n
			if _, ok := ledgerHeld[b]; !ok {
				differ++
			}
		}
		add("gate holding counts = qty of the buyers' orders (buyer_limit)", want, got)
		add("buyers whose gate holding count differs from their orders", 0, differ)
	}
	if rep.GateKnown && (len(ledgerCoupons) > 0 || len(gateCoupons) > 0) {
		var want, got, differ int64
		for code, l := range ledgerCoupons {
			want += l.Uses
			g := gateCoupons[code]
			if g.Uses != l.Uses {
				differ++
			}
			for b, n := range l.Buyers {
				if g.Buyers[b] != n {
					differ++
				}
			}
		}
		for code, g := range gateCoupons {
			got += g.Uses
			l, ok := ledgerCoupons[code]
			if !ok && g.Uses != 0 {
				differ++
			}
			for b, n := range g.Buyers {
				if _, seen := l.Buyers[b]; !seen && n != 0 {
					differ++
				}
			}
		}
		add("gate coupon uses = orders whose coupon use stands", want, got)
		add("coupon counts (per coupon and per buyer) that differ between the gate and the orders", 0, differ)
	}
	return rep, nil
}

// EnsureGates initialises, from the ledger, the gate of every product the gate does not know
// (a fresh Redis, or one that lost its keys), and reports how many it rebuilt. Products the
// gate knows are left alone. It runs at start.
func (s *Catalogue) EnsureGates(ctx context.Context) (int, error) {
	products, err := s.ledger.Products().Products(ctx)
	if err != nil {
		return 0, fmt.Errorf("ensure gates: %w", err)
	}
	rebuilt := 0
	for _, p := range products {
		_, ok, err := s.gate.Levels(ctx, p.ID())
		if err != nil {
			return rebuilt, fmt.Errorf("ensure gates: %w", err)
		}
		if ok {
			continue
		}
		if err := s.RebuildGate(ctx, p); err != nil {
			return rebuilt, err
		}
		rebuilt++
	}
	return rebuilt, nil
}
