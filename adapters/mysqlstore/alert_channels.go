package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"cardshop/domain"
)

type alertChannels struct{ s *store }

// sealAlertSecret encrypts an alert channel's secret with the keyring's sealSecret, bound
// to the channel's name (a sealed secret copied to another channel's row does not open); an
// empty secret is stored as NULL.
func (k *Keyring) sealAlertSecret(name string, secret domain.Secret) (sealed []byte, kid string) {
	if secret == "" {
		return nil, ""
	}
	return k.sealSecret(alertChannelLabel(name), []byte(secret.Reveal()))
}

// openAlertSecret decrypts what sealAlertSecret sealed for the channel name.
func (k *Keyring) openAlertSecret(name, kid string, sealed []byte) (domain.Secret, error) {
	if len(sealed) == 0 {
		return "", nil
	}
	plain, err := k.openSecret(alertChannelLabel(name), kid, sealed)
	if err != nil {
		return "", err
	}
	return domain.Secret(plain), nil
}

// alertChannelLabel is the owner an alert channel's secret is sealed for.
func alertChannelLabel(name string) string { return "alert-channel\x00" + name }

type channelRow struct {
	ID          int64        `bun:"id"`
	Name        string       `bun:"name"`
	Type        string       `bun:"type"`
	Target      string       `bun:"target"`
	Sealed      []byte       `bun:"secret_sealed"`
	Kid         string       `bun:"secret_kid"`
	Kinds       string       `bun:"kinds"`
	Stock       bool         `bun:"stock"`
	Enabled     bool         `bun:"enabled"`
	UpdatedAt   time.Time    `bun:"updated_at"`
	LastOKAt    sql.NullTime `bun:"last_ok_at"`
	LastErrorAt sql.NullTime `bun:"last_error_at"`
	LastError   string       `bun:"last_error"`
}

const channelColumns = "id, name, type, target, secret_sealed, secret_kid, kinds, stock, enabled, updated_at, " +
	"last_ok_at, last_error_at, last_error"

// channel rehydrates a row. A secret the keyring cannot open (its key was dropped from
// CARDSHOP_CODE_KEYS) does not hide the channel: it comes back disabled, without a secret, its
// error saying so, so that alerts are still recorded and an admin can enter the secret again.
func (r alertChannels) channel(row channelRow) (domain.AlertChannel, error) {
	secret, serr := r.s.keys().openAlertSecret(row.Name, row.Kid, row.Sealed)
	c := domain.AlertChannel{ID: row.ID, Name: row.Name, Type: domain.AlertChannelType(row.Type), Target: row.Target,
		Secret: secret, Stock: row.Stock, Enabled: row.Enabled, UpdatedAt: row.UpdatedAt.UTC(), LastError: row.LastError}
	if serr != nil {
		c.Secret, c.Enabled = "", false
		c.LastError = "the secret cannot be decrypted with the keyring (CARDSHOP_CODE_KEYS); enter it again"
	}
	if err := json.Unmarshal([]byte(row.Kinds), &c.Kinds); err != nil {
		return domain.AlertChannel{}, fmt.Errorf("alert channel %d's kinds: %w", row.ID, err)
	}
	if len(c.Kinds) == 0 {
		c.Kinds = nil
	}
	if row.LastOKAt.Valid {
		c.LastOKAt = row.LastOKAt.Time.UTC()
	}
	if row.LastErrorAt.Valid {
		c.LastErrorAt = row.LastErrorAt.Time.UTC()
	}
	return c, nil
}

func kindsJSON(kinds []string) string {
	if kinds == nil {
		kinds = []string{}
	}
	b, _ := json.Marshal(kinds) // strings always encode
	return string(b)
}

