package application

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cardshop/domain"
)

// The notification log keeps every verified notification (the operators' evidence of what a
// provider said) as a record of its own. A notification refused before verification (a bad
// signature, an unparsable body) proves nothing and anyone can send one, so those are
// aggregated on this instance before they reach the ledger: per provider and sender address,
// one record per window (Config.RefusedNotificationWindow) counting them. The first refusal of
// a window writes its record at once; the next ones only count in memory, and their count is
// added to the record when the window ends (by the next refusal) or at the next
// PruneNotifications, whichever comes first. At most Config.RefusedNotificationAddresses
// addresses are tracked one by one per window; the refusals from any other address count
// towards one record per provider, with domain.RefusedElsewhere as its address. So a flood of
// forged notifications costs at most (addresses + providers) writes per window however many
// arrive, and this instance's memory for them is bounded the same way. A count still in
// memory when the instance dies is lost (the records it adds to are not).

// Refusal reasons: the values of RefusedNotificationKey.Reason.
const (
	RefusedBadSignature = "bad_signature" // the signature (or freshness) did not check out
	RefusedInvalid      = "invalid"       // the body could not be read as a notification
	RefusedUnavailable  = "unavailable"   // the verification needed the provider, which could not be reached
	RefusedOther        = "other"
)

// RefusedReasons lists every refusal reason.
var RefusedReasons = []string{RefusedBadSignature, RefusedInvalid, RefusedUnavailable, RefusedOther}

// RefusedNotificationKey names a count of RefusedNotifications.
type RefusedNotificationKey struct {
	Provider domain.Provider
	Reason   string // one of RefusedReasons
}

// refusedLogEvery is how often at most this instance logs refused notifications: a flood
// must not flood the log either. Each line says how many were refused since the last one.
const refusedLogEvery = 10 * time.Second

// notificationPruneBatch is how many records one Prune of PruneNotifications deletes at most,
// and notificationPrunePasses how many Prunes one PruneNotifications makes at most: a backlog
// of old records is worked off over several runs instead of holding the ledger in one.
const (
	notificationPruneBatch  = 1000
	notificationPrunePasses = 50
)

// refusedNotices is this instance's aggregation of refused notifications. It is safe for
// concurrent use.
type refusedNotices struct {
	mu     sync.Mutex
	start  time.Time // the current window's start
	aggs   map[refusedAddr]*refusedAgg
	counts map[RefusedNotificationKey]int64 // since start, for /metrics
	logged time.Time                        // the last log line
	quiet  int64                            // refusals since the last log line
}

// refusedAddr is one sender of a provider's refused notifications; remote is
// domain.RefusedElsewhere for every sender beyond the window's tracked addresses.
type refusedAddr struct {
	provider domain.Provider
	remote   string
}

// refusedAgg is one address's refusals in the current window: its latest notification and
// how many after the first (written at once) the ledger has not been told of yet.
type refusedAgg struct {
	last    domain.NotificationRecord
	pending int64
}

// refusedStep is what one refusal asks of the caller, outside the lock.
type refusedStep struct {
	first *domain.NotificationRecord  // the window's first refusal from its address: record it now
	flush []domain.NotificationRecord // the ended window's counts still in memory
	log   int64                       // > 0: log a line, which stands for that many refusals
}

// add counts one refusal of rec (its At, Provider, Remote, Method, Result and BodyBytes set).
func (r *refusedNotices) add(rec domain.NotificationRecord, reason string, window time.Duration, addresses int) refusedStep {
	r.mu.Lock()
	defer r.mu.Unlock()
	var step refusedStep
	// Windows only move forward: a refusal timed before the current window (it waited for the
	// lock, or the clock stepped back) counts in the current one.
	if start := rec.At.Truncate(window); start.After(r.start) || r.aggs == nil {
		step.flush = r.takePending()
		if start.After(r.start) {
			r.start = start
		}
		r.aggs = make(map[refusedAddr]*refusedAgg)
	}
	if r.counts == nil {
		r.counts = make(map[RefusedNotificationKey]int64)
	}
	r.counts[RefusedNotificationKey{rec.Provider, reason}]++
	addr := refusedAddr{rec.Provider, rec.Remote}
	a, ok := r.aggs[addr]
	if !ok && len(r.aggs) >= addresses {
		addr.remote = domain.RefusedElsewhere
		a, ok = r.aggs[addr]
	}
	rec.Remote, rec.RefusedWindow, rec.Count = addr.remote, r.start, 1
	if !ok {
		r.aggs[addr] = &refusedAgg{last: rec}
		step.first = &rec
	} else {
		a.last, a.pending = rec, a.pending+1
	}
	r.quiet++
	if rec.At.Sub(r.logged) >= refusedLogEvery || rec.At.Before(r.logged) {
		step.log, r.quiet, r.logged = r.quiet, 0, rec.At
	}
	return step
}

