package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cardshop/domain"
)

// OrderView is an order with the codes sold to it (empty unless PAID).
type OrderView struct {
	Order domain.Order
	Cards []domain.Card
}

// BuyerOrder returns the buyer's own order with its codes once PAID. Another buyer's order
// answers ErrOrderNotFound, exactly like a missing one, so numbers cannot be probed.
//
// Showing the codes is a reveal: the order's RevealedAt is recorded durably before they are
// read (see reveal), so a later refund voids them.
//
// Errors: ErrOrderNotFound, ErrUnavailable (also when the reveal cannot be recorded: then no
// code is returned).
func (s *Sales) BuyerOrder(ctx context.Context, buyer domain.BuyerID, no domain.OrderNo) (OrderView, error) {
	o, err := s.ledger.Orders().Order(ctx, no)
	if err != nil {
		return OrderView{}, fmt.Errorf("load order: %w", err)
	}
	if o.Buyer() != buyer {
		return OrderView{}, domain.ErrOrderNotFound
	}
	return s.view(ctx, o, true)
}

// AdminOrder returns any order, for operators, without its codes: nothing is recorded, so an
// operator can look at an order (and its RevealedAt) before deciding on a refund without
// turning its codes void.
//
// Errors: ErrOrderNotFound, ErrUnavailable.
func (s *Sales) AdminOrder(ctx context.Context, no domain.OrderNo) (OrderView, error) {
	o, err := s.ledger.Orders().Order(ctx, no)
	if err != nil {
		return OrderView{}, fmt.Errorf("load order: %w", err)
	}
	return OrderView{Order: o}, nil
}

// Reader is who reads an order's codes, as the audit entry of the read names them: the
// operator and the client's address.
type Reader struct {
	Identity
	ClientAddr string
}

// ActionCodesRead is the audit action of an operator's read of an order's codes.
const ActionCodesRead = "order.codes_read"

// AdminOrderCodes returns any order with its codes, for an operator (RoleOperator and up). It
// is a reveal exactly like the buyer's read (any plain-text read counts: an operator may pass
// the codes on), and every read that shows codes is in the audit log (ActionCodesRead): who,
// the order, how many codes and their card ids as ranges ("cards", "ids"), never a code. The
// card ids say which codes even after a refund has recycled them into the pool (the order then
// holds them no more); the codes themselves stay out of the log, which every viewer reads. The
// entry is written before the codes are returned: a read that cannot be recorded shows none.
//
// Errors: ErrForbidden (a role below operator), ErrOrderNotFound, ErrUnavailable (also when
// the reveal or the audit entry cannot be recorded: then no code is returned).
func (s *Sales) AdminOrderCodes(ctx context.Context, no domain.OrderNo, by Reader) (OrderView, error) {
	if by.Name == "" || !by.Role.Allows(domain.RoleOperator) {
		return OrderView{}, fmt.Errorf("read the codes of order %s: %w", no, domain.ErrForbidden)
	}
	o, err := s.ledger.Orders().Order(ctx, no)
	if err != nil {
		return OrderView{}, fmt.Errorf("load order: %w", err)
	}
	v, err := s.view(ctx, o, true)
	if err != nil || len(v.Cards) == 0 {
		return v, err
	}
	ids := make([]int64, len(v.Cards))
	for i, c := range v.Cards {
		ids[i] = c.ID
	}
	params, _ := json.Marshal(struct { // integers and a string always encode
		Cards int    `json:"cards"`
		IDs   string `json:"ids"`
	}{len(ids), idRanges(ids)})
	e := domain.AuditEntry{Operator: by.Name, Role: by.Role, Action: ActionCodesRead, Target: "order " + string(no),
		Params: string(params), Result: "200", ClientAddr: by.ClientAddr}
	if _, err := s.audit(ctx, e); err != nil {
		return OrderView{}, revealFailed(no, fmt.Errorf("audit the read: %w", err))
	}
	return v, nil
}

// idRanges writes card ids as sorted ranges, "7-9,12": an order's codes are mostly imported
// together, so its ids mostly run on, and a thousand of them fit an audit entry.
func idRanges(ids []int64) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] <= ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(ids[i], 10))
		if ids[j] != ids[i] {
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(ids[j], 10))
		}
		i = j + 1
	}
	return b.String()
}

func (s *core) view(ctx context.Context, o domain.Order, withCodes bool) (OrderView, error) {
	if !withCodes || o.Status() != domain.StatusPaid {
		return OrderView{Order: o}, nil
	}
	o, err := s.reveal(ctx, o)
	if err != nil {
		return OrderView{}, err
	}
	v := OrderView{Order: o}
	if o.Status() != domain.StatusPaid {
		return v, nil
	}
	cards, err := s.ledger.Cards().Cards(ctx, o.No())
	if err != nil {
		return OrderView{}, fmt.Errorf("load codes: %w", err)
	}
	v.Cards = cards
	return v, nil
}

// reveal makes sure the PAID order o has its RevealedAt recorded before any code is read, and
// returns the order as it now stands: still PAID and revealed (its codes may be shown), or
// moved on by a refund that won the race (no code may be shown).
//
// MarkRevealed records the time only while the order is PAID, in one conditional step, and a
// refund's Transition only wins while the order is revealed as the refund saw it; so a refund
// that decided to recycle either completes before the reveal (which then finds the order
// REFUNDED) or loses to it and decides again (voiding). Codes read after a refund are not SOLD
// to the order any more, and Cards does not return them.
func (s *outbox) reveal(ctx context.Context, o domain.Order) (domain.Order, error) {
	if o.Revealed() {
		return o, nil
	}
	at := s.clock.Now()
	set, err := s.ledger.Orders().MarkRevealed(ctx, o.No(), at)
	if err != nil {
		return domain.Order{}, revealFailed(o.No(), err)
	}
	if set {
		if err := o.MarkRevealed(at); err != nil {
			return domain.Order{}, err
		}
		return o, nil
	}
	// Revealed by a concurrent read, or no longer PAID: the stored order says which.
	stored, err := s.ledger.Orders().Order(ctx, o.No())
	if err != nil {
		return domain.Order{}, revealFailed(o.No(), err)
	}
	if stored.Status() == domain.StatusPaid && !stored.Revealed() {
		return domain.Order{}, revealFailed(o.No(), errors.New("MarkRevealed set nothing on a PAID order without a reveal"))
	}
	return stored, nil
}

// revealFailed is the error of a reveal that could not be recorded: the codes stay hidden and
// the caller may retry.
func revealFailed(no domain.OrderNo, err error) error {
	if errors.Is(err, domain.ErrUnavailable) {
		return fmt.Errorf("record reveal of order %s: %w", no, err)
	}
	return fmt.Errorf("record reveal of order %s: %w: %w", no, domain.ErrUnavailable, err)
}
