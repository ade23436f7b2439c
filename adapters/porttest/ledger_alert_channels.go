package porttest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"cardshop/domain"
)

// runAlertChannels checks the alert channels: a channel read back whole (its secret too, its
// kinds in order, times in UTC), a taken name refused on create and rename, an update that
// keeps the stored secret when given none and replaces it when given one, outcomes recorded
// (and ignored for an unknown channel), removal, concurrent creates of one name (exactly one
// wins), and the rollback of a failed transaction. Names are random: a shared database keeps
// the channels of earlier runs.
func runAlertChannels(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	newChannel := func() domain.AlertChannel {
		return domain.AlertChannel{Name: fmt.Sprintf("pt-%016x", rand.Uint64()), Type: domain.ChannelTelegram,
			Target: "-1001234567890", Secret: "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
			Kinds: []string{"mail_failed", "paid_unfulfilled"}, Stock: true, Enabled: true, UpdatedAt: usec()}
	}
	get := func(t *testing.T, l domain.Store, id int64) domain.AlertChannel {
		t.Helper()
		c, err := l.AlertChannels().Channel(t.Context(), id)
		if err != nil {
			t.Fatalf("Channel(%d): %v", id, err)
		}
		return c
	}

	t.Run("a channel reads back whole, in the list too; a taken name is refused", func(t *testing.T) {
		l := newLedger(t)
		c := newChannel()
		id, err := l.AlertChannels().Create(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		want := c
		want.ID, want.UpdatedAt = id, c.UpdatedAt.UTC()
		if got := get(t, l, id); !reflect.DeepEqual(got, want) {
			t.Fatalf("read back %+v\nwant %+v", got, want)
		}
		all, err := l.AlertChannels().Channels(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for i, x := range all {
			found = found || reflect.DeepEqual(x, want)
			if i > 0 && all[i-1].ID >= x.ID {
				t.Fatalf("Channels not in id order: %d before %d", all[i-1].ID, x.ID)
			}
		}
		if !found {
			t.Fatalf("Channels lacks %+v", want)
		}
		if _, err := l.AlertChannels().Create(t.Context(), c); !errors.Is(err, domain.ErrAlertChannelExists) {
			t.Fatalf("a second channel of the name: err = %v, want ErrAlertChannelExists", err)
		}
		if _, err := l.AlertChannels().Channel(t.Context(), id+1_000_000_000); !errors.Is(err, domain.ErrAlertChannelNotFound) {
			t.Fatalf("an unknown id: err = %v, want ErrAlertChannelNotFound", err)
		}
	})

	t.Run("update keeps the secret unless given one; rename to a taken name is refused", func(t *testing.T) {
		l := newLedger(t)
		a, b := newChannel(), newChannel()
		ida, err := l.AlertChannels().Create(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AlertChannels().Create(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		if err := l.AlertChannels().RecordOutcome(t.Context(), ida, usec(), ""); err != nil {
			t.Fatal(err)
		}
		u := a
		u.ID, u.Name, u.Target, u.Secret, u.Kinds, u.Stock, u.Enabled = ida, a.Name+"-x", "@shopalerts", "", nil, false, false
		if err := l.AlertChannels().Update(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		got := get(t, l, ida)
		if got.Secret != a.Secret || got.Name != u.Name || got.Target != "@shopalerts" || len(got.Kinds) != 0 || got.Stock || got.Enabled {
			t.Fatalf("after an update without a secret: %+v", got)
		}
		if got.LastOKAt.IsZero() {
			t.Fatal("an update cleared the channel's outcome")
		}
		u.Secret = "987654321:BBHdqTcvCH1vGWJxfSeofSAs0K5PALDzzz"
		if err := l.AlertChannels().Update(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		if got := get(t, l, ida); got.Secret != u.Secret {
			t.Fatalf("secret after an update with one: %v", got.Secret == a.Secret)
		}
		u.Name = b.Name
		if err := l.AlertChannels().Update(t.Context(), u); !errors.Is(err, domain.ErrAlertChannelExists) {
			t.Fatalf("rename to a taken name: err = %v, want ErrAlertChannelExists", err)
		}
		u.ID = ida + 1_000_000_000
		if err := l.AlertChannels().Update(t.Context(), u); !errors.Is(err, domain.ErrAlertChannelNotFound) {
			t.Fatalf("update of an unknown id: err = %v, want ErrAlertChannelNotFound", err)
		}
	})

	t.Run("outcomes: success and failure kept apart, clipped, an unknown channel ignored; remove", func(t *testing.T) {
		l := newLedger(t)
		id, err := l.AlertChannels().Create(t.Context(), newChannel())
		if err != nil {
			t.Fatal(err)
		}
		ok, bad := usec(), usec().Add(3e9)
		if err := l.AlertChannels().RecordOutcome(t.Context(), id, ok, ""); err != nil {
			t.Fatal(err)
		}
		if err := l.AlertChannels().RecordOutcome(t.Context(), id, bad, "wecom 93000: "+strings.Repeat("x", 600)); err != nil {
			t.Fatal(err)
		}
		got := get(t, l, id)
		if !got.LastOKAt.Equal(ok) || !got.LastErrorAt.Equal(bad) || len([]rune(got.LastError)) != 500 ||
			!strings.HasPrefix(got.LastError, "wecom 93000") {
			t.Fatalf("outcome: ok %v, error at %v, error %d characters", got.LastOKAt, got.LastErrorAt, len([]rune(got.LastError)))
		}
		if err := l.AlertChannels().RecordOutcome(t.Context(), id+1_000_000_000, ok, "x"); err != nil {
			t.Fatalf("outcome of an unknown channel: %v", err)
		}
		if err := l.AlertChannels().Remove(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if err := l.AlertChannels().Remove(t.Context(), id); !errors.Is(err, domain.ErrAlertChannelNotFound) {
			t.Fatalf("a second remove: err = %v, want ErrAlertChannelNotFound", err)
		}
	})

	t.Run("concurrent creates of one name: exactly one wins", func(t *testing.T) {
		l := newLedger(t)
		c := newChannel()
		var won, lost atomic.Int64
		parallel(8, func(int) {
			_, err := l.AlertChannels().Create(t.Context(), c)
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, domain.ErrAlertChannelExists):
				lost.Add(1)
			default:
				t.Errorf("create: %v", err)
			}
		})
		if won.Load() != 1 || lost.Load() != 7 {
			t.Fatalf("%d creates won and %d lost, want 1 and 7", won.Load(), lost.Load())
		}
	})

	t.Run("a failed transaction leaves no channel", func(t *testing.T) {
		l := newLedger(t)
		c := newChannel()
		boom := errors.New("boom")
		var id int64
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			var err error
			if id, err = tx.AlertChannels().Create(t.Context(), c); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Atomically: %v", err)
		}
		if _, err := l.AlertChannels().Channel(t.Context(), id); !errors.Is(err, domain.ErrAlertChannelNotFound) {
			t.Fatalf("the rolled-back channel: err = %v, want ErrAlertChannelNotFound", err)
		}
		if _, err := l.AlertChannels().Create(t.Context(), c); err != nil {
			t.Fatalf("the name after the rollback: %v", err)
		}
	})
}
