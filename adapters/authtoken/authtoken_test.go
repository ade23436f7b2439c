package authtoken_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/authtoken"
	"cardshop/domain"
)

const secret = "token-secret-0123456789"

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func issuer(t testing.TB, secret string) *authtoken.Issuer {
	t.Helper()
	i, err := authtoken.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func TestIssueVerify(t *testing.T) {
	i := issuer(t, secret)
	for _, buyer := range []domain.BuyerID{"alice", "a", "alice@example.com", "first.last", "a.b.c.d", "...", "x-y_z",
		domain.BuyerID(strings.Repeat("b", 64))} {
		tok, exp, err := i.Issue(buyer, now, time.Hour)
		if err != nil {
			t.Fatalf("Issue(%q): %v", buyer, err)
		}
		if !exp.Equal(now.Add(time.Hour)) {
			t.Errorf("expiry %v", exp)
		}
		if !strings.HasPrefix(tok, "v1."+string(buyer)+".") {
			t.Errorf("token %q", tok)
		}
		got, err := i.Verify(tok, now)
		if err != nil || got != buyer {
			t.Errorf("Verify(%q) = %q, %v; want %q", tok, got, err, buyer)
		}
		if got, err := i.Verify(tok, exp.Add(-time.Nanosecond)); err != nil || got != buyer {
			t.Errorf("the last instant before expiry refused: %v", err)
		}
	}
}

func TestExpired(t *testing.T) {
	i := issuer(t, secret)
	tok, exp, _ := i.Issue("alice", now, time.Minute)
	for _, at := range []time.Time{exp, exp.Add(time.Second), exp.Add(365 * 24 * time.Hour)} {
		if _, err := i.Verify(tok, at); !errors.Is(err, domain.ErrUnauthorized) {
			t.Errorf("Verify at expiry+%v: %v", at.Sub(exp), err)
		}
	}
}

func TestRefused(t *testing.T) {
	i := issuer(t, secret)
	tok, exp, _ := i.Issue("alice", now, time.Hour)
	parts := strings.Split(tok, ".")
	mac := parts[3]
	later := strconv.FormatInt(exp.Add(24*time.Hour).Unix(), 10)
	otherTok, _, _ := issuer(t, "another-secret-0123").Issue("alice", now, time.Hour)
	bobTok, _, _ := i.Issue("bob", now, time.Hour)
	flip := func(s string) string {
		b := []byte(s)
		if b[0] == 'A' {
			b[0] = 'B'
		} else {
			b[0] = 'A'
		}
		return string(b)
	}
	tests := map[string]string{
		"empty":                    "",
		"buyer changed":            "v1.mallory." + parts[2] + "." + mac,
		"buyer given a dot suffix": "v1.alice.x." + parts[2] + "." + mac,
		"expiry extended":          "v1.alice." + later + "." + mac,
		"expiry with a plus sign":  "v1.alice.+" + parts[2] + "." + mac,
		"mac flipped":              "v1.alice." + parts[2] + "." + flip(mac),
		"mac truncated":            "v1.alice." + parts[2] + "." + mac[:len(mac)-1],
		"mac missing":              "v1.alice." + parts[2] + ".",
		"mac of another buyer":     "v1.alice." + parts[2] + "." + strings.Split(bobTok, ".")[3],
		"signed with another key":  otherTok,
		"wrong version":            "v2" + tok[2:],
		"too few parts":            "v1.alice." + mac,
		"padded":                   tok + "=",
		"with spaces":              " " + tok,
		"too long":                 tok + strings.Repeat("x", 300),
		"not a token":              "Bearer " + tok,
	}
	for name, bad := range tests {
		t.Run(name, func(t *testing.T) {
			if got, err := i.Verify(bad, now); !errors.Is(err, domain.ErrUnauthorized) || got != "" {
				t.Fatalf("Verify = %q, %v; want ErrUnauthorized", got, err)
			}
		})
	}
	// Another issuer does not accept ours either.
	if _, err := issuer(t, "another-secret-0123").Verify(tok, now); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("wrong secret: %v", err)
	}
}

