package porttest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/domain"
)

// runAlerts checks the alert log: a raise read back whole (times at microsecond precision, in
// UTC), repeated raises of an open condition folding into one alert (sequentially and at
// once), acknowledgement (its fields, a second one refused and the first kept, unknown ids,
// exactly one winner of concurrent ones, a new alert for the next raise), the filters and
// paging of List, OpenCounts, and the rollback of a failed transaction. Every case uses kinds
// of its own: a shared database keeps the alerts of earlier runs.
func runAlerts(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("a raise reads back whole and open; an unknown id is ErrAlertNotFound", func(t *testing.T) {
		l := newLedger(t)
		a := domain.Alert{Kind: newAlertKind(), Product: 12, OrderNo: newOrderNo(), Message: "paid but no codes"}
		at := usec()
		id := raiseAlert(t, l, a, at)
		want := domain.AlertRecord{ID: id, Alert: a, RaisedAt: at.UTC(), LastAt: at.UTC(), Count: 1}
		wantAlert(t, l, want)
		if !want.Open() {
			t.Fatal("a new alert is not open")
		}
		if _, err := l.Alerts().Get(t.Context(), id+1_000_000_000); !errors.Is(err, domain.ErrAlertNotFound) {
			t.Fatalf("Get of an unknown id: err = %v, want ErrAlertNotFound", err)
		}
	})

	t.Run("raises of an open condition fold into one alert; another condition is another alert", func(t *testing.T) {
		l := newLedger(t)
		kind, order := newAlertKind(), newOrderNo()
		at := usec()
		id := raiseAlert(t, l, domain.Alert{Kind: kind, Product: 3, OrderNo: order, Message: "first"}, at)
		again := raiseAlert(t, l, domain.Alert{Kind: kind, Product: 3, OrderNo: order, Message: "third"}, at.Add(2*time.Second))
		if again != id {
			t.Fatalf("a second raise of an open condition made alert %d, want it folded into %d", again, id)
		}
		raiseAlert(t, l, domain.Alert{Kind: kind, Product: 3, OrderNo: order, Message: "second"}, at.Add(time.Second))
		wantAlert(t, l, domain.AlertRecord{ID: id, Alert: domain.Alert{Kind: kind, Product: 3, OrderNo: order, Message: "second"},
			RaisedAt: at.UTC(), LastAt: at.Add(time.Second).UTC(), Count: 3})
		for _, other := range []domain.Alert{
			{Kind: kind, Product: 4, OrderNo: order}, {Kind: kind, Product: 3, OrderNo: newOrderNo()},
			{Kind: kind, Product: 3}, {Kind: newAlertKind(), Product: 3, OrderNo: order},
		} {
			if got := raiseAlert(t, l, other, at); got == id {
				t.Fatalf("a raise of %+v folded into alert %d of another condition", other, id)
			}
		}
	})

	t.Run("acknowledge once; twice is ErrAlertAcknowledged and the first stays; the next raise opens a new alert", func(t *testing.T) {
		l := newLedger(t)
		a := domain.Alert{Kind: newAlertKind(), Product: 7, Message: "gate rebuilt"}
		at := usec()
		id := raiseAlert(t, l, a, at)
		ackAt := at.Add(time.Minute)
		if err := l.Alerts().Acknowledge(t.Context(), id, "pt-ann", "looked: fine", ackAt); err != nil {
			t.Fatal(err)
		}
		want := domain.AlertRecord{ID: id, Alert: a, RaisedAt: at.UTC(), LastAt: at.UTC(), Count: 1,
			AckedBy: "pt-ann", AckedAt: ackAt.UTC(), AckNote: "looked: fine"}
		wantAlert(t, l, want)
		if err := l.Alerts().Acknowledge(t.Context(), id, "pt-bob", "me too", ackAt.Add(time.Hour)); !errors.Is(err, domain.ErrAlertAcknowledged) {
			t.Fatalf("second Acknowledge: err = %v, want ErrAlertAcknowledged", err)
		}
		wantAlert(t, l, want)
		if err := l.Alerts().Acknowledge(t.Context(), id+1_000_000_000, "pt-ann", "", ackAt); !errors.Is(err, domain.ErrAlertNotFound) {
			t.Fatalf("Acknowledge of an unknown id: err = %v, want ErrAlertNotFound", err)
		}
		next := raiseAlert(t, l, a, ackAt.Add(time.Second))
		if next == id {
			t.Fatalf("a raise after the acknowledgement folded into the acknowledged alert %d", id)
		}
		wantAlert(t, l, want)
	})

	t.Run("of concurrent acknowledgements exactly one wins", func(t *testing.T) {
		l := newLedger(t)
		id := raiseAlert(t, l, domain.Alert{Kind: newAlertKind(), Message: "race"}, usec())
		const n = 8
		var won, lost atomic.Int32
		parallel(n, func(i int) {
			err := l.Alerts().Acknowledge(t.Context(), id, domain.OperatorName(fmt.Sprintf("pt-op%d", i)), "", usec())
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, domain.ErrAlertAcknowledged):
				lost.Add(1)
			default:
				t.Errorf("Acknowledge %d: %v", i, err)
			}
		})
		if won.Load() != 1 || lost.Load() != n-1 {
			t.Fatalf("%d acknowledgements won and %d were refused, want 1 and %d", won.Load(), lost.Load(), n-1)
		}
	})

	t.Run("concurrent raises of one condition fold into one alert", func(t *testing.T) {
		l := newLedger(t)
		a := domain.Alert{Kind: newAlertKind(), Product: 9, OrderNo: newOrderNo(), Message: "storm"}
		const n = 8
		ids := make([]int64, n)
		parallel(n, func(i int) {
			id, err := l.Alerts().Raise(t.Context(), a, usec())
			if err != nil {
				t.Errorf("Raise %d: %v", i, err)
			}
			ids[i] = id
		})
		for _, id := range ids[1:] {
			if id != ids[0] {
				t.Fatalf("concurrent raises made alerts %v, want one", ids)
			}
		}
		got, err := l.Alerts().Get(t.Context(), ids[0])
		if err != nil || got.Count != n {
			t.Fatalf("the alert counts %d raises (%v), want %d", got.Count, err, n)
		}
	})

	t.Run("list by status, kind and product, newest first, paged; bad filters are refused", func(t *testing.T) {
		l := newLedger(t)
		k1, k2 := newAlertKind(), newAlertKind()
		p := domain.ProductID(rand.Int64N(1<<40) + 1)
		at := usec()
		ids := []int64{
			raiseAlert(t, l, domain.Alert{Kind: k1, Product: p}, at),
			raiseAlert(t, l, domain.Alert{Kind: k2, Product: p}, at),
			raiseAlert(t, l, domain.Alert{Kind: k1, Product: p, OrderNo: newOrderNo()}, at),
			raiseAlert(t, l, domain.Alert{Kind: k1}, at),
		}
		if err := l.Alerts().Acknowledge(t.Context(), ids[2], "pt-ann", "", at); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			f    domain.AlertFilter
			want []int64
		}{
			{"kind, open by default", domain.AlertFilter{Kind: k1}, []int64{ids[3], ids[0]}},
			{"kind, open", domain.AlertFilter{Kind: k1, Status: domain.AlertsOpen}, []int64{ids[3], ids[0]}},
			{"kind, acknowledged", domain.AlertFilter{Kind: k1, Status: domain.AlertsAcknowledged}, []int64{ids[2]}},
			{"kind, all", domain.AlertFilter{Kind: k1, Status: domain.AlertsAll}, []int64{ids[3], ids[2], ids[0]}},
			{"product, all", domain.AlertFilter{Product: p, Status: domain.AlertsAll}, []int64{ids[2], ids[1], ids[0]}},
			{"product and kind", domain.AlertFilter{Product: p, Kind: k2}, []int64{ids[1]}},
			{"a page", domain.AlertFilter{Kind: k1, Status: domain.AlertsAll, Limit: 2}, []int64{ids[3], ids[2]}},
			{"the next page", domain.AlertFilter{Kind: k1, Status: domain.AlertsAll, Limit: 2, BeforeID: ids[2]}, []int64{ids[0]}},
		} {
			if c.f.Limit == 0 {
				c.f.Limit = 10
			}
			got, err := l.Alerts().List(t.Context(), c.f)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var gotIDs []int64
			for _, r := range got {
				gotIDs = append(gotIDs, r.ID)
			}
			if !reflect.DeepEqual(gotIDs, c.want) {
				t.Errorf("%s: List gives %v, want %v", c.name, gotIDs, c.want)
			}
		}
		for _, f := range []domain.AlertFilter{{Limit: 0}, {Limit: 1001}, {Limit: 5, Status: "closed"}} {
			var ve *domain.ValidationError
			if _, err := l.Alerts().List(t.Context(), f); !errors.As(err, &ve) {
				t.Errorf("List(%+v): err = %v, want a ValidationError", f, err)
			}
		}
	})

	t.Run("open counts by kind", func(t *testing.T) {
		l := newLedger(t)
		k1, k2 := newAlertKind(), newAlertKind()
		at := usec()
		a := raiseAlert(t, l, domain.Alert{Kind: k1, Product: 1}, at)
		raiseAlert(t, l, domain.Alert{Kind: k1, Product: 1}, at) // folded: still one alert
		raiseAlert(t, l, domain.Alert{Kind: k1, Product: 2}, at)
		raiseAlert(t, l, domain.Alert{Kind: k2}, at)
		wantOpenCounts(t, l, k1, 2, k2, 1)
		if err := l.Alerts().Acknowledge(t.Context(), a, "pt-ann", "", at); err != nil {
			t.Fatal(err)
		}
		wantOpenCounts(t, l, k1, 1, k2, 1)
	})

	t.Run("a failed transaction leaves no raise and no acknowledgement", func(t *testing.T) {
		l := newLedger(t)
		a := domain.Alert{Kind: newAlertKind(), Product: 5, Message: "kept"}
		at := usec()
		id := raiseAlert(t, l, a, at)
		kept := domain.AlertRecord{ID: id, Alert: a, RaisedAt: at.UTC(), LastAt: at.UTC(), Count: 1}
		other := domain.Alert{Kind: newAlertKind(), Message: "undone"}
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if _, err := tx.Alerts().Raise(t.Context(), a, at.Add(time.Second)); err != nil {
				return err
			}
			if _, err := tx.Alerts().Raise(t.Context(), other, at); err != nil {
				return err
			}
			if err := tx.Alerts().Acknowledge(t.Context(), id, "pt-ann", "", at); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Atomically: err = %v, want the rollback", err)
		}
		wantAlert(t, l, kept)
		got, err := l.Alerts().List(t.Context(), domain.AlertFilter{Kind: other.Kind, Status: domain.AlertsAll, Limit: 10})
		if err != nil || len(got) != 0 {
			t.Fatalf("the rolled-back raise is listed: %+v (%v)", got, err)
		}
		// The condition is still open after the rollback: the next raise folds into it.
		if again := raiseAlert(t, l, a, at.Add(time.Minute)); again != id {
			t.Fatalf("a raise after the rollback made alert %d, want it folded into %d", again, id)
		}
	})
}

