package bootstrap

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"

	"cardshop/domain"
)

// MinRealSecretLength is the shortest admin token, payment secret, token secret and webhook
// secret the real adapters accept: 32 characters hold at least 128 random bits even in hex.
// The memory adapters keep the 16 the service needs at all, so that the development values
// of `make run` and the README's walk-through work there.
const MinRealSecretLength = 32

// minDistinct is the fewest different characters (or bytes of a key) a secret of the real
// adapters may have: fewer is a repeated character or a short pattern, never a random value.
const minDistinct = 8

// published are the development values cardshop's own files have printed (the Makefile, the
// README, the scripts): anyone can read them, so the real adapters refuse them. Keys are
// compared by their bytes, so another base64 spelling of one is refused too.
var (
	publishedSecrets = []string{
		"dev-admin-token-change-me",
		"dev-payment-secret-change-me",
		"dev-token-secret-change-me",
	}
	publishedKeys = []string{
		"uZV/T0DKC0hvayBUi9pqlPrt+dudhiCsjzvNkVCcF8Q=", // CARDSHOP_CODE_KEYS of `make run-real`, key id 1
		"bXZjr1kVuZF/4eIYy/o1Uy8qfvT5cZSpqIHyiV1fbfY=", // CARDSHOP_CODE_HASH_KEY of `make run-real`
	}
)

// codeKeySize is an AES-256 key of CARDSHOP_CODE_KEYS; minCodeHashKey the shortest
// CARDSHOP_CODE_HASH_KEY the keyring takes ("cardshop secrets" makes 32 bytes; a shop never
// changes the one it has, so the floor stays the keyring's).
const (
	codeKeySize    = 32
	minCodeHashKey = 16
)

// placeholderWords are what a value made up by hand contains; a random value does not. They
// are looked for in the lower-cased value without - _ . and spaces, so change-me, CHANGE_ME
// and changeme are one word.
var placeholderWords = []string{"changeme", "example", "placeholder", "replaceme", "dummy", "insecure"}

// secretKind is how a secret is judged.
type secretKind int

const (
	ownSecret      secretKind = iota // chosen by the operator: ≥ MinRealSecretLength characters
	codeKeyring                      // CARDSHOP_CODE_KEYS: kid:base64key, …
	codeHashKey                      // CARDSHOP_CODE_HASH_KEY: base64
	providerSecret                   // issued by a provider (payments, captcha, mail): its shape is the provider's
)

// namedSecret is one secret of the configuration and how it is judged.
type namedSecret struct {
	name  string
	value domain.Secret
	kind  secretKind
}

// realSecrets lists the secrets the real adapters judge, in docs/CONFIGURATION.md's order.
// The Alipay and WeChat Pay private keys are RSA keys (PEM or a file): their adapters refuse
// a short key.
func realSecrets(c Config) []namedSecret {
	return []namedSecret{
		{"CARDSHOP_ADMIN_TOKEN", c.AdminToken, ownSecret},
		{"CARDSHOP_PAYMENT_SECRET", c.PaymentSecret, ownSecret},
		{"CARDSHOP_TOKEN_SECRET", c.TokenSecret, ownSecret},
		{"CARDSHOP_CODE_KEYS", c.CodeKeys, codeKeyring},
		{"CARDSHOP_CODE_HASH_KEY", c.CodeHash, codeHashKey},
		{"CARDSHOP_WEBHOOK_SECRET", c.WebhookSecret, ownSecret},
		{"CARDSHOP_STRIPE_SECRET_KEY", c.StripeKey, providerSecret},
		{"CARDSHOP_STRIPE_WEBHOOK_SECRETS", c.StripeWebhook, providerSecret},
		{"CARDSHOP_EPAY_KEY", c.EpayKey, providerSecret},
		{"CARDSHOP_WECHAT_APIV3_KEY", c.WechatAPIv3Key, providerSecret},
		{"CARDSHOP_CAPTCHA_SECRET", c.CaptchaSecret, providerSecret},
		{"CARDSHOP_SMTP_PASSWORD", c.SMTPPassword, providerSecret},
	}
}

