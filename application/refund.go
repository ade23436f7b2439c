package application

import (
	"context"
	"errors"
	"fmt"

	"cardshop/domain"
)

// Refund is an operator's refund of an order. Without Void or Recycle the order's codes are
// VOID when they were revealed (the buyer, or an operator, read them: working copies may be
// out there) and RECYCLED (sold again) when they never left the service.
type Refund struct {
	OrderNo domain.OrderNo
	// Void keeps the codes out of the pool for good, revealed or not.
	Void bool
	// Recycle returns the codes to the pool even though they were revealed: the operator
	// vouches that the buyer never used them. Void and Recycle together are invalid.
	Recycle bool
	Reason  string
}

// RefundResult is what a refund did: the REFUNDED order and where its codes went. A refund of
// an order that was already REFUNDED reports what the first refund did (from its flow row).
type RefundResult struct {
	Order    domain.Order
	Recycled int // codes returned to the pool as RECYCLED (flow refund-restore)
	Voided   int // codes taken out of the pool as VOID (flow refund-void)
	// Money is the refund of the order's payment at its provider; zero when the order was paid
	// through the signed callback (the storefront took the money and returns it).
	Money MoneyRefund
}

// MoneyRefund is where the return of an order's money stands at its provider.
type MoneyRefund struct {
	Provider domain.Provider
	Status   domain.PaymentStatus // REFUNDING (pending or to retry), REFUNDED, REFUND_FAILED
	RefundNo string
	Ref      string
	Reason   string
	// ByHand is true when the provider offers no refund through cardshop: the codes were
	// refunded, the money must be returned at the provider by an operator (alerted).
	ByHand bool
}

// RefundOrder refunds a PAID order (codes VOID or RECYCLED as Refund says; stock back to the
// gate when recycled, flow refund-restore, else only the sold units released, flow
// refund-void) or an UNFULFILLED one (no codes, no stock). A refund of a REFUNDED order
// answers it unchanged; of two racing refunds one does the work. A refund that decided on
// "never revealed" does not complete if a reveal was recorded meanwhile: it decides again. A
// refund that read the order before a late payment made it PAID or UNFULFILLED starts over,
// so the money is returned before the codes.
//
// The operator's decision (Void, Recycle, Reason) is stored with the payment's refund when the
// refund is sent to the provider; whoever completes that refund (its notification, the next
// refund of the order) applies the stored decision, not its own flags.
//
// Errors: ErrInvalidInput (Void and Recycle, a reason over domain.MaxRefundNote characters),
// ErrOrderNotFound, ErrInvalidTransition, ErrRefundRefused, ErrUnavailable.
func (s *Payments) RefundOrder(ctx context.Context, cmd Refund) (RefundResult, error) {
	return s.refundOrder(ctx, cmd)
}

func (s *core) refundOrder(ctx context.Context, cmd Refund) (RefundResult, error) {
	if cmd.Void && cmd.Recycle {
		return RefundResult{}, domain.Invalid("recycle", "void and recycle cannot both be asked for")
	}
	if err := domain.CheckRefundNote(cmd.Reason); err != nil {
		return RefundResult{}, err
	}
	o, err := s.ledger.Orders().Order(ctx, cmd.OrderNo)
	if err != nil {
		return RefundResult{}, fmt.Errorf("load order: %w", err)
	}
	var money MoneyRefund
	paid := o.Status() == domain.StatusPaid || o.Status() == domain.StatusUnfulfilled
	if paid {
		// The money first: the codes are released only once the provider returned it, so a
		// refund the provider refuses or cannot take yet leaves the order as it was.
		// A refund the provider took earlier is finished with the decision stored with it.
		if money, cmd, err = s.refundMoney(ctx, o, cmd); err != nil || money.Status == domain.PaymentRefunding {
			return RefundResult{Order: o, Money: money}, err
		}
	} else if p, ok, err := s.paidPayment(ctx, o); err == nil && ok {
		money = MoneyRefund{Provider: p.Provider, Status: p.Status, RefundNo: p.RefundNo, Ref: p.RefundRef, Reason: p.RefundReason}
	}
	out, err := settle(ctx, s.cfg.ReplayWait, "refund", func() (RefundResult, error) {
		o, err := s.ledger.Orders().Order(ctx, cmd.OrderNo)
		if err != nil {
			return RefundResult{}, fmt.Errorf("load order: %w", err)
		}
		if o.Status() == domain.StatusRefunded {
			return s.refunded(ctx, o)
		}
		if !paid && (o.Status() == domain.StatusPaid || o.Status() == domain.StatusUnfulfilled) {
			return RefundResult{}, errPaidMeanwhile
		}
		return s.refund(ctx, o, cmd)
	})
	if errors.Is(err, errPaidMeanwhile) {
		// A late payment made the order refundable after the first read: its money first. Once
		// PAID or UNFULFILLED an order never goes back, so this happens once.
		return s.refundOrder(ctx, cmd)
	}
	out.Money = money
	return out, err
}

