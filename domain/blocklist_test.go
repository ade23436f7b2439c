package domain_test

import (
	"errors"
	"testing"
	"time"

	"cardshop/domain"
)

// TestBlockValuesAreNormalised: two spellings of one address, range, e-mail address or
// domain are one entry's value.
func TestBlockValuesAreNormalised(t *testing.T) {
	for _, c := range []struct {
		kind     domain.BlockKind
		in, want string
	}{
		{domain.BlockIP, " 203.0.113.7 ", "203.0.113.7"},
		{domain.BlockIP, "203.0.113.7/32", "203.0.113.7"},
		{domain.BlockIP, "198.51.100.77/24", "198.51.100.0/24"},
		{domain.BlockIP, "::ffff:203.0.113.7", "203.0.113.7"},
		{domain.BlockIP, "::ffff:198.51.100.0/120", "198.51.100.0/24"},
		{domain.BlockIP, "2001:DB8::1", "2001:db8::1"},
		{domain.BlockIP, "2001:db8:abcd:12::/32", "2001:db8::/32"},
		{domain.BlockEmail, " Bot@Mailinator.COM. ", "bot@mailinator.com"},
		{domain.BlockEmail, "a.b+tag@example.com", "a.b+tag@example.com"},
		{domain.BlockEmailDomain, "Mailinator.COM", "mailinator.com"},
		{domain.BlockEmailDomain, "eu.mailinator.com.", "eu.mailinator.com"},
	} {
		got, err := domain.NormaliseBlockValue(c.kind, c.in)
		if err != nil || got != c.want {
			t.Errorf("NormaliseBlockValue(%s, %q) = %q, %v; want %q", c.kind, c.in, got, err, c.want)
		}
	}
}

// TestBadBlockEntriesAreRefused: every bad kind, value or note is ErrInvalidBlockEntry with
// the field named (a ValidationError, so ErrInvalidInput too).
func TestBadBlockEntriesAreRefused(t *testing.T) {
	long := make([]byte, domain.MaxBlockNote+1)
	for i := range long {
		long[i] = 'x'
	}
	for _, c := range []struct{ kind, value, note, field string }{
		{"phone", "123", "", "kind"},
		{"ip", "", "", "value"},
		{"ip", "300.1.2.3", "", "value"},
		{"ip", "10.0.0.0/33", "", "value"},
		{"ip", "fe80::1%eth0", "", "value"},
		{"ip", "example.com", "", "value"},
		{"email", "no-at-sign", "", "value"},
		{"email", "@example.com", "", "value"},
		{"email", "a@b@example.com", "", "value"},
		{"email", "a@localhost", "", "value"},
		{"email_domain", "a@example.com", "", "value"},
		{"email_domain", "https://example.com", "", "value"},
		{"email_domain", "-bad.example", "", "value"},
		{"email_domain", "com", "", "value"},
		{"ip", "10.0.0.1", string(long), "note"},
		{"ip", "10.0.0.1", "\xff", "note"},
	} {
		_, err := domain.NewBlockEntry(c.kind, c.value, c.note, "op", time.Now())
		var ve *domain.ValidationError
		if !errors.Is(err, domain.ErrInvalidBlockEntry) || !errors.Is(err, domain.ErrInvalidInput) ||
			!errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("NewBlockEntry(%q, %q): err = %v, want ErrInvalidBlockEntry about %s", c.kind, c.value, err, c.field)
		}
	}
}
