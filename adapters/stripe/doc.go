// Package stripe is the Stripe payment provider as a domain.PaymentGateway: Stripe Checkout
// Sessions created, read and expired over Stripe's REST API, and Stripe's signed webhook events
// verified and mapped to notices.
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
// Errors: transport failures, 5xx, 429 (rate limited) and 409 (the same idempotency key in
// flight) are domain.ErrUnavailable; other 4xx are plain errors with Stripe's message. The
// secret key never appears in an error or a printed value.
//
// It imports the domain and the standard library only.
package stripe
