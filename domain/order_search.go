package domain

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// MaxOrderPage bounds one page of an order search.
const MaxOrderPage = 100

// OrderFilter selects orders for an operator's search: every set field must match (they
// combine with AND); zero fields select everything. A search lists orders newest first (by
// CreatedAt, then by number, both descending), at most Limit of them (1 to MaxOrderPage), and,
// when After is set, only those that come after it in that order: the next page.
type OrderFilter struct {
	Buyer    BuyerID
	Product  ProductID
	Statuses []OrderStatus // any one of them; none: every status
	From, To time.Time     // CreatedAt in [From, To); a zero bound is open
	// NoPrefix selects the orders whose number starts with it (an operator types the first
	// digits a buyer reads out).
	NoPrefix string
	// Email selects a storefront guest's orders by its e-mail address (normalised as
	// ParseEmail does).
	Email Email
	// ProviderRef selects the orders with a payment the provider knows by this reference (a
	// payment's ProviderRef at any provider, or a manual confirmation's reference), exactly.
	ProviderRef string
	After       OrderCursor
	Limit       int
}

// OrderCursor is a position in a search's newest-first order: the creation time and number of
// the last order of a page. The next page starts after it, so orders inserted while an
// operator pages never shift a page's start (as an offset would), and ties in CreatedAt are
// broken by the number.
type OrderCursor struct {
	CreatedAt time.Time
	No        OrderNo
}

// IsZero reports whether c is the start: no cursor.
func (c OrderCursor) IsZero() bool { return c.No == "" && c.CreatedAt.IsZero() }

// Before reports whether the order created at at with number no comes after c in a search's
// newest-first order, that is whether (at, no) sorts below (c.CreatedAt, c.No).
func (c OrderCursor) Before(at time.Time, no OrderNo) bool {
	return at.Before(c.CreatedAt) || at.Equal(c.CreatedAt) && no < c.No
}

// CursorOf is the cursor that pages on after o.
func CursorOf(o Order) OrderCursor { return OrderCursor{CreatedAt: o.CreatedAt(), No: o.No()} }

// String encodes c for a link or an API answer: an opaque token (base64url of the creation
// time in Unix nanoseconds and the number) that ParseOrderCursor reads back. The zero cursor
// is "".
func (c OrderCursor) String() string {
	if c.IsZero() {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + "/" + string(c.No)))
}

// ParseOrderCursor reads a cursor that String wrote; "" is the zero cursor. Anything else is a
// ValidationError of the field "cursor".
func ParseOrderCursor(s string) (OrderCursor, error) {
	if s == "" {
		return OrderCursor{}, nil
	}
	bad := Invalid("cursor", "is not a cursor this service gave out")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return OrderCursor{}, bad
	}
	ns, no, ok := strings.Cut(string(b), "/")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil {
		return OrderCursor{}, bad
	}
	parsed, err := ParseOrderNo(no)
	if err != nil {
		return OrderCursor{}, bad
	}
	return OrderCursor{CreatedAt: time.Unix(0, n).UTC(), No: parsed}, nil
}

// Check validates f: a Limit from 1 to MaxOrderPage, a well-formed buyer, a product id that
// is not negative, known statuses without repeats, From not after To when both are set, and a
// cursor with both its parts or neither. Every failure is a ValidationError.
func (f OrderFilter) Check() error {
	if f.Limit < 1 || f.Limit > MaxOrderPage {
		return Invalid("limit", "must be from 1 to "+strconv.Itoa(MaxOrderPage))
	}
	if f.Buyer != "" {
		if _, err := ParseBuyerID(string(f.Buyer)); err != nil {
			return err
		}
	}
	if f.Product < 0 {
		return Invalid("product_id", "must be a positive integer")
	}
	seen := map[OrderStatus]bool{}
	for _, s := range f.Statuses {
		if _, known := statusNames[s]; !known || seen[s] {
			return Invalid("status", "must be distinct order statuses (PENDING, PAID, CLOSED, FAILED, REFUNDED, UNFULFILLED)")
		}
		seen[s] = true
	}
	if f.NoPrefix != "" && !validToken(f.NoPrefix, 1, 32, "-") {
		return Invalid("no", "an order number's first characters: letters, digits and '-'")
	}
	if f.Email != "" {
		if e, err := ParseEmail(string(f.Email)); err != nil || e != f.Email {
			return Invalid("email", "must be an e-mail address")
		}
	}
	if f.ProviderRef != "" {
		if _, err := ParseManualReference(f.ProviderRef); err != nil || strings.TrimSpace(f.ProviderRef) != f.ProviderRef {
			return Invalid("provider_ref", "1 to 128 printable characters without spaces")
		}
	}
	if !f.From.IsZero() && !f.To.IsZero() && f.To.Before(f.From) {
		return Invalid("from", "must not be after to")
	}
	if (f.After.No == "") != f.After.CreatedAt.IsZero() {
		return Invalid("cursor", "needs both the creation time and the order number")
	}
	return nil
}

// Selects reports whether o passes f's filters (not its cursor or limit, nor ProviderRef,
// which payments hold: the store checks it): what a search keeps, for a store that filters in
// Go.
func (f OrderFilter) Selects(o Order) bool {
	if f.Buyer != "" && o.Buyer() != f.Buyer || f.Product != 0 && o.Product() != f.Product {
		return false
	}
	if f.NoPrefix != "" && !strings.HasPrefix(string(o.No()), f.NoPrefix) || f.Email != "" && o.Email() != f.Email {
		return false
	}
	if !f.From.IsZero() && o.CreatedAt().Before(f.From) || !f.To.IsZero() && !o.CreatedAt().Before(f.To) {
		return false
	}
	if len(f.Statuses) == 0 {
		return true
	}
	for _, s := range f.Statuses {
		if o.Status() == s {
			return true
		}
	}
	return false
}
