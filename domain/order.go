package domain

import (
	"fmt"
	"strconv"
	"time"
)

// OrderNo is an order's public number: time, a digest of the buyer and randomness, 28 digits.
type OrderNo string

// BuyerID identifies a storefront's user: 1 to 64 characters of [A-Za-z0-9._@-].
type BuyerID string

// IdempotencyKey is the client's key for one submission: 8 to 64 characters of
// [A-Za-z0-9._:-] (a UUID fits).
type IdempotencyKey string

func validToken(s string, min, max int, extra string) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		ok := false
		for j := 0; j < len(extra); j++ {
			if c == extra[j] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// ParseBuyerID validates a buyer id.
func ParseBuyerID(s string) (BuyerID, error) {
	if !validToken(s, 1, 64, "._@-") {
		return "", Invalid("buyer_id", "must be 1 to 64 characters of A-Z a-z 0-9 . _ @ -")
	}
	return BuyerID(s), nil
}

// ParseIdempotencyKey validates an idempotency key.
func ParseIdempotencyKey(s string) (IdempotencyKey, error) {
	if !validToken(s, 8, 64, "._:-") {
		return "", ErrInvalidIdempotencyKey
	}
	return IdempotencyKey(s), nil
}

// ParseOrderNo validates an order number from outside.
func ParseOrderNo(s string) (OrderNo, error) {
	if !validToken(s, 1, 32, "-") {
		return "", ErrOrderNotFound
	}
	return OrderNo(s), nil
}

// NewOrderNo builds an order number from the time, the buyer and a random number:
// yyMMddHHmmss, 4 digits of the buyer's digest, 12 random digits. The ledger's unique key on
// the number is the last line of defence.
func NewOrderNo(at time.Time, buyer BuyerID, random uint64) OrderNo {
	// FNV-1a by hand and digits appended to one buffer: every order request makes a number
	// before the gate answers, sold out or not, and fmt with time.Format cost five allocations.
	h := uint32(2166136261)
	for i := 0; i < len(buyer); i++ {
		h = (h ^ uint32(buyer[i])) * 16777619
	}
	var b [28]byte
	t := at.UTC()
	out := b[:0]
	for _, v := range []int{t.Year() % 100, int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()} {
		out = appendDigits(out, uint64(v), 2) //nolint:gosec // G115: date fields, small and non-negative
	}
	out = appendDigits(out, uint64(h%10000), 4)
	out = appendDigits(out, random%1000000000000, 12)
	return OrderNo(out)
}

// appendDigits appends the last n decimal digits of v, zero-padded.
func appendDigits(b []byte, v uint64, n int) []byte {
	start := len(b)
	b = append(b, make([]byte, n)...)
	for i := start + n - 1; i >= start; i-- {
		b[i] = '0' + byte(v%10)
		v /= 10
	}
	return b
}

// OrderStatus is the closed set of order states.
type OrderStatus int

// The order states. UNFULFILLED is the visible exception state: a payment was accepted but no
// codes could be handed over (the pool was short, or a late payment found the product sold
// out); an operator refunds it or fulfils it again.
const (
	StatusPending OrderStatus = iota + 1
	StatusPaid
	StatusClosed
	StatusFailed
	StatusRefunded
	StatusUnfulfilled
)

var statusNames = map[OrderStatus]string{StatusPending: "PENDING", StatusPaid: "PAID", StatusClosed: "CLOSED",
	StatusFailed: "FAILED", StatusRefunded: "REFUNDED", StatusUnfulfilled: "UNFULFILLED"}

// AllOrderStatuses lists every status, for tables and tests.
var AllOrderStatuses = []OrderStatus{StatusPending, StatusPaid, StatusClosed, StatusFailed, StatusRefunded, StatusUnfulfilled}

// String returns the stored name of the status.
func (s OrderStatus) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("OrderStatus(%d)", int(s))
}

