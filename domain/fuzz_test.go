package domain_test

import (
	"errors"
	"strings"
	"testing"

	"cardshop/domain"
)

// tokenCharset reports whether s is made of A-Z a-z 0-9 and the extra bytes only.
func tokenCharset(s, extra string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(extra, c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{"", "abcdefgh", "6f1c1f5e-6f53-4a3b-9f0e-6c8a3c6f7e21", "a.b_c:d-e",
		strings.Repeat("k", 64), strings.Repeat("k", 65), "abcd efgh", "abcdéfgh", "\x00\x00\x00\x00\x00\x00\x00\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := domain.ParseIdempotencyKey(s)
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidIdempotencyKey) || k != "" {
				t.Fatalf("refusal = %q, %v", k, err)
			}
			return
		}
		if string(k) != s || len(s) < 8 || len(s) > 64 || !tokenCharset(s, "._:-") {
			t.Fatalf("accepted %q as %q", s, k)
		}
		if again, err := domain.ParseIdempotencyKey(string(k)); err != nil || again != k {
			t.Fatalf("does not round-trip: %q %v", again, err)
		}
	})
}

func FuzzParseOrderNo(f *testing.F) {
	for _, s := range []string{"", "2503011200001234123456789012", "A", "ab-12", strings.Repeat("9", 33),
		"../etc/passwd", "12%2F34", "１２"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		no, err := domain.ParseOrderNo(s)
		if err != nil {
			if !errors.Is(err, domain.ErrOrderNotFound) || no != "" {
				t.Fatalf("refusal = %q, %v", no, err)
			}
			return
		}
		if string(no) != s || len(s) < 1 || len(s) > 32 || !tokenCharset(s, "-") {
			t.Fatalf("accepted %q as %q", s, no)
		}
		if again, err := domain.ParseOrderNo(string(no)); err != nil || again != no {
			t.Fatalf("does not round-trip: %q %v", again, err)
		}
	})
}

func FuzzParseCardCode(f *testing.F) {
	for _, s := range []string{"", "ABCD", "  trimmed-1  \r\n", "ключ-кода", "abc,def", `abc"def`, "abc\xffdef",
		"abc\u200bdef", "\ufeffＡＢＣＤ\u00a0", "CAFE\u0301", "#abcd", strings.Repeat("c", 128), strings.Repeat("c", 129), "\ufffd\ufffd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := domain.ParseCardCode(s)
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidInput) || !c.IsZero() {
				t.Fatalf("refusal = %v (zero %v)", err, c.IsZero())
			}
			return
		}
		code := c.Reveal()
		if code != domain.NormalizeCardCode(s) || domain.NormalizeCardCode(code) != code {
			t.Fatalf("accepted %q as %q: only the normalisation may change it", s, code)
		}
		if len(code) < 4 || len(code) > domain.MaxCodeLength || code[0] == '#' {
			t.Fatalf("accepted %q: length %d", code, len(code))
		}
		for _, r := range code {
			// Printable ASCII only: no two accepted codes differ by Unicode form or width.
			if r <= ' ' || r > '~' || r == ',' || r == '"' {
				t.Fatalf("accepted %q holding %U", code, r)
			}
		}
		if again, err := domain.ParseCardCode(code); err != nil || again.Reveal() != code {
			t.Fatalf("does not round-trip: %v", err)
		}
		if strings.Contains(c.String(), code) && code != "[REDACTED]" {
			t.Fatalf("String() shows the code")
		}
	})
}
