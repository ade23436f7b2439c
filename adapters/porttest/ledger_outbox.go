package porttest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"cardshop/domain"
)

// runOutbox checks the outbox: Add, Pending, MarkFailed, MarkSent and Backlog; a failed
// message waits for its retry time; of several readers that Claim a message one wins, and
// the message is not due again until its lease ends; ByKey reads a key's messages sent or not.
func runOutbox(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("add, pending, mark failed, mark sent, backlog", func(t *testing.T) {
		l := newLedger(t)
		before := backlog(t, l)
		key := string(newOrderNo())
		payloads := [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2}`), []byte(`{"n":3}`)}
		for _, pl := range payloads {
			m := domain.OutboxMessage{Topic: domain.TopicDelivered, Key: key, Payload: pl, At: now()}
			if err := l.Outbox().Add(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		payloads[0][1] = 'X' // the store kept its own copy
		if got := backlog(t, l); got != before+3 {
			t.Fatalf("Backlog = %d after 3 adds, want %d", got, before+3)
		}
		mine := pendingWithKey(t, l, key)
		if len(mine) != 3 {
			t.Fatalf("Pending holds %d of this test's messages, want 3", len(mine))
		}
		for i, m := range mine {
			want := fmt.Sprintf(`{"n":%d}`, i+1)
			if m.ID <= 0 || (i > 0 && m.ID <= mine[i-1].ID) || string(m.Payload) != want ||
				m.Topic != domain.TopicDelivered || m.Attempts != 0 {
				t.Fatalf("Pending[%d] = %+v (payload %s), want id increasing, payload %s, 0 attempts", i, m, m.Payload, want)
			}
		}
		if one, err := l.Outbox().Pending(t.Context(), farFuture(), 1); err != nil || len(one) != 1 {
			t.Fatalf("Pending(1) = %d messages, %v; want 1", len(one), err)
		}

		first, second := mine[0].ID, mine[1].ID
		for range 2 {
			if err := l.Outbox().MarkFailed(t.Context(), second, mine[1].RetryAt); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Outbox().MarkSent(t.Context(), now(), first); err != nil {
			t.Fatal(err)
		}
		if err := l.Outbox().MarkSent(t.Context(), now(), first); err != nil {
			t.Fatalf("second MarkSent: %v", err)
		}
		if got := backlog(t, l); got != before+2 {
			t.Fatalf("Backlog = %d after one sent, want %d", got, before+2)
		}
		mine = pendingWithKey(t, l, key)
		if len(mine) != 2 || mine[0].ID != second || mine[0].Attempts != 2 {
			t.Fatalf("Pending after MarkSent/MarkFailed = %+v, want message %d with 2 attempts first", mine, second)
		}
		// Several at once, with one sent already and one unknown: one write, the rest ignored.
		ids := []int64{first, 1 << 60}
		for _, m := range mine {
			ids = append(ids, m.ID)
		}
		if err := l.Outbox().MarkSent(t.Context(), now(), ids...); err != nil {
			t.Fatal(err)
		}
		if got := backlog(t, l); got != before {
			t.Fatalf("Backlog = %d after all sent, want %d", got, before)
		}
		if err := l.Outbox().MarkSent(t.Context(), now()); err != nil {
			t.Fatalf("MarkSent of no message: %v", err)
		}
	})

	t.Run("a failed message waits for its retry time", func(t *testing.T) {
		l := newLedger(t)
		key := string(newOrderNo())
		at := now().Add(-time.Hour) // due long ago, so that it comes before other tests' messages
		for i := range 3 {
			m := domain.OutboxMessage{Topic: domain.TopicWebhook, Key: key, Payload: []byte(fmt.Sprint(i)), At: at}
			if err := l.Outbox().Add(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		mine := pendingWithKey(t, l, key)
		if len(mine) != 3 || !mine[0].RetryAt.Equal(at) {
			t.Fatalf("Pending = %+v, want 3 messages due at their At %v", mine, at)
		}
		retry := at.Add(2 * time.Hour) // an hour from now
		if err := l.Outbox().MarkFailed(t.Context(), mine[0].ID, retry); err != nil {
			t.Fatal(err)
		}
		due := func(at time.Time) []int64 {
			t.Helper()
			all, err := l.Outbox().Pending(t.Context(), at, int(backlog(t, l))+100)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, m := range all {
				if m.Key == key {
					ids = append(ids, m.ID)
				}
			}
			return ids
		}
		if got := due(now()); !slices.Equal(got, []int64{mine[1].ID, mine[2].ID}) {
			t.Fatalf("due now = %v, want %v: the failed message waits for its retry time", got, []int64{mine[1].ID, mine[2].ID})
		}
		if got := due(retry); !slices.Equal(got, []int64{mine[1].ID, mine[2].ID, mine[0].ID}) {
			t.Fatalf("due at the retry time = %v, want the retried message last (latest due)", got)
		}
		// The retry time and the attempt count are kept.
		all := pendingWithKey(t, l, key)
		if last := all[len(all)-1]; last.ID != mine[0].ID || last.Attempts != 1 || !last.RetryAt.Equal(retry) {
			t.Fatalf("retried message = %+v, want 1 attempt, due %v", last, retry)
		}
		// A message added with its own RetryAt (a scheduled one) is due then, not at At.
		later := domain.OutboxMessage{Topic: domain.TopicWebhook, Key: key, Payload: []byte("later"), At: at, RetryAt: retry}
		if err := l.Outbox().Add(t.Context(), later); err != nil {
			t.Fatal(err)
		}
		if got := due(now()); len(got) != 2 {
			t.Fatalf("due now after adding a message due in an hour = %v, want still 2", got)
		}
		for _, m := range pendingWithKey(t, l, key) {
			if err := l.Outbox().MarkSent(t.Context(), now(), m.ID); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("claim: one of several readers wins a message", func(t *testing.T) {
		l := newLedger(t)
		key := string(newOrderNo())
		at := now().Add(-time.Hour)
		if err := l.Outbox().Add(t.Context(), domain.OutboxMessage{Topic: domain.TopicWebhook, Key: key, Payload: []byte("{}"), At: at}); err != nil {
			t.Fatal(err)
		}
		m := pendingWithKey(t, l, key)[0]
		lease := now().Add(time.Hour)
		wins := make([]bool, 8)
		parallel(len(wins), func(i int) {
			ok, err := l.Outbox().Claim(t.Context(), m.ID, m.RetryAt, lease)
			if err != nil {
				t.Error(err)
			}
			wins[i] = ok
		})
		if n := len(slices.DeleteFunc(slices.Clone(wins), func(w bool) bool { return !w })); n != 1 {
			t.Fatalf("%d of %d concurrent claims won, want 1", n, len(wins))
		}
		// Claimed: not due until the lease ends, then due again (its relay died).
		all, err := l.Outbox().Pending(t.Context(), now(), int(backlog(t, l))+100, domain.TopicWebhook)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range all {
			if p.ID == m.ID {
				t.Fatal("a claimed message is due before its lease ends")
			}
		}
		if got := pendingWithKey(t, l, key); len(got) != 1 || !got[0].RetryAt.Equal(lease) || got[0].Attempts != 0 {
			t.Fatalf("claimed message = %+v, want due at the lease's end %v, 0 attempts", got, lease)
		}
		// A claim from a stale read loses; so does one of a sent message.
		if ok, err := l.Outbox().Claim(t.Context(), m.ID, m.RetryAt, lease.Add(time.Hour)); err != nil || ok {
			t.Fatalf("claim from a stale read = %v, %v; want false", ok, err)
		}
		if err := l.Outbox().MarkSent(t.Context(), now(), m.ID); err != nil {
			t.Fatal(err)
		}
		if ok, err := l.Outbox().Claim(t.Context(), m.ID, lease, lease.Add(time.Hour)); err != nil || ok {
			t.Fatalf("claim of a sent message = %v, %v; want false", ok, err)
		}
		if ok, err := l.Outbox().Claim(t.Context(), -1, lease, lease.Add(time.Hour)); err != nil || ok {
			t.Fatalf("claim of an unknown message = %v, %v; want false, nil", ok, err)
		}
	})

	t.Run("by key: a key's messages, sent or not, in add order, of the given topics", func(t *testing.T) {
		l := newLedger(t)
		key, other := string(newOrderNo()), string(newOrderNo())
		at := now()
		for _, m := range []domain.OutboxMessage{
			{Topic: domain.TopicGateChange, Key: key, Payload: []byte(`{"n":1}`), At: at},
			{Topic: domain.TopicDelivered, Key: key, Payload: []byte(`{"n":2}`), At: at},
			{Topic: domain.TopicDelivered, Key: other, Payload: []byte(`{"n":3}`), At: at},
			{Topic: domain.TopicWebhook, Key: key, Payload: []byte(`{"n":4}`), At: at},
		} {
			if err := l.Outbox().Add(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		all := byKey(t, l, key)
		if len(all) != 3 || all[0].Topic != domain.TopicGateChange || all[1].Topic != domain.TopicDelivered ||
			all[2].Topic != domain.TopicWebhook || string(all[1].Payload) != `{"n":2}` {
			t.Fatalf("ByKey = %+v, want the key's 3 messages in add order", all)
		}
		for i, r := range all {
			if r.Key != key || !r.SentAt.IsZero() || r.Attempts != 0 || !r.At.Equal(at) || !r.RetryAt.Equal(at) ||
				i > 0 && r.ID <= all[i-1].ID {
				t.Fatalf("ByKey[%d] = %+v, want unsent, no attempt, due at %v, ids increasing", i, r, at)
			}
		}

		// Sent and failed messages are read with their state.
		sentAt, retryAt := at.Add(time.Second), at.Add(time.Minute)
		if err := l.Outbox().MarkSent(t.Context(), sentAt, all[1].ID); err != nil {
			t.Fatal(err)
		}
		if err := l.Outbox().MarkFailed(t.Context(), all[2].ID, retryAt); err != nil {
			t.Fatal(err)
		}
		got := byKey(t, l, key, domain.TopicDelivered, domain.TopicWebhook)
		if len(got) != 2 || got[0].ID != all[1].ID || !got[0].SentAt.Equal(sentAt) ||
			got[1].ID != all[2].ID || !got[1].SentAt.IsZero() || got[1].Attempts != 1 || !got[1].RetryAt.Equal(retryAt) {
			t.Fatalf("ByKey(delivered, webhook) = %+v, want the delivery sent at %v and the webhook failed once, due at %v",
				got, sentAt, retryAt)
		}
		if got := byKey(t, l, string(newOrderNo())); len(got) != 0 {
			t.Fatalf("ByKey(unknown key) = %+v, want none", got)
		}
		var ve *domain.ValidationError
		if _, err := l.Outbox().ByKey(t.Context(), ""); !errors.As(err, &ve) {
			t.Fatalf("ByKey(\"\"): err = %v, want a ValidationError", err)
		}
	})
}

func byKey(t *testing.T, l domain.Store, key string, topics ...string) []domain.OutboxRecord {
	t.Helper()
	got, err := l.Outbox().ByKey(t.Context(), key, topics...)
	if err != nil {
		t.Fatalf("ByKey(%s): %v", key, err)
	}
	return got
}