// ParseOrderStatus is the inverse of String.
func ParseOrderStatus(s string) (OrderStatus, error) {
	for k, v := range statusNames {
		if v == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown order status %q", s)
}

// HoldsStock reports whether an order in this state holds units of the gate (counts in the
// gate's sold counter): PENDING holds a reservation, PAID holds sold codes.
func (s OrderStatus) HoldsStock() bool { return s == StatusPending || s == StatusPaid }

var transitions = map[OrderStatus][]OrderStatus{
	StatusPending:     {StatusPaid, StatusClosed, StatusFailed, StatusUnfulfilled},
	StatusClosed:      {StatusPaid, StatusUnfulfilled}, // late payment
	StatusFailed:      {StatusPaid, StatusUnfulfilled}, // paid after a failed attempt
	StatusPaid:        {StatusRefunded},                //
	StatusUnfulfilled: {StatusPaid, StatusRefunded},    // fulfilled again, or refunded
	StatusRefunded:    nil,                             // final
}

// CanTransition reports whether the state machine allows from -> to.
func CanTransition(from, to OrderStatus) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Order is one purchase of qty codes of one product by one buyer.
type Order struct {
	no         OrderNo
	buyer      BuyerID
	product    ProductID
	qty        int
	unitPrice  Money
	amount     Money
	idemKey    IdempotencyKey
	status     OrderStatus
	reason     string
	paymentRef string
	createdAt  time.Time
	expiresAt  time.Time
	paidAt     time.Time
	endedAt    time.Time
	updatedAt  time.Time
	revealedAt time.Time
	email      Email      // a guest order's buyer address (Guest); empty for an API order
	lang       string     // a guest order's buyer language
	accessHash AccessHash // SHA-256 of a guest order's access secret
	coupon     CouponCode // the coupon the order carries; empty when none
	discount   Money      // what the coupon took off; amount = unitPrice × qty − discount
}

// NewOrder validates and creates a PENDING order that expires at at+timeout. Its unit price is
// the product's price for qty (UnitPriceFor) and is fixed in the order: a later change of the
// product's prices never changes it.
func NewOrder(no OrderNo, buyer BuyerID, p Product, qty int, key IdempotencyKey, at time.Time, timeout time.Duration) (Order, error) {
	if no == "" || buyer == "" || key == "" {
		return Order{}, Invalid("order", "number, buyer and idempotency key are required")
	}
	if err := p.CheckQty(qty); err != nil {
		return Order{}, err
	}
	if timeout <= 0 {
		return Order{}, Invalid("timeout", "must be positive")
	}
	amount, err := p.Amount(qty)
	if err != nil {
		return Order{}, err
	}
	return Order{no: no, buyer: buyer, product: p.ID(), qty: qty, unitPrice: p.UnitPriceFor(qty), amount: amount,
		idemKey: key, status: StatusPending, createdAt: at, expiresAt: at.Add(timeout), updatedAt: at}, nil
}

// OrderRecord is an order as stored; RehydrateOrder turns it back into an Order.
type OrderRecord struct {
	No         OrderNo
	Buyer      BuyerID
	Product    ProductID
	Qty        int
	UnitPrice  Money
	Amount     Money
	IdemKey    IdempotencyKey
	Status     OrderStatus
	Reason     string
	PaymentRef string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	PaidAt     time.Time
	EndedAt    time.Time
	UpdatedAt  time.Time
	RevealedAt time.Time
	// Email, Lang and AccessHash are a guest order's (Guest); empty for an API order.
	Email      Email
	Lang       string
	AccessHash AccessHash
	// Coupon and Discount are the coupon the order carries and what it took off; empty/0 when
	// none.
	Coupon   CouponCode
	Discount Money
}

// RehydrateOrder rebuilds an order from storage without re-validating it.
func RehydrateOrder(r OrderRecord) Order {
	return Order{no: r.No, buyer: r.Buyer, product: r.Product, qty: r.Qty, unitPrice: r.UnitPrice,
		amount: r.Amount, idemKey: r.IdemKey, status: r.Status, reason: r.Reason, paymentRef: r.PaymentRef,
		createdAt: r.CreatedAt, expiresAt: r.ExpiresAt, paidAt: r.PaidAt, endedAt: r.EndedAt, updatedAt: r.UpdatedAt,
		revealedAt: r.RevealedAt, email: r.Email, lang: r.Lang, accessHash: r.AccessHash,
		coupon: r.Coupon, discount: r.Discount}
}

// Record returns the storable form of o.
func (o Order) Record() OrderRecord {
	return OrderRecord{No: o.no, Buyer: o.buyer, Product: o.product, Qty: o.qty, UnitPrice: o.unitPrice,
		Amount: o.amount, IdemKey: o.idemKey, Status: o.status, Reason: o.reason, PaymentRef: o.paymentRef,
		CreatedAt: o.createdAt, ExpiresAt: o.expiresAt, PaidAt: o.paidAt, EndedAt: o.endedAt, UpdatedAt: o.updatedAt,
		RevealedAt: o.revealedAt, Email: o.email, Lang: o.lang, AccessHash: o.accessHash,
		Coupon: o.coupon, Discount: o.discount}
}

// Coupon returns the coupon the order carries, or "".
func (o Order) Coupon() CouponCode { return o.coupon }

// Discount returns what the order's coupon took off its amount.
func (o Order) Discount() Money { return o.discount }

// WithCoupon applies coupon c to a PENDING order that has none yet, at t (the order's
// creation): the amount becomes the undiscounted amount less c's Discount, fixed from then on.
// Errors: as Coupon.Discount; an order that already carries one is ErrInvalidInput.
func (o Order) WithCoupon(c Coupon, t time.Time) (Order, error) {
	if o.coupon != "" || o.status != StatusPending {
		return Order{}, Invalid("coupon", "the order already carries one")
	}
	off, err := c.Discount(o.product, o.amount, t)
	if err != nil {
		return Order{}, err
	}
	o.coupon, o.discount, o.amount = c.Code, off, o.amount-off
	return o, nil
}

// No returns the order number.
func (o Order) No() OrderNo { return o.no }

// Buyer returns the buyer.
func (o Order) Buyer() BuyerID { return o.buyer }

// Product returns the product id.
func (o Order) Product() ProductID { return o.product }

// Qty returns the number of codes ordered.
func (o Order) Qty() int { return o.qty }

// UnitPrice returns the price of one code when the order was placed.
func (o Order) UnitPrice() Money { return o.unitPrice }

// Amount returns the amount the buyer must pay.
func (o Order) Amount() Money { return o.amount }

// IdempotencyKey returns the key the order was placed with.
func (o Order) IdempotencyKey() IdempotencyKey { return o.idemKey }

// Status returns the current state.
func (o Order) Status() OrderStatus { return o.status }

// Reason explains an UNFULFILLED or FAILED state.
func (o Order) Reason() string { return o.reason }

// PaymentRef is the payment provider's reference of the accepted payment.
func (o Order) PaymentRef() string { return o.paymentRef }

// CreatedAt returns when the order was placed.
func (o Order) CreatedAt() time.Time { return o.createdAt }

// ExpiresAt returns when an unpaid order is closed.
func (o Order) ExpiresAt() time.Time { return o.expiresAt }

// PaidAt returns when the payment was accepted (zero if never).
func (o Order) PaidAt() time.Time { return o.paidAt }

// EndedAt returns when the order was closed, failed or refunded (zero if not).
func (o Order) EndedAt() time.Time { return o.endedAt }

// UpdatedAt returns the time of the last change.
func (o Order) UpdatedAt() time.Time { return o.updatedAt }

// RevealedAt returns when the order's codes first left the service in plain text (zero if
// never): from then on the buyer may hold working copies of them, so a refund voids them
// unless an operator explicitly recycles them.
func (o Order) RevealedAt() time.Time { return o.revealedAt }

// Revealed reports whether the order's codes have left the service in plain text.
func (o Order) Revealed() bool { return !o.revealedAt.IsZero() }

// Fingerprint identifies the request that created the order, to tell a replay (same key, same
// body) from a reuse of the key for a different request.
func (o Order) Fingerprint() string {
	if o.coupon != "" {
		return CouponFingerprint(o.product, o.qty, o.coupon)
	}
	return RequestFingerprint(o.product, o.qty)
}

// RequestFingerprint is the fingerprint of an order request without a coupon.
func RequestFingerprint(p ProductID, qty int) string {
	var b [41]byte // two int64 and the colon
	out := strconv.AppendInt(b[:0], int64(p), 10)
	out = append(out, ':')
	return string(strconv.AppendInt(out, int64(qty), 10))
}

// CouponFingerprint is the fingerprint of an order request with coupon c: the same key sent
// again with another coupon (or none) is another request.
func CouponFingerprint(p ProductID, qty int, c CouponCode) string {
	return RequestFingerprint(p, qty) + ":" + string(c)
}

func (o *Order) move(to OrderStatus, at time.Time) error {
	if !CanTransition(o.status, to) {
		return fmt.Errorf("%w: %s -> %s", ErrInvalidTransition, o.status, to)
	}
	o.status, o.updatedAt = to, at
	return nil
}

// CheckPayment returns ErrAmountMismatch unless amount is exactly the order's amount.
func (o Order) CheckPayment(amount Money) error {
	if amount != o.amount {
		return fmt.Errorf("%w: paid %s, due %s", ErrAmountMismatch, amount, o.amount)
	}
	return nil
}

// MarkPaid records an accepted payment and moves the order to PAID. An UNFULFILLED order
// fulfilled again keeps its paid time: the money came when its payment was accepted, and the
// shop's revenue counts it then.
func (o *Order) MarkPaid(at time.Time, amount Money, paymentRef string) error {
	if err := o.CheckPayment(amount); err != nil {
		return err
	}
	paidBefore := o.status == StatusUnfulfilled && !o.paidAt.IsZero()
	if err := o.move(StatusPaid, at); err != nil {
		return err
	}
	if !paidBefore {
		o.paidAt = at
	}
	o.paymentRef, o.reason = paymentRef, ""
	return nil
}

// MarkUnfulfilled records an accepted payment that could not be fulfilled.
func (o *Order) MarkUnfulfilled(at time.Time, amount Money, paymentRef, reason string) error {
	if err := o.CheckPayment(amount); err != nil {
		return err
	}
	if err := o.move(StatusUnfulfilled, at); err != nil {
		return err
	}
	o.paidAt, o.paymentRef, o.reason = at, paymentRef, reason
	return nil
}

// ErrNotDue means an order cannot be closed before it expires.
var ErrNotDue = fmt.Errorf("%w: order has not expired yet", ErrInvalidTransition)

// Close moves an unpaid order past its expiry to CLOSED.
func (o *Order) Close(at time.Time) error {
	if o.status == StatusPending && at.Before(o.expiresAt) {
		return ErrNotDue
	}
	if err := o.move(StatusClosed, at); err != nil {
		return err
	}
	o.endedAt, o.reason = at, "payment timeout"
	return nil
}

// Fail records a failed payment: PENDING -> FAILED.
func (o *Order) Fail(at time.Time, reason string) error {
	if err := o.move(StatusFailed, at); err != nil {
		return err
	}
	o.endedAt, o.reason = at, reason
	return nil
}

// MarkRevealed records that the codes of a PAID order are being shown for the first time.
// Only a PAID order holds codes to show (ErrInvalidTransition otherwise); a later call keeps
// the first time. It does not count as a change of state: updatedAt stays.
func (o *Order) MarkRevealed(at time.Time) error {
	if o.status != StatusPaid {
		return fmt.Errorf("%w: codes of a %s order cannot be shown", ErrInvalidTransition, o.status)
	}
	if o.revealedAt.IsZero() {
		o.revealedAt = at
	}
	return nil
}

// Refund moves a PAID or UNFULFILLED order to REFUNDED.
func (o *Order) Refund(at time.Time, reason string) error {
	if err := o.move(StatusRefunded, at); err != nil {
		return err
	}
	o.endedAt, o.reason = at, reason
	return nil
}
