package application

import "testing"

func TestTokenNameNamesOnlyOperatorShapedTokens(t *testing.T) {
	tok, _, err := newOperatorToken("olga")
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := TokenName(tok); !ok || n != "olga" {
		t.Fatalf("TokenName(a real token) = %q, %v; want olga", n, ok)
	}
	secret := tok[len("olga."):]
	for _, bad := range []string{
		"", "olga", "olga.", "olga.short", secret, "." + secret, "Olga." + secret, "admin-token." + secret,
		"olga." + secret[:len(secret)-1] + "=", "dev-admin.token-change-me",
	} {
		if n, ok := TokenName(bad); ok || n != "" {
			t.Errorf("TokenName(%q) = %q, %v; want nothing", bad, n, ok)
		}
	}
}
