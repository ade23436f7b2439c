package application_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/domain"
)

// markCountingLedger's outbox counts MarkSent calls and the ids they carry, and fails the
// next failMarks of them.
type markCountingLedger struct {
	*memory.Ledger
	mu        sync.Mutex
	calls     int
	ids       int
	failMarks int
}

func (l *markCountingLedger) Outbox() domain.Outbox { return markCountingOutbox{l.Ledger.Outbox(), l} }

type markCountingOutbox struct {
	domain.Outbox
	l *markCountingLedger
}

func (o markCountingOutbox) MarkSent(ctx context.Context, at time.Time, ids ...int64) error {
	o.l.mu.Lock()
	o.l.calls++
	o.l.ids += len(ids)
	fail := o.l.failMarks > 0
	if fail {
		o.l.failMarks--
	}
	o.l.mu.Unlock()
	if fail {
		return errors.New("the database went away")
	}
	return o.Outbox.MarkSent(ctx, at, ids...)
}

// The relay marks a page of sent messages with one write, not one per message. A write that
// fails leaves them unsent: the next pass sends them again (at least once; each receiver drops
// the repeat by its ID), and nothing is lost.
func TestRelayMarksAPageSentInOneWrite(t *testing.T) {
	var l *markCountingLedger
	f := newFixture(t, withLedger(func(m *memory.Ledger) domain.Ledger { l = &markCountingLedger{Ledger: m}; return l }))
	p := f.createProduct(t, 50, 10)
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil { // the import's gate change
		t.Fatal(err)
	}
	var paid []domain.OrderNo
	for _, buyer := range []domain.BuyerID{"a", "b", "c", "d", "e", "f"} {
		paid = append(paid, f.mustPay(t, f.mustPlace(t, buyer, p.ID(), 1).No()).No())
	}
	l.mu.Lock()
	l.calls, l.ids, l.failMarks = 0, 0, 1
	l.mu.Unlock()
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err == nil {
		t.Fatal("a relay whose marking failed reported no error")
	}
	if n, err := f.ledger.Outbox().Backlog(f.ctx, domain.TopicDelivered); err != nil || n != int64(len(paid)) {
		t.Fatalf("backlog after a failed marking: %d (%v), want the %d deliveries still unsent", n, err, len(paid))
	}
	if n, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil || n != len(paid) {
		t.Fatalf("second relay sent %d (%v), want %d", n, err, len(paid))
	}
	l.mu.Lock()
	calls, ids := l.calls, l.ids
	l.mu.Unlock()
	if calls != 2 || ids != 2*len(paid) {
		t.Fatalf("%d MarkSent calls carrying %d ids over two relays of one page, want 2 carrying %d", calls, ids, 2*len(paid))
	}
	d := f.deliveries(t)
	for _, no := range paid {
		if d[no] != 2 { // sent, not marked, sent again
			t.Fatalf("order %s delivered %d times, want 2 (the relay's marking failed once)", no, d[no])
		}
	}
	if n, _ := f.ledger.Outbox().Backlog(f.ctx); n != 0 {
		t.Fatalf("backlog %d after the relay", n)
	}
}
