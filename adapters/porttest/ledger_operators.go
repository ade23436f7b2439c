package porttest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// runOperators checks the operator repository: Create and the reads, a refused second
// operator of a name, unknown names, Rotate (the hash and RotatedAt change, nothing else),
// SetRole, Remove (the name is free again), console logouts (EndSessions keeps the latest
// time, for any name, racing or rolled back), times at microsecond precision, and the rollback
// of a failed transaction. Every case uses names of its own: a shared database keeps the
// operators of earlier runs.
func runOperators(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("create then read; the list is by name", func(t *testing.T) {
		l := newLedger(t)
		prefix := newOperatorName()
		b := newOperator(prefix+"-b", domain.RoleOperator, usec())
		a := newOperator(prefix+"-a", domain.RoleViewer, usec().Add(time.Second))
		a.RotatedAt = a.CreatedAt.Add(time.Minute)
		createOperator(t, l, b)
		createOperator(t, l, a)
		wantOperator(t, l, a)
		wantOperator(t, l, b)
		all, err := l.Operators().Operators(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var ours []domain.Operator
		for _, o := range all {
			if strings.HasPrefix(string(o.Name), string(prefix)+"-") {
				ours = append(ours, o)
			}
		}
		if len(ours) != 2 || !sameOperator(ours[0], a) || !sameOperator(ours[1], b) {
			t.Fatalf("Operators lists %+v of this case, want %+v then %+v", ours, a, b)
		}
		if !slices.IsSortedFunc(all, func(x, y domain.Operator) int { return strings.Compare(string(x.Name), string(y.Name)) }) {
			t.Fatalf("Operators is not sorted by name: %v", operatorNames(all))
		}
	})

	t.Run("a zero RotatedAt is stored as CreatedAt", func(t *testing.T) {
		l := newLedger(t)
		o := newOperator(newOperatorName(), domain.RoleAdmin, usec())
		o.RotatedAt = time.Time{}
		createOperator(t, l, o)
		o.RotatedAt = o.CreatedAt
		wantOperator(t, l, o)
	})

	t.Run("a taken name is ErrOperatorExists and the first operator stays", func(t *testing.T) {
		l := newLedger(t)
		first := newOperator(newOperatorName(), domain.RoleViewer, usec())
		createOperator(t, l, first)
		second := newOperator(first.Name, domain.RoleAdmin, usec().Add(time.Hour))
		if err := l.Operators().Create(t.Context(), second); !errors.Is(err, domain.ErrOperatorExists) {
			t.Fatalf("second Create of %s: err = %v, want ErrOperatorExists", first.Name, err)
		}
		wantOperator(t, l, first)
	})

	t.Run("an unknown role is refused", func(t *testing.T) {
		l := newLedger(t)
		o := newOperator(newOperatorName(), "root", usec())
		var ve *domain.ValidationError
		if err := l.Operators().Create(t.Context(), o); !errors.As(err, &ve) {
			t.Fatalf("Create with role %q: err = %v, want a ValidationError", o.Role, err)
		}
		wantNoOperator(t, l, o.Name)
		o.Role = domain.RoleViewer
		createOperator(t, l, o)
		if err := l.Operators().SetRole(t.Context(), o.Name, "root"); !errors.As(err, &ve) {
			t.Fatalf("SetRole(%q): err = %v, want a ValidationError", "root", err)
		}
		wantOperator(t, l, o)
	})

	t.Run("unknown names are ErrOperatorNotFound", func(t *testing.T) {
		l := newLedger(t)
		name := newOperatorName()
		wantNoOperator(t, l, name)
		for op, err := range map[string]error{
			"Rotate":  l.Operators().Rotate(t.Context(), name, newTokenHash(), usec()),
			"SetRole": l.Operators().SetRole(t.Context(), name, domain.RoleAdmin),
			"Remove":  l.Operators().Remove(t.Context(), name),
		} {
			if !errors.Is(err, domain.ErrOperatorNotFound) {
				t.Errorf("%s(%s): err = %v, want ErrOperatorNotFound", op, name, err)
			}
		}
		wantNoOperator(t, l, name)
	})

	t.Run("rotate replaces the hash and RotatedAt only, and may be repeated", func(t *testing.T) {
		l := newLedger(t)
		o := newOperator(newOperatorName(), domain.RoleOperator, usec())
		createOperator(t, l, o)
		hash, at := newTokenHash(), o.CreatedAt.Add(90*time.Minute+7*time.Microsecond)
		if err := l.Operators().Rotate(t.Context(), o.Name, hash, at); err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		o.TokenHash, o.RotatedAt = slices.Clone(hash), at
		hash[0] ^= 0xff // the caller's slice, changed after the call, is not the stored hash
		wantOperator(t, l, o)
		// The same values again change nothing, and are no error (a database that counts
		// changed rows must still find the operator).
		if err := l.Operators().Rotate(t.Context(), o.Name, o.TokenHash, at); err != nil {
			t.Fatalf("Rotate to the same hash and time: %v", err)
		}
		wantOperator(t, l, o)
	})

	t.Run("set role changes the role only, and may be repeated", func(t *testing.T) {
		l := newLedger(t)
		o := newOperator(newOperatorName(), domain.RoleViewer, usec())
		createOperator(t, l, o)
		for _, r := range []domain.Role{domain.RoleAdmin, domain.RoleAdmin, domain.RoleOperator} {
			if err := l.Operators().SetRole(t.Context(), o.Name, r); err != nil {
				t.Fatalf("SetRole(%s): %v", r, err)
			}
			o.Role = r
			wantOperator(t, l, o)
		}
	})

	t.Run("remove; then the operator is gone and its name is free", func(t *testing.T) {
		l := newLedger(t)
		o := newOperator(newOperatorName(), domain.RoleAdmin, usec())
		createOperator(t, l, o)
		if err := l.Operators().Remove(t.Context(), o.Name); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		wantNoOperator(t, l, o.Name)
		all, err := l.Operators().Operators(t.Context())
		if err != nil || slices.Contains(operatorNames(all), o.Name) {
			t.Fatalf("Operators after Remove = %v, %v; want %s absent", operatorNames(all), err, o.Name)
		}
		if err := l.Operators().Remove(t.Context(), o.Name); !errors.Is(err, domain.ErrOperatorNotFound) {
			t.Fatalf("second Remove: err = %v, want ErrOperatorNotFound", err)
		}
		again := newOperator(o.Name, domain.RoleViewer, usec().Add(time.Hour))
		createOperator(t, l, again)
		wantOperator(t, l, again)
	})

	t.Run("sessions end at the latest logout; any name, no operator row needed", func(t *testing.T) {
		l := newLedger(t)
		o := newOperator(newOperatorName(), domain.RoleOperator, usec())
		createOperator(t, l, o)
		wantSessionsEnded(t, l, o.Name, time.Time{})
		at := o.CreatedAt.Add(time.Hour + 7*time.Microsecond)
		for _, step := range []struct {
			at, want time.Time
		}{
			{at, at},
			{at.Add(-time.Minute), at}, // an earlier logout reopens nothing
			{at.Add(time.Minute), at.Add(time.Minute)}, // a later one moves it on
			{at.Add(time.Minute), at.Add(time.Minute)}, // the same again is no error
		} {
			if err := l.Operators().EndSessions(t.Context(), o.Name, step.at.In(time.FixedZone("x", 3600))); err != nil {
				t.Fatalf("EndSessions(%v): %v", step.at, err)
			}
			wantSessionsEnded(t, l, o.Name, step.want)
		}
		wantOperator(t, l, o) // the operator itself is unchanged

		// A name without an operator row: removed, never created, or the shared admin token.
		nobody := newOperatorName()
		if err := l.Operators().EndSessions(t.Context(), nobody, at); err != nil {
			t.Fatalf("EndSessions of a name without an operator: %v", err)
		}
		wantSessionsEnded(t, l, nobody, at)
		wantNoOperator(t, l, nobody)
		now := usec()
		if err := l.Operators().EndSessions(t.Context(), domain.LegacyAdmin, now); err != nil {
			t.Fatalf("EndSessions(%s): %v", domain.LegacyAdmin, err)
		}
		// A shared database may hold a later logout of the shared admin token from another run.
		if got, err := l.Operators().SessionsEnded(t.Context(), domain.LegacyAdmin); err != nil || got.Before(now) {
			t.Fatalf("SessionsEnded(%s) = %v, %v; want %v or later", domain.LegacyAdmin, got, err, now)
		}
	})

	t.Run("racing logouts leave the latest", func(t *testing.T) {
		l := newLedger(t)
		name, base := newOperatorName(), usec()
		const n = 16
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- l.Operators().EndSessions(t.Context(), name, base.Add(time.Duration(i)*time.Second))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("EndSessions: %v", err)
			}
		}
		wantSessionsEnded(t, l, name, base.Add((n-1)*time.Second))
	})

	t.Run("a logout in a failed transaction is gone", func(t *testing.T) {
		l := newLedger(t)
		name, at := newOperatorName(), usec()
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if err := tx.Operators().EndSessions(t.Context(), name, at); err != nil {
				return err
			}
			if got, err := tx.Operators().SessionsEnded(t.Context(), name); err != nil || !got.Equal(at) {
				t.Errorf("the transaction reads its own logout as %v, %v; want %v", got, err, at)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Atomically: err = %v, want fn's error", err)
		}
		wantSessionsEnded(t, l, name, time.Time{})
	})

	t.Run("a failed transaction leaves no operator, change or entry; a committed one keeps them", func(t *testing.T) {
		l := newLedger(t)
		kept := newOperator(newOperatorName(), domain.RoleViewer, usec())
		gone := newOperator(newOperatorName(), domain.RoleViewer, usec())
		createOperator(t, l, kept)
		createOperator(t, l, gone)
		added := newOperator(newOperatorName(), domain.RoleOperator, usec())
		entry := newAuditEntry(added.Name, "pt.rollback", usec())
		write := func(tx domain.Store) error {
			if err := tx.Operators().Create(t.Context(), added); err != nil {
				return err
			}
			if err := tx.Operators().Rotate(t.Context(), kept.Name, newTokenHash(), usec().Add(time.Hour)); err != nil {
				return err
			}
			if err := tx.Operators().SetRole(t.Context(), kept.Name, domain.RoleAdmin); err != nil {
				return err
			}
			if err := tx.Operators().Remove(t.Context(), gone.Name); err != nil {
				return err
			}
			_, err := tx.Audit().Append(t.Context(), entry)
			return err
		}
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if err := write(tx); err != nil {
				return err
			}
			if _, err := tx.Operators().Operator(t.Context(), added.Name); err != nil {
				t.Errorf("the transaction does not read its own operator: %v", err)
			}
			if got, err := tx.Audit().List(t.Context(), domain.AuditFilter{Operator: added.Name, Limit: 10}); err != nil || len(got) != 1 {
				t.Errorf("the transaction reads its own entries as %+v, %v", got, err)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Atomically: err = %v, want fn's error", err)
		}
		wantNoOperator(t, l, added.Name)
		wantOperator(t, l, kept)
		wantOperator(t, l, gone)
		wantAudit(t, l, domain.AuditFilter{Operator: added.Name, Limit: 10})

		if err := l.Atomically(t.Context(), write); err != nil {
			t.Fatal(err)
		}
		wantOperator(t, l, added)
		wantNoOperator(t, l, gone.Name)
		if got, err := l.Audit().List(t.Context(), domain.AuditFilter{Operator: added.Name, Limit: 10}); err != nil || len(got) != 1 {
			t.Fatalf("entries of the committed transaction: %+v, %v; want one", got, err)
		}
	})
}

