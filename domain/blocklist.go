package domain

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"
)

// BlockKind is what a blocklist entry matches: a buyer's IP address, e-mail address or
// e-mail domain.
type BlockKind string

// The kinds of blocklist entry.
const (
	// BlockIP matches an IP address: one address or a CIDR range, IPv4 or IPv6.
	BlockIP BlockKind = "ip"
	// BlockEmail matches one e-mail address, normalised (see NormaliseBlockEmail).
	BlockEmail BlockKind = "email"
	// BlockEmailDomain matches the addresses of a domain and of every domain under it: an entry
	// "mailinator.com" blocks "a@mailinator.com" and "a@eu.mailinator.com".
	BlockEmailDomain BlockKind = "email_domain"
)

// Bounds of a blocklist entry's texts.
const (
	MaxBlockValue = 254 // the longest e-mail address SMTP carries
	MaxBlockNote  = 500
)

// ErrInvalidBlockEntry means a blocklist entry's kind, value or note is not valid. It comes
// with a ValidationError that names the field, and matches ErrInvalidInput.
var ErrInvalidBlockEntry = errors.New("invalid blocklist entry")

// ErrBlockExists means the blocklist holds an entry of that kind and value already.
var ErrBlockExists = errors.New("blocklist entry exists")

// ErrBlockNotFound means no blocklist entry has that id.
var ErrBlockNotFound = errors.New("blocklist entry not found")

// BlockEntry is one entry of the blocklists: what it blocks, why, who added it and when.
// Value is normalised, so two spellings of one address or range are one entry: an IP range
// as its masked prefix ("10.0.0.0/8"), one address without a prefix length ("203.0.113.7",
// an IPv4-mapped IPv6 address as its IPv4 form), e-mail addresses and domains in lower case.
type BlockEntry struct {
	ID      int64 // assigned by the ledger
	Kind    BlockKind
	Value   string
	Note    string
	AddedBy OperatorName
	AddedAt time.Time
}

// NewBlockEntry validates and normalises an operator's entry. Errors: ErrInvalidBlockEntry
// (with the field's ValidationError).
func NewBlockEntry(kind, value, note string, by OperatorName, at time.Time) (BlockEntry, error) {
	k := BlockKind(kind)
	v, err := NormaliseBlockValue(k, value)
	if err != nil {
		return BlockEntry{}, err
	}
	if !utf8.ValidString(note) || utf8.RuneCountInString(note) > MaxBlockNote {
		return BlockEntry{}, badBlock("note", fmt.Sprintf("must be valid UTF-8 of at most %d characters", MaxBlockNote))
	}
	return BlockEntry{Kind: k, Value: v, Note: strings.TrimSpace(note), AddedBy: by, AddedAt: at}, nil
}

// CheckBlockEntry is what a ledger checks before it stores e: a known kind, a value in its
// normal form (as NewBlockEntry leaves it: another spelling would slip past the unique kind and
// value), a note within its bound. Errors: ErrInvalidBlockEntry.
func CheckBlockEntry(e BlockEntry) error {
	v, err := NormaliseBlockValue(e.Kind, e.Value)
	if err != nil {
		return err
	}
	if v != e.Value {
		return badBlock("value", fmt.Sprintf("must be stored in its normal form %q", v))
	}
	if !utf8.ValidString(e.Note) || utf8.RuneCountInString(e.Note) > MaxBlockNote {
		return badBlock("note", fmt.Sprintf("must be valid UTF-8 of at most %d characters", MaxBlockNote))
	}
	return nil
}

// badBlock is an ErrInvalidBlockEntry about field.
func badBlock(field, reason string) error {
	return fmt.Errorf("%w: %w", ErrInvalidBlockEntry, Invalid(field, reason))
}

// NormaliseBlockValue checks value as an entry of kind and returns its normal form (see
// BlockEntry). Errors: ErrInvalidBlockEntry.
func NormaliseBlockValue(kind BlockKind, value string) (string, error) {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > MaxBlockValue {
		return "", badBlock("value", fmt.Sprintf("must be 1 to %d characters", MaxBlockValue))
	}
	switch kind {
	case BlockIP:
		p, err := ParseBlockPrefix(value)
		if err != nil {
			return "", err
		}
		if p.IsSingleIP() {
			return p.Addr().String(), nil
		}
		return p.String(), nil
	case BlockEmail:
		e, ok := NormaliseBlockEmail(value)
		if !ok {
			return "", badBlock("value", "must be an e-mail address: local-part@domain")
		}
		return e, nil
	case BlockEmailDomain:
		d, ok := normaliseDomain(value)
		if !ok {
			return "", badBlock("value", "must be a domain name such as example.com (no @, no scheme)")
		}
		return d, nil
	}
	return "", badBlock("kind", `must be "ip", "email" or "email_domain"`)
}

// ParseBlockPrefix reads an IP entry: an address or a CIDR range, IPv4 or IPv6, as a masked
// prefix (an IPv4-mapped IPv6 address or range as its IPv4 form, so that it matches what a
// buyer's IPv4 address reads as). A zone ("fe80::1%eth0") is refused. Errors:
// ErrInvalidBlockEntry.
func ParseBlockPrefix(s string) (netip.Prefix, error) {
	bad := badBlock("value", "must be an IP address or a CIDR range, such as 203.0.113.7, 198.51.100.0/24 or 2001:db8::/32")
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Zone() != "" {
			return netip.Prefix{}, bad
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, bad
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// NormaliseBlockEmail is the normal form the blocklists compare e-mail addresses in: trimmed
// and in lower case, with exactly one @ between a non-empty local part and a domain name.
// Nothing else is rewritten (no dots or +tags removed: providers differ on what they mean).
func NormaliseBlockEmail(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	local, dom, ok := strings.Cut(s, "@")
	if !ok || local == "" || len(s) > MaxBlockValue || strings.ContainsAny(local, " \t\r\n<>\"") {
		return "", false
	}
	d, ok := normaliseDomain(dom)
	if !ok {
		return "", false
	}
	return local + "@" + d, true
}

// normaliseDomain checks a domain name (labels of letters, digits and hyphens, at least two
// labels) and returns it in lower case, without a trailing dot.
func normaliseDomain(s string) (string, bool) {
	s = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
	labels := strings.Split(s, ".")
	if len(s) == 0 || len(s) > 253 || len(labels) < 2 {
		return "", false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", false
			}
		}
	}
	return s, true
}

// BlocklistRepo stores the blocklists' entries in the ledger.
type BlocklistRepo interface {
	// Add stores e (normalised by NewBlockEntry) and returns it with its id. ErrBlockExists
	// when an entry of the same kind and value exists; of concurrent adds of one, exactly one
	// wins.
	Add(ctx context.Context, e BlockEntry) (BlockEntry, error)
	// Remove deletes the entry and returns it; ErrBlockNotFound for an unknown id.
	Remove(ctx context.Context, id int64) (BlockEntry, error)
	// Entries lists every entry by id.
	Entries(ctx context.Context) ([]BlockEntry, error)
}
