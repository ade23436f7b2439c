package bootstrap

import (
	"errors"
	"fmt"
	netmail "net/mail"
	"time"

	"go.uber.org/fx"

	"cardshop/adapters/i18n"
	"cardshop/adapters/mail"
	"cardshop/domain"
)

// mailer provides the domain.Mailer of the order mail when CARDSHOP_SMTP_ADDR is set, and
// nothing otherwise: its users take it as optional (no server, no mail).
func mailer(cfg Config) fx.Option {
	if cfg.SMTPAddr == "" {
		return fx.Options()
	}
	return fx.Provide(func(cfg Config) (domain.Mailer, error) { return newMailer(cfg) })
}

// newMailer is the SMTP mailer cfg describes, with the embedded catalogues' texts.
func newMailer(cfg Config) (*mail.Mailer, error) {
	mc, err := mailConfig(cfg)
	if err != nil {
		return nil, err
	}
	cat, err := i18n.Load()
	if err != nil {
		return nil, err
	}
	return mail.New(mc, cat)
}

// mailConfig translates the CARDSHOP_SMTP_* settings: CARDSHOP_SMTP_FROM may carry the
// sender's display name ("Card shop <shop@example.com>"); the Message-ID domain is the sender
// address's; the payment time shows in the console's time zone.
func mailConfig(cfg Config) (mail.Config, error) {
	if cfg.SMTPFrom == "" {
		return mail.Config{}, errors.New("CARDSHOP_SMTP_FROM must be set with CARDSHOP_SMTP_ADDR: the address the order mail comes from")
	}
	from, err := netmail.ParseAddress(cfg.SMTPFrom)
	if err != nil {
		return mail.Config{}, fmt.Errorf("CARDSHOP_SMTP_FROM: want shop@example.com or Card shop <shop@example.com>, got %q", cfg.SMTPFrom)
	}
	loc := cfg.ConsoleTimeZone
	if loc == nil {
		loc = time.UTC
	}
	return mail.Config{Addr: cfg.SMTPAddr, Username: cfg.SMTPUser, Password: cfg.SMTPPassword,
		From: from.Address, FromName: from.Name, TLS: mail.TLSMode(cfg.SMTPTLS),
		LinkOnly: !cfg.MailCodes, Location: loc}, nil
}

// checkMail refuses, at start, mail settings that could not send a mail.
func checkMail(cfg Config) error {
	if cfg.SMTPAddr == "" {
		return nil
	}
	if cfg.SMTPPassword != "" && cfg.SMTPUser == "" {
		return errors.New("CARDSHOP_SMTP_PASSWORD is set without CARDSHOP_SMTP_USER")
	}
	if _, err := newMailer(cfg); err != nil {
		return fmt.Errorf("CARDSHOP_SMTP_*: %w", err)
	}
	return nil
}
