package mysqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/uptrace/bun"

	"cardshop/domain"
)

// PayMember is one order's status change as its transaction makes it: the order moved to Paid
// (its stored form after the change) if it is still in From, with Codes its Qty codes of its
// product marked SOLD to it, its flow rows and its outbox messages.
//
// A payment has Codes (its flow rows: the pay row, and a late-reserve row before it for a
// payment after a close; its messages: the delivery events). A change that takes no codes —
// an expired order closed, a failed payment, an unfulfillable one — has none (its flow row
// returns the stock; its message carries that change to the gate). The name is the payment's,
// the first kind the batch took.
type PayMember struct {
	Paid   domain.Order
	From   domain.OrderStatus
	Codes  bool
	Flows  []domain.FlowEntry
	Outbox []domain.OutboxMessage
}

// PayOutcome is what PayBatch did with one member.
type PayOutcome uint8

// The outcomes of a member of a payment batch.
const (
	// PayStored: the order moved, its codes are SOLD to it, its rows are written; it commits
	// with the batch.
	PayStored PayOutcome = iota + 1
	// PayAlone: nothing of the member was written, because the batch cannot decide it as its
	// own transaction would: its order is not (or no longer) in From, appears twice in the
	// batch, or changed identity, or the codes it needs are not free for this batch (sold out,
	// or locked by another transaction). It must run alone, the normal way, which decides it
	// exactly as before (a lost race, ErrInsufficientCards after waiting for locked codes, ...).
	PayAlone
	// PayLost: nothing of the member was written, because its conditional transition lost, as
	// Transition would have answered it on the same locked row: the order's status (or its
	// revealed mark) is no longer the member's From, either as committed before the batch or
	// after an earlier member of the batch moved the same order. Valid only when the batch
	// commits: the member's own transaction would have found the same row.
	PayLost
)

