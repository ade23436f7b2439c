package memory

import (
	"context"
	"sort"
	"time"

	"cardshop/domain"
)

type notificationLog struct{ s *store }

// refusedKey names a refused aggregate: its provider, sender address and window start
// (in Unix nanoseconds, so that equal instants in other locations are one key).
type refusedKey struct {
	provider domain.Provider
	remote   string
	window   int64
}

// Record stores a zero rec.At as the time of the call. Ids are not reused after a rollback.
func (l notificationLog) Record(_ context.Context, rec domain.NotificationRecord) error {
	if rec.At.IsZero() {
		rec.At = time.Now()
	}
	if rec.Count < 1 {
		rec.Count = 1
	}
	rec.RefusedWindow = time.Time{}
	release, err := l.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	l.appendNotice(rec)
	return nil
}

// appendNotice stores rec with the next id; the caller holds the ledger.
func (l notificationLog) appendNotice(rec domain.NotificationRecord) {
	d := l.s.data
	d.lastNotice++
	rec.ID = d.lastNotice
	d.notices = append(d.notices, rec)
	l.s.onUndo(func() { d.notices = d.notices[:len(d.notices)-1] })
	if rec.OrderNo != "" {
		put(l.s, d.noticesOf, rec.OrderNo, append(d.noticesOf[rec.OrderNo], rec.ID))
	}
	if !rec.RefusedWindow.IsZero() {
		put(l.s, d.refusedAggs, refusedKey{rec.Provider, rec.Remote, rec.RefusedWindow.UnixNano()}, rec.ID)
	}
}

// RecordRefused stores a zero rec.At as the time of the call.
func (l notificationLog) RecordRefused(_ context.Context, rec domain.NotificationRecord) error {
	if rec.RefusedWindow.IsZero() || rec.Count < 1 || rec.Verified {
		return domain.Invalid("notification", "a refused aggregate needs a window, a count of at least 1 and no verification")
	}
	if rec.At.IsZero() {
		rec.At = time.Now()
	}
	release, err := l.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	d := l.s.data
	id, ok := d.refusedAggs[refusedKey{rec.Provider, rec.Remote, rec.RefusedWindow.UnixNano()}]
	if !ok {
		l.appendNotice(rec)
		return nil
	}
	i := d.find(id)
	old := d.notices[i]
	cur := old
	cur.Count += rec.Count
	cur.Method, cur.Result, cur.BodyBytes = rec.Method, rec.Result, rec.BodyBytes
	if rec.At.After(cur.At) {
		cur.At = rec.At
	}
	d.notices[i] = cur
	l.s.onUndo(func() {
		if j := d.find(id); j >= 0 {
			d.notices[j] = old
		}
	})
	return nil
}

// find returns the index of the record with that id in notices, or -1.
func (d *ledgerData) find(id int64) int {
	i := sort.Search(len(d.notices), func(i int) bool { return d.notices[i].ID >= id })
	if i < len(d.notices) && d.notices[i].ID == id {
		return i
	}
	return -1
}

// Recent walks the order's index of records, or the whole log, from the newest.
func (l notificationLog) Recent(_ context.Context, q domain.NotificationQuery) ([]domain.NotificationRecord, error) {
	if q.Limit < 1 {
		return nil, nil
	}
	release, err := l.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	d := l.s.data
	var out []domain.NotificationRecord
	take := func(r domain.NotificationRecord) bool {
		if q.Verified == nil || r.Verified == *q.Verified {
			out = append(out, r)
		}
		return len(out) < q.Limit
	}
	if q.OrderNo == "" {
		for i := len(d.notices) - 1; i >= 0 && take(d.notices[i]); i-- {
		}
		return out, nil
	}
	of := d.noticesOf[q.OrderNo]
	for i := len(of) - 1; i >= 0; i-- {
		if j := d.find(of[i]); j >= 0 && !take(d.notices[j]) {
			break
		}
	}
	return out, nil
}

// Prune replaces the log by a copy without the records it deletes and rebuilds its indexes;
// a rollback restores the old ones.
func (l notificationLog) Prune(_ context.Context, verifiedBefore, refusedBefore time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, nil
	}
	release, err := l.s.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	d := l.s.data
	kept := make([]domain.NotificationRecord, 0, len(d.notices))
	deleted := 0
	for _, r := range d.notices {
		before := refusedBefore
		if r.Verified {
			before = verifiedBefore
		}
		if deleted < limit && r.At.Before(before) {
			deleted++
			continue
		}
		kept = append(kept, r)
	}
	if deleted == 0 {
		return 0, nil
	}
	oldNotices, oldOf, oldAggs := d.notices, d.noticesOf, d.refusedAggs
	d.notices = kept
	d.noticesOf = make(map[domain.OrderNo][]int64)
	d.refusedAggs = make(map[refusedKey]int64)
	for _, r := range kept {
		if r.OrderNo != "" {
			d.noticesOf[r.OrderNo] = append(d.noticesOf[r.OrderNo], r.ID)
		}
		if !r.RefusedWindow.IsZero() {
			d.refusedAggs[refusedKey{r.Provider, r.Remote, r.RefusedWindow.UnixNano()}] = r.ID
		}
	}
	l.s.onUndo(func() { d.notices, d.noticesOf, d.refusedAggs = oldNotices, oldOf, oldAggs })
	return deleted, nil
}