// runAudit checks the audit log: Append assigns increasing ids and stores the entry whole, at
// microsecond precision; List is newest first, each filter alone and combined, From inclusive
// and To exclusive, pages by BeforeID, a Limit of 1 to 1000; over-long texts are clipped, not
// refused; entries of a failed transaction are gone. Each case records entries under operator
// names (and actions) of its own, or looks only at its own among what a filter returns: a
// shared database keeps the entries of earlier runs.
func runAudit(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("append assigns increasing ids; list is newest first", func(t *testing.T) {
		l := newLedger(t)
		op := newOperatorName()
		var all []domain.AuditEntry // oldest first
		for i := range 5 {
			e := newAuditEntry(op, fmt.Sprintf("pt.step-%d", i), usec().Add(time.Duration(i)*time.Second))
			all = append(all, appendAudit(t, l, e))
		}
		for i := 1; i < len(all); i++ {
			if all[i].ID <= all[i-1].ID {
				t.Fatalf("ids %d then %d: want increasing in order of Append", all[i-1].ID, all[i].ID)
			}
		}
		wantAudit(t, l, domain.AuditFilter{Operator: op, Limit: 10}, reversed(all)...)
		// Unfiltered, the newest entries of the whole log are this case's last ones.
		wantAudit(t, l, domain.AuditFilter{Limit: 3}, all[4], all[3], all[2])
	})

	t.Run("entries round-trip at microsecond precision in UTC", func(t *testing.T) {
		l := newLedger(t)
		at := time.Date(2031, 7, 9, 23, 59, 58, 123456000, time.FixedZone("pt+0530", 5*3600+1800))
		e := appendAudit(t, l, newAuditEntry(newOperatorName(), "pt.time", at))
		got := listAudit(t, l, domain.AuditFilter{Operator: e.Operator, Limit: 1})
		if len(got) != 1 || !got[0].At.Equal(at) || got[0].At.Location() != time.UTC {
			t.Fatalf("At read back as %+v, want %v in UTC", got, at.UTC())
		}
		// A zero time is the time of Append.
		before := time.Now().Add(-time.Second)
		z := newAuditEntry(newOperatorName(), "pt.time", time.Time{})
		if _, err := l.Audit().Append(t.Context(), z); err != nil {
			t.Fatal(err)
		}
		got = listAudit(t, l, domain.AuditFilter{Operator: z.Operator, Limit: 1})
		if len(got) != 1 || got[0].At.Before(before) || got[0].At.After(time.Now().Add(time.Second)) {
			t.Fatalf("a zero At read back as %+v, want the time of Append (about %v)", got, before)
		}
	})

	t.Run("each filter alone and combined; From inclusive, To exclusive", func(t *testing.T) {
		l := newLedger(t)
		a, b := newOperatorName(), newOperatorName()
		x, y := newAction(), newAction()
		// A base far from now (other cases' entries are stamped about now), random so that
		// earlier runs' entries fall elsewhere.
		base := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rand.Int64N(20*365*24)) * time.Hour).Add(321 * time.Microsecond)
		t0, t1, t2, t3 := base, base.Add(time.Second), base.Add(2*time.Second), base.Add(3*time.Second)
		other := newAuditEntry(a, y, t2)
		other.Target = "product 13"
		e := []domain.AuditEntry{
			appendAudit(t, l, newAuditEntry(a, x, t0)),
			appendAudit(t, l, newAuditEntry(b, x, t1)),
			appendAudit(t, l, other),
			appendAudit(t, l, newAuditEntry(b, y, t3)),
			appendAudit(t, l, newAuditEntry(a, x, t3)),
		}
		ours := func(o domain.OperatorName) bool { return o == a || o == b }
		for _, c := range []struct {
			name string
			f    domain.AuditFilter
			want []domain.AuditEntry
		}{
			{"operator", domain.AuditFilter{Operator: a}, []domain.AuditEntry{e[4], e[2], e[0]}},
			{"action", domain.AuditFilter{Action: x}, []domain.AuditEntry{e[4], e[1], e[0]}},
			{"target", domain.AuditFilter{Target: "product 13"}, []domain.AuditEntry{e[2]}},
			{"action and target", domain.AuditFilter{Action: y, Target: "product 12"}, []domain.AuditEntry{e[3]}},
			{"from, inclusive", domain.AuditFilter{From: t1}, []domain.AuditEntry{e[4], e[3], e[2], e[1]}},
			{"to, exclusive", domain.AuditFilter{To: t3}, []domain.AuditEntry{e[2], e[1], e[0]}},
			{"from and to", domain.AuditFilter{From: t1, To: t3}, []domain.AuditEntry{e[2], e[1]}},
			{"an empty window", domain.AuditFilter{From: t2, To: t2}, nil},
			{"before id", domain.AuditFilter{Operator: b, BeforeID: e[3].ID}, []domain.AuditEntry{e[1]}},
			{"operator and action", domain.AuditFilter{Operator: a, Action: x}, []domain.AuditEntry{e[4], e[0]}},
			{"operator and to", domain.AuditFilter{Operator: b, To: t3}, []domain.AuditEntry{e[1]}},
			{"action and from", domain.AuditFilter{Action: y, From: t3}, []domain.AuditEntry{e[3]}},
			{"everything", domain.AuditFilter{Operator: a, Action: x, From: t0, To: t3, BeforeID: e[4].ID + 1}, []domain.AuditEntry{e[0]}},
			{"the time in another zone", domain.AuditFilter{Operator: a, From: t2.In(time.FixedZone("pt-0800", -8*3600))},
				[]domain.AuditEntry{e[4], e[2]}},
		} {
			c.f.Limit = 1000
			got := listAudit(t, l, c.f)
			var mine []domain.AuditEntry
			for _, g := range got {
				if ours(g.Operator) {
					mine = append(mine, g)
				}
			}
			if !sameEntries(mine, c.want) {
				t.Errorf("%s: List(%+v) gives this case's %+v, want %+v", c.name, c.f, mine, c.want)
			}
			if !slices.IsSortedFunc(got, func(p, q domain.AuditEntry) int { return cmpInt(q.ID, p.ID) }) {
				t.Errorf("%s: List is not newest first: ids %v", c.name, auditIDs(got))
			}
		}
	})

	t.Run("pages by BeforeID cover every entry once", func(t *testing.T) {
		l := newLedger(t)
		op := newOperatorName()
		var all []domain.AuditEntry
		for i := range 7 {
			all = append(all, appendAudit(t, l, newAuditEntry(op, "pt.page", usec().Add(time.Duration(i)*time.Millisecond))))
		}
		var seen []domain.AuditEntry
		f := domain.AuditFilter{Operator: op, Limit: 3}
		for pages := 0; ; pages++ {
			page := listAudit(t, l, f)
			if len(page) == 0 {
				break
			}
			if pages == 3 || len(page) > 3 {
				t.Fatalf("page %d holds %d entries: want pages of 3, 3 and 1", pages+1, len(page))
			}
			seen = append(seen, page...)
			f.BeforeID = page[len(page)-1].ID
		}
		if !sameEntries(seen, reversed(all)) {
			t.Fatalf("the pages hold %v, want each of %v once, newest first", auditIDs(seen), auditIDs(reversed(all)))
		}
	})

	t.Run("limit is 1 to 1000", func(t *testing.T) {
		l := newLedger(t)
		op := newOperatorName()
		var all []domain.AuditEntry
		for range 3 {
			all = append(all, appendAudit(t, l, newAuditEntry(op, "pt.limit", usec())))
		}
		wantAudit(t, l, domain.AuditFilter{Operator: op, Limit: 1}, all[2])
		wantAudit(t, l, domain.AuditFilter{Operator: op, Limit: 2}, all[2], all[1])
		wantAudit(t, l, domain.AuditFilter{Operator: op, Limit: 1000}, all[2], all[1], all[0])
		if got := listAudit(t, l, domain.AuditFilter{Limit: 1000}); len(got) > 1000 {
			t.Fatalf("List with Limit 1000 returned %d entries", len(got))
		}
		for _, n := range []int{0, -1, 1001} {
			var ve *domain.ValidationError
			if got, err := l.Audit().List(t.Context(), domain.AuditFilter{Operator: op, Limit: n}); !errors.As(err, &ve) {
				t.Errorf("List with Limit %d = %d entries, %v; want a ValidationError", n, len(got), err)
			}
		}
	})

	t.Run("over-long texts are clipped, not refused", func(t *testing.T) {
		l := newLedger(t)
		e := newAuditEntry(newOperatorName(), "pt.long", usec())
		long := strings.Repeat("界", 5000)
		e.Params, e.Target, e.Result, e.ClientAddr = `{"note":"`+long+`"}`, long, long, long
		id, err := l.Audit().Append(t.Context(), e)
		if err != nil {
			t.Fatalf("Append with over-long texts: %v", err)
		}
		got := listAudit(t, l, domain.AuditFilter{Operator: e.Operator, Limit: 10})
		if len(got) != 1 || got[0].ID != id {
			t.Fatalf("List = %+v, want the entry %d", got, id)
		}
		// The minimums are the widths of the MariaDB columns: a store may keep more.
		for name, kept := range map[string]struct {
			text, sent string
			min        int
		}{"params": {got[0].Params, e.Params, 4096}, "target": {got[0].Target, long, 128},
			"result": {got[0].Result, long, 128}, "client address": {got[0].ClientAddr, long, 64}} {
			if !strings.HasPrefix(kept.sent, kept.text) || len([]rune(kept.text)) < kept.min {
				t.Errorf("%s read back as %d characters %q…, want a prefix of the text of at least %d", name,
					len([]rune(kept.text)), kept.text[:min(len(kept.text), 12)], kept.min)
			}
		}
	})

	t.Run("entries of a failed transaction are gone, and their ids are not given again", func(t *testing.T) {
		l := newLedger(t)
		op := newOperatorName()
		var lost int64
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			id, err := tx.Audit().Append(t.Context(), newAuditEntry(op, "pt.lost", usec()))
			lost = id
			if err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Atomically: err = %v, want fn's error", err)
		}
		wantAudit(t, l, domain.AuditFilter{Operator: op, Limit: 10})
		next := appendAudit(t, l, newAuditEntry(op, "pt.kept", usec()))
		if next.ID <= lost {
			t.Fatalf("an entry after the rollback got id %d, not above the rolled-back %d", next.ID, lost)
		}
		wantAudit(t, l, domain.AuditFilter{Operator: op, Limit: 10}, next)
	})
}

