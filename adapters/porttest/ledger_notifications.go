package porttest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

// runNotifications checks the notification log: what Record stores is read back whole, with
// an id the store assigns; Recent lists newest first, of one order or of all, verified or
// refused only, up to limit; over-long texts are still recorded; records of a failed
// transaction are gone and their ids are not given again; RecordRefused folds the refused
// notifications of one provider, address and window into one record however many callers add
// to it at once; Prune deletes verified and refused records past their own ages, at most limit
// at a time, and nothing else.
func runNotifications(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("recent lists newest first, of one order or all, up to limit", func(t *testing.T) {
		l := newLedger(t)
		at := now()
		a, b := newOrderNo(), newOrderNo()
		var all []domain.NotificationRecord // oldest first
		for i, no := range []domain.OrderNo{a, b, a, "", a, b} {
			rec := newNotice(no, at.Add(time.Duration(i)*time.Second))
			rec.Result = fmt.Sprintf("result %d", i)
			all = append(all, recordNotice(t, l, rec))
		}
		for i := 1; i < len(all); i++ {
			if all[i].ID <= all[i-1].ID {
				t.Fatalf("ids %d then %d: want increasing in order of Record", all[i-1].ID, all[i].ID)
			}
		}
		wantNotices(t, l, a, 10, all[4], all[2], all[0])
		wantNotices(t, l, a, 2, all[4], all[2])
		wantNotices(t, l, b, 10, all[5], all[1])
		wantNotices(t, l, "", 4, all[5], all[4], all[3], all[2])
		wantNotices(t, l, newOrderNo(), 10)
		wantNotices(t, l, a, 0)
		wantNotices(t, l, "", -1)
	})

	t.Run("a zero time is recorded as the time of Record, a zero count as 1", func(t *testing.T) {
		l := newLedger(t)
		before := time.Now().Add(-time.Second)
		rec := newNotice(newOrderNo(), time.Time{})
		rec.Count = 0
		if err := l.Notifications().Record(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
		got := recent(t, l, domain.NotificationQuery{OrderNo: rec.OrderNo, Limit: 1})
		if len(got) != 1 {
			t.Fatalf("Recent = %+v", got)
		}
		if got[0].At.Before(before) || got[0].At.After(time.Now().Add(time.Second)) {
			t.Fatalf("At = %v, want the time of Record (about %v)", got[0].At, before)
		}
		if got[0].Count != 1 || !got[0].RefusedWindow.IsZero() {
			t.Fatalf("Count %d, RefusedWindow %v: want 1 and none", got[0].Count, got[0].RefusedWindow)
		}
	})

	t.Run("over-long texts from outside are still recorded", func(t *testing.T) {
		l := newLedger(t)
		rec := newNotice(newOrderNo(), now())
		long := strings.Repeat("界", 300)
		rec.Result, rec.EventID, rec.ProviderRef, rec.Method, rec.Remote = long, long, long, long, long
		if err := l.Notifications().Record(t.Context(), rec); err != nil {
			t.Fatalf("Record with over-long texts: %v", err)
		}
		got := recent(t, l, domain.NotificationQuery{OrderNo: rec.OrderNo, Limit: 1})
		if len(got) != 1 {
			t.Fatalf("Recent = %+v", got)
		}
		for name, kept := range map[string]struct {
			text string
			min  int
		}{"result": {got[0].Result, 255}, "event id": {got[0].EventID, 255}, "provider ref": {got[0].ProviderRef, 255},
			"method": {got[0].Method, 1}, "remote": {got[0].Remote, 1}} {
			if !strings.HasPrefix(long, kept.text) || len([]rune(kept.text)) < kept.min {
				t.Errorf("%s read back as %d characters %q…, want a prefix of the text of at least %d", name,
					len([]rune(kept.text)), kept.text[:min(len(kept.text), 12)], kept.min)
			}
		}
	})

	t.Run("records of a failed transaction are gone, and their ids are not given again", func(t *testing.T) {
		l := newLedger(t)
		no := newOrderNo()
		var lost int64
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if err := tx.Notifications().Record(t.Context(), newNotice(no, now())); err != nil {
				return err
			}
			got, err := tx.Notifications().Recent(t.Context(), domain.NotificationQuery{OrderNo: no, Limit: 10})
			if err != nil || len(got) != 1 {
				t.Errorf("the transaction reads its own record as %+v, %v", got, err)
			} else {
				lost = got[0].ID
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Atomically: err = %v, want fn's error", err)
		}
		wantNotices(t, l, no, 10)
		next := recordNotice(t, l, newNotice(no, now()))
		if next.ID <= lost {
			t.Fatalf("a record after the rollback got id %d, not above the rolled-back %d", next.ID, lost)
		}
		wantNotices(t, l, no, 10, next)
	})

	t.Run("refused notifications of one provider, address and window are one record", func(t *testing.T) {
		l := newLedger(t)
		provider := newProvider()
		window := now().Truncate(time.Minute)
		first := refusedNotice(provider, "198.51.100.1", window, window.Add(time.Second), 1)
		addRefused(t, l, first)
		later := first
		later.At, later.Method, later.Result, later.BodyBytes, later.Count = window.Add(5*time.Second), "GET",
			"refused: invalid input", 7, 4
		addRefused(t, l, later)
		earlier := first // a late flush of an older count: adds, keeps the later time
		earlier.At, earlier.Result, earlier.Count = window.Add(2*time.Second), "refused: bad signature", 2
		addRefused(t, l, earlier)
		otherAddr := refusedNotice(provider, "198.51.100.2", window, window.Add(3*time.Second), 1)
		addRefused(t, l, otherAddr)
		nextWindow := refusedNotice(provider, "198.51.100.1", window.Add(time.Minute), window.Add(time.Minute), 3)
		addRefused(t, l, nextWindow)
		elsewhere := refusedNotice(provider, domain.RefusedElsewhere, window, window.Add(4*time.Second), 9)
		addRefused(t, l, elsewhere)
		verified := newNotice(newOrderNo(), window.Add(6*time.Second))
		verified.Provider = provider
		verified = recordNotice(t, l, verified)

		got := ofProvider(recent(t, l, domain.NotificationQuery{Limit: 100}), provider)
		if len(got) != 5 {
			t.Fatalf("%d records of %s, want 5 (one per address and window, and the verified one): %+v", len(got), provider, got)
		}
		agg := got[4] // the oldest: the first address's first window
		want := first // the last addition's method, result and size, the latest time, every count
		want.ID, want.At, want.Count = agg.ID, later.At, 7
		if noticeRecord(agg) != noticeRecord(want) {
			t.Fatalf("the aggregate reads %+v, want %+v", noticeRecord(agg), noticeRecord(want))
		}
		for i, w := range []struct {
			remote string
			count  int64
		}{{"", 1}, {domain.RefusedElsewhere, 9}, {"198.51.100.1", 3}, {"198.51.100.2", 1}} {
			if i == 0 {
				if got[0].ID != verified.ID {
					t.Fatalf("the newest record is %+v, want the verified one", got[0])
				}
				continue
			}
			if r := got[i]; r.Remote != w.remote || r.Count != w.count || r.Verified {
				t.Fatalf("record %d: %s, count %d, verified %t; want %s, %d, unverified", i, r.Remote, r.Count, r.Verified, w.remote, w.count)
			}
		}
		yes, no := true, false
		if v := ofProvider(recent(t, l, domain.NotificationQuery{Verified: &yes, Limit: 100}), provider); len(v) != 1 || v[0].ID != verified.ID {
			t.Fatalf("verified only: %+v, want the verified one", v)
		}
		if r := ofProvider(recent(t, l, domain.NotificationQuery{Verified: &no, Limit: 100}), provider); len(r) != 4 || r[3].ID != agg.ID {
			t.Fatalf("refused only: %+v, want the 4 aggregates", r)
		}
		if r := recent(t, l, domain.NotificationQuery{Verified: &no, Limit: 2}); len(r) != 2 || r[0].Verified || r[1].Verified {
			t.Fatalf("refused only, limit 2: %+v", r)
		}
		if v := recent(t, l, domain.NotificationQuery{OrderNo: verified.OrderNo, Verified: &no, Limit: 10}); len(v) != 0 {
			t.Fatalf("an order's refused records: %+v, want none", v)
		}
	})

	t.Run("a refused aggregate without a window or a count, or verified, is invalid", func(t *testing.T) {
		l := newLedger(t)
		provider := newProvider()
		window := now().Truncate(time.Minute)
		for name, rec := range map[string]domain.NotificationRecord{
			"no window": refusedNotice(provider, "198.51.100.1", time.Time{}, window, 1),
			"count 0":   refusedNotice(provider, "198.51.100.1", window, window, 0),
			"verified": func() domain.NotificationRecord {
				r := refusedNotice(provider, "198.51.100.1", window, window, 1)
				r.Verified = true
				return r
			}(),
		} {
			if err := l.Notifications().RecordRefused(t.Context(), rec); !errors.Is(err, domain.ErrInvalidInput) {
				t.Errorf("%s: err = %v, want ErrInvalidInput", name, err)
			}
		}
		if got := ofProvider(recent(t, l, domain.NotificationQuery{Limit: 100}), provider); len(got) != 0 {
			t.Fatalf("invalid aggregates stored: %+v", got)
		}
	})

	t.Run("concurrent additions to one aggregate are one record with every count", func(t *testing.T) {
		l := newLedger(t)
		provider := newProvider()
		window := now().Truncate(time.Minute)
		const callers, each = 16, 10
		errs := make(chan error, callers*each)
		parallel(callers, func(i int) {
			for j := range each {
				rec := refusedNotice(provider, "198.51.100.9", window, window.Add(time.Duration(j)*time.Second), int64(i%3+1))
				errs <- l.Notifications().RecordRefused(t.Context(), rec)
			}
		})
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("RecordRefused: %v", err)
			}
		}
		want := int64(0)
		for i := range callers {
			want += int64(i%3+1) * each
		}
		got := ofProvider(recent(t, l, domain.NotificationQuery{Limit: 100}), provider)
		if len(got) != 1 || got[0].Count != want || !got[0].At.Equal(window.Add((each-1)*time.Second)) {
			t.Fatalf("records %+v: want one, counting %d, at the latest time", got, want)
		}
	})

	t.Run("prune deletes each kind past its age, at most limit at once", func(t *testing.T) {
		l := newLedger(t)
		provider := newProvider()
		// Long ago, so that no other case's records are as old, and the cutoffs are exact.
		base := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(time.Now().UnixNano()%1e6) * time.Minute)
		verifiedBefore, refusedBefore := base.Add(time.Hour), base.Add(3*time.Hour)
		record := func(verified bool, at time.Time) domain.NotificationRecord {
			if verified {
				rec := newNotice(newOrderNo(), at)
				rec.Provider = provider
				return recordNotice(t, l, rec)
			}
			rec := refusedNotice(provider, fmt.Sprintf("198.51.100.%d", at.Minute()), at.Truncate(time.Minute), at, 2)
			addRefused(t, l, rec)
			return rec
		}
		oldVerified := []domain.NotificationRecord{record(true, base), record(true, base.Add(59*time.Minute))}
		oldRefused := []domain.NotificationRecord{record(false, base.Add(time.Minute)),
			record(false, base.Add(2*time.Hour)), record(false, base.Add(179*time.Minute))}
		keptVerified := []domain.NotificationRecord{record(true, verifiedBefore), record(true, base.Add(2*time.Hour))}
		keptRefused := []domain.NotificationRecord{record(false, refusedBefore.Add(time.Minute)), record(false, time.Now().UTC().Truncate(time.Second))}

		// Other runs against the same database (its records persist) leave records past this
		// run's ages too: prune until a call deletes fewer than its limit, however many there are.
		deleted := 0
		for range 100_000 {
			n, err := l.Notifications().Prune(t.Context(), verifiedBefore, refusedBefore, 2)
			if err != nil {
				t.Fatalf("Prune: %v", err)
			}
			if n < 0 || n > 2 {
				t.Fatalf("Prune(limit 2) deleted %d", n)
			}
			deleted += n
			if n < 2 {
				break
			}
		}
		if deleted < len(oldVerified)+len(oldRefused) {
			t.Fatalf("Prune deleted %d records in all, want at least the case's %d", deleted, len(oldVerified)+len(oldRefused))
		}
		got := ofProvider(recent(t, l, domain.NotificationQuery{Limit: 1000}), provider)
		left := map[string]bool{}
		for _, r := range got {
			left[fmt.Sprint(r.Verified, r.Remote, r.OrderNo, r.At.Unix())] = true
		}
		has := func(r domain.NotificationRecord) bool {
			return left[fmt.Sprint(r.Verified, r.Remote, r.OrderNo, r.At.Unix())]
		}
		for _, r := range append(oldVerified, oldRefused...) {
			if has(r) {
				t.Errorf("kept %+v, past its age", r)
			}
		}
		for _, r := range append(keptVerified, keptRefused...) {
			if !has(r) {
				t.Errorf("deleted %+v, within its age", r)
			}
		}
		if n, err := l.Notifications().Prune(t.Context(), verifiedBefore, refusedBefore, 0); n != 0 || err != nil {
			t.Fatalf("Prune(limit 0) = %d, %v; want 0, nil", n, err)
		}
	})

	t.Run("a failed transaction's aggregate additions and prunes are undone", func(t *testing.T) {
		l := newLedger(t)
		provider := newProvider()
		window := now().Truncate(time.Minute)
		old := newNotice(newOrderNo(), time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
		old.Provider = provider
		old = recordNotice(t, l, old)
		agg := refusedNotice(provider, "198.51.100.3", window, window, 2)
		addRefused(t, l, agg)
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			more := agg
			more.Count = 5
			if err := tx.Notifications().RecordRefused(t.Context(), more); err != nil {
				return err
			}
			if err := tx.Notifications().RecordRefused(t.Context(), refusedNotice(provider, "198.51.100.4", window, window, 1)); err != nil {
				return err
			}
			if _, err := tx.Notifications().Prune(t.Context(), time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC), time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC), 10); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Atomically: err = %v, want fn's error", err)
		}
		got := ofProvider(recent(t, l, domain.NotificationQuery{Limit: 100}), provider)
		if len(got) != 2 || got[0].Count != 2 || got[0].Remote != agg.Remote || got[1].ID != old.ID {
			t.Fatalf("after the rollback: %+v, want the aggregate counting 2 and the old record", got)
		}
	})
}

