package domain

import (
	"errors"
	"fmt"
)

// Sentinel errors of the domain. Adapters wrap them with %w and a short context; the HTTP
// adapter maps them to status codes in exactly one table, the consumers to ack/requeue/drop.
var (
	// ErrInvalidInput is the parent of every validation failure (see ValidationError).
	ErrInvalidInput = errors.New("invalid input")
	// ErrInvalidIdempotencyKey means the Idempotency-Key is missing or malformed.
	ErrInvalidIdempotencyKey = errors.New("invalid idempotency key")
	// ErrQtyOutOfRange means qty is below the product's minimum or above its maximum per order.
	ErrQtyOutOfRange = errors.New("quantity out of range")
	// ErrProductNotFound means no product has that id.
	ErrProductNotFound = errors.New("product not found")
	// ErrProductExists means a product with that id already exists.
	ErrProductExists = errors.New("product already exists")
	// ErrProductFrozen means the product is not on sale (frozen by an operator or by an alert).
	ErrProductFrozen = errors.New("product frozen")
	// ErrSoldOut means the gate has fewer reservable codes than asked for.
	ErrSoldOut = errors.New("sold out")
	// ErrBuyerLimit means the buyer has reserved as many units of the product as one buyer may
	// within the budget window (stock-lock abuse); retry later.
	ErrBuyerLimit = errors.New("buyer has reserved as much as allowed for now")
	// ErrGateNotReady means the stock gate has no record of the product (for example Redis lost
	// its keys); orders are refused until the gate is rebuilt from the ledger.
	ErrGateNotReady = errors.New("stock gate not initialised for product")
	// ErrIdempotencyMismatch means an idempotency key was reused with a different request.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
	// ErrRequestInProgress means the original request for an idempotency key is still running.
	ErrRequestInProgress = errors.New("original request still in progress")
	// ErrDuplicateIdempotencyKey is the ledger's last line of defence: an order with this
	// buyer and idempotency key already exists.
	ErrDuplicateIdempotencyKey = errors.New("duplicate idempotency key")
	// ErrDuplicateOrder means an order with that order number already exists.
	ErrDuplicateOrder = errors.New("duplicate order number")
	// ErrOrderNotFound means no order has that number (or it belongs to another buyer).
	ErrOrderNotFound = errors.New("order not found")
	// ErrInvalidTransition means the order's status does not allow the requested change.
	ErrInvalidTransition = errors.New("invalid order transition")
	// ErrAmountMismatch means a payment's amount differs from the order's amount.
	ErrAmountMismatch = errors.New("paid amount does not match order amount")
	// ErrBadSignature means a callback's signature is missing, forged or stale.
	ErrBadSignature = errors.New("invalid or stale signature")
	// ErrUnauthorized means the caller presented no valid credentials.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrInsufficientCards means the card pool holds fewer sellable codes than an allocation
	// needs: the gate promised stock the ledger does not have.
	ErrInsufficientCards = errors.New("card pool has fewer codes than required")
	// ErrTooFewDistinctCodes means the pool has the uses an allocation needs but on fewer
	// distinct codes than its quantity (a multi-use product's order never gets a code twice):
	// not an inconsistency of gate and ledger, the order waits for more codes or a refund.
	ErrTooFewDistinctCodes = errors.New("card pool has fewer distinct codes than the order's quantity")
	// ErrDuplicateFlow means a flow row for this (reference, change type) already exists.
	ErrDuplicateFlow = errors.New("duplicate stock flow entry")
	// ErrUnavailable means a dependency (database, gate, broker) cannot be reached; the
	// request may be retried. Unless the error also matches ErrCommitUnknown, nothing durable
	// changed.
	ErrUnavailable = errors.New("dependency unavailable")
	// ErrGateRebuilding means the product's gate is fenced by a rebuild from the ledger: the
	// operation changed nothing and may be tried again shortly. It comes with ErrUnavailable.
	ErrGateRebuilding = fmt.Errorf("stock gate is being rebuilt: %w", ErrUnavailable)
	// ErrCommitUnknown means a transaction's COMMIT was sent but its answer was lost (the
	// connection broke): it may or may not have committed. It comes with ErrUnavailable; a
	// caller that must compensate reads back what it wrote first.
	ErrCommitUnknown = errors.New("transaction outcome unknown")
	// ErrPaymentExists means the order already has a payment at that provider.
	ErrPaymentExists = errors.New("the order already has a payment at this provider")
	// ErrPaymentNotFound means the order has no payment at that provider.
	ErrPaymentNotFound = errors.New("payment not found")
	// ErrProviderUnknown means no payment provider of that name is enabled.
	ErrProviderUnknown = errors.New("payment provider not enabled")
	// ErrRefundRefused means the payment provider refused to return the money.
	ErrRefundRefused = errors.New("the payment provider refused the refund")
	// ErrRefundInProgress means the order's money is being returned, or was (its payment is
	// REFUNDING or REFUNDED): its codes must not go out.
	ErrRefundInProgress = errors.New("the order's refund is in progress")
	// ErrProductNotFrozen means the operation needs the product frozen (in the ledger and at
	// the gate) and it is not: a void of codes, which is exact only while no new reservation
	// can take stock.
	ErrProductNotFrozen = errors.New("product is not frozen")
	// ErrVoidExceedsFreeStock means a void would take more codes than the gate has free: the
	// rest of the sellable codes are promised to orders in flight. Nothing was voided.
	ErrVoidExceedsFreeStock = errors.New("void exceeds the free stock")
	// ErrOrderNotPayable means the order cannot be paid any more (it is not PENDING).
	ErrOrderNotPayable = errors.New("order is not awaiting payment")
)

// ValidationError describes one invalid field of outside input. It matches ErrInvalidInput
// with errors.Is.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

// Is makes every ValidationError match ErrInvalidInput.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidInput }

// Invalid returns a ValidationError for field.
func Invalid(field, reason string) error { return &ValidationError{Field: field, Reason: reason} }

// VoidExceedsError refuses a void of more sellable codes than the gate has free: Voidable of
// the given codes are the product's and sellable, Free units are reservable at the gate. It
// matches ErrVoidExceedsFreeStock with errors.Is.
type VoidExceedsError struct {
	Voidable int
	Free     int64
}

func (e *VoidExceedsError) Error() string {
	return fmt.Sprintf("%d codes to void, %d free at the gate: %v", e.Voidable, e.Free, ErrVoidExceedsFreeStock)
}

// Is makes a VoidExceedsError match ErrVoidExceedsFreeStock.
func (e *VoidExceedsError) Is(target error) bool { return target == ErrVoidExceedsFreeStock }
