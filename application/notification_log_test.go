package application_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"cardshop/application"
	"cardshop/domain"
)

// forged is a notification of the scripted provider whose signature does not check out.
func forged(o domain.Order) domain.InboundRequest {
	in := notice(o, "paid", o.Amount(), "CNY")
	in.Header = map[string][]string{"X-Test-Sig": {"forged"}}
	return in
}

// logged returns every record of the ledger's notification log, newest first.
func logged(t *testing.T, f *fixture) []domain.NotificationRecord {
	t.Helper()
	f.shop.WaitBackground()
	recs, err := f.ledger.Notifications().Recent(f.ctx, domain.NotificationQuery{Limit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// refusedTotal sums the counts of the log's refused aggregates.
func refusedTotal(recs []domain.NotificationRecord) (rows int, total int64) {
	for _, r := range recs {
		if !r.Verified {
			rows++
			total += r.Count
		}
	}
	return rows, total
}

// payAfterForgeries sends a genuine success for o and checks that the operators' list shows it.
func payAfterForgeries(t *testing.T, f *fixture, o domain.Order) {
	t.Helper()
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(o, "paid", o.Amount(), "CNY"), "198.51.100.200"); err != nil {
		t.Fatalf("the genuine notification: %v", err)
	}
	for _, q := range []domain.NotificationQuery{{Limit: 100}, {Limit: 1}, {OrderNo: o.No(), Limit: 10}} {
		recs, err := f.shop.Payments.Notifications(f.ctx, q)
		if err != nil || len(recs) == 0 || !recs[0].Verified || recs[0].Result != "paid" || recs[0].OrderNo != o.No() {
			t.Fatalf("Notifications(%+v) = %+v, %v; want the genuine one first", q, recs, err)
		}
	}
}

// Ten thousand forged notifications from one address are one record of the log that counts
// them, not ten thousand rows; the genuine notification that follows is at the top of the
// operators' list.
func TestForgedNotificationsFromOneAddressAreOneRecord(t *testing.T) {
	acme := newScripted("acme")
	f := newFixture(t, withGateways(acme))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	mustCreatePayment(t, f, o, "acme")

	const sent = 10_000
	for i := range sent {
		if i == sent/2 {
			f.clock.Advance(time.Second) // still the same window
		}
		err := f.shop.Payments.HandleNotification(f.ctx, "acme", forged(o), "203.0.113.5")
		is(t, "a forged notification", err, domain.ErrBadSignature)
		if err == nil {
			t.Fatal("a forged notification was accepted, want the provider's refusal")
		}
	}
	if _, err := f.shop.Payments.PruneNotifications(f.ctx); err != nil { // adds the counts held in memory
		t.Fatal(err)
	}
	recs := logged(t, f)
	if len(recs) != 1 {
		t.Fatalf("the log holds %d records after %d forged notifications from one address, want 1", len(recs), sent)
	}
	if r := recs[0]; r.Verified || r.Count != sent || r.Remote != "203.0.113.5" || r.Provider != "acme" ||
		r.Result != "refused: invalid or stale signature" || !r.At.Equal(t0.Add(time.Second)) || !r.RefusedWindow.Equal(t0.Truncate(time.Minute)) {
		t.Fatalf("the aggregate reads %+v, want %d bad signatures from 203.0.113.5, the last at %v", r, sent, t0.Add(time.Second))
	}
	if got := f.shop.Payments.RefusedNotifications()[application.RefusedNotificationKey{Provider: "acme", Reason: application.RefusedBadSignature}]; got != sent {
		t.Fatalf("RefusedNotifications counts %d bad signatures, want %d", got, sent)
	}
	if got := f.order(t, o.No()); got.Status() != domain.StatusPending {
		t.Fatalf("order %s after forged notifications, want PENDING", got.Status())
	}
	payAfterForgeries(t, f, o)
}

// Forged notifications from ten thousand addresses, over three windows, leave at most
// RefusedNotificationAddresses + 1 records per window (the addresses beyond the bound share
// one), counting every one of them; a genuine notification sent before them is still listed
// by the verified filter, and one sent after them first.
func TestForgedNotificationsFromManyAddressesAreBounded(t *testing.T) {
	acme := newScripted("acme")
	f := newFixture(t, withGateways(acme))
	p := f.createProduct(t, 2, 5)
	before, after := f.mustPlace(t, "alice", p.ID(), 1), f.mustPlace(t, "bob", p.ID(), 1)
	mustCreatePayment(t, f, before, "acme")
	mustCreatePayment(t, f, after, "acme")
	if err := f.shop.Payments.HandleNotification(f.ctx, "acme", notice(before, "paid", before.Amount(), "CNY"), "198.51.100.200"); err != nil {
		t.Fatal(err)
	}

	const sent, windows = 10_000, 3
	bound := application.DefaultRefusedNotificationAddresses + 1
	for w := range windows {
		for i := range sent / windows {
			addr := fmt.Sprintf("10.%d.%d.%d", w, i/256, i%256)
			if err := f.shop.Payments.HandleNotification(f.ctx, "acme", forged(before), addr); err == nil {
				t.Fatal("a forged notification was accepted")
			}
		}
		f.clock.Advance(time.Minute)
	}
	rest := sent - sent/windows*windows
	for i := range rest { // a malformed body from a tracked address: another reason, the same record
		in := domain.InboundRequest{Method: "POST", Header: map[string][]string{"X-Test-Sig": {"ok"}}, Body: []byte("{")}
		if err := f.shop.Payments.HandleNotification(f.ctx, "acme", in, fmt.Sprintf("10.9.0.%d", i)); err == nil {
			t.Fatal("an unparsable notification was accepted")
		}
	}
	if _, err := f.shop.Payments.PruneNotifications(f.ctx); err != nil {
		t.Fatal(err)
	}
	recs := logged(t, f)
	rows, total := refusedTotal(recs)
	if rows > (windows+1)*bound || total != sent {
		t.Fatalf("%d refused records counting %d, want at most %d (%d per window) counting %d", rows, total, (windows+1)*bound, bound, sent)
	}
	perWindow := map[time.Time]int{}
	elsewhere := int64(0)
	for _, r := range recs {
		if !r.Verified {
			perWindow[r.RefusedWindow]++
		}
		if r.Remote == domain.RefusedElsewhere {
			elsewhere += r.Count
		}
	}
	for w, n := range perWindow {
		if n > bound {
			t.Fatalf("window %v has %d records, want at most %d", w, n, bound)
		}
	}
	if want := int64(windows * (sent/windows - application.DefaultRefusedNotificationAddresses)); elsewhere != want {
		t.Fatalf("the records of the addresses beyond the bound count %d, want %d", elsewhere, want)
	}
	counts := f.shop.Payments.RefusedNotifications()
	if counts[application.RefusedNotificationKey{Provider: "acme", Reason: application.RefusedBadSignature}] != sent-int64(rest) ||
		counts[application.RefusedNotificationKey{Provider: "acme", Reason: application.RefusedInvalid}] != int64(rest) {
		t.Fatalf("RefusedNotifications = %v, want %d bad signatures and %d invalid", counts, sent-rest, rest)
	}

	yes := true
	verified, err := f.shop.Payments.Notifications(f.ctx, domain.NotificationQuery{Verified: &yes, Limit: 10})
	if err != nil || len(verified) != 1 || verified[0].OrderNo != before.No() {
		t.Fatalf("verified notifications = %+v, %v; want the genuine one sent before the flood", verified, err)
	}
	payAfterForgeries(t, f, after)
}

// Many goroutines forging at once, from more addresses than a window tracks: every refusal is
// counted once, in the log and in the metrics' counts, and the log stays within its bound.
func TestConcurrentForgedNotificationsAddUp(t *testing.T) {
	acme := newScripted("acme")
	f := newFixture(t, withGateways(acme))
	p := f.createProduct(t, 2, 5)
	o := f.mustPlace(t, "alice", p.ID(), 1)
	mustCreatePayment(t, f, o, "acme")

	const senders, each = 32, 250
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				if i == each/2 && g == 0 {
					f.clock.Advance(time.Minute) // a window ends while the others send
				}
				addr := fmt.Sprintf("10.0.%d.%d", g, i%8) // 256 addresses
				if err := f.shop.Payments.HandleNotification(f.ctx, "acme", forged(o), addr); err == nil {
					t.Error("a forged notification was accepted")
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if _, err := f.shop.Payments.PruneNotifications(f.ctx); err != nil {
		t.Fatal(err)
	}
	rows, total := refusedTotal(logged(t, f))
	bound := 2 * (application.DefaultRefusedNotificationAddresses + 1)
	if total != senders*each || rows > bound {
		t.Fatalf("%d refused records counting %d, want at most %d counting %d", rows, total, bound, senders*each)
	}
	if got := f.shop.Payments.RefusedNotifications()[application.RefusedNotificationKey{Provider: "acme", Reason: application.RefusedBadSignature}]; got != senders*each {
		t.Fatalf("RefusedNotifications counts %d, want %d", got, senders*each)
	}
}

// PruneNotifications deletes refused aggregates past their retention and verified
// notifications past theirs, and keeps everything younger: a verified notification outlives a
// refused one of the same day.
func TestNotificationRetention(t *testing.T) {
	acme := newScripted("acme")
	f := newFixture(t, withGateways(acme), withConfig(func(c *application.Config) {
		c.NotificationRetention, c.RefusedNotificationRetention = 30*24*time.Hour, 2*24*time.Hour
	}))
	p := f.createProduct(t, 4, 5)
	o1, o2 := f.mustPlace(t, "alice", p.ID(), 1), f.mustPlace(t, "bob", p.ID(), 1)
	mustCreatePayment(t, f, o1, "acme")
	mustCreatePayment(t, f, o2, "acme")
	send := func(o domain.Order, genuine bool) {
		t.Helper()
		in := notice(o, "pending", o.Amount(), "CNY")
		if !genuine {
			in = forged(o)
		}
		if err := f.shop.Payments.HandleNotification(f.ctx, "acme", in, "203.0.113.9"); (err == nil) != genuine {
			t.Fatalf("notification (genuine %t): %v", genuine, err)
		}
	}
	prune := func(want int) {
		t.Helper()
		n, err := f.shop.Payments.PruneNotifications(f.ctx)
		if err != nil || n != want {
			t.Fatalf("PruneNotifications = %d, %v; want %d deleted", n, err, want)
		}
	}
	summary := func() (verified []domain.OrderNo, refused int) {
		for _, r := range logged(t, f) {
			if r.Verified {
				verified = append(verified, r.OrderNo)
			} else {
				refused++
			}
		}
		return verified, refused
	}

	send(o1, true)
	send(o1, false)
	f.clock.Advance(24 * time.Hour)
	send(o2, false)
	prune(0)
	f.clock.Advance(24*time.Hour + time.Second) // the first refused aggregate is past 2 days
	prune(1)
	if v, r := summary(); len(v) != 1 || r != 1 {
		t.Fatalf("after 2 days: verified %v, %d refused; want o1's and the second refused", v, r)
	}
	send(o2, true)
	f.clock.Advance(28 * 24 * time.Hour) // o1's notification is past 30 days, o2's is not
	prune(2)
	if v, r := summary(); len(v) != 1 || v[0] != o2.No() || r != 0 {
		t.Fatalf("after 30 days: verified %v, %d refused; want o2's only", v, r)
	}
}
