package mail

import (
	"context"
	"fmt"
	"net/mail"
	"strings"

	gomail "github.com/wneessen/go-mail"
)

// SendAlertMail sends an alert channel's push (package alertpush) as a plain-text e-mail to
// to. id is the push's id, the same on every attempt: it becomes the Message-ID's local part
// (characters a Message-ID cannot hold turned into dots), so a copy sent after an unknown
// outcome is recognisably the same mail.
func (ml *Mailer) SendAlertMail(ctx context.Context, to, id, subject, text string) error {
	local := strings.Map(func(r rune) rune {
		if validIDLocal(string(r)) {
			return r
		}
		return '.'
	}, "alert."+id)
	local = strings.Trim(strings.ReplaceAll(local, "..", "."), ".")
	if !validIDLocal(local) {
		return fmt.Errorf("mail: alert %q cannot be a Message-ID", id)
	}
	addr, err := mail.ParseAddress(to)
	if err != nil {
		return fmt.Errorf("mail: alert %s: bad recipient address: %w", id, err)
	}
	msg, err := ml.newMsg()
	if err != nil {
		return err
	}
	if err := msg.To(addr.Address); err != nil {
		return fmt.Errorf("mail: alert %s: recipient: %w", id, err)
	}
	msg.Subject(subject)
	msg.SetMessageIDWithValue(local + "@" + ml.cfg.MessageIDDomain)
	msg.SetDate()
	msg.SetGenHeader(gomail.Header("Auto-Submitted"), "auto-generated")
	msg.SetBodyString(gomail.TypeTextPlain, text)
	c, err := ml.client()
	if err != nil {
		return fmt.Errorf("mail: alert %s: %w", id, err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("mail: alert %s not sent (or its outcome is unknown): %w", id, err)
	}
	return nil
}
