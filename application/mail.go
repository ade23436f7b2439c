package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cardshop/domain"
)

// The mail relay's settings: how many e-mails are in flight at once and per page, how long a
// relay holds one it is sending (more than an SMTP exchange can last; a relay that dies
// mid-send delays that mail by at most this long), and the backoff between attempts: from
// mailRetryBase, doubling, up to mailRetryCap (an SMTP server down for maintenance).
const (
	DefaultMailAttempts = 8
	mailParallel        = 4
	mailPage            = 32
	MailLease           = 2 * time.Minute
	mailRetryBase       = 30 * time.Second
	mailRetryCap        = 30 * time.Minute
)

// AlertMailFailed is the alert raised when an order's e-mail failed Config.MailAttempts times
// and the relay gave it up: an operator looks at the address and resends it
// (ResendOrderMail).
const AlertMailFailed = "mail_failed"

// ActionMailResent is the audit action of an operator's resend of an order's e-mail.
const ActionMailResent = "order.mail_resent"

// errNoMailer fails an e-mail message while no Mailer is configured: it stays in the outbox
// (visible in the backlog) until one is.
var errNoMailer = errors.New("no mailer configured")

// mailPayload is an order e-mail message's payload: which order, and whether an operator
// asked for it again. The mail itself is built when it is sent, from the ledger.
type mailPayload struct {
	OrderNo  domain.OrderNo `json:"order_no"`
	ResentBy string         `json:"resent_by,omitempty"`
}

// orderMailMessage is the outbox message of the order's e-mail, keyed by its number.
func orderMailMessage(no domain.OrderNo, by domain.OperatorName, at time.Time) (domain.OutboxMessage, error) {
	payload, err := json.Marshal(mailPayload{OrderNo: no, ResentBy: string(by)})
	if err != nil {
		return domain.OutboxMessage{}, fmt.Errorf("encode order mail: %w", err)
	}
	return domain.OutboxMessage{Topic: domain.TopicOrderMail, Key: string(no), Payload: payload, At: at}, nil
}

// addOrderMail records, inside tx, the e-mail of the guest order o that is being paid; an API
// order, or a shop without a Mailer, records none.
func (s *outbox) addOrderMail(ctx context.Context, tx domain.Store, o domain.Order, at time.Time) error {
	if s.mailer == nil || !o.IsGuest() {
		return nil
	}
	m, err := orderMailMessage(o.No(), "", at)
	if err != nil {
		return err
	}
	return tx.Outbox().Add(ctx, m)
}

// mailTopics are the topics RelayMail sends.
var mailTopics = []string{domain.TopicOrderMail}

// RelayMail sends due order e-mails through the Mailer, mailParallel at a time. Each message
// is claimed (MailLease) before it is sent, so relays on several instances do not both send
// it; a failure is tried again after a backoff (30 s doubling, up to 30 min) and, after
// Config.MailAttempts attempts, given up with an AlertMailFailed. Every attempt of an order's
// mail has the same OrderMail.ID. It returns how many were sent.
func (s *Relay) RelayMail(ctx context.Context) (int, error) {
	sent, _, err := s.relayTopics(ctx, relayRun{batch: min(s.cfg.RelayBatch, mailPage), parallel: mailParallel,
		topics: mailTopics, send: s.sendMail, lease: MailLease, attempts: s.cfg.MailAttempts, giveUp: s.mailGivenUp})
	return sent, err
}

// MailBacklog counts the order e-mails not yet sent (nor given up).
func (s *Relay) MailBacklog(ctx context.Context) (int64, error) {
	return s.ledger.Outbox().Backlog(ctx, mailTopics...)
}

// MailGivenUp reports whether r is an order e-mail the relay gave up (its last attempt failed;
// an AlertMailFailed was raised): done, but never sent.
func (s *Sales) MailGivenUp(r domain.OutboxRecord) bool {
	return r.Topic == domain.TopicOrderMail && !r.SentAt.IsZero() && r.Attempts >= s.cfg.MailAttempts
}

