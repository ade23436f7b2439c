package alipay

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"sort"
	"strings"
)

// SigningString is what an RSA2 signature of parameters covers: every parameter but the
// excluded ones and empty values, sorted by name (bytewise, which is ASCII order), joined
// "k=v&…" with the raw (decoded) values. Requests exclude sign; notifications sign and
// sign_type.
func SigningString(p map[string]string, exclude ...string) string {
	keys := make([]string, 0, len(p))
outer:
	for k, v := range p {
		if v == "" {
			continue
		}
		for _, x := range exclude {
			if k == x {
				continue outer
			}
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
	return b.String()
}

// SignBytes is RSA2: base64 (standard, padded) of SHA256withRSA (PKCS #1 v1.5) of data.
func SignBytes(key *rsa.PrivateKey, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", errors.New("alipay: cannot sign")
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifyBytes reports whether sig (base64 of an RSA2 signature) signs data under pub. A sig
// that is not exactly one modulus long once decoded is refused.
func VerifyBytes(pub *rsa.PublicKey, data []byte, sig string) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) != pub.Size() {
		return false
	}
	sum := sha256.Sum256(data)
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], raw) == nil
}
