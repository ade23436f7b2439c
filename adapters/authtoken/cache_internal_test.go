package authtoken

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

// TestVerifiedCache: a token is cached only once it passed every check; a cached token still
// expires; a forged MAC, another secret's token or a changed byte is never answered from the
// cache; the cache stays within verifiedMax.
func TestVerifiedCache(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	i, err := New("token-secret-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	tok, exp, err := i.Issue("alice", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	forged := tok[:len(tok)-1] + map[bool]string{true: "A", false: "B"}[!strings.HasSuffix(tok, "A")]
	if _, err := i.Verify(forged, now); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("forged MAC: %v", err)
	}
	if n := i.cached(); n != 0 {
		t.Fatalf("%d tokens cached after a refusal, want 0", n)
	}
	for range 3 {
		b, err := i.Verify(tok, now)
		if err != nil || b != "alice" {
			t.Fatalf("Verify = %q %v, want alice", b, err)
		}
	}
	if n := i.cached(); n != 1 {
		t.Fatalf("%d tokens cached, want 1", n)
	}
	if _, err := i.Verify(tok, exp); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("cached token at its expiry: %v, want ErrUnauthorized", err)
	}
	if b, err := i.Verify(tok, exp.Add(-time.Second)); err != nil || b != "alice" {
		t.Fatalf("cached token a second before its expiry: %q %v", b, err)
	}
	if _, err := i.Verify(forged, now); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("forged MAC after the real token was cached: %v", err)
	}
	other, err := New("another-secret-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Verify(tok, now); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("another secret's Issuer accepted the token: %v", err)
	}
	// An expired token is refused before it could be cached.
	old, _, err := i.Issue("bob", now.Add(-time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := i.Verify(old, now); !errors.Is(err, domain.ErrUnauthorized) || i.cached() != 1 {
		t.Fatalf("expired token: %v, %d cached", err, i.cached())
	}
	for n := range verifiedMax + 10 {
		tk, _, err := i.Issue(domain.BuyerID(fmt.Sprintf("buyer-%d", n)), now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := i.Verify(tk, now); err != nil {
			t.Fatal(err)
		}
		if c := i.cached(); c > verifiedMax {
			t.Fatalf("%d tokens cached, bound %d", c, verifiedMax)
		}
	}
}

// BenchmarkVerify measures Verify of one of 64 tokens, cached after the first round.
func BenchmarkVerify(b *testing.B) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	i, err := New("token-secret-0123456789")
	if err != nil {
		b.Fatal(err)
	}
	toks := make([]string, 64)
	for n := range toks {
		if toks[n], _, err = i.Issue(domain.BuyerID(fmt.Sprintf("bench-buyer-%02d", n)), now, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := i.Verify(toks[n%len(toks)], now); err != nil {
			b.Fatal(err)
		}
		n++
	}
}
