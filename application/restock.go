package application

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"cardshop/domain"
)

// FillReport says what filling a product's waiting (UNFULFILLED) orders did.
type FillReport struct {
	// Filled lists the orders filled, oldest first.
	Filled []domain.OrderNo
	// Passed counts the waiting orders passed over, which stay UNFULFILLED for an operator: a
	// refund in flight, a payment accepted after the sale's end, a buyer at the holding limit.
	Passed int
	// Waiting counts the orders left waiting for stock: the first one that did not fit (or met
	// a frozen product) and every younger one.
	Waiting int
}

// SystemActor is who acknowledges the paid_unfulfilled alert of an order once it is filled
// (on restock, or by an operator's fulfil). It is no valid operator name, so no operator can
// be taken for it.
const SystemActor domain.OperatorName = "(system)"

// The acknowledgement's notes of the paid_unfulfilled alert of a filled order.
const (
	RestockNote = "filled on restock"
	FulfilNote  = "fulfilled by an operator"
)

// fillWaiting fills the product's UNFULFILLED orders from its stock, oldest first (by the
// instant their payment was accepted, then by number), each through fulfilWaiting: the same
// code path as an operator's fulfil, so a fill reserves at the gate (gate and ledger move
// together), is refused while a refund is in flight, writes the order's flow, delivery event
// and e-mail, and of racing fills, fulfils and refunds of one order exactly one wins.
//
// The queue is strict: the first order whose qty the stock cannot cover stops the fill, and
// no smaller, younger order goes before it (an order is filled whole or not at all). Orders
// that stock cannot help (a refund in flight, paid after the sale's end, over the buyer's
// limit) are passed over and do not hold the queue. A frozen product stops the fill without
// an error: its waiting orders are filled after the unfreeze, by the sweep.
//
// Every order that became UNFULFILLED before the stock arrived is seen by the fill that runs
// after the stock's commit (ImportCodes runs one); one that became UNFULFILLED after that fill
// listed the orders runs a fill itself (fillAfterLatePayment), so no order waits while stock
// that could fill it sits at the gate. The sweep (FillWaiting) runs it again for every product
// with waiting orders, which covers a crash between an import and its fill.
//
// On one instance the fills of a product run one at a time: a fill asked for while one runs
// is folded into it (the running fill lists the waiting orders again when it ends), so two
// fills never race for one order, and a fill that stopped for want of stock runs again when
// units came back meanwhile (an attempt that lost its order to another gives its units back
// and asks for a fill). Fills on different instances may race: each order is still filled
// once (see fulfil), and the sweep fills what a race left waiting.
//
// Errors: ErrGateNotReady, ErrUnavailable (the fill stopped; the orders not reached wait for
// the next fill).
func (s *core) fillWaiting(ctx context.Context, id domain.ProductID) (FillReport, error) {
	v, _ := s.fills.LoadOrStore(id, &fillRun{})
	run := v.(*fillRun)
	run.mu.Lock()
	if run.running {
		run.again = true
		run.mu.Unlock()
		return FillReport{}, nil
	}
	run.running = true
	run.mu.Unlock()
	var total FillReport
	for round := 1; ; round++ {
		rep, err := s.fillOnce(ctx, id)
		total.Filled = append(total.Filled, rep.Filled...)
		total.Passed, total.Waiting = rep.Passed, rep.Waiting
		run.mu.Lock()
		again := run.again && err == nil && round < maxFillRounds
		run.again, run.running = false, again
		run.mu.Unlock()
		if !again {
			return total, err
		}
	}
}

// maxFillRounds bounds how often one fill lists the waiting orders again for fills asked for
// while it ran; the sweep does what is left.
const maxFillRounds = 10

// fillRun is the state of a product's fill on this instance.
type fillRun struct {
	mu      sync.Mutex
	running bool // a fill runs
	again   bool // a fill was asked for while it ran
}

// fillOnce is one pass of fillWaiting over the product's waiting orders.
func (s *core) fillOnce(ctx context.Context, id domain.ProductID) (FillReport, error) {
	waiting, err := s.waitingOrders(ctx, id)
	if err != nil {
		return FillReport{}, err
	}
	var rep FillReport
	for i, o := range waiting {
		got, err := s.fulfilWaiting(ctx, o.No())
		switch {
		case err == nil:
			rep.Filled = append(rep.Filled, got.No())
		case errors.Is(err, domain.ErrInvalidTransition):
			// Filled by a racing fill or an operator, or refunded, since the list was read.
		case errors.Is(err, domain.ErrRefundInProgress), errors.Is(err, domain.ErrPaidAfterSaleEnded),
			errors.Is(err, domain.ErrFulfilOverLimit), errors.Is(err, domain.ErrCouponUsedUp):
			rep.Passed++
		case errors.Is(err, domain.ErrSoldOut), errors.Is(err, domain.ErrProductFrozen):
			rep.Waiting = len(waiting) - i
			s.resolveFilled(ctx, id, rep.Filled, RestockNote)
			return rep, nil
		default:
			rep.Waiting = len(waiting) - i
			s.resolveFilled(ctx, id, rep.Filled, RestockNote)
			return rep, fmt.Errorf("fill waiting order %s: %w", o.No(), err)
		}
	}
	s.resolveFilled(ctx, id, rep.Filled, RestockNote)
	return rep, nil
}

