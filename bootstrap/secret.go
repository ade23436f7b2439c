package bootstrap

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"cardshop/domain"
)

// ConnString is a connection string (a MySQL DSN or an AMQP URL) that may hold a password.
// The settings that are secrets are domain.Secret; a connection string is not one: every way
// of printing it shows where it points with the password replaced by xxxxx, or [REDACTED]
// when it cannot be parsed. Reveal returns it whole.
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
			return domain.Redacted
		}
		return u.Redacted()
	}
	cfg, err := mysql.ParseDSN(s)
	if err != nil {
		return domain.Redacted
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
