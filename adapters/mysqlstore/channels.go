package mysqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"cardshop/domain"
)

// channelRepo stores the payment channels' settings in payment_channels, their secrets sealed
// by the keyring (see Keyring.sealSecret): the row never holds a secret's bytes in the clear.
type channelRepo struct{ s *store }

type payChannelRow struct {
	Provider  string    `bun:"provider"`
	Enabled   bool      `bun:"enabled"`
	Fields    string    `bun:"fields"`
	Secrets   []byte    `bun:"secrets"`
	KeyID     string    `bun:"key_id"`
	Version   int64     `bun:"version"`
	UpdatedAt time.Time `bun:"updated_at"`
	UpdatedBy string    `bun:"updated_by"`
}

// channelLabel binds a channel's sealed secrets to its provider.
func channelLabel(p string) string { return "payment_channel:" + p }

// Channels reads the whole table (a handful of rows) and opens each row's secrets.
func (r channelRepo) Channels(ctx context.Context) ([]domain.ChannelSettings, error) {
	var rows []payChannelRow
	if err := r.s.get(ctx, "payment channels", &rows,
		"SELECT provider, enabled, fields, secrets, key_id, version, updated_at, updated_by FROM payment_channels ORDER BY provider"); err != nil {
		return nil, err
	}
	out := make([]domain.ChannelSettings, 0, len(rows))
	for _, row := range rows {
		c := domain.ChannelSettings{Provider: domain.Provider(row.Provider), Enabled: row.Enabled, Version: row.Version,
			UpdatedAt: row.UpdatedAt, UpdatedBy: domain.OperatorName(row.UpdatedBy)}
		if err := json.Unmarshal([]byte(row.Fields), &c.Fields); err != nil {
			return nil, fmt.Errorf("payment channel %s: fields: %w", row.Provider, err)
		}
		plain, err := r.s.keys().openSecret(channelLabel(row.Provider), row.KeyID, row.Secrets)
		if err != nil {
			return nil, fmt.Errorf("payment channel %s: secrets: %w", row.Provider, err)
		}
		var secrets map[string]string
		err = json.Unmarshal(plain, &secrets)
		clear(plain)
		if err != nil {
			return nil, fmt.Errorf("payment channel %s: secrets: %w", row.Provider, err)
		}
		c.Secrets = make(map[string]domain.Secret, len(secrets))
		for k, v := range secrets {
			c.Secrets[k] = domain.Secret(v)
		}
		if c.Fields == nil {
			c.Fields = map[string]string{}
		}
		out = append(out, c)
	}
	return out, nil
}

// Save inserts version 1, or updates the row still at s.Version-1: of two saves racing from
// one version, the second changes no row (or hits the primary key) and reports false. The
// secrets are sealed anew under the keyring's active key on every save, so a row saved after
// a rotation uses the new key.
func (r channelRepo) Save(ctx context.Context, s domain.ChannelSettings) (bool, error) {
	if err := s.Check(); err != nil {
		return false, err
	}
	if s.Version < 1 {
		return false, domain.Invalid("version", "must be at least 1")
	}
	op := "save payment channel " + string(s.Provider)
	fields, err := json.Marshal(nonNil(s.Fields))
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	secrets := make(map[string]string, len(s.Secrets))
	for k, v := range s.Secrets {
		secrets[k] = v.Reveal()
	}
	plain, err := json.Marshal(secrets)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	sealed, kid := r.s.keys().sealSecret(channelLabel(string(s.Provider)), plain)
	clear(plain)
	at := s.UpdatedAt.UTC()
	if s.Version == 1 {
		_, err := r.s.exec(ctx, op, "INSERT INTO payment_channels (provider, enabled, fields, secrets, key_id, version, updated_at, updated_by) "+
			"VALUES (?, ?, ?, ?, ?, 1, ?, ?)", string(s.Provider), s.Enabled, string(fields), sealed, kid, at, string(s.UpdatedBy))
		if _, dup := duplicateKey(err); dup {
			return false, nil
		}
		return err == nil, err
	}
	n, err := r.s.execN(ctx, op, "UPDATE payment_channels SET enabled = ?, fields = ?, secrets = ?, key_id = ?, version = ?, "+
		"updated_at = ?, updated_by = ? WHERE provider = ? AND version = ?",
		s.Enabled, string(fields), sealed, kid, s.Version, at, string(s.UpdatedBy), string(s.Provider), s.Version-1)
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
