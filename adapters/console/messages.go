package console

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/i18n"
	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// catalogue is the embedded message catalogues, loaded once: the console's pages and its
// own validation errors (fieldError) read them.
var catalogue = sync.OnceValue(func() *i18n.Catalogue {
	c, err := i18n.Load()
	if err != nil {
		// The catalogues are embedded: one that does not load is a programming error.
		panic(err)
	}
	return c
})

// tr is message id in the request's language, its placeholders filled from kv ("Name",
// value, …).
func (k *console) tr(c *fiber.Ctx, id string, kv ...any) string {
	return k.msgs.T(k.lang(c), id, i18n.Args(kv))
}

// trN is tr for a message with plural forms, chosen by count.
func (k *console) trN(c *fiber.Ctx, id string, count int, kv ...any) string {
	return k.msgs.N(k.lang(c), id, count, i18n.Args(kv))
}

// errorIDs are the message ids of the errors the web doors know (webkit's error table), so
// that a console page says them in the operator's language. errText finds an error's row as
// webkit does (first match) and shows the row's message here; a row without an id here is
// shown in webkit's English words (TestEveryKnownErrorHasAMessage keeps that from happening).
var errorIDs = map[error]string{
	domain.ErrInvalidIdempotencyKey: "console.err.invalid_idempotency_key",
	domain.ErrQtyOutOfRange:         "console.err.qty_out_of_range",
	domain.ErrInvalidBlockEntry:     "console.err.invalid_block_entry",
	domain.ErrInvalidInput:          "console.err.invalid_request",
	domain.ErrBadSignature:          "console.err.invalid_signature",
	domain.ErrUnauthorized:          "console.err.unauthorized",
	domain.ErrProductNotFound:       "console.err.product_not_found",
	domain.ErrOrderNotFound:         "console.err.order_not_found",
	domain.ErrProviderUnknown:       "console.err.provider_not_found",
	domain.ErrOrderNotPayable:       "console.err.order_not_payable",
	domain.ErrRefundRefused:         "console.err.refund_refused",
	domain.ErrRefundInProgress:      "console.err.refund_in_progress",
	domain.ErrSoldOut:               "console.err.sold_out",
	domain.ErrProductExists:         "console.err.product_exists",
	domain.ErrRequestInProgress:     "console.err.request_in_progress",
	domain.ErrNoOrderMail:           "console.err.no_order_mail",
	domain.ErrMailNotConfigured:     "console.err.mail_not_configured",
	domain.ErrInvalidTransition:     "console.err.invalid_order_state",
	domain.ErrIdempotencyMismatch:   "console.err.idempotency_key_reused",
	domain.ErrAmountMismatch:        "console.err.amount_mismatch",
	domain.ErrProductFrozen:         "console.err.product_frozen",
	domain.ErrProductNotFrozen:      "console.err.product_not_frozen",
	domain.ErrVoidExceedsFreeStock:  "console.err.void_exceeds_free_stock",
	domain.ErrForbidden:             "console.err.forbidden",
	domain.ErrOperatorExists:        "console.err.operator_exists",
	domain.ErrOperatorNotFound:      "console.err.operator_not_found",
	domain.ErrLastAdmin:             "console.support.err.last_admin",
	domain.ErrReferenceUsed:         "console.support.err.reference_used",
	domain.ErrProviderUnpaid:        "console.support.err.provider_unpaid",
	domain.ErrAlertNotFound:         "console.err.alert_not_found",
	domain.ErrAlertAcknowledged:     "console.err.alert_acknowledged",
	domain.ErrBlockExists:           "console.err.block_exists",
	domain.ErrBlockNotFound:         "console.err.block_not_found",
	domain.ErrBlocked:               "console.err.buyer_blocked",
	domain.ErrCouponExists:          "console.coupons.err.exists",
	domain.ErrCouponNotFound:        "console.coupons.err.not_found",
	domain.ErrCouponNotApplicable:   "console.coupons.err.not_applicable",
	domain.ErrCouponUsedUp:          "console.coupons.err.used_up",
	domain.ErrCouponBuyerLimit:      "console.coupons.err.buyer_limit",
	domain.ErrBuyerLimit:            "console.err.buyer_limit",
	domain.ErrFulfilOverLimit:       "console.err.fulfil_over_limit",
	domain.ErrBuyerHoldingLimit:     "console.err.buyer_holding_limit",
	domain.ErrSaleNotStarted:        "console.err.sale_not_started",
	domain.ErrPaidAfterSaleEnded:    "console.err.paid_after_sale_ended",
	domain.ErrSaleEnded:             "console.err.sale_ended",
	webkit.ErrBodyTooLarge:          "console.err.body_too_large",
	webkit.ErrRateLimited:           "console.err.rate_limited",
	domain.ErrGateNotReady:          "console.err.stock_gate_not_ready",
	domain.ErrUnavailable:           "console.err.service_unavailable",
	context.DeadlineExceeded:        "console.err.service_unavailable",
}

