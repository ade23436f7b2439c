package porttest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"cardshop/domain"
)

// runChannels checks the payment channels' repository: a save keeps every field (the secrets
// handed back in the clear), a save from a stale version stores nothing (of concurrent saves
// from one version exactly one wins), settings that fail Check are refused and store nothing,
// and a failed transaction leaves nothing behind. Every case uses a provider name of its own:
// a shared database keeps the rows of earlier runs.
func runChannels(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("save then read; every field is kept", func(t *testing.T) {
		l := newLedger(t)
		c := newChannel(1)
		if won, err := l.Channels().Save(t.Context(), c); err != nil || !won {
			t.Fatalf("Save(v1) = %v, %v; want true, nil", won, err)
		}
		if got := findChannel(t, l, c.Provider); !sameChannel(got, c) {
			t.Fatalf("Channels holds %+v, want %+v", got, c)
		}
		c2 := c
		c2.Version, c2.Enabled, c2.Fields = 2, false, map[string]string{"url": "https://pay.example.org/"}
		c2.Secrets = map[string]domain.Secret{"key": "another secret value"}
		if won, err := l.Channels().Save(t.Context(), c2); err != nil || !won {
			t.Fatalf("Save(v2) = %v, %v; want true, nil", won, err)
		}
		if got := findChannel(t, l, c.Provider); !sameChannel(got, c2) {
			t.Fatalf("Channels holds %+v, want %+v", got, c2)
		}
	})
	t.Run("a save from a stale or future version stores nothing", func(t *testing.T) {
		l := newLedger(t)
		c := newChannel(1)
		if won, err := l.Channels().Save(t.Context(), c); err != nil || !won {
			t.Fatalf("Save(v1) = %v, %v", won, err)
		}
		for _, v := range []int64{1, 3} {
			other := c
			other.Version, other.Fields = v, map[string]string{"url": "https://other.example.org/"}
			if won, err := l.Channels().Save(t.Context(), other); err != nil || won {
				t.Fatalf("Save(v%d) over v1 = %v, %v; want false, nil", v, won, err)
			}
		}
		if got := findChannel(t, l, c.Provider); !sameChannel(got, c) {
			t.Fatalf("after refused saves Channels holds %+v, want %+v", got, c)
		}
	})
	t.Run("of concurrent saves from one version exactly one wins", func(t *testing.T) {
		l := newLedger(t)
		c := newChannel(1)
		if _, err := l.Channels().Save(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		var wins atomic.Int32
		var winner atomic.Value
		parallel(8, func(i int) {
			next := c
			next.Version, next.Fields = 2, map[string]string{"url": fmt.Sprintf("https://pay%d.example.org/", i)}
			won, err := l.Channels().Save(t.Context(), next)
			if err != nil {
				t.Errorf("Save: %v", err)
			}
			if won {
				wins.Add(1)
				winner.Store(next)
			}
		})
		if wins.Load() != 1 {
			t.Fatalf("%d saves won, want exactly 1", wins.Load())
		}
		if got, want := findChannel(t, l, c.Provider), winner.Load().(domain.ChannelSettings); !sameChannel(got, want) {
			t.Fatalf("Channels holds %+v, want the winner %+v", got, want)
		}
	})
	t.Run("settings that fail Check are refused and store nothing", func(t *testing.T) {
		l := newLedger(t)
		for name, mutate := range map[string]func(c *domain.ChannelSettings){
			"bad field name": func(c *domain.ChannelSettings) { c.Fields["Bad Name"] = "x" },
			"empty secret":   func(c *domain.ChannelSettings) { c.Secrets["key"] = "" },
			"plain and secret": func(c *domain.ChannelSettings) {
				c.Fields["key"] = "x"
			},
			"version 0": func(c *domain.ChannelSettings) { c.Version = 0 },
		} {
			c := newChannel(1)
			mutate(&c)
			if _, err := l.Channels().Save(t.Context(), c); !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("%s: Save = %v, want ErrInvalidInput", name, err)
			}
			if _, ok := lookupChannel(t, l, c.Provider); ok {
				t.Fatalf("%s: a refused save stored the channel", name)
			}
		}
	})
	t.Run("a failed transaction leaves nothing behind", func(t *testing.T) {
		l := newLedger(t)
		c := newChannel(1)
		boom := errors.New("boom")
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if won, err := tx.Channels().Save(t.Context(), c); err != nil || !won {
				return fmt.Errorf("save: %v %w", won, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Atomically = %v, want boom", err)
		}
		if _, ok := lookupChannel(t, l, c.Provider); ok {
			t.Fatal("a rolled-back save left the channel")
		}
	})
}

// newChannel is an enabled channel of a provider name no other case or run uses.
func newChannel(version int64) domain.ChannelSettings {
	return domain.ChannelSettings{Provider: domain.Provider(fmt.Sprintf("pt-%016x", rand.Uint64())), Enabled: true,
		Fields:  map[string]string{"url": "https://pay.example.com/", "pid": "1001"},
		Secrets: map[string]domain.Secret{"key": "s3cret-value-of-the-channel-under-test", "pem": "-----BEGIN X-----\nAAAA\n-----END X-----\n"},
		Version: version, UpdatedAt: now(), UpdatedBy: "porttest"}
}

func lookupChannel(t *testing.T, l domain.Ledger, p domain.Provider) (domain.ChannelSettings, bool) {
	t.Helper()
	all, err := l.Channels().Channels(t.Context())
	if err != nil {
		t.Fatalf("Channels: %v", err)
	}
	for _, c := range all {
		if c.Provider == p {
			return c, true
		}
	}
	return domain.ChannelSettings{}, false
}

func findChannel(t *testing.T, l domain.Ledger, p domain.Provider) domain.ChannelSettings {
	t.Helper()
	c, ok := lookupChannel(t, l, p)
	if !ok {
		t.Fatalf("channel %s not stored", p)
	}
	return c
}

func sameChannel(a, b domain.ChannelSettings) bool {
	return a.Provider == b.Provider && a.Enabled == b.Enabled && maps.Equal(a.Fields, b.Fields) &&
		maps.Equal(a.Secrets, b.Secrets) && a.Version == b.Version && a.UpdatedAt.Equal(b.UpdatedAt) && a.UpdatedBy == b.UpdatedBy
}
