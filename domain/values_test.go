package domain_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

func fieldOf(err error) string {
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		return ve.Field
	}
	return ""
}

func TestNewProduct(t *testing.T) {
	tests := []struct {
		name      string
		id        domain.ProductID
		pname     string
		price     domain.Money
		max       int
		wantField string // "" = valid
	}{
		{"valid", 1, "Steam 50", 5000, 10, ""},
		{"id zero lets the catalogue choose", 0, "x", 1, 1, ""},
		{"limits at their bounds", 9, strings.Repeat("é", 128), math.MaxInt64, domain.MaxQtyLimit, ""},
		{"name is trimmed", 2, "  padded  ", 1, 1, ""},
		{"negative id", -1, "x", 1, 1, "id"},
		{"empty name", 1, "", 1, 1, "name"},
		{"blank name", 1, " \t\n", 1, 1, "name"},
		{"name of 129 characters", 1, strings.Repeat("é", 129), 1, 1, "name"},
		{"zero price", 1, "x", 0, 1, "price"},
		{"negative price", 1, "x", -5, 1, "price"},
		{"limit zero", 1, "x", 1, 0, "max_per_order"},
		{"negative limit", 1, "x", 1, -1, "max_per_order"},
		{"limit above the maximum", 1, "x", 1, domain.MaxQtyLimit + 1, "max_per_order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := domain.NewProduct(tt.id, tt.pname, tt.price, tt.max, t0)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if p.ID() != tt.id || p.Name() != strings.TrimSpace(tt.pname) || p.Price() != tt.price ||
					p.MaxPerOrder() != tt.max || p.Frozen() || !p.CreatedAt().Equal(t0) {
					t.Fatalf("product = %+v", p.Record())
				}
				return
			}
			if !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("err = %v, want ErrInvalidInput", err)
			}
			if f := fieldOf(err); f != tt.wantField {
				t.Fatalf("field = %q, want %q", f, tt.wantField)
			}
		})
	}
}

func TestProductMethods(t *testing.T) {
	p, err := domain.NewProduct(0, "x", 250, 3, t0)
	if err != nil {
		t.Fatal(err)
	}
	p = p.WithID(5)
	if p.ID() != 5 {
		t.Fatal("WithID")
	}
	p.Freeze("  audit  ")
	if !p.Frozen() || p.FrozenReason() != "audit" {
		t.Errorf("Freeze: %v %q", p.Frozen(), p.FrozenReason())
	}
	if back := domain.RehydrateProduct(p.Record()); !reflect.DeepEqual(back, p) {
		t.Errorf("Record/RehydrateProduct do not round-trip")
	}
	p.Unfreeze()
	if p.Frozen() || p.FrozenReason() != "" {
		t.Errorf("Unfreeze: %v %q", p.Frozen(), p.FrozenReason())
	}
	for qty, ok := range map[int]bool{-1: false, 0: false, 1: true, 3: true, 4: false} {
		if err := p.CheckQty(qty); (err == nil) != ok || (err != nil && !errors.Is(err, domain.ErrQtyOutOfRange)) {
			t.Errorf("CheckQty(%d) = %v", qty, err)
		}
	}
	if a, err := p.Amount(3); err != nil || a != 750 {
		t.Errorf("Amount(3) = %d, %v", a, err)
	}
}