// errText is what a page says of err in language l, safe to show: a field the operator got
// wrong with its reason (the console's own reasons translated, the domain's in its words),
// else the message of the error's row in webkit's table, else webkit's safe English words —
// never the internal text.
func (k *console) errText(l i18n.Lang, err error) string {
	var fe *fieldError
	if errors.As(err, &fe) {
		args := fe.args
		if r, ok := args["Reason"].(string); ok {
			// A domain's reason inside the console's own ("line 2 is not a code: …").
			args = maps.Clone(args)
			args["Reason"] = k.reasonText(l, r)
		}
		return k.msgs.T(l, "console.err.field", map[string]any{"Field": k.fieldName(l, fe.Field),
			"Reason": k.msgs.T(l, fe.id, args)})
	}
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		return k.msgs.T(l, "console.err.field", map[string]any{"Field": k.fieldName(l, ve.Field), "Reason": k.reasonText(l, ve.Reason)})
	}
	for _, row := range webkit.Rows() {
		if errors.Is(err, row.Err) {
			if id, ok := errorIDs[row.Err]; ok {
				return k.msgs.T(l, id)
			}
			return row.Answer.Message
		}
	}
	a := webkit.Lookup(err)
	if a == webkit.Internal {
		return k.msgs.T(l, "console.err.internal")
	}
	return a.Message
}

// fieldName is a form field's name in language l (the field's own name when the catalogue has
// none for it).
func (k *console) fieldName(l i18n.Lang, field string) string {
	if id := "console.field." + field; k.msgs.Has(l, id) {
		return k.msgs.T(l, id)
	}
	return field
}

// explain is err's status (the API's) and what a page says of it in the request's language.
func (k *console) explain(c *fiber.Ctx, err error) (int, string) {
	status, _ := describe(err)
	return status, k.errText(k.lang(c), err)
}

// fieldError is a console form's invalid field whose reason is a message id of the
// catalogues: pages show it in the operator's language, the audit log and logs in English. It
// matches domain.ErrInvalidInput and unwraps to the domain.ValidationError of its English
// words (what webkit.Describe and the audit log read).
type fieldError struct {
	Field string
	id    string
	args  map[string]any
}

// invalid is a fieldError of field: reason id with its placeholders from kv.
func invalid(field, id string, kv ...any) error {
	return &fieldError{Field: field, id: id, args: i18n.Args(kv)}
}

func (e *fieldError) english() *domain.ValidationError {
	return &domain.ValidationError{Field: e.Field, Reason: catalogue().T(i18n.English, e.id, e.args)}
}

func (e *fieldError) Error() string { return e.english().Error() }

// Unwrap is the field's English validation error.
func (e *fieldError) Unwrap() error { return e.english() }

// reasonIDs are the message ids of the reasons the domain and the import give in English for
// a code that is not valid or a line not imported (domain.ParseCardCode, application's
// import), and for a product description refused (domain.CheckDescription): a page shows them
// in the operator's language. A reason may end in the character
// it names, " (U+00E9 at character 3)", which reasonText words too.
var reasonIDs = []struct{ en, id string }{
	{"must be valid UTF-8 text", "console.reason.utf8"},
	{"must not contain spaces", "console.reason.spaces"},
	{"must not contain control characters", "console.reason.control"},
	{"must not contain invisible format characters", "console.reason.format"},
	{"must be printable ASCII (letters, digits and signs); other characters, accented letters in either Unicode form included, are refused", "console.reason.ascii"},
	{"must not contain commas or double quotes", "console.reason.comma"},
	{"must not start with # (a line starting with # is a comment)", "console.reason.hash"},
	{"must be 4 to 128 characters", "console.reason.length"},
	{"already in this product (an earlier line or an earlier import)", "console.reason.duplicate"},
	{"already in another product's pool", "console.reason.in_pool"},
	{"the body ended inside this line", "console.reason.unterminated"},
	{"must be at most 2000 characters", "console.reason.description_length"},
	{"must not contain control characters other than newline and tab", "console.reason.description_control"},
}

// atCharRE is the end of a reason that names a character: " (U+00E9 at character 3)".
var atCharRE = regexp.MustCompile(`^ \((U\+[0-9A-F]{4,6}) at character (\d+)\)$`)

// reasonText is a domain's reason in language l: its message when reasonIDs knows it, the
// reason as it is otherwise.
func (k *console) reasonText(l i18n.Lang, reason string) string {
	for _, r := range reasonIDs {
		rest, ok := strings.CutPrefix(reason, r.en)
		if !ok {
			continue
		}
		if rest == "" {
			return k.msgs.T(l, r.id)
		}
		if m := atCharRE.FindStringSubmatch(rest); m != nil {
			return k.msgs.T(l, r.id) + k.msgs.T(l, "console.reason.at", map[string]any{"Char": m[1], "Pos": m[2]})
		}
	}
	return reason
}
