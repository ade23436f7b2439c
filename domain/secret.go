package domain

import (
	"fmt"
	"log/slog"
	"strconv"
)

// Redacted is what every printing of a non-empty Secret shows.
const Redacted = "[REDACTED]"

// Secret is a value that must never reach a log line, an error, a response or a dump of a
// configuration: a token, a signing secret, a merchant key, a private key, a card code. Every
// way of printing it (fmt's verbs, slog, JSON and text encoding) shows [REDACTED]; an empty one
// shows empty, so that "unset" stays visible. Reveal hands the value to the code that needs it,
// and is the one call to look for when asking where a secret leaves the process. Never key a
// map by a Secret: encoding/json writes a string-kinded map key as it is.
type Secret string

// Reveal returns the secret itself.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) show() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// String redacts the secret.
func (s Secret) String() string { return s.show() }

// GoString redacts the secret (%#v).
func (s Secret) GoString() string { return s.show() }

// Format redacts the secret for every verb and flag.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.show())) }

// LogValue redacts the secret in slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.show()) }

// MarshalText redacts the secret in text encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.show()), nil }

// MarshalJSON redacts the secret in JSON.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.show())), nil }