// newOperatorName is a valid operator name no other case or run uses.
func newOperatorName() domain.OperatorName {
	return domain.OperatorName(fmt.Sprintf("pt-%016x", rand.Uint64()))
}

// newAction is an action name no other case or run uses.
func newAction() string { return fmt.Sprintf("pt.action-%016x", rand.Uint64()) }

func newTokenHash() []byte {
	h := sha256.Sum256(fmt.Appendf(nil, "pt-token-%x", rand.Uint64()))
	return h[:]
}

// usec is the test's wall time at microsecond precision (the columns' DATETIME(6)), with a
// fraction of a second and in a zone other than UTC, so a store that drops either is caught.
func usec() time.Time {
	return now().Add(654321 * time.Microsecond).In(time.FixedZone("pt+0100", 3600))
}

func newOperator(name domain.OperatorName, r domain.Role, at time.Time) domain.Operator {
	return domain.Operator{Name: name, Role: r, TokenHash: newTokenHash(), CreatedAt: at, RotatedAt: at}
}

func createOperator(t *testing.T, l domain.Store, o domain.Operator) {
	t.Helper()
	if err := l.Operators().Create(t.Context(), o); err != nil {
		t.Fatalf("Create operator %s: %v", o.Name, err)
	}
}

// sameOperator compares operators as stored: times in UTC, hashes by their bytes.
func sameOperator(got, want domain.Operator) bool {
	return got.Name == want.Name && got.Role == want.Role && bytes.Equal(got.TokenHash, want.TokenHash) &&
		got.CreatedAt.UTC() == want.CreatedAt.UTC() && got.RotatedAt.UTC() == want.RotatedAt.UTC()
}