// checkSecrets refuses, outside the memory adapters, a secret that is one of the published
// development values or obviously weak (too short, a repeated character or short pattern, a
// placeholder word, a key of a few distinct bytes). The error names every such variable and
// why, never a value, and says how to make fresh ones. Unset secrets are not its business:
// LoadConfig says which are required.
func checkSecrets(c Config) error {
	if c.Adapters == AdaptersMemory {
		return nil
	}
	var weak []string
	for _, s := range realSecrets(c) {
		if s.value == "" {
			continue
		}
		if why := judge(s); why != "" {
			weak = append(weak, s.name+" "+why)
		}
	}
	if len(weak) == 0 {
		return nil
	}
	return fmt.Errorf("CARDSHOP_ADAPTERS=%s refuses weak secrets: %s; run \"cardshop secrets\" to generate fresh values",
		c.Adapters, strings.Join(weak, "; "))
}

// judge says why s is weak, or "" when it is not.
func judge(s namedSecret) string {
	v := strings.TrimSpace(s.value.Reveal())
	switch s.kind {
	case codeKeyring:
		// Keys are named by their place in the list: a malformed entry's id may be its key.
		for i, entry := range strings.Split(v, ",") {
			_, b64, ok := strings.Cut(strings.TrimSpace(entry), ":")
			if !ok {
				return fmt.Sprintf("entry %d is not kid:base64key", i+1)
			}
			if why := judgeKey(b64, codeKeySize, true); why != "" {
				return fmt.Sprintf("key %d %s", i+1, why)
			}
		}
		return ""
	case codeHashKey:
		return judgeKey(v, minCodeHashKey, false)
	default: // judged below
	}
	for _, p := range publishedSecrets {
		if v == p {
			return "is a published development value"
		}
	}
	if w := placeholder(v); w != "" {
		return fmt.Sprintf("is a placeholder (it contains %q)", w)
	}
	if s.kind == ownSecret && len(v) < MinRealSecretLength {
		return fmt.Sprintf("is shorter than %d characters", MinRealSecretLength)
	}
	if distinct(v) < minDistinct {
		return fmt.Sprintf("has fewer than %d different characters", minDistinct)
	}
	return ""
}

// judgeKey says why a base64 key is weak, or "" when it is not: it must decode to size bytes
// (at least size when exact is false), be none of the published keys and have more than a few
// distinct bytes.
func judgeKey(b64 string, size int, exact bool) string {
	raw, ok := decodeKey(b64)
	if !ok || len(raw) < size || (exact && len(raw) != size) {
		if exact {
			return fmt.Sprintf("is not %d bytes in base64", size)
		}
		return fmt.Sprintf("is not at least %d bytes in base64", size)
	}
	for _, p := range publishedKeys {
		if pub, _ := decodeKey(p); bytes.Equal(raw, pub) {
			return "is a published development key"
		}
	}
	if distinct(string(raw)) < minDistinct {
		return fmt.Sprintf("has fewer than %d different bytes", minDistinct)
	}
	return ""
}

// decodeKey reads base64 as the keyring does: standard or URL alphabet, padded or not.
func decodeKey(s string) ([]byte, bool) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// placeholder returns the placeholder word v contains, or "".
func placeholder(v string) string {
	folded := strings.NewReplacer("-", "", "_", "", ".", "", " ", "").Replace(strings.ToLower(v))
	for _, w := range placeholderWords {
		if strings.Contains(folded, w) {
			return w
		}
	}
	return ""
}

// distinct counts the different bytes of s.
func distinct(s string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(s); i++ {
		if !seen[s[i]] {
			seen[s[i]], n = true, n+1
		}
	}
	return n
}
