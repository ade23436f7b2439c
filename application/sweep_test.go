package application_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/domain"
)

// meeting counts the calls inside a section at once. A call waits there until want calls are
// inside together, or until patience runs out (so a caller that makes its calls one at a time
// is slowed, not hung), and the most seen at once is kept.
type meeting struct {
	want     int
	patience time.Duration
	mu       sync.Mutex
	on       bool
	inside   int
	most     int
	closed   bool
	met      chan struct{}
}

func newMeeting(want int) *meeting {
	return &meeting{want: want, patience: time.Second, met: make(chan struct{})}
}

func (m *meeting) start() { m.mu.Lock(); m.on = true; m.mu.Unlock() }

// enter is called at the start of the section; the function it returns at its end.
func (m *meeting) enter() func() {
	m.mu.Lock()
	if !m.on {
		m.mu.Unlock()
		return func() {}
	}
	m.inside++
	m.most = max(m.most, m.inside)
	if m.inside == m.want && !m.closed {
		m.closed = true
		close(m.met)
	}
	met := m.met
	m.mu.Unlock()
	select {
	case <-met:
	case <-time.After(m.patience):
	}
	return func() { m.mu.Lock(); m.inside--; m.mu.Unlock() }
}

func (m *meeting) mostAtOnce() int { m.mu.Lock(); defer m.mu.Unlock(); return m.most }

// meetingLedger's Payments().OfOrder, a step of every close, goes through a meeting.
type meetingLedger struct {
	*memory.Ledger
	m *meeting
}

func (l meetingLedger) Payments() domain.PaymentRepo {
	return meetingPayments{l.Ledger.Payments(), l.m}
}

type meetingPayments struct {
	domain.PaymentRepo
	m *meeting
}

func (p meetingPayments) OfOrder(ctx context.Context, no domain.OrderNo) ([]domain.Payment, error) {
	defer p.m.enter()()
	return p.PaymentRepo.OfOrder(ctx, no)
}

// The sweeper closes the orders of a page side by side, not one at a time: while the broker is
// down it is the only closer, and a flash sale's expiries come by the hundred each second while
// each close waits for a commit. Every order is still closed exactly once, and every unit is
// back at the gate.
func TestSweepClosesAPageSideBySide(t *testing.T) {
	const orders, together = 12, 4
	m := newMeeting(together)
	f := newFixture(t, withQueue(func(domain.Clock) domain.DelayQueue { return &dropQueue{} }),
		withLedger(func(l *memory.Ledger) domain.Ledger { return meetingLedger{l, m} }))
	p := f.createProduct(t, 1, orders)
	var placed []domain.Order
	for i := range orders {
		placed = append(placed, f.mustPlace(t, domain.BuyerID("buyer-"+string(rune('a'+i))), p.ID(), 1))
	}
	f.clock.Advance(f.cfg.OrderTimeout)
	m.start()
	n, err := f.shop.Sales.Sweep(f.ctx)
	if err != nil || n != orders {
		t.Fatalf("sweep: %d, %v; want %d orders", n, err, orders)
	}
	if got := m.mostAtOnce(); got < together {
		t.Fatalf("at most %d closes at once, want the page's orders closed side by side (%d or more)", got, together)
	}
	for _, o := range placed {
		if st := f.order(t, o.No()).Status(); st != domain.StatusClosed {
			t.Fatalf("order %s %s after the sweep, want CLOSED", o.No(), st)
		}
		if ft := f.flowTypes(t, o.No()); ft[domain.FlowTimeoutRestore] != 1 {
			t.Fatalf("order %s flow %v, want one timeout-restore row", o.No(), ft)
		}
	}
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.assertNoExpiredPending(t)
	f.assertInvariants(t, p.ID())
	if lv := f.levels(t, p.ID()); lv.Stock != orders || lv.Sold != 0 {
		t.Fatalf("gate %+v, want every unit back", lv)
	}
}

// meetingPublisher's delivery events go through a meeting on their way to the publisher.
type meetingPublisher struct {
	*memory.Publisher
	m *meeting
}

func (p meetingPublisher) Publish(ctx context.Context, msg domain.OutboxMessage) error {
	if msg.Topic == domain.TopicDelivered {
		defer p.m.enter()()
	}
	return p.Publisher.Publish(ctx, msg)
}

// The outbox relay publishes delivery events several at once (each waits for the broker's
// confirm; one at a time, a sale's paid orders outran it), and each is published once.
func TestRelayPublishesDeliveryEventsSideBySide(t *testing.T) {
	const orders, together = 10, 4
	m := newMeeting(together)
	f := newFixture(t, withPublisher(func(p *memory.Publisher) domain.EventPublisher { return meetingPublisher{p, m} }))
	p := f.createProduct(t, 1, orders)
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil { // the import's gate change
		t.Fatal(err)
	}
	var paid []domain.OrderNo
	for i := range orders {
		paid = append(paid, f.mustPay(t, f.mustPlace(t, domain.BuyerID("buyer-"+string(rune('a'+i))), p.ID(), 1).No()).No())
	}
	m.start()
	if n, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil || n < orders {
		t.Fatalf("relay sent %d (%v), want at least the %d delivery events", n, err, orders)
	}
	if got := m.mostAtOnce(); got < together {
		t.Fatalf("at most %d delivery events published at once, want %d or more", got, together)
	}
	d := f.deliveries(t)
	for _, no := range paid {
		if d[no] != 1 {
			t.Fatalf("order %s delivered %d times, want once", no, d[no])
		}
	}
	if n, err := f.ledger.Outbox().Backlog(f.ctx); err != nil || n != 0 {
		t.Fatalf("backlog %d (%v) after the relay", n, err)
	}
}
