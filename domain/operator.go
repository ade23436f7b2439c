package domain

import (
	"errors"
	"time"
	"unicode/utf8"
)

// Role is what an operator may do. Each role may do everything the roles below it may.
type Role string

// The roles, from the least to the most trusted.
const (
	// RoleViewer reads: products, orders without their codes, reconciliation, alerts, the
	// audit log.
	RoleViewer Role = "viewer"
	// RoleOperator also runs the shop: products, code imports, freeze and unfreeze, fulfil,
	// buyer tokens, an order's codes.
	RoleOperator Role = "operator"
	// RoleAdmin also moves money and the ledger's truth: refunds, gate repair, operators.
	RoleAdmin Role = "admin"
)

var roleRank = map[Role]int{RoleViewer: 1, RoleOperator: 2, RoleAdmin: 3}

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if roleRank[r] == 0 {
		return "", Invalid("role", `must be "viewer", "operator" or "admin"`)
	}
	return r, nil
}

// Allows reports whether r may do what needs the role need.
func (r Role) Allows(need Role) bool { return roleRank[r] > 0 && roleRank[r] >= roleRank[need] }

// OperatorName names an operator: 1 to 64 of a-z, 0-9, '-', '_', starting with a letter. It is
// the first part of the operator's token and what the audit log records.
type OperatorName string

// LegacyAdmin is the identity of CARDSHOP_ADMIN_TOKEN, an admin kept for compatibility. No
// operator may take its name.
const LegacyAdmin OperatorName = "admin-token"

// ParseOperatorName validates an operator name.
func ParseOperatorName(s string) (OperatorName, error) {
	ok := s != "" && utf8.RuneCountInString(s) <= 64 && s[0] >= 'a' && s[0] <= 'z'
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if !ok {
		return "", Invalid("name", "must be 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter")
	}
	if OperatorName(s) == LegacyAdmin {
		return "", Invalid("name", `"admin-token" is the shared admin token's name`)
	}
	return OperatorName(s), nil
}

// Operator is a named person or system allowed into the admin API and the console. Its
// token is never stored: TokenHash is the SHA-256 of the token's secret part.
type Operator struct {
	Name      OperatorName
	Role      Role
	TokenHash []byte
	CreatedAt time.Time
	RotatedAt time.Time // when the token was last replaced; CreatedAt at first
	// DisabledAt is when the operator was disabled (its token refused, its console sessions
	// over, the row and its audit trail kept); zero while it is enabled.
	DisabledAt time.Time
}

// Disabled reports whether the operator is disabled.
func (o Operator) Disabled() bool { return !o.DisabledAt.IsZero() }

// ErrLastAdmin means the change would leave no enabled admin operator: the last one cannot be
// demoted, disabled or removed (the shared admin token is not counted: it may be unset).
var ErrLastAdmin = errors.New("the last enabled admin cannot be demoted, disabled or removed")

// ErrOperatorExists means an operator with that name exists.
var ErrOperatorExists = errors.New("operator already exists")

// ErrOperatorNotFound means no operator has that name.
var ErrOperatorNotFound = errors.New("operator not found")

// ErrForbidden means the caller's role does not allow the action.
var ErrForbidden = errors.New("the operator's role does not allow this")

// AuditEntry is one write through the admin API, the CLI or the console: who did it with what
// role, what and to what, with which parameters (never a secret or a code), how it ended, when
// and from where.
type AuditEntry struct {
	ID         int64 // assigned by the log, increasing
	At         time.Time
	Operator   OperatorName
	Role       Role
	Action     string // e.g. "product.update"
	Target     string // e.g. "product 12", "order 2503…"; empty when none
	Params     string // JSON of the request's parameters, secrets and codes left out
	Result     string // e.g. "200", "409 sold_out"
	ClientAddr string
}

// AuditFilter selects audit entries; zero fields select everything. Entries come newest
// first, at most Limit (1 to 1000), with IDs below BeforeID when it is set (paging).
type AuditFilter struct {
	Operator OperatorName
	Action   string
	Target   string    // exactly, e.g. "product 12" (the console's import history of a product)
	From, To time.Time // From inclusive, To exclusive
	BeforeID int64
	Limit    int
}
