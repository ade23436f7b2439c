package mysqlstore

import (
	"context"
	"fmt"
	"time"

	"cardshop/domain"
)

type flowLog struct{ s *store }

type flowRow struct {
	ID         int64     `bun:"id"`
	ProductID  int64     `bun:"product_id"`
	Ref        string    `bun:"order_no"`
	ChangeType int       `bun:"change_type"`
	Qty        int64     `bun:"qty"`
	CreatedAt  time.Time `bun:"created_at"`
}

// Append relies on uk_ref_type (order_no, change_type): the flow row is what makes a retried
// change harmless, so the database, not a read before the write, refuses the second one.
func (f flowLog) Append(ctx context.Context, e domain.FlowEntry) error {
	return appendFlows(ctx, f.s, fmt.Sprintf("append %s flow of %s", e.Type, e.Ref), []domain.FlowEntry{e})
}

// appendFlows writes entries with one multi-row INSERT: all of them, or none when one is
// refused (ErrDuplicateFlow for a (ref, type) that exists, not saying which row).
func appendFlows(ctx context.Context, s *store, op string, entries []domain.FlowEntry) error {
	v := sqlValues{b: make([]byte, 0, 96+96*len(entries)), d: s.db.Dialect()}
	v.raw("INSERT INTO stock_flow (product_id, order_no, change_type, qty, created_at) VALUES ")
	for _, e := range entries {
		if !e.Type.Valid() {
			return domain.Invalid("type", fmt.Sprintf("unknown flow type %d", int(e.Type)))
		}
		if e.Ref == "" {
			return domain.Invalid("ref", "required")
		}
		v.row()
		v.int(int64(e.ProductID))
		v.str(e.Ref)
		v.int(int64(e.Type))
		v.int(e.Qty)
		v.time(e.At)
		v.end()
	}
	_, err := s.exec(ctx, op, string(v.b))
	if _, dup := duplicateKey(err); dup {
		return fmt.Errorf("%s: %w", op, domain.ErrDuplicateFlow)
	}
	return err
}

func (f flowLog) Totals(ctx context.Context, p domain.ProductID) (domain.FlowTotals, error) {
	var rows []struct {
		ChangeType int   `bun:"change_type"`
		Qty        int64 `bun:"qty"`
	}
	if err := f.s.get(ctx, fmt.Sprintf("flow totals of product %d", p), &rows,
		"SELECT change_type, SUM(qty) AS qty FROM stock_flow WHERE product_id = ? GROUP BY change_type", int64(p)); err != nil {
		return nil, err
	}
	out := make(domain.FlowTotals, len(rows))
	for _, r := range rows {
		out[domain.FlowType(r.ChangeType)] = r.Qty
	}
	return out, nil
}

func (f flowLog) Entries(ctx context.Context, ref string) ([]domain.FlowEntry, error) {
	var rows []flowRow
	if err := f.s.get(ctx, fmt.Sprintf("flow of %s", ref), &rows,
		"SELECT id, product_id, order_no, change_type, qty, created_at FROM stock_flow WHERE order_no = ? ORDER BY id", ref); err != nil {
		return nil, err
	}
	out := make([]domain.FlowEntry, len(rows))
	for i, r := range rows {
		out[i] = domain.FlowEntry{ID: r.ID, ProductID: domain.ProductID(r.ProductID), Ref: r.Ref,
			Type: domain.FlowType(r.ChangeType), Qty: r.Qty, At: r.CreatedAt}
	}
	return out, nil
}

// PerInterval counts in one query over idx_product (product_id, created_at): the rows of the
// window are grouped by their interval's number, counted from from in microseconds.
func (f flowLog) PerInterval(ctx context.Context, p domain.ProductID, t domain.FlowType, from time.Time, step time.Duration, n int) ([]int64, error) {
	if err := domain.CheckFlowIntervals(step, n); err != nil {
		return nil, err
	}
	from = from.UTC()
	var rows []struct {
		Slot  int64 `bun:"slot"`
		Count int64 `bun:"n"`
	}
	if err := f.s.get(ctx, fmt.Sprintf("%s flow per interval of product %d", t, p), &rows,
		"SELECT TIMESTAMPDIFF(MICROSECOND, ?, created_at) DIV ? AS slot, COUNT(*) AS n FROM stock_flow "+
			"WHERE product_id = ? AND change_type = ? AND created_at >= ? AND created_at < ? GROUP BY slot",
		from, step.Microseconds(), int64(p), int(t), from, from.Add(time.Duration(n)*step)); err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for _, r := range rows {
		if r.Slot >= 0 && r.Slot < int64(n) {
			out[r.Slot] = r.Count
		}
	}
	return out, nil
}
