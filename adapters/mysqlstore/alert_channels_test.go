package mysqlstore_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"cardshop/adapters/mysqlstore"
	"cardshop/domain"
)

// TestAlertChannelSecretsAreSealed: a channel's secret is stored encrypted (the row holds
// neither it nor a part of it) under the active key, read back after a rotation that keeps the
// old key, and a channel whose key left the keyring comes back disabled, without a secret and
// saying why, instead of failing every read of the channels.
func TestAlertChannelSecretsAreSealed(t *testing.T) {
	db := openDB(t)
	const secret = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
	old := mysqlstore.New(db, keyring(t, testKeyOld))
	name := fmt.Sprintf("sealed-%016x", rand.Uint64())
	id, err := old.AlertChannels().Create(t.Context(), domain.AlertChannel{Name: name, Type: domain.ChannelTelegram,
		Target: "-100123", Secret: secret, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	var sealed []byte
	var kid string
	if err := db.QueryRowContext(t.Context(), "SELECT secret_sealed, secret_kid FROM alert_channels WHERE id = ?", id).Scan(&sealed, &kid); err != nil {
		t.Fatal(err)
	}
	if len(sealed) == 0 || bytes.Contains(sealed, []byte(secret[10:30])) || kid != "k1" {
		t.Fatalf("stored secret: %d bytes under %q; want sealed under k1", len(sealed), kid)
	}
	rotated := mysqlstore.New(db, keyring(t, testKeyNew+","+testKeyOld))
	if c, err := rotated.AlertChannels().Channel(t.Context(), id); err != nil || c.Secret.Reveal() != secret || !c.Enabled {
		t.Fatalf("after a rotation: %v, secret kept %v", err, c.Secret.Reveal() == secret)
	}
	lost := mysqlstore.New(db, keyring(t, testKeyNew))
	c, err := lost.AlertChannels().Channel(t.Context(), id)
	if err != nil || c.Secret != "" || c.Enabled || !strings.Contains(c.LastError, "decrypt") {
		t.Fatalf("without its key: %v, enabled %v, error %q", err, c.Enabled, c.LastError)
	}
	if _, err := lost.AlertChannels().Channels(t.Context()); err != nil {
		t.Fatalf("Channels without one channel's key: %v", err)
	}
	if err := old.AlertChannels().Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
}