// newProvider is a provider name no other case uses, so a case can pick its own records out
// of a shared log.
func newProvider() domain.Provider {
	return domain.Provider(fmt.Sprintf("pt-%d", time.Now().UnixNano()%1e12))
}

// refusedNotice is count notifications from remote refused before verification, the last at at,
// in the window starting at window.
func refusedNotice(provider domain.Provider, remote string, window, at time.Time, count int64) domain.NotificationRecord {
	return domain.NotificationRecord{Provider: provider, At: at, Method: "POST", Remote: remote,
		Result: "refused: bad signature", BodyBytes: 64, Count: count, RefusedWindow: window}
}

func addRefused(t *testing.T, l domain.Store, rec domain.NotificationRecord) {
	t.Helper()
	if err := l.Notifications().RecordRefused(t.Context(), rec); err != nil {
		t.Fatalf("RecordRefused: %v", err)
	}
}

func recent(t *testing.T, l domain.Store, q domain.NotificationQuery) []domain.NotificationRecord {
	t.Helper()
	got, err := l.Notifications().Recent(t.Context(), q)
	if err != nil {
		t.Fatalf("Recent(%+v): %v", q, err)
	}
	return got
}

// ofProvider keeps the records of provider, in their order.
func ofProvider(recs []domain.NotificationRecord, provider domain.Provider) []domain.NotificationRecord {
	var out []domain.NotificationRecord
	for _, r := range recs {
		if r.Provider == provider {
			out = append(out, r)
		}
	}
	return out
}