func wantOperator(t *testing.T, l domain.Store, want domain.Operator) {
	t.Helper()
	got, err := l.Operators().Operator(t.Context(), want.Name)
	if err != nil {
		t.Fatalf("Operator(%s): %v", want.Name, err)
	}
	if !sameOperator(got, want) {
		t.Fatalf("Operator(%s) = %+v, want %+v", want.Name, got, want)
	}
}

func wantNoOperator(t *testing.T, l domain.Store, name domain.OperatorName) {
	t.Helper()
	if got, err := l.Operators().Operator(t.Context(), name); !errors.Is(err, domain.ErrOperatorNotFound) {
		t.Fatalf("Operator(%s) = %+v, %v; want ErrOperatorNotFound", name, got, err)
	}
}

// wantSessionsEnded checks SessionsEnded(name): want exactly (zero: never logged out), in UTC.
func wantSessionsEnded(t *testing.T, l domain.Store, name domain.OperatorName, want time.Time) {
	t.Helper()
	got, err := l.Operators().SessionsEnded(t.Context(), name)
	if err != nil {
		t.Fatalf("SessionsEnded(%s): %v", name, err)
	}
	if !got.Equal(want) || (!got.IsZero() && got.Location() != time.UTC) {
		t.Fatalf("SessionsEnded(%s) = %v, want %v in UTC", name, got, want)
	}
}