// mailGivenUp raises the alert of an e-mail the relay stops trying.
func (s *outbox) mailGivenUp(ctx context.Context, m domain.OutboxMessage, err error) {
	s.alerts.Alert(ctx, domain.Alert{Kind: AlertMailFailed, OrderNo: domain.OrderNo(m.Key),
		Message: fmt.Sprintf("the order's e-mail failed %d times and is given up (resend it from the order's page): %v", m.Attempts+1, err)})
}

// sendMail builds the order's e-mail from the ledger as it is now and sends it. An order that
// is no longer PAID (refunded meanwhile) or no guest order has nothing to send: the message is
// done. With Config.MailCodes the reveal is recorded before the codes are read and sent.
func (s *outbox) sendMail(ctx context.Context, m domain.OutboxMessage) error {
	if s.mailer == nil {
		return errNoMailer
	}
	no := domain.OrderNo(m.Key)
	o, err := s.ledger.Orders().Order(ctx, no)
	if err != nil {
		return fmt.Errorf("load order: %w", err)
	}
	if !o.IsGuest() || o.Status() != domain.StatusPaid {
		s.log.InfoContext(ctx, "order e-mail dropped: the order has none to send", "order_no", no, "status", o.Status().String())
		return nil
	}
	p, err := s.ledger.Products().Product(ctx, o.Product())
	if err != nil {
		return fmt.Errorf("load product: %w", err)
	}
	mail := domain.OrderMail{ID: "order-" + string(no), OrderNo: no, To: string(o.Email()), Lang: o.Lang(),
		Product: p.Name(), Qty: o.Qty(), Amount: s.cfg.Currency.Format(o.Amount()), PaidAt: o.PaidAt(),
		OrderURL: s.orderURL(no)}
	if s.cfg.MailCodes {
		if o, err = s.reveal(ctx, o); err != nil {
			return err
		}
		if o.Status() != domain.StatusPaid {
			s.log.InfoContext(ctx, "order e-mail dropped: the order was refunded", "order_no", no)
			return nil
		}
		cards, err := s.ledger.Cards().Cards(ctx, no)
		if err != nil {
			return fmt.Errorf("load codes: %w", err)
		}
		for _, c := range cards {
			mail.Codes = append(mail.Codes, c.Code.Reveal())
		}
	}
	return s.mailer.SendOrderMail(ctx, mail)
}

// orderURL is the order page's link with the order's access secret (Config.OrderURL).
func (s *outbox) orderURL(no domain.OrderNo) string {
	return strings.NewReplacer("{order_no}", string(no), "{key}", s.accessSecret(no)).Replace(s.cfg.OrderURL)
}

// ResendOrderMail sends a paid guest order's e-mail again, for an operator (the role of
// ActionMailResent: RoleOperator and up): a new outbox message for the order, whose mail has
// the same OrderMail.ID as before. The driving adapter records the audit entry
// (ActionMailResent), refusals included, as for every operator's write.
//
// Errors: ErrForbidden (a role below the action's), ErrMailNotConfigured (no Mailer),
// ErrOrderNotFound, ErrNoOrderMail (an API order, or one not PAID), ErrUnavailable.
func (s *Sales) ResendOrderMail(ctx context.Context, no domain.OrderNo, by Identity) error {
	role, _ := ActionRole(ActionMailResent)
	if by.Name == "" || !by.Role.Allows(role) {
		return fmt.Errorf("resend the e-mail of order %s: %w", no, domain.ErrForbidden)
	}
	if s.mailer == nil {
		return fmt.Errorf("resend the e-mail of order %s: %w", no, domain.ErrMailNotConfigured)
	}
	now := s.clock.Now()
	return s.ledger.Atomically(ctx, func(tx domain.Store) error {
		o, err := tx.Orders().Order(ctx, no)
		if err != nil {
			return fmt.Errorf("load order: %w", err)
		}
		if !o.IsGuest() || o.Status() != domain.StatusPaid {
			return fmt.Errorf("resend the e-mail of order %s (%s): %w", no, o.Status(), domain.ErrNoOrderMail)
		}
		m, err := orderMailMessage(no, by.Name, now)
		if err != nil {
			return err
		}
		return tx.Outbox().Add(ctx, m)
	})
}
