package domain

import (
	"errors"
	"time"
	"unicode"
	"unicode/utf8"
)

// AlertRecord is an alert as the alert log keeps it: what was raised, when first and last,
// how many raises of the same condition it folds together, and, once an operator has looked
// at it, who acknowledged it, when and with what note.
//
// While an alert is open, raising the same Kind for the same Product and OrderNo again does
// not add a row: it counts (Count), moves LastAt and keeps the newest Message, so that a storm
// of one condition (a retried fulfil, a provider repeating a notice) is one line an operator
// acknowledges once. Once acknowledged, the next raise of the condition opens a new alert.
type AlertRecord struct {
	ID       int64 // assigned by the log, increasing in order of first raise
	Alert          // Kind, Product, OrderNo, and the newest raise's Message
	RaisedAt time.Time
	LastAt   time.Time // the newest raise folded into this alert; RaisedAt at first
	Count    int64     // raises folded into this alert, 1 at first
	AckedBy  OperatorName
	AckedAt  time.Time // zero while the alert is open
	AckNote  string
}

// Open reports whether no operator has acknowledged the alert yet.
func (r AlertRecord) Open() bool { return r.AckedAt.IsZero() }

// AlertStatus selects alerts by acknowledgement.
type AlertStatus string

// The alert statuses a list may select.
const (
	AlertsOpen         AlertStatus = "open"
	AlertsAcknowledged AlertStatus = "acknowledged"
	AlertsAll          AlertStatus = "all"
)

// ParseAlertStatus validates a status to list; the empty string is AlertsOpen.
func ParseAlertStatus(s string) (AlertStatus, error) {
	switch st := AlertStatus(s); st {
	case "":
		return AlertsOpen, nil
	case AlertsOpen, AlertsAcknowledged, AlertsAll:
		return st, nil
	}
	return "", Invalid("status", `must be "open", "acknowledged" or "all"`)
}

// AlertFilter selects alerts: by Status (AlertsOpen when empty), and by Kind and Product when
// set. Alerts come newest (highest ID) first, at most Limit (1 to 1000), with IDs below
// BeforeID when it is set (paging).
type AlertFilter struct {
	Status   AlertStatus
	Kind     string
	Product  ProductID
	BeforeID int64
	Limit    int
}

// MaxAlertNote bounds an acknowledgement's note, in characters.
const MaxAlertNote = 500

// ParseAlertNote validates an acknowledgement's note: at most MaxAlertNote characters of
// printable text (spaces and line breaks allowed), surrounding blanks trimmed by the caller.
func ParseAlertNote(s string) (string, error) {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxAlertNote {
		return "", Invalid("note", "must be at most 500 characters of text")
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
			return "", Invalid("note", "must not hold control characters")
		}
	}
	return s, nil
}

// ErrAlertNotFound means no alert has that id.
var ErrAlertNotFound = errors.New("alert not found")

// ErrAlertAcknowledged means the alert was acknowledged already (by someone else, or by an
// earlier try of the same request); the first acknowledgement stays.
var ErrAlertAcknowledged = errors.New("alert already acknowledged")

// AlertManualPayment is the kind of the alert every manual confirmation of a payment raises.
const AlertManualPayment = "manual_payment"
