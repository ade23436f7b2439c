package domain

import (
	"fmt"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CardStatus is the life-cycle state of one card code in the pool.
type CardStatus int

// The card states. A code is sellable while UNSOLD or RECYCLED.
const (
	CardUnsold CardStatus = iota + 1
	CardSold
	CardRecycled
	CardVoid
)

var cardStatusNames = map[CardStatus]string{CardUnsold: "UNSOLD", CardSold: "SOLD", CardRecycled: "RECYCLED", CardVoid: "VOID"}

// String returns the stored name of the status.
func (s CardStatus) String() string {
	if n, ok := cardStatusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("CardStatus(%d)", int(s))
}

// ParseCardStatus is the inverse of String.
func ParseCardStatus(s string) (CardStatus, error) {
	for k, v := range cardStatusNames {
		if v == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown card status %q", s)
}

// Sellable reports whether a code in this state may be allocated to an order.
func (s CardStatus) Sellable() bool { return s == CardUnsold || s == CardRecycled }

// CardCode is a secret card code. Its String, GoString, Format and LogValue all redact it, so
// a code can only leave the process through an explicit Reveal (the buyer's read).
type CardCode struct{ secret string }

// MaxCodeLength is the longest card code accepted at import.
const MaxCodeLength = 128

// ParseCardCode validates one imported code: 4 to 128 printable characters, without spaces,
// commas or quotes (so a code survives CSV and one-per-line files alike).
func ParseCardCode(s string) (CardCode, error) {
	s = strings.TrimSpace(s)
	if len(s) < 4 || len(s) > MaxCodeLength {
		return CardCode{}, Invalid("code", "must be 4 to 128 characters")
	}
	if !utf8.ValidString(s) {
		// Invalid bytes decode as U+FFFD, which is printable: without this check the pool
		// would hold a code the buyer can never receive intact (JSON replaces the bytes).
		return CardCode{}, Invalid("code", "must be valid UTF-8 text")
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == ',' || r == '"' {
			return CardCode{}, Invalid("code", "must be printable, without spaces, commas or quotes")
		}
	}
	return CardCode{secret: s}, nil
}

// RehydrateCardCode wraps a code read back from storage.
func RehydrateCardCode(s string) CardCode { return CardCode{secret: s} }

// Reveal returns the code itself. Call it only where the code must leave the process.
func (c CardCode) Reveal() string { return c.secret }

// IsZero reports whether c holds no code.
func (c CardCode) IsZero() bool { return c.secret == "" }

const redacted = "[REDACTED]"

// String redacts the code.
func (c CardCode) String() string { return redacted }

// GoString redacts the code.
func (c CardCode) GoString() string { return redacted }

// Format redacts the code for every verb.
func (c CardCode) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue redacts the code in slog output.
func (c CardCode) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText redacts the code in any encoder; the HTTP adapter sends Reveal() explicitly.
func (c CardCode) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Card is one code of a product's pool.
type Card struct {
	ID        int64
	ProductID ProductID
	Code      CardCode
	Status    CardStatus
	OrderNo   OrderNo
}
