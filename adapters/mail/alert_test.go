package mail_test

import (
	"context"
	"strings"
	"testing"

	"cardshop/adapters/lab/mailpit"
)

// TestAlertMailKeepsItsID: an alert channel's push arrives as a plain-text mail to the
// channel's address with its subject and text, and every copy carries the same Message-ID,
// made of the push's id (the characters a Message-ID cannot hold turned into dots).
func TestAlertMailKeepsItsID(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	m := newMailer(t, mp)
	for range 2 {
		if err := m.SendAlertMail(context.Background(), "ops@shop.example", "stock-product.sold_out:1001:1764403200123",
			"[cardshop] product.sold_out · product 1001", "product 1001: product.sold_out, 0 left"); err != nil {
			t.Fatal(err)
		}
	}
	got := received(t, mp, 2)
	for _, g := range got {
		if g.MessageID != "alert.stock-product.sold_out.1001.1764403200123@mail.cards.example" {
			t.Errorf("Message-ID %q", g.MessageID)
		}
		if len(g.To) != 1 || g.To[0].Address != "ops@shop.example" || g.Subject != "[cardshop] product.sold_out · product 1001" ||
			!strings.Contains(g.Text, "0 left") || g.HTML != "" {
			t.Errorf("mail: to %v, subject %q, text %q, html %q", g.To, g.Subject, g.Text, g.HTML)
		}
	}
	if err := m.SendAlertMail(context.Background(), "not an address", "alert-1", "s", "t"); err == nil {
		t.Fatal("a bad address was accepted")
	}
}