// Create inserts the channel; uk_name refuses a taken name.
func (r alertChannels) Create(ctx context.Context, c domain.AlertChannel) (int64, error) {
	sealed, kid := r.s.keys().sealAlertSecret(c.Name, c.Secret)
	res, err := r.s.exec(ctx, "create alert channel",
		"INSERT INTO alert_channels (name, type, target, secret_sealed, secret_kid, kinds, stock, enabled, updated_at) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		c.Name, string(c.Type), c.Target, sealed, kid, kindsJSON(c.Kinds), c.Stock, c.Enabled, c.UpdatedAt.UTC())
	if _, dup := duplicateKey(err); dup {
		return 0, fmt.Errorf("create alert channel %q: %w", c.Name, domain.ErrAlertChannelExists)
	}
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	return id, r.s.failed("create alert channel", err)
}

// Update rewrites the settings in one transaction: the secret is sealed again under the new
// name (its additional data) whether or not it changes.
func (r alertChannels) Update(ctx context.Context, c domain.AlertChannel) error {
	return r.s.atomic(ctx, func(s *store) error {
		var row channelRow
		err := s.get(ctx, "alert channel", &row, "SELECT "+channelColumns+" FROM alert_channels WHERE id = ? FOR UPDATE", c.ID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("update alert channel %d: %w", c.ID, domain.ErrAlertChannelNotFound)
		}
		if err != nil {
			return err
		}
		secret := c.Secret
		if secret == "" {
			if secret, err = s.keys().openAlertSecret(row.Name, row.Kid, row.Sealed); err != nil {
				return fmt.Errorf("alert channel %d's secret: %w", c.ID, err)
			}
		}
		sealed, kid := s.keys().sealAlertSecret(c.Name, secret)
		_, err = s.exec(ctx, "update alert channel",
			"UPDATE alert_channels SET name = ?, target = ?, secret_sealed = ?, secret_kid = ?, kinds = ?, stock = ?, "+
				"enabled = ?, updated_at = ? WHERE id = ?",
			c.Name, c.Target, sealed, kid, kindsJSON(c.Kinds), c.Stock, c.Enabled, c.UpdatedAt.UTC(), c.ID)
		if _, dup := duplicateKey(err); dup {
			return fmt.Errorf("rename alert channel to %q: %w", c.Name, domain.ErrAlertChannelExists)
		}
		return err
	})
}

func (r alertChannels) Channel(ctx context.Context, id int64) (domain.AlertChannel, error) {
	var row channelRow
	err := r.s.get(ctx, "alert channel", &row, "SELECT "+channelColumns+" FROM alert_channels WHERE id = ?", id)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.AlertChannel{}, fmt.Errorf("alert channel %d: %w", id, domain.ErrAlertChannelNotFound)
	}
	if err != nil {
		return domain.AlertChannel{}, err
	}
	return r.channel(row)
}

func (r alertChannels) Channels(ctx context.Context) ([]domain.AlertChannel, error) {
	var rows []channelRow
	if err := r.s.get(ctx, "list alert channels", &rows, "SELECT "+channelColumns+" FROM alert_channels ORDER BY id"); err != nil {
		return nil, err
	}
	out := make([]domain.AlertChannel, 0, len(rows))
	for _, row := range rows {
		c, err := r.channel(row)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (r alertChannels) Remove(ctx context.Context, id int64) error {
	n, err := r.s.execN(ctx, "remove alert channel", "DELETE FROM alert_channels WHERE id = ?", id)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("remove alert channel %d: %w", id, domain.ErrAlertChannelNotFound)
	}
	return nil
}

// RecordOutcome sets the success's or the failure's columns; an unknown id changes no row.
func (r alertChannels) RecordOutcome(ctx context.Context, id int64, at time.Time, failure string) error {
	if failure == "" {
		_, err := r.s.exec(ctx, "record alert push", "UPDATE alert_channels SET last_ok_at = ? WHERE id = ?", at.UTC(), id)
		return err
	}
	_, err := r.s.exec(ctx, "record alert push failure", "UPDATE alert_channels SET last_error_at = ?, last_error = ? WHERE id = ?",
		at.UTC(), clip(failure, 500), id)
	return err
}
