package epay

import (
	"fmt"
	"log/slog"
)

// MinKeyLength is the shortest merchant KEY accepted. Gateways issue 32 characters; a short
// one is a placeholder or a typo, and MD5 signatures with it can be forged by guessing.
const MinKeyLength = 16

const redacted = "[REDACTED]"

// Key is the merchant KEY: it signs every request and notification and authenticates queries.
// Every way of printing it — fmt's verbs, slog, JSON and text encoding — gives [REDACTED] (an
// empty one prints empty, so that "unset" stays visible).
type Key string

func (k Key) show() string {
	if k == "" {
		return ""
	}
	return redacted
}

// String redacts the key.
func (k Key) String() string { return k.show() }

// GoString redacts the key.
func (k Key) GoString() string { return k.show() }

// Format redacts the key for every verb.
func (k Key) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.show())) }

// LogValue redacts the key in slog output.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.show()) }

// MarshalText redacts the key in JSON and other encodings.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.show()), nil }