// errPaidMeanwhile tells RefundOrder that the order was paid (a late payment) between its
// first read, which found no money to return, and its change.
var errPaidMeanwhile = errors.New("the order was paid while the refund looked at it")

// refunded answers a refund of an order already REFUNDED with what its refund did.
func (s *core) refunded(ctx context.Context, o domain.Order) (RefundResult, error) {
	rows, err := s.ledger.Flows().Entries(ctx, string(o.No()))
	if err != nil {
		return RefundResult{}, fmt.Errorf("load flow of order %s: %w", o.No(), err)
	}
	out := RefundResult{Order: o}
	for _, e := range rows {
		switch e.Type {
		case domain.FlowRefundRestore:
			out.Recycled += int(e.Qty)
		case domain.FlowRefundVoid:
			out.Voided += int(e.Qty)
		default: // other flows: not a refund's
		}
	}
	return out, nil
}

// refundReleasesLimit reports the product's setting; a product that cannot be read keeps the
// units counted (the stricter choice: a rebuild from the ledger settles it either way).
func (s *core) refundReleasesLimit(ctx context.Context, id domain.ProductID) bool {
	p, err := s.product(ctx, id)
	return err == nil && p.RefundReleasesLimit()
}

func (s *core) refund(ctx context.Context, o domain.Order, cmd Refund) (RefundResult, error) {
	now := s.clock.Now()
	from := o.Status()
	reason := cmd.Reason
	if reason == "" {
		reason = "refunded by operator"
	}
	refunded := o
	if err := refunded.Refund(now, reason); err != nil {
		return RefundResult{Order: o}, err
	}
	holdsCodes := from == domain.StatusPaid
	// Decided on the revealed state read with o: Transition wins only while the stored order is
	// still revealed exactly as o is, so a reveal recorded meanwhile sends us round again.
	void := cmd.Void || (o.Revealed() && !cmd.Recycle)
	flowType, to := domain.FlowRefundRestore, domain.CardRecycled
	change := releaseChange(o, domain.FlowRefundRestore)
	if void {
		flowType, to = domain.FlowRefundVoid, domain.CardVoid
		change = domain.GateChange{Product: o.Product(), Ref: flowRef(o.No(), domain.FlowRefundVoid), Sold: -int64(o.Qty()),
			Buyer: o.Buyer(), Held: -int64(o.Qty())}
	}
	if !s.refundReleasesLimit(ctx, o.Product()) {
		change.Held = 0 // the refunded units keep counting against the buyer's limit
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
			return RefundResult{Order: o}, err
		}
		return RefundResult{Order: o}, fmt.Errorf("record refund: %w", err)
	}
	out := RefundResult{Order: refunded}
	if holdsCodes {
		s.applyGate(ctx, change)
		if void {
			out.Voided = o.Qty()
		} else {
			out.Recycled = o.Qty()
		}
	}
	return out, nil
}
