package epay

import (
	"crypto/md5" //nolint:gosec // G501: epay's protocol signs with MD5
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"cardshop/domain"
)

// SignVariant is how the KEY joins the signed string.
type SignVariant int

// The variants. SignAppend is what the epay SDKs do and the default.
const (
	SignAppend SignVariant = iota // "k=v&…&k=v" + KEY
	SignAmpKey                    // "k=v&…&k=v" + "&key=" + KEY
)

// String names the variant as configuration spells it.
func (v SignVariant) String() string {
	if v == SignAmpKey {
		return "ampkey"
	}
	return "append"
}

// Params are epay parameters, one value per name: a gateway signs what it sends, and a name
// sent twice would leave what was signed ambiguous.
type Params map[string]string

// SigningString is the string the MD5 covers: every parameter but sign, sign_type and empty
// values, sorted by key (bytewise, which is ASCII order), joined "k=v&…" with the raw values,
// then the KEY as the variant says.
func SigningString(p Params, key domain.Secret, v SignVariant) string {
	keys := make([]string, 0, len(p))
	for k, val := range p {
		if k == "sign" || k == "sign_type" || val == "" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(p[k])
	}
	if v == SignAmpKey {
		b.WriteString("&key=")
	}
	b.WriteString(key.Reveal())
	return b.String()
}

// Sign returns the lower-case hex MD5 signature of p.
func Sign(p Params, key domain.Secret, v SignVariant) string {
	sum := md5.Sum([]byte(SigningString(p, key, v))) //nolint:gosec // G401: as above, the provider fixes the digest
	return hex.EncodeToString(sum[:])
}

// validSign reports whether sig is p's signature, in constant time. Gateways send lower-case
// hex (PHP's md5()); anything else is refused rather than normalised.
func validSign(p Params, sig string, key domain.Secret, v SignVariant) bool {
	want := Sign(p, key, v)
	return len(sig) == len(want) && subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

// The signed string joins "k=v&…" with the raw values and nothing escaped: a value holding '&'
// or '=' would make one signature cover two parameter sets (a product named
// "x&out_trade_no=…&trade_status=TRADE_SUCCESS&z=" would turn its pay URL's signature into a
// paid notification for another order). So no parameter is signed or accepted unless its name
// is 1 to 64 of A-Z a-z 0-9 _ and its value is valid UTF-8 without '&', '=' or a control
// character.

// signableKey reports whether k may name a signed parameter.
func signableKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// signableValue reports whether v may stand in a signed parameter set.
func signableValue(v string) bool {
	if !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if r == '&' || r == '=' || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// CheckSignable refuses a value the shop signs for every payment (its notify and return URLs)
// when it could not stand in a signed parameter set ('&', '=', a control character, invalid
// UTF-8): epay would refuse every payment, so the service refuses to start instead.
func CheckSignable(name, v string) error {
	if !signableValue(v) {
		return fmt.Errorf("%s %q cannot be signed for epay: it may not contain '&', '=' or a control character", name, v)
	}
	return nil
}

// signable returns the name of the first parameter of p that may not be signed, or "".
func signable(p Params) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !signableKey(k) || !signableValue(p[k]) {
			return k
		}
	}
	return ""
}

// SafeName is a subject (a product's name) made fit to be signed and shown at the gateway: '&'
// and '=' become their full-width look-alikes '＆' and '＝', a control character or an invalid
// byte a space, runs of white space one space, the ends trimmed.
func SafeName(s string) string {
	s = strings.ToValidUTF8(s, " ")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '&':
			return '＆'
		case r == '=':
			return '＝'
		case unicode.IsControl(r):
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
