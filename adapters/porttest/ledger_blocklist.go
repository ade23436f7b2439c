package porttest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/domain"
)

// runBlocklist checks the blocklists' repository: Add assigns increasing ids and keeps every
// field (times to the microsecond), a second entry of a kind and value is ErrBlockExists (of
// concurrent adds exactly one wins), an invalid value is refused and stores nothing, Remove
// returns the entry and frees its kind and value, an unknown id is ErrBlockNotFound, and a
// failed transaction leaves nothing behind. Every case uses values of its own: a shared
// database keeps the entries of earlier runs.
func runBlocklist(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("add then list; ids increase; every field is kept", func(t *testing.T) {
		l := newLedger(t)
		var added []domain.BlockEntry
		for _, kv := range [][2]string{
			{"ip", newBlockIP()}, {"ip", newBlockCIDR6()}, {"email", "bot-" + newBlockDomain()[1:] + "@" + newBlockDomain()},
			{"email_domain", newBlockDomain()},
		} {
			e := newBlockEntry(t, kv[0], kv[1])
			got, err := l.Blocklist().Add(t.Context(), e)
			if err != nil {
				t.Fatalf("Add(%s %s): %v", kv[0], kv[1], err)
			}
			if got.ID <= 0 || len(added) > 0 && got.ID <= added[len(added)-1].ID {
				t.Fatalf("Add gave id %d after %v: want increasing positive ids", got.ID, added)
			}
			e.ID = got.ID
			if !sameBlock(got, e) {
				t.Fatalf("Add returned %+v, want %+v", got, e)
			}
			added = append(added, e)
		}
		for _, e := range added {
			if got, ok := findBlock(t, l, e.ID); !ok || !sameBlock(got, e) {
				t.Fatalf("Entries holds %+v (found %v), want %+v", got, ok, e)
			}
		}
		all, err := l.Blocklist().Entries(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].ID <= all[i-1].ID {
				t.Fatalf("Entries is not by id: %d after %d", all[i].ID, all[i-1].ID)
			}
		}
	})

	t.Run("a second entry of a kind and value is ErrBlockExists; another kind is not", func(t *testing.T) {
		l := newLedger(t)
		d := newBlockDomain()
		first, err := l.Blocklist().Add(t.Context(), newBlockEntry(t, "email_domain", d))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Blocklist().Add(t.Context(), newBlockEntry(t, "email_domain", d)); !errors.Is(err, domain.ErrBlockExists) {
			t.Fatalf("second Add of %s: err = %v, want ErrBlockExists", d, err)
		}
		if _, err := l.Blocklist().Add(t.Context(), newBlockEntry(t, "email", "x@"+d)); err != nil {
			t.Fatalf("an address of the blocked domain, as an entry of its own: %v", err)
		}
		if got, ok := findBlock(t, l, first.ID); !ok || !sameBlock(got, first) {
			t.Fatalf("the first entry became %+v (found %v), want %+v", got, ok, first)
		}
	})

	t.Run("of concurrent adds of one entry exactly one wins", func(t *testing.T) {
		l := newLedger(t)
		ip := newBlockIP()
		var won, lost atomic.Int64
		parallel(8, func(int) {
			_, err := l.Blocklist().Add(t.Context(), newBlockEntry(t, "ip", ip))
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, domain.ErrBlockExists):
				lost.Add(1)
			default:
				t.Errorf("Add: %v", err)
			}
		})
		if won.Load() != 1 || lost.Load() != 7 {
			t.Fatalf("%d adds won and %d lost, want 1 and 7", won.Load(), lost.Load())
		}
		if n := countBlocks(t, l, domain.BlockIP, ip); n != 1 {
			t.Fatalf("%d entries of %s, want 1", n, ip)
		}
	})

	t.Run("an invalid or unnormalised value, or a note too long, is refused and stores nothing", func(t *testing.T) {
		l := newLedger(t)
		for _, e := range []domain.BlockEntry{
			{Kind: domain.BlockIP, Value: "300.1.1.1"},
			{Kind: domain.BlockEmail, Value: "no-at-sign"},
			{Kind: "phone", Value: "12345"},
			{Kind: domain.BlockIP, Value: "10.0.0.5/8"},            // not in its normal form, 10.0.0.0/8
			{Kind: domain.BlockEmailDomain, Value: "Spam.EXAMPLE"}, // nor this, spam.example
			{Kind: domain.BlockIP, Value: "10.0.0.6", Note: string(make([]byte, domain.MaxBlockNote+1))},
		} {
			e.AddedAt = usec()
			if _, err := l.Blocklist().Add(t.Context(), e); !errors.Is(err, domain.ErrInvalidBlockEntry) {
				t.Fatalf("Add(%+v): err = %v, want ErrInvalidBlockEntry", e, err)
			}
			if n := countBlocks(t, l, e.Kind, e.Value); n != 0 {
				t.Fatalf("%d entries of %+v stored", n, e)
			}
		}
	})

	t.Run("remove returns the entry and frees its value; an unknown id is ErrBlockNotFound", func(t *testing.T) {
		l := newLedger(t)
		e, err := l.Blocklist().Add(t.Context(), newBlockEntry(t, "ip", newBlockIP()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Blocklist().Remove(t.Context(), e.ID)
		if err != nil || !sameBlock(got, e) {
			t.Fatalf("Remove = %+v, %v; want %+v", got, err, e)
		}
		if _, ok := findBlock(t, l, e.ID); ok {
			t.Fatalf("entry %d still listed after Remove", e.ID)
		}
		if _, err := l.Blocklist().Remove(t.Context(), e.ID); !errors.Is(err, domain.ErrBlockNotFound) {
			t.Fatalf("second Remove: err = %v, want ErrBlockNotFound", err)
		}
		again, err := l.Blocklist().Add(t.Context(), newBlockEntry(t, "ip", e.Value))
		if err != nil || again.ID <= e.ID {
			t.Fatalf("Add of the removed value = %+v, %v; want a new, greater id than %d", again, err, e.ID)
		}
	})

	t.Run("a failed transaction adds and removes nothing", func(t *testing.T) {
		l := newLedger(t)
		kept, err := l.Blocklist().Add(t.Context(), newBlockEntry(t, "email_domain", newBlockDomain()))
		if err != nil {
			t.Fatal(err)
		}
		fresh := newBlockEntry(t, "ip", newBlockCIDR6())
		boom := errors.New("boom")
		err = l.Atomically(t.Context(), func(tx domain.Store) error {
			if _, err := tx.Blocklist().Add(t.Context(), fresh); err != nil {
				return err
			}
			if _, err := tx.Blocklist().Remove(t.Context(), kept.ID); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Atomically: %v, want boom", err)
		}
		if n := countBlocks(t, l, fresh.Kind, fresh.Value); n != 0 {
			t.Fatalf("the rolled-back add left %d entries", n)
		}
		if got, ok := findBlock(t, l, kept.ID); !ok || !sameBlock(got, kept) {
			t.Fatalf("the rolled-back remove left %+v (found %v), want %+v", got, ok, kept)
		}
	})
}

// newBlockEntry is a valid entry added by a porttest operator now (to the microsecond).
func newBlockEntry(t *testing.T, kind, value string) domain.BlockEntry {
	t.Helper()
	e, err := domain.NewBlockEntry(kind, value, "porttest: "+value, "porttest-op", usec())
	if err != nil {
		t.Fatalf("NewBlockEntry(%s, %s): %v", kind, value, err)
	}
	return e
}

// newBlockIP is a random IPv4 address in 10.0.0.0/8, normalised.
func newBlockIP() string {
	return fmt.Sprintf("10.%d.%d.%d", rand.IntN(256), rand.IntN(256), rand.IntN(256))
}

// newBlockCIDR6 is a random /48 of the documentation range 2001:db8::/32.
func newBlockCIDR6() string { return fmt.Sprintf("2001:db8:%x::/48", rand.IntN(0x10000)) }

// newBlockDomain is a random domain name.
func newBlockDomain() string { return fmt.Sprintf("pt%016x.example", rand.Uint64()) }

func findBlock(t *testing.T, l domain.Store, id int64) (domain.BlockEntry, bool) {
	t.Helper()
	all, err := l.Blocklist().Entries(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if e.ID == id {
			return e, true
		}
	}
	return domain.BlockEntry{}, false
}

func countBlocks(t *testing.T, l domain.Store, kind domain.BlockKind, value string) int {
	t.Helper()
	all, err := l.Blocklist().Entries(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range all {
		if e.Kind == kind && e.Value == value {
			n++
		}
	}
	return n
}

// sameBlock compares two entries, their times as instants (a store may answer in UTC).
func sameBlock(a, b domain.BlockEntry) bool {
	at, bt := a.AddedAt, b.AddedAt
	a.AddedAt, b.AddedAt = time.Time{}, time.Time{}
	return a == b && at.Equal(bt)
}
