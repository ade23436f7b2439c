// Package stripe is the Stripe payment provider as a domain.PaymentGateway: Stripe Checkout
// Sessions created, read and expired, and their payments refunded, over Stripe's REST API, and
// Stripe's signed webhook events verified and mapped to notices.
//
// The client is a few dozen lines over net/http rather than stripe-go: every call is one
// form-encoded request and one JSON object back, and the webhook check is an HMAC over
// "<t>.<body>"; owning both keeps the exact bytes, the error mapping and the redaction of the
// key in view.
//
// Create opens a Checkout Session in mode=payment with one line item whose unit amount is the
// whole order amount (quantity 1), so the charged total is exactly the order's amount; the
// order number is the session's client_reference_id and metadata[order_no], and the request
// carries the Idempotency-Key "cardshop-<order_no>", so a retry after a lost reply gets the
// first session back instead of a second one. Stripe compares a retried request's parameters
// with the first and refuses a difference, so every parameter is a function of the request
// alone: expires_at is the order's expiry plus 31 minutes (Stripe wants 30 minutes to 24 hours
// ahead of the session's creation, which happens before the order expires; the extra minute
// absorbs clock skew), capped at 24 hours from now for orders that live longer than a day.
// The session therefore outlives a short order: when the order closes, the caller must Close
// the payment, which expires the session; a payment that still lands afterwards reaches the
// shop as a validly signed success for an order that is no longer payable.
//
// The webhook endpoint and its signing secret are configured in Stripe's dashboard, not per
// session: PaymentRequest.NotifyURL is not sent. Verify accepts the header
// "Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]" when one v1 is the HMAC-SHA256 of
// "<t>." + the raw body under one of the configured endpoint secrets (several while a secret
// rotates) and t is within 300 seconds of the arrival, either way; other schemes (v0) and
// undecodable v1 values are ignored, as Stripe's libraries do. The body is Stripe's own
// signed JSON, so it is read with encoding/json (unknown fields are Stripe's many others).
//
// Event mapping, on the checkout session in data.object:
//
//	checkout.session.completed, payment_status paid      → paid
//	checkout.session.completed, otherwise (unpaid)       → pending (a delayed method settles later)
//	checkout.session.async_payment_succeeded, paid       → paid
//	checkout.session.async_payment_failed                → failed
//	checkout.session.expired                             → expired
//	any other type                                       → pending, with no order: accept, do nothing
//
// The order comes from client_reference_id; amount and currency from amount_total and the
// lower-case currency. An event of another type carries no order number: the caller accepts it
// (Stripe retries anything refused for days) and changes nothing.
//
// Close expires the session. Stripe expires only open sessions; when it refuses, the session is
// read back: complete means the buyer finished paying (paid, or a delayed method still
// settling) and gives domain.ErrAlreadyPaid, so the caller queries; expired is success.
//
// Refund returns the whole amount. It reads the session (as Query does) for its payment_intent,
// then POSTs /v1/refunds with payment_intent, amount (the whole amount, which must be the
// payment's), reason=requested_by_customer, metadata[order_no] and metadata[refund_no], and the
// Idempotency-Key "cardshop-refund-<refund_no>": a retry after a timeout or a lost reply gets
// the first refund back, never a second. The request's Reason is not sent, so that a retry's
// parameters equal the first's (Stripe refuses a key reused with other parameters). The
// refund's status maps: succeeded → succeeded; pending, requires_action → pending (refund.updated
// or refund.failed follows); failed, canceled → refused, with failure_reason. A replayed answer
// is the first one, so a refund answered pending is read again (GET /v1/refunds/{id}) for how
// it stands now. A session that is
// not complete and paid is refused without a call. Stripe's 4xx answers are refusals with its
// message (amount_too_large, a disputed charge, …), except charge_already_refunded: the money
// went back already (this refund number's earlier refund, once Stripe's 24-hour idempotency
// record expired, or a refund from the dashboard), so the payment's refunds are listed and this
// number's refund, else the newest one returning money, gives the answer. Stripe keeps an
// answer under its key for 24 hours, refusals included: asking again with the same refund
// number within that time gets the same refusal; a new attempt after fixing the cause needs a
// new refund number.
//
// Refund events carry the refund in data.object: refund.created, refund.updated,
// refund.failed (and charge.refund.updated, their name before API version 2024-10-28) give a
// notice with RefundNo from metadata[refund_no], OrderNo from metadata[order_no], the refund's
// amount and currency, ProviderRef the refund's id (re_…) and RefundOutcome from its status as
// above (Outcome stays pending). A refund without metadata[refund_no] was not made by cardshop:
// accepted, no order, no change. charge.refunded carries the charge; its refunds list (API
// versions before 2022-11-15, or expanded) gives cardshop's refund; without one the event is
// accepted without change, as the refund events say the same.
//
// Errors: transport failures, 5xx, 429 (rate limited) and 409 (the same idempotency key in
// flight) are domain.ErrUnavailable; other 4xx are plain errors with Stripe's message (refunds:
// refusals, as above). The secret key never appears in an error or a printed value.
//
// It imports the domain and the standard library only.
package stripe
