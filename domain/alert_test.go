package domain_test

import (
	"errors"
	"strings"
	"testing"

	"cardshop/domain"
)

func TestParseAlertStatus(t *testing.T) {
	for _, c := range []struct {
		in   string
		want domain.AlertStatus
		ok   bool
	}{
		{"", domain.AlertsOpen, true},
		{"open", domain.AlertsOpen, true},
		{"acknowledged", domain.AlertsAcknowledged, true},
		{"all", domain.AlertsAll, true},
		{"closed", "", false},
		{"OPEN", "", false},
		{" open", "", false},
	} {
		got, err := domain.ParseAlertStatus(c.in)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("ParseAlertStatus(%q) = %q, %v; want %q (ok %v)", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("ParseAlertStatus(%q): %v is not ErrInvalidInput", c.in, err)
		}
	}
}

func TestParseAlertNote(t *testing.T) {
	for _, c := range []struct {
		name, in string
		ok       bool
	}{
		{"empty", "", true},
		{"text", "refunded by hand; see ticket 42", true},
		{"line breaks and tabs", "first\r\nsecond\tthird", true},
		{"500 characters", strings.Repeat("é", domain.MaxAlertNote), true},
		{"501 characters", strings.Repeat("é", domain.MaxAlertNote+1), false},
		{"a control character", "bell\a", false},
		{"NUL", "a\x00b", false},
		{"invalid UTF-8", "a\xffb", false},
	} {
		got, err := domain.ParseAlertNote(c.in)
		if c.ok != (err == nil) || (c.ok && got != c.in) {
			t.Errorf("%s: ParseAlertNote = %q, %v; want ok %v", c.name, got, err, c.ok)
		}
		if err != nil && !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: %v is not ErrInvalidInput", c.name, err)
		}
	}
}

func TestAlertRecordIsOpenUntilAcknowledged(t *testing.T) {
	var r domain.AlertRecord
	if !r.Open() {
		t.Fatal("an alert without an acknowledgement time is not open")
	}
	r.AckedAt = r.RaisedAt.AddDate(2030, 0, 0)
	if r.Open() {
		t.Fatal("an acknowledged alert is open")
	}
}
