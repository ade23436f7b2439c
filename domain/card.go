package domain

import (
	"fmt"
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

// CardCode is a secret card code: a Secret that passed ParseCardCode (or was read back from
// storage). Every way of printing it redacts it, so a code can only leave the process through
// an explicit Reveal (the buyer's read).
type CardCode struct{ code }

// code embeds Secret in CardCode under an unexported name: CardCode has Secret's redacting
// methods and Reveal, and no code is made outside ParseCardCode and RehydrateCardCode.
type code = Secret

// MaxCodeLength is the longest card code accepted at import.
const MaxCodeLength = 128

// NormalizeCardCode applies the import's normalisation to s without validating it:
//
//   - full-width ASCII variants (U+FF01..U+FF5E) fold to their ASCII letters, digits and
//     signs, and the ideographic space U+3000 to a space, so that "ＡＢＣ１" is "ABC1";
//   - surrounding white space (including NBSP and the ideographic space) and surrounding
//     invisible format characters (Unicode Cf: U+200B zero-width space, U+FEFF byte order
//     mark, U+2060 word joiner, …) are trimmed.
//
// Nothing else changes: codes are case-sensitive (licence keys can be), and nothing is
// composed or decomposed. Bytes that are not UTF-8 are kept as they are, for ParseCardCode to
// refuse.
func NormalizeCardCode(s string) string {
	var b strings.Builder
	folded := false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		fold := rune(-1)
		switch {
		case r >= 0xFF01 && r <= 0xFF5E:
			fold = r - 0xFEE0
		case r == 0x3000:
			fold = ' '
		}
		if fold >= 0 && !folded {
			folded = true
			b.Grow(len(s))
			b.WriteString(s[:i])
		}
		switch {
		case fold >= 0:
			b.WriteByte(byte(fold))
		case folded:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	if folded {
		s = b.String()
	}
	return strings.TrimFunc(s, invisibleEdge)
}

// invisibleEdge is what NormalizeCardCode trims from both ends of a code.
func invisibleEdge(r rune) bool { return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) }

// ParseCardCode normalises one imported code (NormalizeCardCode) and validates it: 4 to 128
// printable ASCII characters (U+0021..U+007E), without commas or double quotes (so a code
// survives CSV and one-per-line files alike), not starting with # (a line starting with # is
// a comment in an import file).
//
// Everything else is refused with the reason, never silently changed: a space, a control or
// invisible format character inside the code, and any other non-ASCII character. Refusing
// non-ASCII is what keeps two stored codes from differing only by Unicode form: "é" precomposed
// (NFC) and "e" + combining accent (NFD) are both refused, and so are look-alike letters of
// other scripts. Codes are case-sensitive: "abcd" and "ABCD" are two codes.
func ParseCardCode(s string) (CardCode, error) {
	if !utf8.ValidString(s) {
		// Invalid bytes decode as U+FFFD: the pool would hold a code the buyer can never
		// receive intact (JSON replaces the bytes).
		return CardCode{}, Invalid("code", "must be valid UTF-8 text")
	}
	s = NormalizeCardCode(s)
	for i, r := range s {
		var why string
		switch {
		case r == ' ' || unicode.IsSpace(r):
			why = "must not contain spaces"
		case r < 0x20 || r == 0x7F || unicode.IsControl(r):
			why = "must not contain control characters"
		case unicode.Is(unicode.Cf, r):
			why = "must not contain invisible format characters"
		case r > 0x7E:
			why = "must be printable ASCII (letters, digits and signs); other characters, accented letters in either Unicode form included, are refused"
		case r == ',' || r == '"':
			why = "must not contain commas or double quotes"
		case r == '#' && i == 0:
			why = "must not start with # (a line starting with # is a comment)"
		}
		if why != "" {
			if r > 0x7E || r < 0x20 || r == 0x7F {
				why += fmt.Sprintf(" (%U at character %d)", r, utf8.RuneCountInString(s[:i])+1)
			}
			return CardCode{}, Invalid("code", why)
		}
	}
	if len(s) < 4 || len(s) > MaxCodeLength {
		return CardCode{}, Invalid("code", "must be 4 to 128 characters")
	}
	return CardCode{code(s)}, nil
}

// RehydrateCardCode wraps a code read back from storage.
func RehydrateCardCode(s string) CardCode { return CardCode{code(s)} }

// IsZero reports whether c holds no code.
func (c CardCode) IsZero() bool { return c.code == "" }

// Card is one code of a product's pool.
type Card struct {
	ID        int64
	ProductID ProductID
	Code      CardCode
	Status    CardStatus
	OrderNo   OrderNo
}