// PayBatch writes, in one transaction and one COMMIT, every member it can decide exactly as
// that member's own transaction would, and reports each member's outcome (in the members'
// order; valid only when the error is nil). It locks the members' order rows and then their
// codes with SKIP LOCKED, so it never waits for another transaction: a member whose row or
// codes another one holds is PayAlone. Any error fails the whole batch and writes nothing; a
// lost COMMIT answer is domain.ErrCommitUnknown for every member. The transaction may run more
// than once (deadlock retry); the outcomes are those of the run that committed. Its three
// steps, and why each decides as Transition and Allocate would: docs/DESIGN.md, "Group commit
// of placed orders and payments".
func (l *Ledger) PayBatch(ctx context.Context, members []PayMember) ([]PayOutcome, error) {
	if len(members) == 0 {
		return nil, nil
	}
	var out []PayOutcome
	err := l.Atomically(ctx, func(tx domain.Store) error {
		var err error
		out, err = payBatch(ctx, tx.(*store), members)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// payRow is what the batch reads of a member's order row.
type payRow struct {
	No       string  `bun:"order_no"`
	Status   string  `bun:"status"`
	Buyer    string  `bun:"buyer_id"`
	Product  int64   `bun:"product_id"`
	Qty      int     `bun:"qty"`
	Key      *string `bun:"idem_key"`
	Revealed bool    `bun:"revealed"`
}

func payBatch(ctx context.Context, s *store, members []PayMember) ([]PayOutcome, error) {
	out := make([]PayOutcome, len(members))
	op := fmt.Sprintf("pay a batch of %d orders", len(members))

	// 1. The transitions, decided on the locked rows.
	nos := make([]string, 0, len(members))
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		if no := string(m.Paid.No()); !seen[no] {
			seen[no] = true
			nos = append(nos, no)
		}
	}
	var rows []payRow
	if err := s.get(ctx, op, &rows, "SELECT order_no, status, buyer_id, product_id, qty, idem_key, revealed_at IS NOT NULL AS revealed "+
		"FROM orders FORCE INDEX (PRIMARY) WHERE order_no IN (?) ORDER BY order_no FOR UPDATE SKIP LOCKED", bun.List(nos)); err != nil {
		return nil, err
	}
	byNo := make(map[string]payRow, len(rows))
	for _, r := range rows {
		byNo[r.No] = r
	}
	holder := make(map[string]int, len(members)) // order no -> the member that moves it
	var repeats []int
	need := map[domain.ProductID]int{}
	for i, m := range members {
		out[i] = PayAlone
		rec := m.Paid.Record()
		r, ok := byNo[string(rec.No)]
		if !ok {
			continue // no such order, or locked by another transaction
		}
		if _, taken := holder[r.No]; taken {
			repeats = append(repeats, i)
			continue
		}
		if r.Status != m.From.String() || r.Revealed != m.Paid.Revealed() {
			out[i] = PayLost // Transition's UPDATE matches no row and its read finds it moved
			continue
		}
		key := ""
		if r.Key != nil {
			key = *r.Key
		}
		if r.Buyer != string(rec.Buyer) || r.Product != int64(rec.Product) || r.Qty != rec.Qty || key != string(rec.IdemKey) {
			continue // Transition refuses a change of identity: alone, it says so
		}
		holder[r.No] = i
		out[i] = PayStored
		if m.Codes {
			need[rec.Product] += rec.Qty
		}
	}

	// 2. The codes, per product, handed out in member order, each member's of distinct codes
	// (a multi-use code's uses may sit side by side).
	type free struct {
		ID   int64  `bun:"id"`
		Hash []byte `bun:"code_hash"`
	}
	codes := map[domain.ProductID][]free{}
	for p, n := range need {
		var ids []free
		if err := s.get(ctx, op, &ids, "SELECT id, code_hash FROM card_stock WHERE product_id = ? AND status IN ('UNSOLD', 'RECYCLED') "+
			"ORDER BY status, use_no, id LIMIT ? FOR UPDATE SKIP LOCKED", int64(p), n); err != nil {
			return nil, err
		}
		codes[p] = ids
	}
	var (
		cardIDs  []int64
		cardCase strings.Builder
		cardArgs []any
	)
	for i, m := range members {
		if out[i] != PayStored || !m.Codes {
			continue
		}
		p, q := m.Paid.Product(), m.Paid.Qty()
		taken, left := distinctUses(codes[p], q, func(f free) string { return string(f.Hash) })
		if len(taken) < q {
			out[i] = PayAlone // the codes left for it are not free for this batch
			continue
		}
		for _, f := range taken {
			cardCase.WriteString(" WHEN ? THEN ?")
			cardArgs = append(cardArgs, f.ID, string(m.Paid.No()))
			cardIDs = append(cardIDs, f.ID)
		}
		codes[p] = left
	}
	// A repeat loses to the earlier member that moves its order, once that one is stored and
	// leaves the row in another status than the repeat expects (the row's revealed mark does
	// not move); any other repeat runs alone.
	for _, i := range repeats {
		m := members[i]
		r := byNo[string(m.Paid.No())]
		if j := holder[r.No]; out[j] == PayStored && (members[j].Paid.Status() != m.From || r.Revealed != m.Paid.Revealed()) {
			out[i] = PayLost
		}
	}
	// 3. The writes of the members stored.
	var (
		winners []string
		flows   []domain.FlowEntry
		msgs    []domain.OutboxMessage
	)
	for i, m := range members {
		if out[i] == PayStored {
			winners = append(winners, string(m.Paid.No()))
			flows = append(flows, m.Flows...)
			msgs = append(msgs, m.Outbox...)
		}
	}
	if len(winners) == 0 {
		return out, nil
	}
	if err := moveOrders(ctx, s, op, members, out, winners); err != nil {
		return nil, err
	}
	if len(cardIDs) > 0 {
		args := append(cardArgs, bun.List(cardIDs))
		n, err := s.execN(ctx, op, "UPDATE card_stock SET status = 'SOLD', order_no = CASE id"+cardCase.String()+" END, "+
			"updated_at = UTC_TIMESTAMP(6) WHERE id IN (?) AND status IN ('UNSOLD', 'RECYCLED')", args...)
		if err != nil {
			return nil, err
		}
		if n != int64(len(cardIDs)) {
			return nil, fmt.Errorf("%s: marked %d of %d locked codes sold", op, n, len(cardIDs))
		}
	}
	if len(flows) > 0 {
		if err := appendFlows(ctx, s, op, flows); err != nil {
			return nil, err
		}
	}
	if len(msgs) > 0 {
		if err := addMessages(ctx, s, op, msgs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// moveOrders writes the stored members' orders in one UPDATE: each column set by a CASE on
// the order number, as each member's Transition would set it. The rows are locked and their
// status checked (step 1), so every one of them changes.
func moveOrders(ctx context.Context, s *store, op string, members []PayMember, out []PayOutcome, winners []string) error {
	var cases [6]strings.Builder
	args := make([][]any, 6)
	for i, m := range members {
		if out[i] != PayStored {
			continue
		}
		rec := m.Paid.Record()
		no := string(rec.No)
		for c, v := range []any{rec.Status.String(), rec.Reason, rec.PaymentRef, nullTime(rec.PaidAt), nullTime(rec.EndedAt), rec.UpdatedAt.UTC()} {
			cases[c].WriteString(" WHEN ? THEN ?")
			args[c] = append(args[c], no, v)
		}
	}
	var q strings.Builder
	var all []any
	q.WriteString("UPDATE orders FORCE INDEX (PRIMARY) SET ")
	for c, col := range []string{"status", "reason", "payment_ref", "paid_at", "ended_at", "updated_at"} {
		if c > 0 {
			q.WriteString(", ")
		}
		q.WriteString(col + " = CASE order_no" + cases[c].String() + " END")
		all = append(all, args[c]...)
	}
	q.WriteString(" WHERE order_no IN (?)")
	all = append(all, bun.List(winners))
	n, err := s.execN(ctx, op, q.String(), all...)
	if err != nil {
		return err
	}
	if n != int64(len(winners)) {
		return fmt.Errorf("%s: %d of %d locked orders changed", op, n, len(winners))
	}
	return nil
}

// distinctUses returns the first (up to) qty of uses whose codes (key) differ, and the rest in
// their order.
func distinctUses[T any](uses []T, qty int, key func(T) string) (taken, left []T) {
	seen := make(map[string]bool, qty)
	for i, u := range uses {
		if len(taken) == qty {
			return taken, append(left, uses[i:]...)
		}
		if seen[key(u)] {
			left = append(left, u)
			continue
		}
		seen[key(u)] = true
		taken = append(taken, u)
	}
	return taken, left
}