func operatorNames(all []domain.Operator) []domain.OperatorName {
	out := make([]domain.OperatorName, len(all))
	for i, o := range all {
		out[i] = o.Name
	}
	return out
}

// newAuditEntry is an entry of a product update by op, with every field set.
func newAuditEntry(op domain.OperatorName, action string, at time.Time) domain.AuditEntry {
	return domain.AuditEntry{At: at, Operator: op, Role: domain.RoleOperator, Action: action, Target: "product 12",
		Params: `{"price":199}`, Result: "200", ClientAddr: "192.0.2.7:4242"}
}

// appendAudit appends e and returns it as stored: with its id, read back whole.
func appendAudit(t *testing.T, l domain.Store, e domain.AuditEntry) domain.AuditEntry {
	t.Helper()
	id, err := l.Audit().Append(t.Context(), e)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if id <= 0 {
		t.Fatalf("Append assigned id %d, want a positive one", id)
	}
	got := listAudit(t, l, domain.AuditFilter{Operator: e.Operator, BeforeID: id + 1, Limit: 1})
	e.ID = id
	if len(got) != 1 || auditRecord(got[0]) != auditRecord(e) {
		t.Fatalf("appended %+v, read back %+v", auditRecord(e), got)
	}
	return got[0]
}

func listAudit(t *testing.T, l domain.Store, f domain.AuditFilter) []domain.AuditEntry {
	t.Helper()
	got, err := l.Audit().List(t.Context(), f)
	if err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	return got
}

func wantAudit(t *testing.T, l domain.Store, f domain.AuditFilter, want ...domain.AuditEntry) {
	t.Helper()
	if got := listAudit(t, l, f); !sameEntries(got, want) {
		t.Fatalf("List(%+v) = %+v, want %+v", f, got, want)
	}
}

func auditRecord(e domain.AuditEntry) domain.AuditEntry {
	e.At = e.At.UTC()
	return e
}

func sameEntries(got, want []domain.AuditEntry) bool {
	return slices.EqualFunc(got, want, func(g, w domain.AuditEntry) bool { return auditRecord(g) == auditRecord(w) })
}

func reversed(e []domain.AuditEntry) []domain.AuditEntry {
	out := slices.Clone(e)
	slices.Reverse(out)
	return out
}

func auditIDs(e []domain.AuditEntry) []int64 {
	out := make([]int64, len(e))
	for i, x := range e {
		out[i] = x.ID
	}
	return out
}
