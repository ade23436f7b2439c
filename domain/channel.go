package domain

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// ChannelSettings are a payment provider's settings as an operator stored them (a payment
// channel configured in the console): whether new orders are offered it, its plain fields (a
// gateway URL, a merchant id) and its secret ones (keys), by name. What each field means is
// the provider adapter's business; the domain only bounds them. Version counts the saves (1
// for the first): a save names the version it changes, so two operators' saves never silently
// overwrite each other.
type ChannelSettings struct {
	Provider  Provider
	Enabled   bool
	Fields    map[string]string
	Secrets   map[string]Secret
	Version   int64
	UpdatedAt time.Time
	UpdatedBy OperatorName
}

// Bounds of a channel's settings: a PEM certificate chain fits in a value.
const (
	MaxChannelFields     = 16
	MaxChannelFieldValue = 16 << 10
)

var channelFieldName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// Check bounds the settings: a known provider name, at most MaxChannelFields fields of each
// kind named in lower-case letters, digits and "_", values valid UTF-8 of at most
// MaxChannelFieldValue bytes, and no name both plain and secret. Empty values are left out
// by the caller, never stored.
func (c ChannelSettings) Check() error {
	if _, err := ParseProvider(string(c.Provider)); err != nil {
		return err
	}
	if len(c.Fields) > MaxChannelFields || len(c.Secrets) > MaxChannelFields {
		return Invalid("fields", fmt.Sprintf("at most %d fields of each kind", MaxChannelFields))
	}
	check := func(name, v string) error {
		if !channelFieldName.MatchString(name) {
			return Invalid("fields", fmt.Sprintf("field name %q: want 1 to 32 lower-case letters, digits and _", name))
		}
		if v == "" || len(v) > MaxChannelFieldValue || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return Invalid(name, fmt.Sprintf("want 1 to %d bytes of text", MaxChannelFieldValue))
		}
		return nil
	}
	for name, v := range c.Fields {
		if err := check(name, v); err != nil {
			return err
		}
		if _, both := c.Secrets[name]; both {
			return Invalid(name, "a field is either plain or secret")
		}
	}
	for name, v := range c.Secrets {
		if err := check(name, v.Reveal()); err != nil {
			return err
		}
	}
	return nil
}

// ChannelRepo stores the payment channels' settings in the ledger. Secrets are encrypted at
// rest by the adapters that persist them; every method hands them out in the clear.
type ChannelRepo interface {
	// Channels returns every stored channel, by provider name. Errors: ErrUnavailable; an
	// error naming the provider when a channel's secrets cannot be decrypted (the keyring
	// lacks their key, or the row was altered).
	Channels(ctx context.Context) ([]ChannelSettings, error)
	// Save stores s (checked with Check) when the stored version of its provider is
	// s.Version-1, no row standing for 0; it reports false, storing nothing, when another save
	// got there first. Errors: ErrInvalidInput (s fails Check, or s.Version < 1),
	// ErrUnavailable.
	Save(ctx context.Context, s ChannelSettings) (bool, error)
}
