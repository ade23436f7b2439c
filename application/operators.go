package application

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"cardshop/domain"
)

// Identity is who calls the admin API or the console: an operator's name and role.
type Identity struct {
	Name domain.OperatorName
	Role domain.Role
}

// LegacyAdminIdentity is the shared CARDSHOP_ADMIN_TOKEN's identity: an admin, kept for
// compatibility (and to create the first operator).
var LegacyAdminIdentity = Identity{Name: domain.LegacyAdmin, Role: domain.RoleAdmin}

// An operator's token is "<name>.<secret>": the name finds the operator with one primary-key
// read, the secret (32 random bytes, base64url) is checked against its SHA-256 in constant time.
// A token of 256 random bits needs no slow hash: nobody guesses it, and the hash only keeps a
// database reader from using the tokens it sees.
const tokenSecretBytes = 32

func newOperatorToken(name domain.OperatorName) (token string, hash []byte, err error) {
	b := make([]byte, tokenSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("operator token: %w", err)
	}
	secret := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(secret))
	return string(name) + "." + secret, sum[:], nil
}

// tokenSecretLen is the length of a token's secret part: 32 bytes in unpadded base64url.
var tokenSecretLen = base64.RawURLEncoding.EncodedLen(tokenSecretBytes)

// TokenName is the operator name a token claims, safe to log: the part before its dot, when
// the token has the shape of an operator's (a valid name, a dot, a secret of the right length
// in base64url). Anything else is not named at all (ok false): a mistyped shared admin token,
// or a secret pasted without its name, must not reach a log in part.
func TokenName(token string) (name domain.OperatorName, ok bool) {
	n, secret, found := strings.Cut(token, ".")
	if !found || len(secret) != tokenSecretLen {
		return "", false
	}
	if _, err := base64.RawURLEncoding.DecodeString(secret); err != nil {
		return "", false
	}
	name, err := domain.ParseOperatorName(n)
	return name, err == nil
}

// Authenticate resolves an operator's token to its identity. Any malformed, unknown, removed
// or replaced token is ErrUnauthorized (which of them is not told).
//
// Errors: ErrUnauthorized, ErrUnavailable.
func (s *Admin) Authenticate(ctx context.Context, token string) (Identity, error) {
	name, secret, ok := strings.Cut(token, ".")
	if !ok || secret == "" {
		return Identity{}, domain.ErrUnauthorized
	}
	n, err := domain.ParseOperatorName(name)
	if err != nil {
		return Identity{}, domain.ErrUnauthorized
	}
	o, err := s.ledger.Operators().Operator(ctx, n)
	if errors.Is(err, domain.ErrOperatorNotFound) {
		return Identity{}, domain.ErrUnauthorized
	}
	if err != nil {
		return Identity{}, fmt.Errorf("authenticate: %w", err)
	}
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], o.TokenHash) != 1 || o.Disabled() {
		return Identity{}, domain.ErrUnauthorized
	}
	return Identity{Name: o.Name, Role: o.Role}, nil
}

// CreateOperator adds an operator and returns its token, shown this once (only its hash is
// stored).
//
// Errors: ErrInvalidInput, ErrOperatorExists, ErrUnavailable.
func (s *Admin) CreateOperator(ctx context.Context, name string, role string) (domain.Operator, string, error) {
	n, err := domain.ParseOperatorName(name)
	if err != nil {
		return domain.Operator{}, "", err
	}
	r, err := domain.ParseRole(role)
	if err != nil {
		return domain.Operator{}, "", err
	}
	token, hash, err := newOperatorToken(n)
	if err != nil {
		return domain.Operator{}, "", err
	}
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	o := domain.Operator{Name: n, Role: r, TokenHash: hash, CreatedAt: now, RotatedAt: now}
	if err := s.ledger.Operators().Create(ctx, o); err != nil {
		return domain.Operator{}, "", fmt.Errorf("create operator: %w", err)
	}
	return o, token, nil
}

