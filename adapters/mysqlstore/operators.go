package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"cardshop/domain"
)

type operatorRepo struct{ s *store }

type operatorRow struct {
	Name      string       `bun:"name"`
	Role      string       `bun:"role"`
	TokenHash []byte       `bun:"token_hash"`
	CreatedAt time.Time    `bun:"created_at"`
	RotatedAt time.Time    `bun:"rotated_at"`
	Disabled  sql.NullTime `bun:"disabled_at"`
}

const operatorColumns = "name, role, token_hash, created_at, rotated_at, disabled_at"

func (r operatorRow) operator() (domain.Operator, error) {
	role, err := domain.ParseRole(r.Role)
	if err != nil {
		return domain.Operator{}, fmt.Errorf("operator %s: %w", r.Name, err)
	}
	return domain.Operator{Name: domain.OperatorName(r.Name), Role: role, TokenHash: r.TokenHash,
		CreatedAt: r.CreatedAt, RotatedAt: r.RotatedAt, DisabledAt: r.Disabled.Time}, nil
}

// Create is one INSERT; the primary key refuses a second operator of the name, whoever races
// to write it. A zero RotatedAt is the creation time (the first token is "rotated" then).
func (r operatorRepo) Create(ctx context.Context, o domain.Operator) error {
	if _, err := domain.ParseRole(string(o.Role)); err != nil {
		return err
	}
	rotated := o.RotatedAt
	if rotated.IsZero() {
		rotated = o.CreatedAt
	}
	op := fmt.Sprintf("create operator %s", o.Name)
	_, err := r.s.exec(ctx, op, "INSERT INTO operators ("+operatorColumns+") VALUES (?, ?, ?, ?, ?, ?)",
		string(o.Name), string(o.Role), o.TokenHash, o.CreatedAt.UTC(), rotated.UTC(), nullTime(o.DisabledAt))
	if _, dup := duplicateKey(err); dup {
		return fmt.Errorf("%s: %w", op, domain.ErrOperatorExists)
	}
	return err
}

func (r operatorRepo) Operator(ctx context.Context, name domain.OperatorName) (domain.Operator, error) {
	op := fmt.Sprintf("operator %s", name)
	var row operatorRow
	err := r.s.get(ctx, op, &row, "SELECT "+operatorColumns+" FROM operators WHERE name = ?", string(name))
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Operator{}, fmt.Errorf("%s: %w", op, domain.ErrOperatorNotFound)
	}
	if err != nil {
		return domain.Operator{}, err
	}
	return row.operator()
}

// Operators reads the primary key in order: the binary collation sorts names as Go does.
func (r operatorRepo) Operators(ctx context.Context) ([]domain.Operator, error) {
	var rows []operatorRow
	if err := r.s.get(ctx, "operators", &rows, "SELECT "+operatorColumns+" FROM operators ORDER BY name"); err != nil {
		return nil, err
	}
	out := make([]domain.Operator, 0, len(rows))
	for _, row := range rows {
		o, err := row.operator()
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func (r operatorRepo) Rotate(ctx context.Context, name domain.OperatorName, hash []byte, at time.Time) error {
	op := fmt.Sprintf("rotate the token of operator %s", name)
	n, err := r.s.execN(ctx, op, "UPDATE operators SET token_hash = ?, rotated_at = ? WHERE name = ?",
		hash, at.UTC(), string(name))
	return r.changed(ctx, op, name, n, err)
}

func (r operatorRepo) SetRole(ctx context.Context, name domain.OperatorName, role domain.Role) error {
	if _, err := domain.ParseRole(string(role)); err != nil {
		return err
	}
	op := fmt.Sprintf("set the role of operator %s to %s", name, role)
	n, err := r.s.execN(ctx, op, "UPDATE operators SET role = ? WHERE name = ?", string(role), string(name))
	return r.changed(ctx, op, name, n, err)
}

// changed tells, after an UPDATE of the operator that changed n rows, an unknown operator from
// one that already held the values: the connection counts changed rows, not matched ones.
func (r operatorRepo) changed(ctx context.Context, op string, name domain.OperatorName, n int64, err error) error {
	if err != nil || n > 0 {
		return err
	}
	var found int
	err = r.s.get(ctx, op, &found, "SELECT COUNT(*) FROM operators WHERE name = ?", string(name))
	if err == nil && found == 0 {
		return fmt.Errorf("%s: %w", op, domain.ErrOperatorNotFound)
	}
	return err
}

func (r operatorRepo) Remove(ctx context.Context, name domain.OperatorName) error {
	op := fmt.Sprintf("remove operator %s", name)
	n, err := r.s.execN(ctx, op, "DELETE FROM operators WHERE name = ?", string(name))
	if err == nil && n == 0 {
		return fmt.Errorf("%s: %w", op, domain.ErrOperatorNotFound)
	}
	return err
}

func (r operatorRepo) SetDisabled(ctx context.Context, name domain.OperatorName, at time.Time) error {
	op := fmt.Sprintf("disable or enable operator %s", name)
	n, err := r.s.execN(ctx, op, "UPDATE operators SET disabled_at = ? WHERE name = ?", nullTime(at), string(name))
	return r.changed(ctx, op, name, n, err)
}

// ActiveAdmins is a locking read (FOR UPDATE): inside a transaction the admins' rows stay
// locked until it ends, and a concurrent locking read waits, then reads the rows as the first
// transaction left them (a locking read sees the newest committed rows, whatever the
// isolation), so two demotions of the last two admins cannot both see "another is left".
func (r operatorRepo) ActiveAdmins(ctx context.Context) ([]domain.OperatorName, error) {
	var names []string
	if err := r.s.get(ctx, "active admins", &names,
		"SELECT name FROM operators WHERE role = 'admin' AND disabled_at IS NULL ORDER BY name FOR UPDATE"); err != nil {
		return nil, err
	}
	out := make([]domain.OperatorName, len(names))
	for i, n := range names {
		out[i] = domain.OperatorName(n)
	}
	return out, nil
}

// EndSessions is one upsert that keeps the later time (GREATEST), so two logouts racing on two
// instances leave the later one whichever commits last.
func (r operatorRepo) EndSessions(ctx context.Context, name domain.OperatorName, at time.Time) error {
	_, err := r.s.exec(ctx, fmt.Sprintf("end the console sessions of %s", name),
		"INSERT INTO console_logouts (name, logged_out_at) VALUES (?, ?) "+
			"ON DUPLICATE KEY UPDATE logged_out_at = GREATEST(logged_out_at, VALUES(logged_out_at))",
		string(name), at.UTC())
	return err
}

func (r operatorRepo) SessionsEnded(ctx context.Context, name domain.OperatorName) (time.Time, error) {
	var at time.Time
	err := r.s.get(ctx, fmt.Sprintf("console logout of %s", name), &at,
		"SELECT logged_out_at FROM console_logouts WHERE name = ?", string(name))
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	return at, err
}