// waitingOrders lists the product's UNFULFILLED orders, oldest payment first.
func (s *core) waitingOrders(ctx context.Context, id domain.ProductID) ([]domain.Order, error) {
	all, err := s.unfulfilledOrders(ctx, id)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b domain.Order) int {
		if c := a.PaidAt().Compare(b.PaidAt()); c != 0 {
			return c
		}
		return compareNo(a.No(), b.No())
	})
	return all, nil
}

func compareNo(a, b domain.OrderNo) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// unfulfilledOrders lists every UNFULFILLED order, of product id (0: of every product).
func (s *core) unfulfilledOrders(ctx context.Context, id domain.ProductID) ([]domain.Order, error) {
	f := domain.OrderFilter{Product: id, Statuses: []domain.OrderStatus{domain.StatusUnfulfilled}, Limit: domain.MaxOrderPage}
	var all []domain.Order
	for {
		page, err := s.ledger.Orders().Search(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list waiting orders: %w", err)
		}
		all = append(all, page...)
		if len(page) < f.Limit {
			return all, nil
		}
		f.After = domain.CursorOf(page[len(page)-1])
	}
}

// resolveFilled acknowledges the open paid_unfulfilled alerts of the orders filled, in the
// system's name with note: the condition they raise is over. Best effort: an alert left open is one an
// operator acknowledges by hand.
func (s *core) resolveFilled(ctx context.Context, id domain.ProductID, filled []domain.OrderNo, note string) {
	if len(filled) == 0 {
		return
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	before := int64(0)
	for {
		page, err := s.ledger.Alerts().List(ctx, domain.AlertFilter{Status: domain.AlertsOpen, Kind: "paid_unfulfilled",
			Product: id, BeforeID: before, Limit: MaxAlertPage})
		if err != nil {
			s.log.WarnContext(ctx, "alerts of filled orders left open", "product", int64(id), "err", err)
			return
		}
		for _, a := range page {
			if !slices.Contains(filled, a.OrderNo) {
				continue
			}
			err := s.ledger.Alerts().Acknowledge(ctx, a.ID, SystemActor, note, s.clock.Now().UTC().Truncate(time.Microsecond))
			if err != nil && !errors.Is(err, domain.ErrAlertAcknowledged) {
				s.log.WarnContext(ctx, "alert of a filled order left open", "alert", a.ID, "err", err)
			}
		}
		if len(page) < MaxAlertPage {
			return
		}
		before = page[len(page)-1].ID
	}
}

// fillAfterLatePayment runs the product's fill after o's late payment found no stock and made
// it UNFULFILLED, and returns o as it is after (PAID when the fill reached it). Best effort:
// the sweep runs the fill again.
func (s *core) fillAfterLatePayment(ctx context.Context, o domain.Order) domain.Order {
	rep, err := s.fillWaiting(ctx, o.Product())
	if err != nil {
		s.log.WarnContext(ctx, "waiting orders not filled; the sweep fills them", "product", int64(o.Product()), "err", err)
	}
	if !slices.Contains(rep.Filled, o.No()) {
		return o
	}
	got, err := s.ledger.Orders().Order(ctx, o.No())
	if err != nil {
		return o
	}
	return got
}

// refill runs the product's fill after units came back to the stock. Best effort: the sweep
// runs the fill again.
func (s *core) refill(ctx context.Context, id domain.ProductID) {
	ctx, cancel := detached(ctx)
	defer cancel()
	if _, err := s.fillWaiting(ctx, id); err != nil {
		s.log.WarnContext(ctx, "waiting orders not filled; the sweep fills them", "product", int64(id), "err", err)
	}
}

// fillAfterImport runs the product's fill after an import added codes, and records what it
// did in rep. Its failure does not fail the import (the codes are in): it is logged, and the
// sweep fills the orders later.
func (s *Catalogue) fillAfterImport(ctx context.Context, id domain.ProductID, rep *ImportReport) {
	if s.fill == nil || rep.Added == 0 {
		return
	}
	ctx, cancel := detached(ctx) // the codes are in: their waiting orders are filled even when the caller left
	defer cancel()
	fr, err := s.fill(ctx, id)
	rep.Filled = len(fr.Filled)
	if err != nil {
		s.log.WarnContext(ctx, "waiting orders not filled after an import; the sweep fills them", "product", int64(id), "err", err)
	}
}

// FillWaiting fills the waiting orders of every product that has some, as the import does
// (see fillWaiting): the sweep's safety net for a crash between an import and its fill, a
// fill that failed, and stock that came back another way (an expired order's units, an
// unfreeze). It returns how many orders it filled; after a product's failure it goes on with
// the others and returns the first failure.
func (s *Sales) FillWaiting(ctx context.Context) (int, error) {
	all, err := s.unfulfilledOrders(ctx, 0)
	if err != nil {
		return 0, err
	}
	var products []domain.ProductID
	for _, o := range all {
		if !slices.Contains(products, o.Product()) {
			products = append(products, o.Product())
		}
	}
	filled := 0
	var first error
	for _, id := range products {
		rep, err := s.fillWaiting(ctx, id)
		filled += len(rep.Filled)
		if err != nil && first == nil {
			first = err
		}
	}
	return filled, first
}
