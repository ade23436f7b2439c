package domain_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

func TestParseEmailNormalisesTheDomainOnly(t *testing.T) {
	for in, want := range map[string]domain.Email{
		"a@example.com":                  "a@example.com",
		"  First.Last@Example.COM \t":    "First.Last@example.com",
		"user+tag@mail.example.co.uk":    "user+tag@mail.example.co.uk",
		"o'brien@xn--fiqs8s.cn":          "o'brien@xn--fiqs8s.cn",
		"x@a-b.example":                  "x@a-b.example",
		strings.Repeat("a", 64) + "@b.c": domain.Email(strings.Repeat("a", 64) + "@b.c"),
	} {
		got, err := domain.ParseEmail(in)
		if err != nil || got != want {
			t.Errorf("ParseEmail(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestParseEmailRefusesWhatIsNoPlainAddress(t *testing.T) {
	for _, in := range []string{
		"", "  ", "plain", "@example.com", "a@", "a@b", "a@@example.com", "a b@example.com", "a@exa mple.com",
		".a@example.com", "a.@example.com", "a..b@example.com", `"quoted"@example.com`, "<a@example.com>",
		"a@example.com>", "a@-example.com", "a@example-.com", "a@example..com", "a@[127.0.0.1]", "a@例子.中国",
		"a\r\nBcc: x@evil.com@example.com", "a@exa\nmple.com", strings.Repeat("a", 65) + "@example.com",
		"a@" + strings.Repeat("b", 64) + ".com", strings.Repeat("a", 60) + "@" + strings.Repeat("b.", 96) + "com",
	} {
		if got, err := domain.ParseEmail(in); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("ParseEmail(%q) = %q, %v; want a validation error", in, got, err)
		}
	}
}

func TestGuestBuyerIsOnePerAddress(t *testing.T) {
	a, _ := domain.ParseEmail("Buyer@Example.com")
	b, _ := domain.ParseEmail(" Buyer@EXAMPLE.COM")
	c, _ := domain.ParseEmail("buyer@example.com")
	if domain.GuestBuyer(a) != domain.GuestBuyer(b) {
		t.Error("one address, two buyers")
	}
	if domain.GuestBuyer(a) == domain.GuestBuyer(c) {
		t.Error("the local part's case is the mail server's: two addresses, one buyer")
	}
	id := domain.GuestBuyer(a)
	if _, err := domain.ParseBuyerID(string(id)); err != nil || !strings.HasPrefix(string(id), "g.") || len(id) != 34 ||
		strings.Contains(string(id), "xample") {
		t.Errorf("guest buyer %q", id)
	}
}

func TestWithGuestChecksWhatItCarries(t *testing.T) {
	p, err := domain.NewProduct(1, "card", 100, 5, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	email := domain.Email("g@example.com")
	o, err := domain.NewOrder("2503011200001234000000000001", domain.GuestBuyer(email), p, 1, "key-00000001", time.Unix(0, 0), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hash := domain.AccessHash(sha256.Sum256([]byte("secret")))
	g, err := o.WithGuest(domain.Guest{Email: email, Lang: "zh-CN", AccessHash: hash})
	if err != nil || !g.IsGuest() || g.Email() != email || g.Lang() != "zh-CN" || g.AccessHash() != hash {
		t.Fatalf("guest order %+v, %v", g.Record(), err)
	}
	if o.IsGuest() || !o.AccessHash().IsZero() {
		t.Fatal("WithGuest changed the order it was called on")
	}
	if back := domain.RehydrateOrder(g.Record()); back.Record() != g.Record() {
		t.Fatal("a guest order does not survive its record")
	}
	for name, bad := range map[string]domain.Guest{
		"another address's buyer": {Email: "other@example.com", Lang: "en", AccessHash: hash},
		"no address":              {Lang: "en", AccessHash: hash},
		"an unknown language":     {Email: email, Lang: "fr", AccessHash: hash},
		"no hash":                 {Email: email, Lang: "en"},
	} {
		if _, err := o.WithGuest(bad); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
