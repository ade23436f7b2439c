package mysqlstore

import (
	"context"
	"strings"
	"time"

	"cardshop/domain"
)

type auditLog struct{ s *store }

// The widths of audit_log's text columns, in characters.
const (
	widthAuditOperator = 64
	widthAuditRole     = 16
	widthAuditAction   = 64
	widthAuditTarget   = 128
	widthAuditParams   = 4096
	widthAuditResult   = 128
	widthAuditClient   = 64
)

// maxAuditPage bounds AuditFilter.Limit, as the port says.
const maxAuditPage = 1000

// Append clips every text to its column: an entry is recorded whatever a request carried,
// because losing the record of a write is worse than shortening it. A zero e.At is the time
// of the insert.
func (l auditLog) Append(ctx context.Context, e domain.AuditEntry) (int64, error) {
	at := e.At.UTC()
	if e.At.IsZero() {
		at = time.Now().UTC()
	}
	res, err := l.s.exec(ctx, "append to the audit log",
		"INSERT INTO audit_log (at, operator, role, action, target, params, result, client_addr) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		at, clip(string(e.Operator), widthAuditOperator), clip(string(e.Role), widthAuditRole),
		clip(e.Action, widthAuditAction), clip(e.Target, widthAuditTarget), clip(e.Params, widthAuditParams),
		clip(e.Result, widthAuditResult), clip(e.ClientAddr, widthAuditClient))
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	return id, l.s.failed("append to the audit log", err)
}

type auditRow struct {
	ID         int64     `bun:"id"`
	At         time.Time `bun:"at"`
	Operator   string    `bun:"operator"`
	Role       string    `bun:"role"`
	Action     string    `bun:"action"`
	Target     string    `bun:"target"`
	Params     string    `bun:"params"`
	Result     string    `bun:"result"`
	ClientAddr string    `bun:"client_addr"`
}

// List walks the primary key backwards, or idx_operator's or idx_action's range of one
// operator or action (whose second part is the id), so a page costs its Limit rows, not the
// log's size. A target has no index of its own: it is asked with its action (the console's
// import history, product.import of one product), and filters that action's range.
func (l auditLog) List(ctx context.Context, f domain.AuditFilter) ([]domain.AuditEntry, error) {
	if f.Limit < 1 || f.Limit > maxAuditPage {
		return nil, domain.Invalid("limit", "must be 1 to 1000")
	}
	where, args := auditWhere(f)
	var rows []auditRow
	if err := l.s.get(ctx, "list the audit log", &rows, "SELECT id, at, operator, role, action, target, params, result, "+
		"client_addr FROM audit_log"+where+" ORDER BY id DESC LIMIT ?", append(args, f.Limit)...); err != nil {
		return nil, err
	}
	out := make([]domain.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = domain.AuditEntry{ID: r.ID, At: r.At, Operator: domain.OperatorName(r.Operator), Role: domain.Role(r.Role),
			Action: r.Action, Target: r.Target, Params: r.Params, Result: r.Result, ClientAddr: r.ClientAddr}
	}
	return out, nil
}

// auditWhere is the WHERE clause of f's set fields (none: every entry), and its arguments.
func auditWhere(f domain.AuditFilter) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		conds = append(conds, cond)
		args = append(args, arg)
	}
	if f.Operator != "" {
		add("operator = ?", string(f.Operator))
	}
	if f.Action != "" {
		add("action = ?", f.Action)
	}
	if f.Target != "" {
		add("target = ?", f.Target)
	}
	if !f.From.IsZero() {
		add("at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		add("at < ?", f.To.UTC())
	}
	if f.BeforeID != 0 {
		add("id < ?", f.BeforeID)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}
