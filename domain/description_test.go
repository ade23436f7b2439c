package domain_test

import (
	"errors"
	"strings"
	"testing"

	"cardshop/domain"
)

// TestProductDescription: a description is plain text kept as written (markup included, every
// page escapes it), trimmed, with its line ends made "\n"; more than MaxDescription characters
// or a control character other than newline and tab is refused with a description
// ValidationError, and a refused revision leaves the product as it was.
func TestProductDescription(t *testing.T) {
	p, err := domain.NewProduct(1, "desc", 1000, 5, t0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Description() != "" {
		t.Fatalf("a new product's description = %q, want empty", p.Description())
	}
	long := strings.Repeat("码", domain.MaxDescription)
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"  one line  ", "one line", true},
		{"first\r\nsecond\rthird\n\n\tindented", "first\nsecond\nthird\n\n\tindented", true},
		{`<script>alert(1)</script> "><img src=x onerror=alert(1)>`, `<script>alert(1)</script> "><img src=x onerror=alert(1)>`, true},
		{long, long, true},
		{" " + long + "\n", long, true},
		{long + "x", "", false},
		{"bell\a", "", false},
		{"nul\x00", "", false},
		{"esc\x1b[31m", "", false},
		{"c1\u0085x", "", false},
		{"sep\u2028x", "", false},
		{"bad\xffutf8", "", false},
	} {
		r := p.Revision()
		r.Description = tt.in
		got, err := p.Revise(r)
		var ve *domain.ValidationError
		switch {
		case tt.ok && err != nil:
			t.Errorf("%.20q: %v", tt.in, err)
		case tt.ok && got.Description() != tt.want:
			t.Errorf("%.20q: stored %.20q, want %.20q", tt.in, got.Description(), tt.want)
		case !tt.ok && (!errors.As(err, &ve) || ve.Field != "description"):
			t.Errorf("%.20q: err = %v, want a description ValidationError", tt.in, err)
		}
		if p.Description() != "" {
			t.Fatal("Revise changed the product it was called on")
		}
	}
	r := p.Revision()
	r.Description = "kept"
	if p, err = p.Revise(r); err != nil {
		t.Fatal(err)
	}
	back := domain.RehydrateProduct(p.Record())
	if back.Description() != "kept" || back.Revision().Description != "kept" {
		t.Fatalf("record round trip: description %q", back.Description())
	}
}