func TestNewOrder(t *testing.T) {
	p, _ := domain.NewProduct(7, "x", 999, 5, t0)
	huge, _ := domain.NewProduct(8, "x", math.MaxInt64/2+1, 5, t0)
	tests := []struct {
		name    string
		no      domain.OrderNo
		buyer   domain.BuyerID
		p       domain.Product
		qty     int
		key     domain.IdempotencyKey
		timeout time.Duration
		want    error
	}{
		{"valid", "N1", "alice", p, 2, "key-00000001", testTimeout, nil},
		{"qty at the limit", "N1", "alice", p, 5, "key-00000001", testTimeout, nil},
		{"no number", "", "alice", p, 1, "key-00000001", testTimeout, domain.ErrInvalidInput},
		{"no buyer", "N1", "", p, 1, "key-00000001", testTimeout, domain.ErrInvalidInput},
		{"no key", "N1", "alice", p, 1, "", testTimeout, domain.ErrInvalidInput},
		{"qty zero", "N1", "alice", p, 0, "key-00000001", testTimeout, domain.ErrQtyOutOfRange},
		{"qty negative", "N1", "alice", p, -1, "key-00000001", testTimeout, domain.ErrQtyOutOfRange},
		{"qty above the limit", "N1", "alice", p, 6, "key-00000001", testTimeout, domain.ErrQtyOutOfRange},
		{"zero timeout", "N1", "alice", p, 1, "key-00000001", 0, domain.ErrInvalidInput},
		{"negative timeout", "N1", "alice", p, 1, "key-00000001", -time.Second, domain.ErrInvalidInput},
		{"amount overflows", "N1", "alice", huge, 2, "key-00000001", testTimeout, domain.ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := domain.NewOrder(tt.no, tt.buyer, tt.p, tt.qty, tt.key, t0, tt.timeout)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Status() != domain.StatusPending || o.Qty() != tt.qty || o.Amount() != tt.p.Price()*domain.Money(tt.qty) ||
				o.UnitPrice() != tt.p.Price() || o.Product() != tt.p.ID() || o.Buyer() != tt.buyer ||
				o.IdempotencyKey() != tt.key || o.No() != tt.no || !o.CreatedAt().Equal(t0) ||
				!o.ExpiresAt().Equal(t0.Add(tt.timeout)) || !o.PaidAt().IsZero() || !o.EndedAt().IsZero() {
				t.Fatalf("order = %+v", o.Record())
			}
			if o.Fingerprint() != domain.RequestFingerprint(tt.p.ID(), tt.qty) {
				t.Errorf("fingerprint %q", o.Fingerprint())
			}
			if domain.RehydrateOrder(o.Record()) != o {
				t.Errorf("Record/RehydrateOrder do not round-trip")
			}
		})
	}
	if domain.RequestFingerprint(1, 12) == domain.RequestFingerprint(11, 2) {
		t.Error("fingerprints of different requests collide")
	}
}

// The fingerprint is stored in claims and orders: its format is "<product>:<qty>", in decimal,
// whatever builds it.
func TestRequestFingerprintFormat(t *testing.T) {
	for _, tt := range []struct {
		p    domain.ProductID
		qty  int
		want string
	}{
		{1, 1, "1:1"}, {1001, 12, "1001:12"}, {math.MaxInt64, math.MaxInt32, "9223372036854775807:2147483647"},
		{-5, 0, "-5:0"}, {math.MinInt64, -1, "-9223372036854775808:-1"},
	} {
		if got := domain.RequestFingerprint(tt.p, tt.qty); got != tt.want {
			t.Errorf("RequestFingerprint(%d, %d) = %q, want %q", tt.p, tt.qty, got, tt.want)
		}
	}
}

func TestMoneyTimes(t *testing.T) {
	tests := []struct {
		m    domain.Money
		qty  int
		want domain.Money
		ok   bool
	}{
		{999, 2, 1998, true},
		{1, 0, 0, true},
		{0, 5, 0, true},
		{math.MaxInt64, 1, math.MaxInt64, true},
		{math.MaxInt64 / 2, 2, math.MaxInt64 - 1, true},
		{math.MaxInt64/2 + 1, 2, 0, false},
		{math.MaxInt64, 2, 0, false},
		{1 << 32, 1 << 31, 0, false},
		{3037000500, 3037000500, 0, false},
		{-1, 1, 0, false},
		{1, -1, 0, false},
	}
	for _, tt := range tests {
		got, err := tt.m.Times(tt.qty)
		if tt.ok {
			if err != nil || got != tt.want {
				t.Errorf("%d.Times(%d) = %d, %v; want %d", tt.m, tt.qty, got, err, tt.want)
			}
			continue
		}
		if !errors.Is(err, domain.ErrInvalidInput) || got != 0 {
			t.Errorf("%d.Times(%d) = %d, %v; want an error", tt.m, tt.qty, got, err)
		}
	}
}