// RotateOperator gives an operator a new token, returned this once; the old one stops working
// at once on every instance (each request reads the operator).
//
// Errors: ErrInvalidInput, ErrOperatorNotFound, ErrUnavailable.
func (s *Admin) RotateOperator(ctx context.Context, name string) (domain.Operator, string, error) {
	n, err := domain.ParseOperatorName(name)
	if err != nil {
		return domain.Operator{}, "", err
	}
	token, hash, err := newOperatorToken(n)
	if err != nil {
		return domain.Operator{}, "", err
	}
	if err := s.ledger.Operators().Rotate(ctx, n, hash, s.clock.Now().UTC().Truncate(time.Microsecond)); err != nil {
		return domain.Operator{}, "", fmt.Errorf("rotate operator: %w", err)
	}
	o, err := s.ledger.Operators().Operator(ctx, n)
	return o, token, err
}

// SetOperatorRole changes an operator's role; it applies from the operator's next request.
// Demoting the last enabled admin is refused (ErrLastAdmin), also when two admins demote each
// other at once: the check and the change are one transaction that locks the admins.
//
// Errors: ErrInvalidInput, ErrOperatorNotFound, ErrLastAdmin, ErrUnavailable.
func (s *Admin) SetOperatorRole(ctx context.Context, name, role string) (domain.Operator, error) {
	n, err := domain.ParseOperatorName(name)
	if err != nil {
		return domain.Operator{}, err
	}
	r, err := domain.ParseRole(role)
	if err != nil {
		return domain.Operator{}, err
	}
	var out domain.Operator
	err = s.keepingAnAdmin(ctx, n, r != domain.RoleAdmin, func(tx domain.Store) error {
		if err := tx.Operators().SetRole(ctx, n, r); err != nil {
			return err
		}
		out, err = tx.Operators().Operator(ctx, n)
		return err
	})
	if err != nil {
		return domain.Operator{}, fmt.Errorf("set operator role: %w", err)
	}
	return out, nil
}

// DisableOperator disables an operator: its token is refused and its console sessions end at
// their next request, on every instance; the operator stays listed (and its name taken) until
// it is enabled again or removed. Disabling the last enabled admin is refused.
//
// Errors: ErrInvalidInput, ErrOperatorNotFound, ErrLastAdmin, ErrUnavailable.
func (s *Admin) DisableOperator(ctx context.Context, name string) (domain.Operator, error) {
	return s.setDisabled(ctx, name, true)
}

// EnableOperator enables a disabled operator again with its current token.
//
// Errors: ErrInvalidInput, ErrOperatorNotFound, ErrUnavailable.
func (s *Admin) EnableOperator(ctx context.Context, name string) (domain.Operator, error) {
	return s.setDisabled(ctx, name, false)
}

func (s *Admin) setDisabled(ctx context.Context, name string, disable bool) (domain.Operator, error) {
	n, err := domain.ParseOperatorName(name)
	if err != nil {
		return domain.Operator{}, err
	}
	var at time.Time
	if disable {
		at = s.clock.Now().UTC().Truncate(time.Microsecond)
	}
	var out domain.Operator
	err = s.keepingAnAdmin(ctx, n, disable, func(tx domain.Store) error {
		cur, err := tx.Operators().Operator(ctx, n)
		if err != nil {
			return err
		}
		if cur.Disabled() == disable { // already so: keep the first time it was disabled
			out = cur
			return nil
		}
		if err := tx.Operators().SetDisabled(ctx, n, at); err != nil {
			return err
		}
		out, err = tx.Operators().Operator(ctx, n)
		return err
	})
	if err != nil {
		return domain.Operator{}, fmt.Errorf("disable or enable operator: %w", err)
	}
	return out, nil
}

// RemoveOperator deletes an operator; its token stops working at once. Removing the last
// enabled admin is refused.
//
// Errors: ErrInvalidInput, ErrOperatorNotFound, ErrLastAdmin, ErrUnavailable.
func (s *Admin) RemoveOperator(ctx context.Context, name string) error {
	n, err := domain.ParseOperatorName(name)
	if err != nil {
		return err
	}
	err = s.keepingAnAdmin(ctx, n, true, func(tx domain.Store) error { return tx.Operators().Remove(ctx, n) })
	if err != nil {
		return fmt.Errorf("remove operator: %w", err)
	}
	return nil
}

