package webkit

import (
	"context"
	"errors"
	"slices"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// Answer is how the web doors answer an error: an HTTP status, a stable code clients can
// switch on, and a message safe to show (never the internal error text).
type Answer struct {
	Status  int
	Code    string
	Message string
}

// Row is one row of the error table: an error and its answer.
type Row struct {
	Err    error
	Answer Answer
}

// table maps domain errors to answers. The first match wins, so more specific errors come
// before their parents (ErrNotDue wraps ErrInvalidTransition).
var table = []Row{
	{domain.ErrInvalidIdempotencyKey, Answer{400, "invalid_idempotency_key", "Idempotency-Key header is required: 8 to 64 characters of A-Z a-z 0-9 . _ : -"}},
	{domain.ErrQtyOutOfRange, Answer{400, "qty_out_of_range", "qty must be between the product's min_per_order and max_per_order"}},
	{domain.ErrInvalidBlockEntry, Answer{400, "invalid_block_entry", "the blocklist entry is not valid"}},
	{domain.ErrInvalidInput, Answer{400, "invalid_request", "the request is not valid"}},
	{domain.ErrBadSignature, Answer{401, "invalid_signature", "the callback signature is missing, forged or stale"}},
	{domain.ErrUnauthorized, Answer{401, "unauthorized", "missing or invalid credentials"}},
	{domain.ErrProductNotFound, Answer{404, "product_not_found", "no such product"}},
	{domain.ErrOrderNotFound, Answer{404, "order_not_found", "no such order"}},
	{domain.ErrProviderUnknown, Answer{404, "provider_not_found", "no such payment provider is enabled"}},
	{domain.ErrOrderNotPayable, Answer{409, "order_not_payable", "the order is not awaiting payment"}},
	{domain.ErrRefundRefused, Answer{409, "refund_refused", "the payment provider refused the refund; the order is unchanged"}},
	{domain.ErrRefundInProgress, Answer{409, "refund_in_progress", "the order's money is being returned, or was: its codes are not handed over"}},
	{domain.ErrSoldOut, Answer{409, "sold_out", "sold out"}},
	{domain.ErrProductExists, Answer{409, "product_exists", "a product with this id already exists"}},
	{domain.ErrRequestInProgress, Answer{409, "request_in_progress", "the original request with this Idempotency-Key is still running; retry shortly"}},
	{domain.ErrNoOrderMail, Answer{409, "no_order_mail", "only a paid order placed in the shop (with an e-mail address) has an e-mail to send"}},
	{domain.ErrMailNotConfigured, Answer{409, "mail_not_configured", "the shop sends no e-mail: no mail server is configured"}},
	{domain.ErrInvalidTransition, Answer{409, "invalid_order_state", "the order's state does not allow this"}},
	{domain.ErrIdempotencyMismatch, Answer{422, "idempotency_key_reused", "this Idempotency-Key was used with a different request"}},
	{domain.ErrAmountMismatch, Answer{422, "amount_mismatch", "the paid amount does not match the order"}},
	{domain.ErrProductFrozen, Answer{423, "product_frozen", "the product is not on sale"}},
	{domain.ErrProductNotFrozen, Answer{409, "product_not_frozen", "freeze the product first: codes are voided only while it is frozen"}},
	{domain.ErrVoidExceedsFreeStock, Answer{409, "void_exceeds_free_stock", "more of these codes are sellable than the gate has free: the others are promised to orders in flight; nothing was voided"}},
	{domain.ErrForbidden, Answer{403, "forbidden", "your role does not allow this"}},
	{domain.ErrOperatorExists, Answer{409, "operator_exists", "an operator with this name exists"}},
	{domain.ErrOperatorNotFound, Answer{404, "operator_not_found", "no such operator"}},
	{domain.ErrLastAdmin, Answer{409, "last_admin", "the last enabled admin cannot be demoted, disabled or removed"}},
	{domain.ErrReferenceUsed, Answer{409, "reference_used", "this provider reference already paid another order"}},
	{domain.ErrProviderUnpaid, Answer{409, "provider_unpaid", "the provider does not confirm the payment; only an admin may override it, with a reason"}},
	{domain.ErrAlertNotFound, Answer{404, "alert_not_found", "no such alert"}},
	{domain.ErrAlertAcknowledged, Answer{409, "alert_acknowledged", "the alert was acknowledged already"}},
	{domain.ErrBlockExists, Answer{409, "block_exists", "the blocklist has this entry already"}},
	{domain.ErrBlockNotFound, Answer{404, "block_not_found", "no such blocklist entry"}},
	{domain.ErrCouponExists, Answer{409, "coupon_exists", "a coupon with that code already exists"}},
	// A disabled coupon answers as an unknown one: a buyer cannot tell one withdrawn from one
	// that never existed.
	{domain.ErrCouponNotFound, Answer{404, "coupon_not_found", "no such coupon"}},
	{domain.ErrCouponNotApplicable, Answer{422, "coupon_not_applicable", "the coupon does not apply to this order (another product, outside its dates, or below its minimum amount)"}},
	{domain.ErrCouponUsedUp, Answer{409, "coupon_used_up", "the coupon has been used as often as it may on this product"}},
	{domain.ErrCouponBuyerLimit, Answer{429, "coupon_buyer_limit", "you have used this coupon as often as one buyer may on this product"}},
	// A buyer is never told which list refused them. The human check's refusals have no row:
	// no API route asks for one (the storefront words them in its own pages).
	{domain.ErrBlocked, Answer{403, "buyer_blocked", "this order cannot be placed"}},
	{domain.ErrBuyerLimit, Answer{429, "buyer_limit", "you have reserved as many units of this product as one buyer may for now; retry later"}},
	{domain.ErrFulfilOverLimit, Answer{429, "buyer_limit", "fulfilling this order would give its buyer more units of the product than its buyer_limit allows; refund it, or fulfil it once the buyer holds less"}},
	{domain.ErrBuyerHoldingLimit, Answer{429, "buyer_limit", "you already hold as many units of this product as one buyer may (its buyer_limit)"}},
	{domain.ErrSaleNotStarted, Answer{409, "sale_not_started", "the sale of this product has not started; retry after the seconds in Retry-After"}},
	{domain.ErrPaidAfterSaleEnded, Answer{409, "sale_ended", "this order was paid after the product's sale ended: it is never fulfilled; refund it"}},
	{domain.ErrSaleEnded, Answer{409, "sale_ended", "the sale of this product has ended"}},
	{ErrBodyTooLarge, Answer{413, "body_too_large", "the request body is too large"}},
	{ErrRateLimited, Answer{429, "rate_limited", "too many requests; retry after the seconds in Retry-After"}},
	{domain.ErrGateNotReady, Answer{503, "stock_gate_not_ready", "stock for this product is being rebuilt; retry shortly"}},
	{domain.ErrUnavailable, Answer{503, "service_unavailable", "a dependency is unavailable; retry shortly"}},
	// The request's deadline (Config.RequestTimeout) passed while a dependency had not answered.
	{context.DeadlineExceeded, Answer{503, "service_unavailable", "a dependency is unavailable; retry shortly"}},
}

// ErrBodyTooLarge is a body over its limit (413 body_too_large), whichever door read it.
var ErrBodyTooLarge = errors.New("body too large")

// ErrRateLimited is a request over a rate limit (429 rate_limited).
var ErrRateLimited = errors.New("rate limited")

// Internal is the answer to an error the table does not know.
var Internal = Answer{500, "internal_error", "internal error"}

// Rows returns the error table in its order.
func Rows() []Row { return slices.Clone(table) }

// Lookup is the answer to err: its table row's, Fiber's own errors' (404, 405, 413, 429, other
// 4xx), else Internal.
func Lookup(err error) Answer {
	for _, row := range table {
		if errors.Is(err, row.Err) {
			return row.Answer
		}
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusNotFound:
			return Answer{404, "route_not_found", "no such endpoint"}
		case fiber.StatusMethodNotAllowed:
			return Answer{405, "method_not_allowed", "method not allowed"}
		case fiber.StatusRequestEntityTooLarge:
			return Answer{413, "body_too_large", "the request body is too large"}
		case fiber.StatusTooManyRequests:
			return Answer{429, "rate_limited", "too many requests"}
		}
		if fe.Code >= 400 && fe.Code < 500 {
			return Answer{fe.Code, "bad_request", "the request is not valid"}
		}
	}
	return Internal
}

// Describe is how the web doors answer err: its status, stable code and a message safe to show
// (an invalid field's own message). The console shows these words in its pages.
func Describe(err error) (status int, code, message string) {
	api := Lookup(err)
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		return api.Status, api.Code, ve.Error()
	}
	return api.Status, api.Code, api.Message
}
