package bootstrap

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
)

const redacted = "[REDACTED]"

// Secret is a setting that must never reach a log line, an error or a dump of the
// configuration (tokens, signing secrets, encryption keys): every way of printing it — fmt's
// verbs, slog, JSON and text encoding — gives [REDACTED] (an empty one prints empty, so that
// "unset" stays visible). Reveal hands the value to the code that needs it.
type Secret string

// Reveal returns the secret itself.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) show() string {
	if s == "" {
		return ""
	}
	return redacted
}

// String redacts the secret.
func (s Secret) String() string { return s.show() }

// GoString redacts the secret.
func (s Secret) GoString() string { return s.show() }

// Format redacts the secret for every verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.show())) }

// LogValue redacts the secret in slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.show()) }

// MarshalText redacts the secret in JSON and other encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.show()), nil }

// ConnString is a connection string (a MySQL DSN or an AMQP URL) that may hold a password:
// every way of printing it shows where it points with the password replaced by xxxxx, or
// [REDACTED] when it cannot be parsed. Reveal returns it whole.
type ConnString string

// Reveal returns the connection string with its password.
func (c ConnString) Reveal() string { return string(c) }

func (c ConnString) show() string {
	s := string(c)
	if s == "" {
		return ""
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return redacted
		}
		return u.Redacted()
	}
	cfg, err := mysql.ParseDSN(s)
	if err != nil {
		return redacted
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxxxx"
	}
	return cfg.FormatDSN()
}

// String shows the connection string without its password.
func (c ConnString) String() string { return c.show() }

// GoString shows the connection string without its password.
func (c ConnString) GoString() string { return c.show() }

// Format shows the connection string without its password, for every verb.
func (c ConnString) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.show())) }

// LogValue shows the connection string without its password in slog output.
func (c ConnString) LogValue() slog.Value { return slog.StringValue(c.show()) }

// MarshalText shows the connection string without its password in JSON and other encodings.
func (c ConnString) MarshalText() ([]byte, error) { return []byte(c.show()), nil }
