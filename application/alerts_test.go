package application_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/domain"
)

// Alerts raised by a use case reach the pager (the configured Alerter) and the ledger's alert
// log, where an operator lists and acknowledges them once.
func TestAlertsAreRecordedAndAcknowledgedOnce(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 2)
	if err := f.gate.Rebuild(f.ctx, p.ID(), domain.GateLevels{Stock: 5}); err != nil {
		t.Fatal(err)
	}
	o := f.mustPlace(t, "alice", p.ID(), 3)
	if _, err := f.pay(t, o.No()); err != nil {
		t.Fatal(err)
	}
	if kinds := f.alertsFor(o.No()); !hasKind(kinds, "paid_unfulfilled") {
		t.Fatalf("paged alerts %v, want paid_unfulfilled", kinds)
	}
	open, err := f.shop.Admin.Alerts(f.ctx, domain.AlertFilter{Product: p.ID()})
	if err != nil {
		t.Fatal(err)
	}
	var unfulfilled domain.AlertRecord
	for _, a := range open {
		if a.Kind == "paid_unfulfilled" && a.OrderNo == o.No() {
			unfulfilled = a
		}
	}
	if unfulfilled.ID == 0 || !unfulfilled.Open() || unfulfilled.Count != 1 || !unfulfilled.RaisedAt.Equal(t0) {
		t.Fatalf("open alerts of the product %+v, want an open paid_unfulfilled for %s raised at %v", open, o.No(), t0)
	}
	counts, err := f.shop.Admin.OpenAlerts(f.ctx)
	if err != nil || counts["paid_unfulfilled"] != 1 || counts["stock_inconsistency"] != 1 {
		t.Fatalf("open alerts by kind %v (%v), want one paid_unfulfilled and one stock_inconsistency", counts, err)
	}

	// Bad input changes nothing.
	if _, err := f.shop.Admin.AcknowledgeAlert(f.ctx, unfulfilled.ID, "ann", strings.Repeat("x", domain.MaxAlertNote+1)); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("a note too long: err = %v, want ErrInvalidInput", err)
	}
	for _, id := range []int64{0, -1, unfulfilled.ID + 1000} {
		if _, err := f.shop.Admin.AcknowledgeAlert(f.ctx, id, "ann", ""); !errors.Is(err, domain.ErrAlertNotFound) {
			t.Fatalf("acknowledge alert %d: err = %v, want ErrAlertNotFound", id, err)
		}
	}

	f.clock.Advance(time.Minute)
	got, err := f.shop.Admin.AcknowledgeAlert(f.ctx, unfulfilled.ID, "ann", "  refunding it  ")
	if err != nil {
		t.Fatal(err)
	}
	if got.Open() || got.AckedBy != "ann" || got.AckNote != "refunding it" || !got.AckedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("acknowledged alert %+v, want it closed by ann at %v with the note trimmed", got, t0.Add(time.Minute))
	}
	if _, err := f.shop.Admin.AcknowledgeAlert(f.ctx, unfulfilled.ID, "bob", ""); !errors.Is(err, domain.ErrAlertAcknowledged) {
		t.Fatalf("a second acknowledgement: err = %v, want ErrAlertAcknowledged", err)
	}
	if counts, _ := f.shop.Admin.OpenAlerts(f.ctx); counts["paid_unfulfilled"] != 0 {
		t.Fatalf("open alerts by kind %v after the acknowledgement, want no paid_unfulfilled", counts)
	}
	if _, err := f.shop.Admin.Alerts(f.ctx, domain.AlertFilter{Status: "closed"}); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("an unknown status: err = %v, want ErrInvalidInput", err)
	}
}

// brokenAlertLog is a ledger whose alert log cannot be written.
type brokenAlertLog struct{ *memory.Ledger }

func (l brokenAlertLog) Alerts() domain.AlertLog { return failingAlerts{l.Ledger.Alerts()} }

// Atomically hands fn a store whose alert log fails too: an alert is raised in a transaction,
// with its pushes.
func (l brokenAlertLog) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	return l.Ledger.Atomically(ctx, func(tx domain.Store) error { return fn(brokenAlertStore{tx}) })
}

type brokenAlertStore struct{ domain.Store }

func (s brokenAlertStore) Alerts() domain.AlertLog { return failingAlerts{s.Store.Alerts()} }

type failingAlerts struct{ domain.AlertLog }

func (failingAlerts) Raise(context.Context, domain.Alert, time.Time) (int64, error) {
	return 0, domain.ErrUnavailable
}

// An alert the ledger cannot store still pages, and the operation that raised it ends as it
// would have.
func TestAnAlertTheLedgerCannotStoreStillPagesAndFailsNothing(t *testing.T) {
	f := newFixture(t, withLedger(func(l *memory.Ledger) domain.Ledger { return brokenAlertLog{l} }))
	p := f.createProduct(t, 3, 2)
	if err := f.gate.Rebuild(f.ctx, p.ID(), domain.GateLevels{Stock: 5}); err != nil {
		t.Fatal(err)
	}
	o := f.mustPlace(t, "alice", p.ID(), 3)
	got, err := f.pay(t, o.No())
	if err != nil || got.Status() != domain.StatusUnfulfilled {
		t.Fatalf("pay with the pool short: %v, %v; want UNFULFILLED", got.Status(), err)
	}
	if kinds := f.alertsFor(o.No()); !hasKind(kinds, "paid_unfulfilled") {
		t.Fatalf("paged alerts %v, want paid_unfulfilled", kinds)
	}
	if list, _ := f.ledger.Alerts().List(f.ctx, domain.AlertFilter{Status: domain.AlertsAll, Limit: 10}); len(list) != 0 {
		t.Fatalf("the broken log holds %+v", list)
	}
}
