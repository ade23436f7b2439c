package domain

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ManualPayment is an operator's confirmation that an order was paid outside cardshop's
// notifications (补单): at which provider, under the provider's transaction reference, by whom,
// why, and what the provider's query answered. A reference is used by one order at most.
type ManualPayment struct {
	OrderNo   OrderNo
	Provider  Provider
	Reference string // the provider's transaction reference, as the operator read it there
	Operator  OperatorName
	Note      string
	// Queried is what the provider's query answered ("paid", "pending", …), or "not asked"
	// with the reason when it could not be asked.
	Queried string
	// Override is an admin's reason to pay the order although the provider did not confirm
	// the payment; empty when it did (or could not be asked).
	Override string
	At       time.Time
}

// MaxManualReference and MaxManualNote bound a manual confirmation's reference and texts, in
// characters.
const (
	MaxManualReference = 128
	MaxManualNote      = 255
)

// ParseManualReference checks a provider's transaction reference typed by an operator: 1 to
// MaxManualReference printable characters without spaces, trimmed.
func ParseManualReference(s string) (string, error) {
	s = strings.TrimSpace(s)
	ok := s != "" && utf8.ValidString(s) && utf8.RuneCountInString(s) <= MaxManualReference
	for _, r := range s {
		ok = ok && unicode.IsPrint(r) && !unicode.IsSpace(r)
	}
	if !ok {
		return "", Invalid("reference", fmt.Sprintf("1 to %d printable characters without spaces", MaxManualReference))
	}
	return s, nil
}

// CheckManualNote refuses an operator's note or override reason that cannot be stored: over
// MaxManualNote characters, not UTF-8, or with control characters.
func CheckManualNote(field, s string) error {
	ok := utf8.ValidString(s) && utf8.RuneCountInString(s) <= MaxManualNote
	for _, r := range s {
		ok = ok && !unicode.IsControl(r)
	}
	if !ok {
		return Invalid(field, fmt.Sprintf("at most %d characters, no control characters", MaxManualNote))
	}
	return nil
}

// ErrReferenceUsed means a provider's transaction reference is already the payment of another
// order: one payment never pays two orders.
var ErrReferenceUsed = errors.New("the provider's reference is already used by another order")

// ErrProviderUnpaid means the provider's query does not confirm the payment a manual
// confirmation claims (unpaid, another amount, or the provider could not be asked): only an
// admin may override it, with a reason.
var ErrProviderUnpaid = errors.New("the provider does not confirm the payment")
