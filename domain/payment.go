package domain

import (
	"context"
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Provider names a payment provider ("stripe", "epay", "dev", …): lower-case letters, digits
// and dashes.
type Provider string

var providerName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// ParseProvider checks a provider name from outside input.
func ParseProvider(s string) (Provider, error) {
	if !providerName.MatchString(s) {
		return "", Invalid("provider", "unknown payment provider")
	}
	return Provider(s), nil
}

// PaymentStatus is where a payment at a provider stands, as cardshop last learned it.
type PaymentStatus int

// The payment statuses. OPEN is the only one a buyer can still pay. A PAID payment may be
// refunded: REFUNDING while the provider works on it (or could not be reached: the operator's
// retry asks again with the same refund number), then REFUNDED, or REFUND_FAILED when the
// provider refused (the order stays PAID; the operator may try again).
const (
	PaymentOpen         PaymentStatus = iota + 1 // created at the provider, not paid yet
	PaymentPaid                                  // the provider confirmed the money
	PaymentFailed                                // the provider reported the payment failed
	PaymentExpired                               // expired or closed at the provider: no longer payable
	PaymentRefunding                             // a refund was asked for and is not final yet
	PaymentRefunded                              // the provider returned the money
	PaymentRefundFailed                          // the provider refused the refund
)

var paymentStatusNames = map[PaymentStatus]string{PaymentOpen: "OPEN", PaymentPaid: "PAID",
	PaymentFailed: "FAILED", PaymentExpired: "EXPIRED", PaymentRefunding: "REFUNDING",
	PaymentRefunded: "REFUNDED", PaymentRefundFailed: "REFUND_FAILED"}

// String returns the status's name.
func (s PaymentStatus) String() string {
	if n, ok := paymentStatusNames[s]; ok {
		return n
	}
	return "UNKNOWN"
}

// ParsePaymentStatus reads a stored status name.
func ParsePaymentStatus(s string) (PaymentStatus, error) {
	for st, n := range paymentStatusNames {
		if n == s {
			return st, nil
		}
	}
	return 0, Invalid("payment_status", "unknown")
}

// Payment is one order's payment at one provider: at most one per order and provider. The
// amount and currency are the order's, fixed when it is created; they are what every
// notification must match exactly.
type Payment struct {
	OrderNo     OrderNo
	Provider    Provider
	ProviderRef string // the provider's id of the payment (Stripe's session id, epay's trade_no)
	Amount      Money
	Currency    Currency
	Status      PaymentStatus
	PayURL      string // where the buyer pays (a redirect), if the provider gives one
	QRCode      string // what a QR code shows (desktop scan-to-pay), if the provider gives one
	// RefundNo is cardshop's number of the payment's refund, the provider's idempotency
	// reference: every attempt at the refund sends the same one, so money is returned once.
	RefundNo string
	// RefundRef is the provider's id of the refund; RefundReason the provider's words when it
	// refused.
	RefundRef    string
	RefundReason string
	// RefundVoid, RefundRecycle and RefundNote are the operator's decision about the order's
	// codes, stored with the refund when it is asked for (PAID → REFUNDING): a refund the
	// provider finishes later is completed by whoever learns of it first (the provider's
	// notification, the operator's next refund), and each applies this decision, never
	// defaults. RefundVoid keeps the codes out of the pool, RefundRecycle returns revealed ones
	// (never both); RefundNote is the operator's reason, at most MaxRefundNote characters.
	RefundVoid    bool
	RefundRecycle bool
	RefundNote    string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// MaxRefundNote is the longest operator's reason a refund stores with its payment, in
// characters.
const MaxRefundNote = 255

// CheckRefundNote refuses an operator's reason a refund cannot store: over MaxRefundNote
// characters, or not UTF-8.
func CheckRefundNote(s string) error {
	if utf8.RuneCountInString(s) > MaxRefundNote || !utf8.ValidString(s) {
		return Invalid("reason", fmt.Sprintf("at most %d characters of UTF-8", MaxRefundNote))
	}
	return nil
}

// Check refuses what a stored payment cannot be: no order or provider, an unknown status, a
// currency the shop does not know (or with another exponent than its own), an amount that is
// not positive, no creation time, or a refund decision that cannot be (void and recycle, an
// over-long or invalid note). Both stores call it, so they refuse the same payments.
func (p Payment) Check() error {
	switch {
	case p.OrderNo == "" || p.Provider == "":
		return Invalid("payment", "order and provider required")
	case p.Status.String() == "UNKNOWN":
		return Invalid("payment_status", "unknown")
	case p.Amount <= 0:
		return Invalid("amount", "must be a positive number of minor units")
	case p.CreatedAt.IsZero():
		return Invalid("created_at", "required")
	case p.RefundVoid && p.RefundRecycle:
		return Invalid("recycle", "void and recycle cannot both be asked for")
	}
	if err := CheckRefundNote(p.RefundNote); err != nil {
		return err
	}
	if c, err := ParseCurrency(p.Currency.Code); err != nil || c != p.Currency {
		return Invalid("currency", "not a currency the shop supports")
	}
	return nil
}

// RefundNoOf is the first refund number of an order's payment: every retry of that refund (a
// timeout, a lost answer, a second operator) sends it again, so it is the same refund at the
// provider.
func RefundNoOf(no OrderNo) string { return string(no) + "R1" }

// NextRefundNo is the number of a new refund after the provider refused prev: a provider keeps
// its answer under an idempotency reference (Stripe for a day, refusals included), so a new
// attempt needs a new number. prev empty gives the first.
func NextRefundNo(no OrderNo, prev string) string {
	n, err := strconv.Atoi(strings.TrimPrefix(prev, string(no)+"R"))
	if prev == "" || err != nil || n < 1 {
		return RefundNoOf(no)
	}
	return string(no) + "R" + strconv.Itoa(n+1)
}

// RefundRequest asks a provider to return a payment's money, all of it.
type RefundRequest struct {
	RefundNo string // the idempotency reference at the provider (Payment.RefundNo)
	Amount   Money
	Currency Currency
	Reason   string
}

// RefundOutcome is where a refund stands at the provider.
type RefundOutcome int

// The refund outcomes.
const (
	RefundSucceeded RefundOutcome = iota + 1 // the money is on its way back to the buyer
	RefundPending                            // accepted, not final yet (a notification or a query tells)
	RefundRefused                            // the provider refused it (Reason says why)
)

var refundOutcomeNames = map[RefundOutcome]string{RefundSucceeded: "succeeded", RefundPending: "pending", RefundRefused: "refused"}

// String returns the outcome's name.
func (o RefundOutcome) String() string {
	if n, ok := refundOutcomeNames[o]; ok {
		return n
	}
	return "unknown"
}

// RefundState is a provider's answer about a refund.
type RefundState struct {
	Outcome     RefundOutcome
	ProviderRef string // the provider's id of the refund
	Reason      string // the provider's words on a refusal
}

// PaymentRequest is what a gateway needs to create a payment for an order.
type PaymentRequest struct {
	OrderNo   OrderNo
	Amount    Money
	Currency  Currency
	Subject   string    // shown to the buyer at the provider (product name and qty)
	ExpiresAt time.Time // the order's expiry: the payment must not be payable after it
	ReturnURL string    // where the provider sends the buyer back
	NotifyURL string    // where the provider sends its notifications
	ClientIP  string    // the buyer's address, for providers that want it
}

// PaymentCreated is a gateway's answer to a creation.
type PaymentCreated struct {
	ProviderRef string
	PayURL      string
	QRCode      string
}

// PaymentOutcome is what a notification or a query says about a payment.
type PaymentOutcome int

// The outcomes.
const (
	OutcomePending PaymentOutcome = iota + 1 // nothing final yet (created, waiting, processing)
	OutcomePaid                              // the money is there
	OutcomeFailed                            // the payment failed
	OutcomeExpired                           // expired or closed: it can no longer be paid
	// OutcomeRefunded: paid, then the money went back at the provider (a query's answer, never
	// a notice's): not paid. An order is never paid on it.
	OutcomeRefunded
	// OutcomeFrozen: paid, then held by the provider (a dispute, a risk check; a query's answer,
	// never a notice's): not paid unless the provider releases it and says paid again.
	OutcomeFrozen
)

var outcomeNames = map[PaymentOutcome]string{OutcomePending: "pending", OutcomePaid: "paid",
	OutcomeFailed: "failed", OutcomeExpired: "expired", OutcomeRefunded: "refunded", OutcomeFrozen: "frozen"}

// String returns the outcome's name.
func (o PaymentOutcome) String() string {
	if n, ok := outcomeNames[o]; ok {
		return n
	}
	return "unknown"
}

// InboundRequest is a provider's notification as it reached the shop: the raw bytes a gateway
// verifies.
type InboundRequest struct {
	Method string
	Header Header
	Query  url.Values
	Body   []byte
	At     time.Time // when it arrived (the shop's clock): signature freshness is checked against it
}

// Header holds a notification's header fields by canonical name ("Content-Type"): Add and Set
// canonicalize, Get and Values look a name up whatever its case. An http.Header converts to it
// as it is.
type Header map[string][]string

// Get returns the first value of the field k, or "".
func (h Header) Get(k string) string {
	if v := h[textproto.CanonicalMIMEHeaderKey(k)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Values returns every value of the field k.
func (h Header) Values(k string) []string { return h[textproto.CanonicalMIMEHeaderKey(k)] }

// Add appends v to the field k.
func (h Header) Add(k, v string) {
	k = textproto.CanonicalMIMEHeaderKey(k)
	h[k] = append(h[k], v)
}

// Set makes v the only value of the field k.
func (h Header) Set(k, v string) { h[textproto.CanonicalMIMEHeaderKey(k)] = []string{v} }

// Del removes the field k.
func (h Header) Del(k string) { delete(h, textproto.CanonicalMIMEHeaderKey(k)) }

// ProviderNotice is a notification a gateway verified: its signature, its freshness, its
// merchant. Nothing in it has been checked against the ledger yet.
type ProviderNotice struct {
	OrderNo     OrderNo
	ProviderRef string
	EventID     string // the provider's id of this notification (dedupe), or "" when it has none
	Outcome     PaymentOutcome
	Amount      Money // in the currency's minor units; 0 and Currency zero when not carried
	Currency    Currency
	Reason      string // the provider's words on a failure
	// Method is the payment method the notice names (epay's type: alipay, wxpay, …), "" when the
	// provider names none.
	Method string
	// RefundNo is set when the notification is about a refund (cardshop's refund number, as
	// sent with the refund); RefundOutcome then says how it ended and Outcome is unused.
	RefundNo      string
	RefundOutcome RefundOutcome
}

// PaymentState is what a gateway's query found.
type PaymentState struct {
	Outcome     PaymentOutcome
	ProviderRef string
	Amount      Money
	Currency    Currency
}

// ErrUnsupported means a gateway does not offer an operation (a provider without a close or
// a query API): the caller does without it.
var ErrUnsupported = errors.New("not supported by this payment provider")

// ErrAlreadyPaid means a provider refused to close a payment because it was paid.
var ErrAlreadyPaid = errors.New("the payment is already paid at the provider")

// PaymentGateway is one payment provider. Each method's errors: ErrUnsupported when the
// provider has no such operation; ErrUnavailable when the provider could not be reached or
// answered with a server error (the caller retries; a create is retried with the same order,
// which the gateway makes idempotent at the provider where the provider allows it); a plain
// error for an answer that makes no sense.
type PaymentGateway interface {
	// Provider is the provider's name, as in the notify URL.
	Provider() Provider
	// Supports reports whether the provider can charge in c.
	Supports(c Currency) bool
	// Create creates the payment for an order at the provider.
	Create(ctx context.Context, r PaymentRequest) (PaymentCreated, error)
	// Verify checks a notification on its raw bytes (signature, freshness, merchant) and parses
	// it. Errors: ErrBadSignature for an unsigned, forged or stale one; a ValidationError for a
	// well-signed one that does not parse.
	Verify(ctx context.Context, in InboundRequest) (ProviderNotice, error)
	// Query asks the provider where the order's payment stands.
	Query(ctx context.Context, p Payment) (PaymentState, error)
	// Close makes the payment unpayable at the provider (expire a session, close a trade).
	// ErrAlreadyPaid when the provider says it was paid: the caller queries and pays the order.
	Close(ctx context.Context, p Payment) error
	// Refund returns a paid payment's money and answers how the refund stands. Where
	// RefundIdempotent reports true it is idempotent by r.RefundNo: asking again with the same
	// number (after a timeout, a lost answer, a crash) never pays out twice. A refusal is a
	// RefundState with RefundRefused, not an error.
	Refund(ctx context.Context, p Payment, r RefundRequest) (RefundState, error)
	// RefundIdempotent reports whether the provider keeps a refund by its number, so that two
	// calls of Refund with one number, even at once, return the money once. Where it does not
	// (epay has no refund number: its check of the order and its payout are two steps), only
	// the caller that won the payment's move to REFUNDING may call Refund.
	RefundIdempotent() bool
}

// NoticeConfirmer is a PaymentGateway whose signed notifications do not prove a payment on
// their own (epay's MD5 over the merchant KEY is weak by design): before a success pays an
// order, or takes the late-payment path, the application has the gateway confirm it against
// the provider's own record.
type NoticeConfirmer interface {
	// ConfirmPaid checks the verified success n against every field the payment p fixed at its
	// creation and asks the provider (its query) where the payment stands; it answers the
	// provider's record, which the caller judges (only OutcomePaid, with the payment's amount
	// and currency, pays). Errors: ErrUnavailable when the provider could not be asked (nothing
	// is paid; the provider resends); any other error means the notice does not match the
	// payment or the provider's record of it (refused).
	ConfirmPaid(ctx context.Context, p Payment, n ProviderNotice) (PaymentState, error)
}

// CredentialProber is a PaymentGateway with a better harmless authenticated call than a query
// of a made-up order (Stripe queries a checkout session, which a made-up order has none of).
type CredentialProber interface {
	// Probe asks the provider about a made-up reference with the gateway's credentials. A nil
	// error means it authenticated the call; answer is what it said. Errors: ErrUnavailable
	// when it could not be reached; any other error is its refusal, in its words.
	Probe(ctx context.Context, ref string) (answer string, err error)
}

// PaymentRepo stores payments: one per order and provider.
type PaymentRepo interface {
	// Create stores p; ErrPaymentExists when the order already has a payment at that provider.
	Create(ctx context.Context, p Payment) error
	// Payment returns the order's payment at the provider, or ErrPaymentNotFound.
	Payment(ctx context.Context, no OrderNo, provider Provider) (Payment, error)
	// OfOrder lists the order's payments, oldest first.
	OfOrder(ctx context.Context, no OrderNo) ([]Payment, error)
	// Transition stores p if the stored payment's status is still from, and reports whether it
	// won; of racing transitions from the same status exactly one wins.
	Transition(ctx context.Context, p Payment, from PaymentStatus) (bool, error)
	// ClaimManual records m, an operator's confirmation of m.OrderNo paid under the provider's
	// reference (m.Provider, m.Reference), and reports whether it was recorded now (false: the
	// same order claimed that reference before; the first record stays). ErrReferenceUsed,
	// recording nothing, when another order holds the reference: a manual confirmation, or a
	// payment at m.Provider with that ProviderRef. Of concurrent claims of one reference for
	// different orders exactly one succeeds (a unique key, not a read before the write).
	ClaimManual(ctx context.Context, m ManualPayment) (bool, error)
	// ManualOf lists the order's manual confirmations, oldest first.
	ManualOf(ctx context.Context, no OrderNo) ([]ManualPayment, error)
}

// NotificationRecord is one provider notification as received and judged: what an operator
// reads when a buyer says "I paid". It never holds a secret or a signature.
//
// A verified notification has a record of its own (Count 1). Notifications refused before
// verification (a bad signature, an unparsable body) are aggregated: one record per provider,
// sender address and window (RefusedWindow, its start), counting them (Count), with the last
// one's time, method, result and size. Remote is RefusedElsewhere for the record that
// aggregates the senders beyond the number a window tracks one by one.
type NotificationRecord struct {
	ID          int64
	Provider    Provider
	At          time.Time
	Method      string
	Remote      string
	Verified    bool   // the signature and freshness checked out
	Accepted    bool   // applied (or a duplicate of one applied)
	Result      string // what cardshop did: "paid", "duplicate", "refused: amount mismatch", …
	OrderNo     OrderNo
	EventID     string
	ProviderRef string
	Outcome     string
	Amount      Money
	Currency    string
	BodyBytes   int
	// Count is how many notifications the record stands for: 1, or for an aggregate of
	// refused ones, how many were refused from its provider and address in its window.
	Count int64
	// RefusedWindow is the start of an aggregate's window; zero for a verified notification.
	RefusedWindow time.Time
}

// RefusedElsewhere is the Remote of the aggregate of refused notifications from the senders
// beyond the number a window tracks one by one.
const RefusedElsewhere = "*"

// NotificationQuery selects records of the notification log.
type NotificationQuery struct {
	OrderNo OrderNo // of one order only when not empty
	// Verified selects verified records only (true) or refused aggregates only (false); nil
	// selects both.
	Verified *bool
	Limit    int // at most this many; none when < 1
}

// NotificationLog is the log of provider notifications.
type NotificationLog interface {
	// Record appends r, a notification that passed verification, as a record of its own (a
	// zero r.Count stores 1); the store assigns ID.
	Record(ctx context.Context, r NotificationRecord) error
	// RecordRefused adds r.Count (at least 1) notifications refused before verification to the
	// aggregate of (r.Provider, r.Remote, r.RefusedWindow), creating it from r when it does
	// not exist yet; an existing one takes r's At (when later), Method, Result and BodyBytes.
	// Of concurrent calls for one aggregate none is lost and one record results.
	// ErrInvalidInput when r.RefusedWindow is zero, r.Count < 1 or r.Verified.
	RecordRefused(ctx context.Context, r NotificationRecord) error
	// Recent lists the records q selects, newest (highest ID) first.
	Recent(ctx context.Context, q NotificationQuery) ([]NotificationRecord, error)
	// Prune deletes up to limit records: verified ones received before verifiedBefore and
	// refused aggregates whose last notification came before refusedBefore.
	// It returns how many it deleted; fewer than limit means none of them is left.
	Prune(ctx context.Context, verifiedBefore, refusedBefore time.Time, limit int) (int, error)
}