func TestTokenForAnInvalidBuyerIsRefusedEvenWithAGoodMAC(t *testing.T) {
	// Issue refuses such a buyer; a token minted some other way with our key is refused too.
	i := issuer(t, secret)
	if _, _, err := i.Issue("bad buyer", now, time.Hour); !errors.Is(err, domain.ErrInvalidInput) {
		t.Errorf("Issue with a space: %v", err)
	}
	if _, _, err := i.Issue("", now, time.Hour); !errors.Is(err, domain.ErrInvalidInput) {
		t.Errorf("Issue with no buyer: %v", err)
	}
	if _, _, err := i.Issue(domain.BuyerID(strings.Repeat("b", 65)), now, time.Hour); !errors.Is(err, domain.ErrInvalidInput) {
		t.Errorf("Issue with a long buyer: %v", err)
	}
}

func TestTTLBounds(t *testing.T) {
	i := issuer(t, secret)
	for _, ttl := range []time.Duration{time.Second, time.Hour, authtoken.MaxTTL} {
		tok, exp, err := i.Issue("alice", now, ttl)
		if err != nil || !exp.Equal(now.Add(ttl)) {
			t.Errorf("ttl %v: exp %v err %v", ttl, exp, err)
			continue
		}
		if _, err := i.Verify(tok, now); err != nil {
			t.Errorf("ttl %v: %v", ttl, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, authtoken.MaxTTL + time.Nanosecond, authtoken.MaxTTL + time.Hour} {
		if tok, _, err := i.Issue("alice", now, ttl); !errors.Is(err, domain.ErrInvalidInput) || tok != "" {
			t.Errorf("ttl %v accepted: %q %v", ttl, tok, err)
		}
	}
	// Expiry is whole seconds: a token is never valid longer than asked.
	odd := now.Add(700 * time.Millisecond)
	_, exp, _ := i.Issue("alice", odd, time.Hour)
	if exp.After(odd.Add(time.Hour)) || exp.Nanosecond() != 0 {
		t.Errorf("expiry %v for now %v", exp, odd)
	}
}

func TestNewRefusesShortSecrets(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("s", authtoken.MinSecretLength-1)} {
		if i, err := authtoken.New(s); err == nil || i != nil {
			t.Errorf("New(%q) accepted", s)
		}
	}
}

func FuzzVerify(f *testing.F) {
	i := issuer(f, secret)
	tok, _, _ := i.Issue("alice", now, time.Hour)
	dotted, _, _ := i.Issue("a.b.c", now, time.Hour)
	for _, s := range []string{tok, dotted, "", "v1", "v1....", "v1.a.1.", strings.Repeat(".", 300), "v1.\xff.1.x"} {
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, token string, offset int64) {
		at := now.Add(time.Duration(offset) * time.Millisecond)
		buyer, err := i.Verify(token, at)
		if err != nil {
			if !errors.Is(err, domain.ErrUnauthorized) || buyer != "" {
				t.Fatalf("refusal = %q, %v", buyer, err)
			}
			return
		}
		if _, err := domain.ParseBuyerID(string(buyer)); err != nil {
			t.Fatalf("verified an invalid buyer %q", buyer)
		}
		// Only tokens we issued verify: re-issuing for the embedded expiry gives the same token.
		parts := strings.Split(token, ".")
		exp, perr := strconv.ParseInt(parts[len(parts)-2], 10, 64)
		if perr != nil || !at.Before(time.Unix(exp, 0)) {
			t.Fatalf("verified %q at %v", token, at)
		}
		if !strings.HasPrefix(token, "v1."+string(buyer)+".") {
			t.Fatalf("verified %q as %q", token, buyer)
		}
	})
}
