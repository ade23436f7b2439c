package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"cardshop/domain"
)

type alertLog struct{ s *store }

// The widths of the alerts table's text columns, in characters.
const (
	widthAlertKind    = 64
	widthAlertOrder   = 64
	widthAlertMessage = 1024
	widthAlertBy      = 64
	widthAlertNote    = 500
)

// maxAlertPage bounds AlertFilter.Limit, as the port says.
const maxAlertPage = 1000

// Raise inserts the alert, or (uk_open: the condition has an open alert) counts the raise in
// that row; LAST_INSERT_ID(id) makes the statement return the folded row's id. Texts are
// clipped to their columns: an alert is recorded whatever it says.
func (l alertLog) Raise(ctx context.Context, a domain.Alert, at time.Time) (int64, error) {
	const op = "raise an alert"
	res, err := l.s.exec(ctx, op,
		"INSERT INTO alerts (kind, product_id, order_no, message, raised_at, last_at) VALUES (?, ?, ?, ?, ?, ?) "+
			"ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id), count = count + 1, last_at = VALUES(last_at), message = VALUES(message)",
		clip(a.Kind, widthAlertKind), int64(a.Product), clip(string(a.OrderNo), widthAlertOrder),
		clip(a.Message, widthAlertMessage), at.UTC(), at.UTC())
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	return id, l.s.failed(op, err)
}

type alertRow struct {
	ID       int64        `bun:"id"`
	Kind     string       `bun:"kind"`
	Product  int64        `bun:"product_id"`
	OrderNo  string       `bun:"order_no"`
	Message  string       `bun:"message"`
	RaisedAt time.Time    `bun:"raised_at"`
	LastAt   time.Time    `bun:"last_at"`
	Count    int64        `bun:"count"`
	AckedBy  string       `bun:"acked_by"`
	AckedAt  sql.NullTime `bun:"acked_at"`
	AckNote  string       `bun:"ack_note"`
}

const alertColumns = "id, kind, product_id, order_no, message, raised_at, last_at, count, acked_by, acked_at, ack_note"

func (r alertRow) record() domain.AlertRecord {
	out := domain.AlertRecord{ID: r.ID, Alert: domain.Alert{Kind: r.Kind, Product: domain.ProductID(r.Product),
		OrderNo: domain.OrderNo(r.OrderNo), Message: r.Message}, RaisedAt: r.RaisedAt.UTC(), LastAt: r.LastAt.UTC(),
		Count: r.Count, AckedBy: domain.OperatorName(r.AckedBy), AckNote: r.AckNote}
	if r.AckedAt.Valid {
		out.AckedAt = r.AckedAt.Time.UTC()
	}
	return out
}

// List walks idx_open_id (open), idx_kind or idx_product backwards, or the primary key, so a
// page costs about its Limit rows.
func (l alertLog) List(ctx context.Context, f domain.AlertFilter) ([]domain.AlertRecord, error) {
	if f.Limit < 1 || f.Limit > maxAlertPage {
		return nil, domain.Invalid("limit", "must be 1 to 1000")
	}
	status, err := domain.ParseAlertStatus(string(f.Status))
	if err != nil {
		return nil, err
	}
	var conds []string
	var args []any
	switch status {
	case domain.AlertsOpen:
		conds = append(conds, "is_open = 1")
	case domain.AlertsAcknowledged:
		conds = append(conds, "is_open IS NULL")
	default: // all: no condition
	}
	if f.Kind != "" {
		conds, args = append(conds, "kind = ?"), append(args, f.Kind)
	}
	if f.Product != 0 {
		conds, args = append(conds, "product_id = ?"), append(args, int64(f.Product))
	}
	if f.BeforeID != 0 {
		conds, args = append(conds, "id < ?"), append(args, f.BeforeID)
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	var rows []alertRow
	if err := l.s.get(ctx, "list alerts", &rows, "SELECT "+alertColumns+" FROM alerts"+where+" ORDER BY id DESC LIMIT ?",
		append(args, f.Limit)...); err != nil {
		return nil, err
	}
	out := make([]domain.AlertRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

func (l alertLog) Get(ctx context.Context, id int64) (domain.AlertRecord, error) {
	op := fmt.Sprintf("alert %d", id)
	var row alertRow
	err := l.s.get(ctx, op, &row, "SELECT "+alertColumns+" FROM alerts WHERE id = ?", id)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.AlertRecord{}, fmt.Errorf("%s: %w", op, domain.ErrAlertNotFound)
	}
	if err != nil {
		return domain.AlertRecord{}, err
	}
	return row.record(), nil
}

// Acknowledge is conditional on the alert being open: the row lock makes one of concurrent
// acknowledgements change it, and the others (no row changed) learn whether it exists.
func (l alertLog) Acknowledge(ctx context.Context, id int64, by domain.OperatorName, note string, at time.Time) error {
	op := fmt.Sprintf("acknowledge alert %d", id)
	n, err := l.s.execN(ctx, op, "UPDATE alerts SET is_open = NULL, acked_by = ?, acked_at = ?, ack_note = ? WHERE id = ? AND is_open = 1",
		clip(string(by), widthAlertBy), at.UTC(), clip(note, widthAlertNote), id)
	if err != nil || n == 1 {
		return err
	}
	var found int
	if err := l.s.get(ctx, op, &found, "SELECT COUNT(*) FROM alerts WHERE id = ?", id); err != nil {
		return err
	}
	if found == 0 {
		return fmt.Errorf("%s: %w", op, domain.ErrAlertNotFound)
	}
	return fmt.Errorf("%s: %w", op, domain.ErrAlertAcknowledged)
}

func (l alertLog) OpenCounts(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Kind  string `bun:"kind"`
		Count int64  `bun:"n"`
	}
	if err := l.s.get(ctx, "count open alerts", &rows, "SELECT kind, COUNT(*) AS n FROM alerts WHERE is_open = 1 GROUP BY kind"); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Kind] = r.Count
	}
	return out, nil
}