// newAlertKind is an alert kind no other case or run uses.
func newAlertKind() string { return fmt.Sprintf("pt_%016x", rand.Uint64()) }

func raiseAlert(t *testing.T, l domain.Store, a domain.Alert, at time.Time) int64 {
	t.Helper()
	id, err := l.Alerts().Raise(t.Context(), a, at)
	if err != nil {
		t.Fatalf("Raise %+v: %v", a, err)
	}
	return id
}

// wantAlert checks that Get, and List of its kind, read want back exactly, times in UTC.
func wantAlert(t *testing.T, l domain.Store, want domain.AlertRecord) {
	t.Helper()
	got, err := l.Alerts().Get(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("Get alert %d: %v", want.ID, err)
	}
	if !sameAlert(got, want) {
		t.Fatalf("Get alert %d = %+v, want %+v", want.ID, got, want)
	}
	list, err := l.Alerts().List(t.Context(), domain.AlertFilter{Kind: want.Kind, Status: domain.AlertsAll, BeforeID: want.ID + 1, Limit: 1})
	if err != nil || len(list) != 1 || !sameAlert(list[0], want) {
		t.Fatalf("List reads alert %d as %+v (%v), want %+v", want.ID, list, err, want)
	}
}

// sameAlert compares two alerts, times by instant and required in UTC.
func sameAlert(got, want domain.AlertRecord) bool {
	for _, at := range []time.Time{got.RaisedAt, got.LastAt, got.AckedAt} {
		if !at.IsZero() && at.Location() != time.UTC {
			return false
		}
	}
	return got.ID == want.ID && got.Alert == want.Alert && got.RaisedAt.Equal(want.RaisedAt) && got.LastAt.Equal(want.LastAt) &&
		got.Count == want.Count && got.AckedBy == want.AckedBy && got.AckedAt.Equal(want.AckedAt) && got.AckNote == want.AckNote
}

// wantOpenCounts checks OpenCounts for the given kind, count pairs.
func wantOpenCounts(t *testing.T, l domain.Store, kindCounts ...any) {
	t.Helper()
	got, err := l.Alerts().OpenCounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(kindCounts); i += 2 {
		k, n := kindCounts[i].(string), int64(kindCounts[i+1].(int))
		if got[k] != n {
			t.Errorf("OpenCounts[%s] = %d, want %d", k, got[k], n)
		}
	}
}
