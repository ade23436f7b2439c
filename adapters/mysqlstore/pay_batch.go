package mysqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/uptrace/bun"

	"cardshop/domain"
)

// PayMember is one payment's writes as the fulfil transaction makes them: the order moved to
// Paid (its stored form after the payment) if it is still in From, its Qty codes of its product
// marked SOLD to it, its flow rows (the pay row, and a late-reserve row before it for a payment
// after a close) and its outbox messages.
type PayMember struct {
	Paid   domain.Order
	From   domain.OrderStatus
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
)

// PayBatch writes, in one transaction and one COMMIT, every member it can decide as that
// member's own transaction would, and reports each member's outcome (in the members' order;
// valid only when the error is nil).
//
//  1. The members' order rows are locked in one SELECT … FOR UPDATE (in primary-key order) and
//     each member's conditional transition is decided on its row, as Transition's UPDATE
//     would: same status, same identity, revealed exactly when the member's order is. A member
//     whose order is a repeat of an earlier member's runs alone.
//  2. Per product, the codes of all winners are taken with one SELECT … FOR UPDATE SKIP LOCKED
//     LIMIT Σqty in Allocate's order, and handed out in member order; a winner left without
//     all its codes runs alone (Allocate then tells a real shortage from locked codes).
//  3. The winners' orders are updated (each still conditional on its status), their codes
//     marked SOLD in one UPDATE, their flow rows and outbox messages inserted in one multi-row
//     INSERT each.
//
// Any error (a duplicate flow row, a lost connection, a deadlock the retries did not resolve)
// fails the whole batch, and nothing of it is written; a lost COMMIT answer is
// domain.ErrCommitUnknown for every member, as Atomically reports it. The transaction may run
// more than once (deadlock retry); the outcomes are those of the run that committed.
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
		"FROM orders FORCE INDEX (PRIMARY) WHERE order_no IN (?) ORDER BY order_no FOR UPDATE", bun.List(nos)); err != nil {
		return nil, err
	}
	byNo := make(map[string]payRow, len(rows))
	for _, r := range rows {
		byNo[r.No] = r
	}
	taken := make(map[string]bool, len(members))
	need := map[domain.ProductID]int{}
	for i, m := range members {
		out[i] = PayAlone
		rec := m.Paid.Record()
		r, ok := byNo[string(rec.No)]
		key := ""
		if r.Key != nil {
			key = *r.Key
		}
		if !ok || taken[r.No] || r.Status != m.From.String() || r.Revealed != m.Paid.Revealed() ||
			r.Buyer != string(rec.Buyer) || r.Product != int64(rec.Product) || r.Qty != rec.Qty || key != string(rec.IdemKey) {
			continue
		}
		taken[r.No] = true
		out[i] = PayStored
		need[rec.Product] += rec.Qty
	}

	// 2. The codes, per product, handed out in member order.
	codes := map[domain.ProductID][]int64{}
	for p, n := range need {
		var ids []int64
		if err := s.get(ctx, op, &ids, "SELECT id FROM card_stock WHERE product_id = ? AND status IN ('UNSOLD', 'RECYCLED') "+
			"ORDER BY status, id LIMIT ? FOR UPDATE SKIP LOCKED", int64(p), n); err != nil {
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
		if out[i] != PayStored {
			continue
		}
		p, q := m.Paid.Product(), m.Paid.Qty()
		if len(codes[p]) < q {
			out[i] = PayAlone // the codes left for it are not free for this batch
			continue
		}
		for _, id := range codes[p][:q] {
			cardCase.WriteString(" WHEN ? THEN ?")
			cardArgs = append(cardArgs, id, string(m.Paid.No()))
			cardIDs = append(cardIDs, id)
		}
		codes[p] = codes[p][q:]
	}
	if len(cardIDs) == 0 {
		return out, nil
	}

	// 3. The writes of the members stored.
	var (
		flows []domain.FlowEntry
		msgs  []domain.OutboxMessage
	)
	for i, m := range members {
		if out[i] != PayStored {
			continue
		}
		rec := m.Paid.Record()
		n, err := s.execN(ctx, op, "UPDATE orders FORCE INDEX (PRIMARY) SET status = ?, reason = ?, payment_ref = ?, paid_at = ?, ended_at = ?, updated_at = ? "+
			"WHERE order_no = ? AND status = ?",
			rec.Status.String(), rec.Reason, rec.PaymentRef, nullTime(rec.PaidAt), nullTime(rec.EndedAt), rec.UpdatedAt.UTC(),
			string(rec.No), m.From.String())
		if err != nil {
			return nil, err
		}
		if n != 1 {
			return nil, fmt.Errorf("%s: order %s changed under its lock", op, rec.No)
		}
		flows = append(flows, m.Flows...)
		msgs = append(msgs, m.Outbox...)
	}
	args := append(cardArgs, bun.List(cardIDs))
	n, err := s.execN(ctx, op, "UPDATE card_stock SET status = 'SOLD', order_no = CASE id"+cardCase.String()+" END, "+
		"updated_at = UTC_TIMESTAMP(6) WHERE id IN (?) AND status IN ('UNSOLD', 'RECYCLED')", args...)
	if err != nil {
		return nil, err
	}
	if n != int64(len(cardIDs)) {
		return nil, fmt.Errorf("%s: marked %d of %d locked codes sold", op, n, len(cardIDs))
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
