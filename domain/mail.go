package domain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrMailNotConfigured refuses to queue an e-mail on a shop that sends none (no Mailer).
var ErrMailNotConfigured = errors.New("no mailer is configured: the shop sends no e-mail")

// ErrNoOrderMail refuses to (re)send an order's e-mail for an order that has none: an API
// order (no address) or one that is not PAID.
var ErrNoOrderMail = fmt.Errorf("%w: only a paid guest order has an e-mail to send", ErrInvalidTransition)

// TopicOrderMail is an order's paid e-mail to its buyer (a guest order of the storefront, which
// has an e-mail address): an OrderMail's order number as the key, recorded in the transaction
// that pays the order and sent by the mail relay through the Mailer, at least once and with
// the same OrderMail.ID on every attempt.
const TopicOrderMail = "mail.order.paid"

// OrderMail is the e-mail that tells a buyer their order is paid: its codes, or only a link to
// the order page (by configuration), in the buyer's language.
type OrderMail struct {
	// ID is the same on every attempt and every resend of this order's mail: the Message-ID's
	// local part, so that a mail sent twice after an unknown outcome is recognisably one mail
	// (and it carries the same codes: an order's codes do not change once paid).
	ID      string
	OrderNo OrderNo
	To      string // the buyer's e-mail address, normalised
	Lang    string // the buyer's language, a BCP 47 tag of the catalogues ("zh-CN", "en")
	Product string // the product's name
	Qty     int
	Amount  string // the amount paid, formatted with the shop's currency ("100.00 CNY")
	PaidAt  time.Time
	// Codes are the order's codes; empty when the shop sends only the link.
	Codes []string
	// OrderURL opens the order page with the order's access secret.
	OrderURL string
}

// Mailer sends e-mail to buyers (SMTP in production).
type Mailer interface {
	// SendOrderMail sends m. An error means it was not sent, or that its outcome is unknown
	// (the connection broke after the message was handed over): the relay sends it again
	// later, with the same ID.
	SendOrderMail(ctx context.Context, m OrderMail) error
}