// newNotice is a verified, accepted notification of a payment of order no (none when no is
// empty), received at at.
func newNotice(no domain.OrderNo, at time.Time) domain.NotificationRecord {
	return domain.NotificationRecord{Provider: "pt-a", At: at, Method: "POST", Remote: "192.0.2.7:4242",
		Verified: true, Accepted: true, Result: "paid", OrderNo: no, EventID: "evt-" + string(no),
		ProviderRef: "ref-" + string(no), Outcome: "paid", Amount: 1999, Currency: "CNY", BodyBytes: 512, Count: 1}
}

// recordNotice records rec and returns it as stored: with its id, read back by Recent.
func recordNotice(t *testing.T, l domain.Store, rec domain.NotificationRecord) domain.NotificationRecord {
	t.Helper()
	if err := l.Notifications().Record(t.Context(), rec); err != nil {
		t.Fatalf("Record: %v", err)
	}
	got := recent(t, l, domain.NotificationQuery{Limit: 1})
	if len(got) != 1 {
		t.Fatalf("Recent after Record = %+v", got)
	}
	stored := got[0]
	if stored.ID <= 0 {
		t.Fatalf("Record assigned id %d, want a positive one", stored.ID)
	}
	rec.ID = stored.ID
	if noticeRecord(stored) != noticeRecord(rec) {
		t.Fatalf("recorded %+v, read back %+v", noticeRecord(rec), noticeRecord(stored))
	}
	return stored
}

func noticeRecord(r domain.NotificationRecord) domain.NotificationRecord {
	r.At = r.At.UTC()
	if !r.RefusedWindow.IsZero() {
		r.RefusedWindow = r.RefusedWindow.UTC()
	}
	return r
}

func wantNotices(t *testing.T, l domain.Store, no domain.OrderNo, limit int, want ...domain.NotificationRecord) {
	t.Helper()
	got := recent(t, l, domain.NotificationQuery{OrderNo: no, Limit: limit})
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = noticeRecord(got[i]) == noticeRecord(want[i])
	}
	if !ok {
		t.Fatalf("Recent(%q, %d) = %+v, want %+v", no, limit, got, want)
	}
}
