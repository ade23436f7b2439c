package epay

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/hex"
	"sort"
	"strings"
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
func SigningString(p Params, key Key, v SignVariant) string {
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
	b.WriteString(string(key))
	return b.String()
}

// Sign returns the lower-case hex MD5 signature of p.
func Sign(p Params, key Key, v SignVariant) string {
	sum := md5.Sum([]byte(SigningString(p, key, v)))
	return hex.EncodeToString(sum[:])
}

// validSign reports whether sig is p's signature, in constant time. Gateways send lower-case
// hex (PHP's md5()); anything else is refused rather than normalised.
func validSign(p Params, sig string, key Key, v SignVariant) bool {
	want := Sign(p, key, v)
	return len(sig) == len(want) && subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}