func TestMoneyString(t *testing.T) {
	for m, want := range map[domain.Money]string{0: "0.00", 5: "0.05", 1999: "19.99", 100: "1.00", -250: "-2.50"} {
		if got := m.String(); got != want {
			t.Errorf("Money(%d).String() = %q, want %q", int64(m), got, want)
		}
	}
}

func TestParseIdempotencyKey(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"abcdefgh", true},
		{"6f1c1f5e-6f53-4a3b-9f0e-6c8a3c6f7e21", true},
		{"a.b_c:d-e", true},
		{strings.Repeat("k", 64), true},
		{"", false},
		{"abcdefg", false},
		{strings.Repeat("k", 65), false},
		{"abcd efgh", false},
		{"abcdefgh ", false},
		{"abcd/efgh", false},
		{"abcd@efgh", false},
		{"abcdéfgh", false},
		{"abcd\x00efgh", false},
		{"abcd\nefgh", false},
	}
	for _, tt := range tests {
		k, err := domain.ParseIdempotencyKey(tt.in)
		if tt.ok {
			if err != nil || string(k) != tt.in {
				t.Errorf("ParseIdempotencyKey(%q) = %q, %v", tt.in, k, err)
			}
			continue
		}
		if !errors.Is(err, domain.ErrInvalidIdempotencyKey) {
			t.Errorf("ParseIdempotencyKey(%q) err = %v, want ErrInvalidIdempotencyKey", tt.in, err)
		}
	}
}

func TestParseBuyerID(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"a", true},
		{"alice@example.com", true},
		{"user_42.b-c", true},
		{strings.Repeat("b", 64), true},
		{"", false},
		{strings.Repeat("b", 65), false},
		{"ali ce", false},
		{"alice:1", false},
		{"alice/1", false},
		{"ålice", false},
		{"alice\n", false},
	}
	for _, tt := range tests {
		b, err := domain.ParseBuyerID(tt.in)
		if tt.ok {
			if err != nil || string(b) != tt.in {
				t.Errorf("ParseBuyerID(%q) = %q, %v", tt.in, b, err)
			}
			continue
		}
		if !errors.Is(err, domain.ErrInvalidInput) || fieldOf(err) != "buyer_id" {
			t.Errorf("ParseBuyerID(%q) err = %v, want a buyer_id ValidationError", tt.in, err)
		}
	}
}

func TestParseOrderNo(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"2503011200001234123456789012", true},
		{"A", true},
		{"ab-12", true},
		{strings.Repeat("9", 32), true},
		{"", false},
		{strings.Repeat("9", 33), false},
		{"12_34", false},
		{"12.34", false},
		{"../etc", false},
		{"12 34", false},
		{"12%2F34", false},
		{"１２", false},
	}
	for _, tt := range tests {
		no, err := domain.ParseOrderNo(tt.in)
		if tt.ok {
			if err != nil || string(no) != tt.in {
				t.Errorf("ParseOrderNo(%q) = %q, %v", tt.in, no, err)
			}
			continue
		}
		// A malformed number answers exactly like a missing order.
		if !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("ParseOrderNo(%q) err = %v, want ErrOrderNotFound", tt.in, err)
		}
	}
}

