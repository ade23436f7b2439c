package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"cardshop/domain"
)

type operatorRepo struct{ s *store }

// Create stores a zero RotatedAt as the creation time, and its own copy of the hash (the
// caller's slice may change later, a row does not).
func (r operatorRepo) Create(_ context.Context, o domain.Operator) error {
	if _, err := domain.ParseRole(string(o.Role)); err != nil {
		return err
	}
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	if _, taken := r.s.data.operators[o.Name]; taken {
		return fmt.Errorf("create operator %s: %w", o.Name, domain.ErrOperatorExists)
	}
	if o.RotatedAt.IsZero() {
		o.RotatedAt = o.CreatedAt
	}
	o.TokenHash = slices.Clone(o.TokenHash)
	o.CreatedAt, o.RotatedAt = o.CreatedAt.UTC(), o.RotatedAt.UTC()
	put(r.s, r.s.data.operators, o.Name, o)
	return nil
}

func (r operatorRepo) Operator(_ context.Context, name domain.OperatorName) (domain.Operator, error) {
	release, err := r.s.acquire()
	if err != nil {
		return domain.Operator{}, err
	}
	defer release()
	o, ok := r.s.data.operators[name]
	if !ok {
		return domain.Operator{}, fmt.Errorf("operator %s: %w", name, domain.ErrOperatorNotFound)
	}
	return copyOperator(o), nil
}

// Operators sorts by name, as the database's binary collation does.
func (r operatorRepo) Operators(_ context.Context) ([]domain.Operator, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]domain.Operator, 0, len(r.s.data.operators))
	for _, o := range r.s.data.operators {
		out = append(out, copyOperator(o))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (r operatorRepo) Rotate(_ context.Context, name domain.OperatorName, hash []byte, at time.Time) error {
	return r.update(name, "rotate the token of", func(o *domain.Operator) {
		o.TokenHash, o.RotatedAt = slices.Clone(hash), at.UTC()
	})
}

func (r operatorRepo) SetRole(_ context.Context, name domain.OperatorName, role domain.Role) error {
	if _, err := domain.ParseRole(string(role)); err != nil {
		return err
	}
	return r.update(name, "set the role of", func(o *domain.Operator) { o.Role = role })
}

// update applies change to a copy of the named operator and stores the copy, so that the undo
// of a rolled-back transaction restores the row as it was.
func (r operatorRepo) update(name domain.OperatorName, what string, change func(o *domain.Operator)) error {
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	o, ok := r.s.data.operators[name]
	if !ok {
		return fmt.Errorf("%s operator %s: %w", what, name, domain.ErrOperatorNotFound)
	}
	change(&o)
	put(r.s, r.s.data.operators, name, o)
	return nil
}

func (r operatorRepo) Remove(_ context.Context, name domain.OperatorName) error {
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	if _, ok := r.s.data.operators[name]; !ok {
		return fmt.Errorf("remove operator %s: %w", name, domain.ErrOperatorNotFound)
	}
	del(r.s, r.s.data.operators, name)
	return nil
}

func (r operatorRepo) SetDisabled(_ context.Context, name domain.OperatorName, at time.Time) error {
	return r.update(name, "disable or enable", func(o *domain.Operator) { o.DisabledAt = at.UTC() })
}

// ActiveAdmins needs no lock of its own: Atomically holds the ledger's mutex for the whole
// transaction, which serialises every change of operators.
func (r operatorRepo) ActiveAdmins(_ context.Context) ([]domain.OperatorName, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	var out []domain.OperatorName
	for _, o := range r.s.data.operators {
		if o.Role == domain.RoleAdmin && !o.Disabled() {
			out = append(out, o.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// EndSessions keeps the later of the stored time and at, as the port says.
func (r operatorRepo) EndSessions(_ context.Context, name domain.OperatorName, at time.Time) error {
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	if at.After(r.s.data.logouts[name]) {
		put(r.s, r.s.data.logouts, name, at.UTC())
	}
	return nil
}

func (r operatorRepo) SessionsEnded(_ context.Context, name domain.OperatorName) (time.Time, error) {
	release, err := r.s.acquire()
	if err != nil {
		return time.Time{}, err
	}
	defer release()
	return r.s.data.logouts[name], nil
}

// copyOperator gives the caller a hash of its own: changing it must not change the row.
func copyOperator(o domain.Operator) domain.Operator {
	o.TokenHash = slices.Clone(o.TokenHash)
	return o
}

type auditLog struct{ s *store }

// maxAuditPage bounds AuditFilter.Limit, as the port says.
const maxAuditPage = 1000

// Append stores a zero e.At as the time of the call, in UTC as the database returns times. Ids
// count from 1 and are not reused after a rollback.
func (l auditLog) Append(_ context.Context, e domain.AuditEntry) (int64, error) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.At = e.At.UTC()
	release, err := l.s.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	d := l.s.data
	d.lastAudit++
	e.ID = d.lastAudit
	d.audit = append(d.audit, e)
	l.s.onUndo(func() { d.audit = d.audit[:len(d.audit)-1] })
	return e.ID, nil
}

// List walks the log from the newest entry below f.BeforeID (found by binary search: ids
// increase along the slice) and keeps those f selects.
func (l auditLog) List(_ context.Context, f domain.AuditFilter) ([]domain.AuditEntry, error) {
	if f.Limit < 1 || f.Limit > maxAuditPage {
		return nil, domain.Invalid("limit", "must be 1 to 1000")
	}
	release, err := l.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	log := l.s.data.audit
	end := len(log)
	if f.BeforeID != 0 {
		end = sort.Search(len(log), func(i int) bool { return log[i].ID >= f.BeforeID })
	}
	var out []domain.AuditEntry
	for i := end - 1; i >= 0 && len(out) < f.Limit; i-- {
		if auditSelects(f, log[i]) {
			out = append(out, log[i])
		}
	}
	return out, nil
}

// auditSelects reports whether e passes f's set fields other than BeforeID and Limit.
func auditSelects(f domain.AuditFilter, e domain.AuditEntry) bool {
	return (f.Operator == "" || e.Operator == f.Operator) &&
		(f.Action == "" || e.Action == f.Action) &&
		(f.Target == "" || e.Target == f.Target) &&
		(f.From.IsZero() || !e.At.Before(f.From)) &&
		(f.To.IsZero() || e.At.Before(f.To))
}