// takePending returns the counts not yet in the ledger as records to add, and clears them;
// the caller holds mu.
func (r *refusedNotices) takePending() []domain.NotificationRecord {
	var out []domain.NotificationRecord
	for _, a := range r.aggs {
		if a.pending > 0 {
			rec := a.last
			rec.Count, a.pending = a.pending, 0
			out = append(out, rec)
		}
	}
	return out
}

// due returns every count not yet in the ledger, and forgets the window's addresses when it
// ended before now.
func (r *refusedNotices) due(now time.Time, window time.Duration) []domain.NotificationRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.takePending()
	if now.Truncate(window).After(r.start) {
		r.aggs = nil
	}
	return out
}

// tracked returns how many addresses the current window tracks (for tests of the bound).
func (r *refusedNotices) tracked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.aggs)
}

// refusedReason classifies a verification error.
func refusedReason(err error) string {
	switch {
	case errors.Is(err, domain.ErrBadSignature):
		return RefusedBadSignature
	case errors.Is(err, domain.ErrInvalidInput):
		return RefusedInvalid
	case errors.Is(err, domain.ErrUnavailable):
		return RefusedUnavailable
	default:
		return RefusedOther
	}
}

// recordRefused counts a notification refused before verification: see the notification log
// rule at the top of this file.
func (s *Payments) recordRefused(ctx context.Context, rec domain.NotificationRecord, err error) {
	reason := refusedReason(err)
	step := s.refused.add(rec, reason, s.cfg.RefusedNotificationWindow, s.cfg.RefusedNotificationAddresses)
	if step.log > 0 {
		s.log.WarnContext(ctx, "payment notifications refused", "provider", rec.Provider, "remote", rec.Remote,
			"reason", refusal(err), "err", err, "refused", step.log, "since", refusedLogEvery)
	}
	if step.first != nil {
		s.addRefused(ctx, *step.first)
	}
	if len(step.flush) > 0 {
		// Once per window: the request that opened it does not wait for the ended one's writes.
		s.background.Add(1)
		go func() {
			defer s.background.Done()
			for _, r := range step.flush {
				s.addRefused(context.WithoutCancel(ctx), r)
			}
		}()
	}
}

func (s *Payments) addRefused(ctx context.Context, rec domain.NotificationRecord) {
	ctx, cancel := detached(ctx)
	defer cancel()
	if err := s.ledger.Notifications().RecordRefused(ctx, rec); err != nil {
		s.log.ErrorContext(ctx, "refused payment notifications not logged", "provider", rec.Provider, "remote", rec.Remote,
			"count", rec.Count, "err", err)
	}
}

// RefusedNotifications returns how many notifications this instance refused before
// verification since it started, by provider and reason; every enabled provider and reason is
// present (from 0).
func (s *Payments) RefusedNotifications() map[RefusedNotificationKey]int64 {
	all := s.gateways.Load().all
	out := make(map[RefusedNotificationKey]int64, len(all)*len(RefusedReasons))
	for p := range all {
		for _, r := range RefusedReasons {
			out[RefusedNotificationKey{p, r}] = 0
		}
	}
	s.refused.mu.Lock()
	defer s.refused.mu.Unlock()
	for k, n := range s.refused.counts {
		out[k] = n
	}
	return out
}

// PruneNotifications keeps the notification log bounded: it adds the refused counts this
// instance still holds in memory to their records, then deletes verified notifications older
// than Config.NotificationRetention and refused aggregates older than
// Config.RefusedNotificationRetention, in batches of notificationPruneBatch, at most
// notificationPrunePasses batches per run. It returns how many records it deleted. Every
// instance may run it at once.
func (s *Payments) PruneNotifications(ctx context.Context) (int, error) {
	now := s.clock.Now()
	for _, r := range s.refused.due(now, s.cfg.RefusedNotificationWindow) {
		s.addRefused(ctx, r)
	}
	verifiedBefore, refusedBefore := now.Add(-s.cfg.NotificationRetention), now.Add(-s.cfg.RefusedNotificationRetention)
	deleted := 0
	for range notificationPrunePasses {
		n, err := s.ledger.Notifications().Prune(ctx, verifiedBefore, refusedBefore, notificationPruneBatch)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("prune the notification log: %w", err)
		}
		if n < notificationPruneBatch {
			break
		}
	}
	return deleted, nil
}
