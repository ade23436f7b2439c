package memory

import (
	"context"
	"fmt"
	"sort"
	"time"

	"cardshop/domain"
)

type alertLog struct{ s *store }

// alertKey is the condition an open alert stands for: raises of it fold into that alert.
type alertKey struct {
	kind    string
	product domain.ProductID
	order   domain.OrderNo
}

func keyOf(a domain.Alert) alertKey { return alertKey{a.Kind, a.Product, a.OrderNo} }

// maxAlertPage bounds AlertFilter.Limit, as the port says.
const maxAlertPage = 1000

// Raise folds a into the open alert of its condition (found through openAlerts), or appends a
// new one. Times are kept in UTC, as the database returns them; ids are not reused after a
// rollback.
func (l alertLog) Raise(_ context.Context, a domain.Alert, at time.Time) (int64, error) {
	at = at.UTC()
	release, err := l.s.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	d := l.s.data
	if i, ok := d.openAlerts[keyOf(a)]; ok {
		old := d.alerts[i]
		r := old
		r.Count++
		r.LastAt, r.Message = at, a.Message
		d.alerts[i] = r
		l.s.onUndo(func() { d.alerts[i] = old })
		return r.ID, nil
	}
	d.lastAlert++
	d.alerts = append(d.alerts, domain.AlertRecord{ID: d.lastAlert, Alert: a, RaisedAt: at, LastAt: at, Count: 1})
	put(l.s, d.openAlerts, keyOf(a), len(d.alerts)-1)
	l.s.onUndo(func() { d.alerts = d.alerts[:len(d.alerts)-1] })
	return d.lastAlert, nil
}

// List walks the log from the newest alert below f.BeforeID (found by binary search: ids
// increase along the slice) and keeps those f selects.
func (l alertLog) List(_ context.Context, f domain.AlertFilter) ([]domain.AlertRecord, error) {
	if f.Limit < 1 || f.Limit > maxAlertPage {
		return nil, domain.Invalid("limit", "must be 1 to 1000")
	}
	status, err := domain.ParseAlertStatus(string(f.Status))
	if err != nil {
		return nil, err
	}
	release, err := l.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	log := l.s.data.alerts
	end := len(log)
	if f.BeforeID != 0 {
		end = sort.Search(len(log), func(i int) bool { return log[i].ID >= f.BeforeID })
	}
	var out []domain.AlertRecord
	for i := end - 1; i >= 0 && len(out) < f.Limit; i-- {
		r := log[i]
		if (status == domain.AlertsAll || (status == domain.AlertsOpen) == r.Open()) &&
			(f.Kind == "" || r.Kind == f.Kind) && (f.Product == 0 || r.Product == f.Product) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l alertLog) Get(_ context.Context, id int64) (domain.AlertRecord, error) {
	release, err := l.s.acquire()
	if err != nil {
		return domain.AlertRecord{}, err
	}
	defer release()
	i, ok := l.index(id)
	if !ok {
		return domain.AlertRecord{}, fmt.Errorf("alert %d: %w", id, domain.ErrAlertNotFound)
	}
	return l.s.data.alerts[i], nil
}

// index finds alert id in the log (ids increase along it).
func (l alertLog) index(id int64) (int, bool) {
	log := l.s.data.alerts
	i := sort.Search(len(log), func(i int) bool { return log[i].ID >= id })
	return i, i < len(log) && log[i].ID == id
}

// Acknowledge closes the alert and frees its condition, so that the next raise opens a new
// alert.
func (l alertLog) Acknowledge(_ context.Context, id int64, by domain.OperatorName, note string, at time.Time) error {
	release, err := l.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	d := l.s.data
	i, ok := l.index(id)
	if !ok {
		return fmt.Errorf("acknowledge alert %d: %w", id, domain.ErrAlertNotFound)
	}
	old := d.alerts[i]
	if !old.Open() {
		return fmt.Errorf("acknowledge alert %d: %w", id, domain.ErrAlertAcknowledged)
	}
	r := old
	r.AckedBy, r.AckedAt, r.AckNote = by, at.UTC(), note
	d.alerts[i] = r
	l.s.onUndo(func() { d.alerts[i] = old })
	del(l.s, d.openAlerts, keyOf(r.Alert))
	return nil
}

func (l alertLog) OpenCounts(_ context.Context) (map[string]int64, error) {
	release, err := l.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := map[string]int64{}
	for k := range l.s.data.openAlerts {
		out[k.kind]++
	}
	return out, nil
}