// keepingAnAdmin runs change in one transaction; when change may take n out of the enabled
// admins (takesOut), it first locks the enabled admins (ActiveAdmins) and refuses with
// ErrLastAdmin when n is the only one. The lock makes a concurrent demotion of the other
// admin wait and then see this one's outcome, so of two admins demoting each other at once
// exactly one succeeds.
func (s *Admin) keepingAnAdmin(ctx context.Context, n domain.OperatorName, takesOut bool, change func(tx domain.Store) error) error {
	return s.ledger.Atomically(ctx, func(tx domain.Store) error {
		if takesOut {
			admins, err := tx.Operators().ActiveAdmins(ctx)
			if err != nil {
				return err
			}
			if len(admins) == 1 && admins[0] == n {
				return domain.ErrLastAdmin
			}
		}
		return change(tx)
	})
}

// Operator returns one operator, read now: the console checks its session against it on every
// request (its role, and whether its token was rotated since the session began).
//
// Errors: ErrInvalidInput, ErrOperatorNotFound, ErrUnavailable.
func (s *Admin) Operator(ctx context.Context, name string) (domain.Operator, error) {
	n, err := domain.ParseOperatorName(name)
	if err != nil {
		return domain.Operator{}, err
	}
	return s.ledger.Operators().Operator(ctx, n)
}

// ConsoleLogOut ends the console sessions of the identity (an operator, or the shared admin
// token's LegacyAdmin, which has no operator row) issued at or before now, or before the
// logging-out session's own issue time when this instance's clock lags the one that issued
// it: that session always ends. Every session of the identity ends, in every browser.
//
// Errors: ErrUnavailable.
func (s *Admin) ConsoleLogOut(ctx context.Context, name domain.OperatorName, issued time.Time) error {
	at := s.clock.Now().UTC().Truncate(time.Microsecond)
	if issued.After(at) {
		at = issued.UTC()
	}
	if err := s.ledger.Operators().EndSessions(ctx, name, at); err != nil {
		return fmt.Errorf("log %s out of the console: %w", name, err)
	}
	return nil
}

// ConsoleSessionsEnded is the identity's last console logout (zero: never): a session issued
// at or before it is over.
//
// Errors: ErrUnavailable.
func (s *Admin) ConsoleSessionsEnded(ctx context.Context, name domain.OperatorName) (time.Time, error) {
	return s.ledger.Operators().SessionsEnded(ctx, name)
}

// Operators lists the operators (without their token hashes' use: they are never shown).
func (s *Admin) Operators(ctx context.Context) ([]domain.Operator, error) {
	return s.ledger.Operators().Operators(ctx)
}

// Record appends an entry to the audit log, stamped now; it returns the entry's id.
func (s *Admin) Record(ctx context.Context, e domain.AuditEntry) (int64, error) {
	return appendAudit(ctx, s.ledger, s.clock, e)
}

func (s *core) audit(ctx context.Context, e domain.AuditEntry) (int64, error) {
	return appendAudit(ctx, s.ledger, s.clock, e)
}

// appendAudit appends e to the audit log, stamped now.
func appendAudit(ctx context.Context, l domain.Ledger, clock domain.Clock, e domain.AuditEntry) (int64, error) {
	e.At = clock.Now().UTC().Truncate(time.Microsecond)
	return l.Audit().Append(ctx, e)
}

// MaxAuditPage bounds one page of the audit log.
const MaxAuditPage = 1000

// AuditLog lists audit entries, newest first; a Limit outside 1..MaxAuditPage is 100.
func (s *Admin) AuditLog(ctx context.Context, f domain.AuditFilter) ([]domain.AuditEntry, error) {
	if f.Limit < 1 || f.Limit > MaxAuditPage {
		f.Limit = 100
	}
	return s.ledger.Audit().List(ctx, f)
}