func TestParseCardCode(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" = invalid
	}{
		{"ABCD", "ABCD"},
		{"XXXX-YYYY-ZZZZ", "XXXX-YYYY-ZZZZ"},
		{"  trimmed-1  \r\n", "trimmed-1"},
		{"ключ-кода", ""}, // not ASCII
		{"a;b|c'd", "a;b|c'd"},
		{strings.Repeat("c", domain.MaxCodeLength), strings.Repeat("c", domain.MaxCodeLength)},
		{"", ""},
		{"abc", ""},
		{"   abc   ", ""},
		{strings.Repeat("c", domain.MaxCodeLength+1), ""},
		{"abc def", ""},
		{"abc\tdef", ""},
		{"abc,def", ""},
		{`abc"def`, ""},
		{"abc\x00def", ""},
		{"abc\x7fdef", ""},
		{"abc\u200bdef", ""}, // zero-width space is not printable
		{"abc\u00a0def", ""}, // no-break space
		{"abc\xffdef", ""},   // not UTF-8: the buyer would receive something else
		{"#abcd", ""},        // a comment in an import file
		{"ab#cd", "ab#cd"},
	}
	for _, tt := range tests {
		c, err := domain.ParseCardCode(tt.in)
		if tt.want != "" {
			if err != nil || c.Reveal() != tt.want || c.IsZero() {
				t.Errorf("ParseCardCode(%q) = %q, %v; want %q", tt.in, c.Reveal(), err, tt.want)
			}
			continue
		}
		if !errors.Is(err, domain.ErrInvalidInput) || fieldOf(err) != "code" || !c.IsZero() {
			t.Errorf("ParseCardCode(%q) = %q, %v; want a code ValidationError", tt.in, c.Reveal(), err)
		}
	}
	if domain.RehydrateCardCode("stored").Reveal() != "stored" {
		t.Error("RehydrateCardCode")
	}
}

// TestCardCodeNormalisation: codes that look the same are stored the same or refused, so no
// two stored codes differ only by Unicode form, width or invisible characters; case counts.
func TestCardCodeNormalisation(t *testing.T) {
	same := []string{
		"ABCD-1234",
		"\ufeffABCD-1234",              // byte order mark
		"\u200bABCD-1234\u2060",        // zero-width space, word joiner
		"\u00a0ABCD-1234\u3000\r\n",    // no-break space, ideographic space
		"ＡＢＣＤ－１２３４",                    // full-width
		"\u200b ＡＢＣＤ-1234\u00a0\ufeff", // all at once
	}
	for _, in := range same {
		c, err := domain.ParseCardCode(in)
		if err != nil || c.Reveal() != "ABCD-1234" {
			t.Errorf("ParseCardCode(%q) = %q, %v; want ABCD-1234", in, c.Reveal(), err)
		}
	}
	if c, err := domain.ParseCardCode("abcd-1234"); err != nil || c.Reveal() != "abcd-1234" {
		t.Errorf("lower case = %q, %v: codes are case-sensitive and kept as given", c.Reveal(), err)
	}
	refused := map[string]string{
		"CAF\u00c9-0001":  "U+00C9", // É precomposed (NFC)
		"CAFE\u0301-0001": "U+0301", // E + combining acute (NFD)
		"ABCD\u200b1234":  "invisible format",
		"ABCD\u00ad1234":  "invisible format", // soft hyphen
		"ABCD\u30001234":  "spaces",           // ideographic space inside
		"ABCD\x001234":    "control",
		"ABCD\u00851234":  "spaces", // NEL
		"\u0410BCD-1234":  "U+0410", // Cyrillic A
		"ABCD\uff0c1234":  "commas", // full-width comma folds to a comma
		"\u200b#ABCD":     "start with #",
		"ＡＢＣ":             "4 to 128",
	}
	for in, why := range refused {
		c, err := domain.ParseCardCode(in)
		if !errors.Is(err, domain.ErrInvalidInput) || fieldOf(err) != "code" || !c.IsZero() || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseCardCode(%q) = %q, %v; want refused with %q in the reason", in, c.Reveal(), err, why)
		}
	}
	if got := domain.NormalizeCardCode("\ufeff ＡB\xffc\u3000"); got != "AB\xffc" {
		t.Errorf("NormalizeCardCode kept %q", got)
	}
}

func TestValidationError(t *testing.T) {
	err := domain.Invalid("qty", "too big")
	if err.Error() != "qty: too big" || !errors.Is(err, domain.ErrInvalidInput) || errors.Is(err, domain.ErrNotDue) {
		t.Errorf("ValidationError: %v", err)
	}
}
