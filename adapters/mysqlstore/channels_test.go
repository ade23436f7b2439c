package mysqlstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/mysqlstore"
	"cardshop/domain"
)

// testChannel is an enabled channel of a provider name no other run uses, with a secret that
// is easy to look for in a row.
func testChannel() (domain.ChannelSettings, string) {
	secret := fmt.Sprintf("merchant-key-%016x", rand.Uint64())
	return domain.ChannelSettings{Provider: domain.Provider(fmt.Sprintf("ch-%016x", rand.Uint64())), Enabled: true,
		Fields:  map[string]string{"url": "https://pay.example.com/"},
		Secrets: map[string]domain.Secret{"key": domain.Secret(secret)},
		Version: 1, UpdatedAt: time.Now().UTC().Truncate(time.Microsecond), UpdatedBy: "tester"}, secret
}

func channelOf(t *testing.T, l domain.Ledger, p domain.Provider) (domain.ChannelSettings, error) {
	t.Helper()
	all, err := l.Channels().Channels(t.Context())
	if err != nil {
		return domain.ChannelSettings{}, err
	}
	for _, c := range all {
		if c.Provider == p {
			return c, nil
		}
	}
	t.Fatalf("channel %s not stored", p)
	return domain.ChannelSettings{}, nil
}

// TestChannelSecretsAreEncryptedAtRest: the row holds neither the secret nor its name's value
// in the clear, only the active key's id and a ciphertext.
func TestChannelSecretsAreEncryptedAtRest(t *testing.T) {
	l := newLedger(t)
	c, secret := testChannel()
	if won, err := l.Channels().Save(t.Context(), c); err != nil || !won {
		t.Fatalf("Save = %v, %v", won, err)
	}
	var fields string
	var sealed []byte
	var kid string
	if err := rawDB(t).QueryRowContext(t.Context(), "SELECT fields, secrets, key_id FROM payment_channels WHERE provider = ?",
		string(c.Provider)).Scan(&fields, &sealed, &kid); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte(secret)) || strings.Contains(fields, secret) {
		t.Fatal("the row holds the secret in the clear")
	}
	if kid != "k1" || len(sealed) < 12+16+len(secret) {
		t.Fatalf("key_id %q, %d sealed bytes: want k1 and a nonce, ciphertext and tag", kid, len(sealed))
	}
	got, err := channelOf(t, l, c.Provider)
	if err != nil || got.Secrets["key"].Reveal() != secret {
		t.Fatalf("read back %v, %v: want the secret in the clear", got.Secrets, err)
	}
}

// TestChannelSecretsSurviveKeyRotation: after a rotation (a new key first, the old one kept)
// the old row still reads; a save seals under the new key; a keyring without the old key
// cannot read the old row, and says so, never handing out a wrong secret.
func TestChannelSecretsSurviveKeyRotation(t *testing.T) {
	old := newLedger(t)
	c, secret := testChannel()
	if _, err := old.Channels().Save(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	dropChannels(t, c.Provider)
	rotated := mysqlstore.New(openDB(t), keyring(t, testKeyNew+","+testKeyOld))
	got, err := channelOf(t, rotated, c.Provider)
	if err != nil || got.Secrets["key"].Reveal() != secret {
		t.Fatalf("after rotation: %v, %v", got.Secrets, err)
	}
	got.Version, got.UpdatedAt = 2, time.Now().UTC().Truncate(time.Microsecond)
	if won, err := rotated.Channels().Save(t.Context(), got); err != nil || !won {
		t.Fatalf("Save after rotation = %v, %v", won, err)
	}
	var kid string
	if err := rawDB(t).QueryRowContext(t.Context(), "SELECT key_id FROM payment_channels WHERE provider = ?",
		string(c.Provider)).Scan(&kid); err != nil || kid != "k2" {
		t.Fatalf("key_id after a save = %q, %v; want k2", kid, err)
	}
	// A second channel sealed under the old key only.
	c2, _ := testChannel()
	dropChannels(t, c2.Provider)
	if _, err := old.Channels().Save(t.Context(), c2); err != nil {
		t.Fatal(err)
	}
	newOnly := mysqlstore.New(openDB(t), keyring(t, testKeyNew))
	if _, err := newOnly.Channels().Channels(t.Context()); !errors.Is(err, mysqlstore.ErrUndecryptable) {
		t.Fatalf("without the old key Channels = %v, want ErrUndecryptable", err)
	}
}

// TestChannelSecretsAreBoundToTheirProvider: a ciphertext copied to another provider's row
// does not decrypt.
func TestChannelSecretsAreBoundToTheirProvider(t *testing.T) {
	l := newLedger(t)
	a, _ := testChannel()
	b, _ := testChannel()
	for _, c := range []domain.ChannelSettings{a, b} {
		if _, err := l.Channels().Save(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	dropChannels(t, a.Provider, b.Provider)
	if _, err := rawDB(t).ExecContext(t.Context(),
		"UPDATE payment_channels SET secrets = (SELECT s FROM (SELECT secrets AS s FROM payment_channels WHERE provider = ?) x) WHERE provider = ?",
		string(a.Provider), string(b.Provider)); err != nil {
		t.Fatal(err)
	}
	_, err := l.Channels().Channels(t.Context())
	if !errors.Is(err, mysqlstore.ErrUndecryptable) {
		t.Fatalf("Channels with a moved ciphertext = %v, want ErrUndecryptable", err)
	}
}

// dropChannels deletes the test's rows when it ends: a row the shared keyring cannot read
// would fail every later read of the table.
func dropChannels(t *testing.T, ps ...domain.Provider) {
	t.Cleanup(func() {
		for _, p := range ps {
			if _, err := rawDB(t).ExecContext(context.Background(), "DELETE FROM payment_channels WHERE provider = ?", string(p)); err != nil {
				t.Error(err)
			}
		}
	})
}
