package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Email is a buyer's e-mail address as the shop keeps it: trimmed, its domain lower-cased
// (the local part is left as typed: a mail server may tell its cases apart), at most
// MaxEmailLength characters. ParseEmail makes one.
type Email string

// MaxEmailLength is the longest address a path of SMTP can carry (RFC 5321's 256 octets
// less the angle brackets).
const MaxEmailLength = 254

// ParseEmail validates and normalises an e-mail address: one "@", a local part of 1 to 64
// printable ASCII characters without spaces, quotes or the specials of RFC 5322, and a domain
// of at least two dot-separated labels of letters, digits and inner hyphens. Quoted local
// parts, comments and address literals are refused: a shop's buyers do not need them, and
// every one is a way to smuggle something into a mail header. Errors: a ValidationError.
func ParseEmail(s string) (Email, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxEmailLength {
		return "", Invalid("email", "must be at most 254 characters")
	}
	at := strings.LastIndexByte(s, '@')
	if at < 1 || at == len(s)-1 {
		return "", Invalid("email", "must be an address like name@example.com")
	}
	local, host := s[:at], strings.ToLower(s[at+1:])
	if len(local) > 64 || !validLocalPart(local) {
		return "", Invalid("email", "the part before @ has characters an address cannot have")
	}
	if !validMailDomain(host) {
		return "", Invalid("email", "the part after @ must be a domain like example.com")
	}
	return Email(local + "@" + host), nil
}

// validLocalPart accepts RFC 5322's dot-atom: atext characters, dots only between them.
func validLocalPart(s string) bool {
	if s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte(".!#$%&'*+/=?^_`{|}~-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validMailDomain accepts a lower-case host name of at least two labels (IDNs in their
// punycode form), each 1 to 63 letters, digits and inner hyphens.
func validMailDomain(s string) bool {
	labels := strings.Split(s, ".")
	if len(labels) < 2 || len(s) > 253 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// GuestBuyer is the buyer of a guest order: "g." and 32 hex digits of the SHA-256 of the
// normalised address. Every order of one address has the same buyer, so the per-buyer cap and
// holding limit apply per address, and the address itself stays out of the gate's keys.
func GuestBuyer(e Email) BuyerID {
	sum := sha256.Sum256([]byte(e))
	return BuyerID("g." + hex.EncodeToString(sum[:16]))
}

// The buyer languages of guest orders: the storefront's and its e-mails' languages.
const (
	LangChinese = "zh-CN"
	LangEnglish = "en"
)

// ParseBuyerLang validates a buyer's language: LangChinese or LangEnglish. Errors: a
// ValidationError.
func ParseBuyerLang(s string) (string, error) {
	if s != LangChinese && s != LangEnglish {
		return "", Invalid("lang", `must be "zh-CN" or "en"`)
	}
	return s, nil
}

// AccessHash is the SHA-256 of a guest order's access secret; the zero value is none (an
// API order).
type AccessHash [sha256.Size]byte

// IsZero reports whether h is none.
func (h AccessHash) IsZero() bool { return h == AccessHash{} }

// Guest is what a guest order carries beyond an API order: the buyer's address and language
// and the hash of the order's access secret (the secret itself is never kept).
type Guest struct {
	Email      Email
	Lang       string
	AccessHash AccessHash
}

// WithGuest returns o as a guest order of g. The order's buyer must be GuestBuyer(g.Email),
// the language one of the buyer languages and the hash set: a ValidationError otherwise.
func (o Order) WithGuest(g Guest) (Order, error) {
	if _, err := ParseEmail(string(g.Email)); err != nil || g.Email == "" {
		return Order{}, Invalid("email", "a guest order needs a valid e-mail address")
	}
	if o.buyer != GuestBuyer(g.Email) {
		return Order{}, Invalid("buyer", "a guest order's buyer is its e-mail address's GuestBuyer")
	}
	if _, err := ParseBuyerLang(g.Lang); err != nil {
		return Order{}, err
	}
	if g.AccessHash.IsZero() {
		return Order{}, Invalid("access_hash", "a guest order needs the hash of its access secret")
	}
	o.email, o.lang, o.accessHash = g.Email, g.Lang, g.AccessHash
	return o, nil
}

// IsGuest reports whether o is a guest order of the storefront (it has an e-mail address).
func (o Order) IsGuest() bool { return o.email != "" }

// Email returns a guest order's buyer address (empty for an API order).
func (o Order) Email() Email { return o.email }

// Lang returns a guest order's buyer language (empty for an API order).
func (o Order) Lang() string { return o.lang }

// AccessHash returns the SHA-256 of a guest order's access secret (zero for an API order).
func (o Order) AccessHash() AccessHash { return o.accessHash }
