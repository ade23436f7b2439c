package application

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"cardshop/domain"
)

// recordedAlerts is the shop's Alerter: it passes every alert to the configured Alerter (the
// log line a pager watches) and records it in the ledger's alert log, where operators list
// and acknowledge it, with its pushes to the alert channels in the same write (raiseAndPush). Raising never fails the operation that raises: an alert the ledger
// cannot store is logged as an error, and the page has gone out already.
type recordedAlerts struct {
	next   domain.Alerter
	ledger domain.Ledger
	clock  domain.Clock
	log    *slog.Logger
}

// Alert pages first, so that a slow or unreachable ledger never delays the page. The raise
// is stored on a context of its own: the caller's may be about to end (a request answered).
func (a recordedAlerts) Alert(ctx context.Context, al domain.Alert) {
	a.next.Alert(ctx, al)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	pushErr, err := raiseAndPush(sctx, a.ledger, al, a.clock.Now().UTC().Truncate(time.Microsecond))
	if pushErr != nil {
		a.log.ErrorContext(ctx, "alert not pushed to the alert channels", "kind", al.Kind, "product", int64(al.Product),
			"order_no", string(al.OrderNo), "err", pushErr)
	}
	if err != nil {
		a.log.ErrorContext(ctx, "alert not stored in the alert log", "kind", al.Kind, "product", int64(al.Product),
			"order_no", string(al.OrderNo), "err", err)
	}
}

// MaxAlertPage bounds one page of the alert log.
const MaxAlertPage = 1000

// Alerts lists alerts, newest first; a Limit outside 1..MaxAlertPage is 100.
//
// Errors: ErrInvalidInput (an unknown status), ErrUnavailable.
func (s *Admin) Alerts(ctx context.Context, f domain.AlertFilter) ([]domain.AlertRecord, error) {
	if f.Limit < 1 || f.Limit > MaxAlertPage {
		f.Limit = 100
	}
	return s.ledger.Alerts().List(ctx, f)
}

// OpenAlerts counts the open alerts by kind, for the dashboard.
//
// Errors: ErrUnavailable.
func (s *Admin) OpenAlerts(ctx context.Context) (map[string]int64, error) {
	return s.ledger.Alerts().OpenCounts(ctx)
}

// AcknowledgeAlert records that operator by has looked at alert id, with an optional note
// (trimmed; at most domain.MaxAlertNote characters), and returns the alert as it now stands.
//
// Errors: ErrInvalidInput (the note), ErrAlertNotFound, ErrAlertAcknowledged (someone did
// already; the first acknowledgement stays), ErrUnavailable.
func (s *Admin) AcknowledgeAlert(ctx context.Context, id int64, by domain.OperatorName, note string) (domain.AlertRecord, error) {
	note, err := domain.ParseAlertNote(strings.TrimSpace(note))
	if err != nil {
		return domain.AlertRecord{}, err
	}
	if id < 1 {
		return domain.AlertRecord{}, fmt.Errorf("acknowledge alert %d: %w", id, domain.ErrAlertNotFound)
	}
	if err := s.ledger.Alerts().Acknowledge(ctx, id, by, note, s.clock.Now().UTC().Truncate(time.Microsecond)); err != nil {
		return domain.AlertRecord{}, err
	}
	return s.ledger.Alerts().Get(ctx, id)
}
