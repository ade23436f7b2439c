package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

func TestOrderCursorRoundTrips(t *testing.T) {
	for _, c := range []domain.OrderCursor{
		{},
		{CreatedAt: time.Date(2030, 5, 20, 8, 12, 45, 123456000, time.UTC), No: "2505200812450042000000000001"},
		{CreatedAt: time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC), No: "a-B-9"},
	} {
		got, err := domain.ParseOrderCursor(c.String())
		if err != nil || !got.CreatedAt.Equal(c.CreatedAt) || got.No != c.No {
			t.Errorf("ParseOrderCursor(%q) = %+v, %v; want %+v", c.String(), got, err, c)
		}
	}
	if s := (domain.OrderCursor{}).String(); s != "" {
		t.Errorf("the zero cursor encodes as %q, want \"\"", s)
	}
}

func TestParseOrderCursorRefusesWhatItDidNotWrite(t *testing.T) {
	for _, s := range []string{"x", "!!!", "MTIz", "YWJjL2Fi", "MTIzLw", "MTIzL2EgYg", strings.Repeat("A", 300)} {
		_, err := domain.ParseOrderCursor(s)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != "cursor" {
			t.Errorf("ParseOrderCursor(%q): err = %v, want a ValidationError of cursor", s, err)
		}
	}
}

func TestOrderCursorBefore(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := domain.OrderCursor{CreatedAt: at, No: "5"}
	for _, tc := range []struct {
		at   time.Time
		no   domain.OrderNo
		want bool
	}{
		{at.Add(-time.Nanosecond), "9", true}, // older
		{at, "4", true},                       // same time, lower number
		{at, "5", false},                      // the cursor's own order
		{at, "6", false},
		{at.Add(time.Nanosecond), "0", false}, // newer
	} {
		if got := c.Before(tc.at, tc.no); got != tc.want {
			t.Errorf("Before(%v, %s) = %v, want %v", tc.at, tc.no, got, tc.want)
		}
	}
}

func TestOrderFilterCheck(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	good := []domain.OrderFilter{
		{Limit: 1},
		{Limit: domain.MaxOrderPage},
		{Buyer: "bob@example.com", Product: 7, Statuses: []domain.OrderStatus{domain.StatusPaid, domain.StatusRefunded},
			From: at, To: at.Add(time.Hour), After: domain.OrderCursor{CreatedAt: at, No: "1"}, Limit: 10},
		{From: at, To: at, Limit: 10}, // an empty window
	}
	for _, f := range good {
		if err := f.Check(); err != nil {
			t.Errorf("Check(%+v) = %v", f, err)
		}
	}
	for field, f := range map[string]domain.OrderFilter{
		"limit":      {Limit: domain.MaxOrderPage + 1},
		"buyer_id":   {Buyer: "two words", Limit: 1},
		"product_id": {Product: -1, Limit: 1},
		"status":     {Statuses: []domain.OrderStatus{0}, Limit: 1},
		"from":       {From: at.Add(time.Second), To: at, Limit: 1},
		"cursor":     {After: domain.OrderCursor{No: "1"}, Limit: 1},
	} {
		var ve *domain.ValidationError
		if err := f.Check(); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("Check(%+v) = %v, want a ValidationError of %s", f, err, field)
		}
	}
}
