package domain

import (
	"context"
	"sort"
	"strconv"
	"time"
)

// MaxRevenueBuckets bounds the buckets of one revenue query: a month of days or a day of hours
// (25 on the day a clock goes back), with room.
const MaxRevenueBuckets = 64

// RevenueQuery asks for the shop's money summed in consecutive buckets of time.
//
// What counts: revenue is the amount of every order whose payment was accepted (PAID,
// UNFULFILLED, REFUNDED: every order with a paid time), counted in the bucket of its paid
// time; refunds are the amount of every REFUNDED order, counted in the bucket of its refund
// (its end time). Net is revenue less refunds. A refund is never taken back from its
// payment's bucket: an order paid yesterday and refunded today is yesterday's revenue and
// today's refund.
type RevenueQuery struct {
	// Edges are the buckets' bounds, strictly ascending, 2 to MaxRevenueBuckets+1 of them:
	// bucket i holds the instants t with Edges[i] <= t < Edges[i+1]. The caller places them
	// (local midnights or hours in the console's zone), so a bucket may be 23 or 25 hours long.
	Edges []time.Time
}

// Check refuses edges that do not make 1 to MaxRevenueBuckets buckets in ascending order.
func (q RevenueQuery) Check() error {
	if len(q.Edges) < 2 || len(q.Edges) > MaxRevenueBuckets+1 {
		return Invalid("edges", "must be 2 to "+strconv.Itoa(MaxRevenueBuckets+1)+" bounds")
	}
	for i := 1; i < len(q.Edges); i++ {
		if !q.Edges[i-1].Before(q.Edges[i]) {
			return Invalid("edges", "must be strictly ascending")
		}
	}
	return nil
}

// Bucket returns the bucket that holds t, and false when t is before the first edge or at or
// after the last.
func (q RevenueQuery) Bucket(t time.Time) (int, bool) {
	i := sort.Search(len(q.Edges), func(i int) bool { return q.Edges[i].After(t) })
	if i == 0 || i == len(q.Edges) {
		return 0, false
	}
	return i - 1, true
}

// RevenueLine sums one bucket's money of one product taken through one provider.
type RevenueLine struct {
	Bucket  int
	Product ProductID
	// Provider is the provider of the order's accepted payment: of its payments, the one the
	// provider confirmed (PAID, or REFUNDING, REFUNDED, REFUND_FAILED since), the first by name
	// when there are several. "" when the order has none: it was paid through the storefront's
	// signed callback, which records no payment.
	Provider Provider
	Paid     int64 // orders whose payment was accepted in the bucket
	Revenue  Money // their amounts
	Refunds  int64 // orders refunded in the bucket
	Refunded Money // their amounts
}

// ExportFilter selects the orders of an export and one page of them. Orders come oldest
// first, by (CreatedAt, No) ascending, the page after After when it is set: paging on with each
// page's last order lists every order that matches exactly once, whatever is placed meanwhile.
type ExportFilter struct {
	From, To time.Time // CreatedAt in [From, To); a zero bound is open
	Product  ProductID // one product's only when set
	Status   OrderStatus
	Provider Provider // orders with a payment at this provider only, when set
	After    OrderCursor
	Limit    int // 1 to MaxExportPage
}

// MaxExportPage bounds one page of an export.
const MaxExportPage = 5000

// Check validates f: every failure is a ValidationError.
func (f ExportFilter) Check() error {
	if f.Limit < 1 || f.Limit > MaxExportPage {
		return Invalid("limit", "must be from 1 to "+strconv.Itoa(MaxExportPage))
	}
	if f.Product < 0 {
		return Invalid("product_id", "must be a positive integer")
	}
	if f.Status != 0 {
		if _, known := statusNames[f.Status]; !known {
			return Invalid("status", "unknown order status")
		}
	}
	if f.Provider != "" {
		if _, err := ParseProvider(string(f.Provider)); err != nil {
			return err
		}
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return Invalid("from", "must be before to")
	}
	if (f.After.No == "") != f.After.CreatedAt.IsZero() {
		return Invalid("cursor", "needs both the creation time and the order number")
	}
	return nil
}

// ExportRow is one order as an export writes it: the order, and the provider and provider's
// reference of its accepted payment (as RevenueLine.Provider; empty without one). It holds no
// code: an export never reads the card pool.
type ExportRow struct {
	Order       Order
	Provider    Provider
	ProviderRef string
}

// SalesReport is the read model of the shop's money: sums grouped in the store, and the orders
// for an export read page by page, so that neither loads the ledger's orders at once.
type SalesReport interface {
	// Revenue sums revenue and refunds (see RevenueQuery) by bucket, product and provider. A
	// group with nothing paid and nothing refunded is absent; lines come in no set order.
	// ErrInvalidInput, reading nothing, when q fails Check.
	Revenue(ctx context.Context, q RevenueQuery) ([]RevenueLine, error)
	// ExportPage lists one page of the orders f selects (see ExportFilter). ErrInvalidInput,
	// reading nothing, when f fails Check.
	ExportPage(ctx context.Context, f ExportFilter) ([]ExportRow, error)
}

// Confirmed reports whether a payment in status s is one its provider confirmed: paid, or
// refunded (or being refunded, or refused a refund) after it was paid.
func (s PaymentStatus) Confirmed() bool {
	return s == PaymentPaid || s == PaymentRefunding || s == PaymentRefunded || s == PaymentRefundFailed
}
