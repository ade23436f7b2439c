package application_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// stockProduct creates a product with a low-stock threshold and codes codes, and runs the
// first (silent) stock watch, which leaves it normal.
func (f *fixture) stockProduct(t *testing.T, threshold, codes int) domain.Product {
	t.Helper()
	p, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "gift card", Price: testPrice, MaxPerOrder: 100,
		LowStockThreshold: threshold})
	if err != nil {
		t.Fatalf("create product: %v", err)
	}
	f.addCodes(t, p.ID(), codes)
	if n := f.watch(t); n != 0 {
		t.Fatalf("first stock watch recorded %d events, want none (the first evaluation is silent)", n)
	}
	if s := f.stockState(t, p.ID()); s != domain.StockStateNormal {
		t.Fatalf("stock state after the first watch %q, want normal", s)
	}
	return p
}

func (f *fixture) watch(t *testing.T) int {
	t.Helper()
	n, err := f.shop.Catalogue.WatchStock(f.ctx)
	if err != nil {
		t.Fatalf("watch stock: %v", err)
	}
	return n
}

func (f *fixture) stockState(t *testing.T, pid domain.ProductID) domain.StockState {
	t.Helper()
	p, err := f.ledger.Products().Product(f.ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	return p.StockState()
}

// stockEvents returns the unsent outbox rows of topic (due or not) as stock events, in order.
func (f *fixture) stockEvents(t *testing.T, topic string) []domain.StockEvent {
	t.Helper()
	ms, err := f.ledger.Outbox().Pending(f.ctx, f.shopNow().AddDate(1, 0, 0), 1000, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]domain.StockEvent, len(ms))
	for i, m := range ms {
		if out[i], err = application.DecodeStockEvent(m.Payload); err != nil {
			t.Fatalf("outbox row %d: %v", m.ID, err)
		}
	}
	return out
}

func eventTypes(es []domain.StockEvent) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

// sell places orders of one unit until n units are held.
func (f *fixture) sell(t *testing.T, pid domain.ProductID, n int) []domain.Order {
	t.Helper()
	var os []domain.Order
	for range n {
		os = append(os, f.mustPlace(t, domain.BuyerID(fmt.Sprint("buyer-", f.keySeq.Load())), pid, 1))
	}
	return os
}

// giveBack closes the orders unpaid past their expiry, which returns their units to the gate.
func (f *fixture) giveBack(t *testing.T, os ...domain.Order) {
	t.Helper()
	f.clock.Advance(f.cfg.OrderTimeout + time.Second)
	for _, o := range os {
		if err := f.shop.Sales.CloseExpired(f.ctx, o.No()); err != nil {
			t.Fatalf("close %s: %v", o.No(), err)
		}
	}
}

// Stock falling to the threshold fires product.low_stock once, however often the watch runs;
// falling to zero fires product.sold_out once. Each event says what it is about.
func TestStockWatchLowStockOnceThenSoldOut(t *testing.T) {
	f := newFixture(t)
	p := f.stockProduct(t, 5, 10)
	f.sell(t, p.ID(), 4)
	if n := f.watch(t); n != 0 {
		t.Fatalf("6 left of threshold 5: %d events, want none", n)
	}
	f.sell(t, p.ID(), 1)
	for i, want := range []int{1, 0, 0} {
		if n := f.watch(t); n != want {
			t.Fatalf("watch %d at the threshold: %d events, want %d", i+1, n, want)
		}
	}
	es := f.stockEvents(t, domain.TopicProductStock)
	if got := eventTypes(es); !slices.Equal(got, []string{domain.EventLowStock}) {
		t.Fatalf("events %v, want one product.low_stock", got)
	}
	e := es[0]
	at := f.shopNow()
	if e.EventID != fmt.Sprintf("product.low_stock:%d:%d", p.ID(), at.UnixMilli()) || e.Product != p.ID() ||
		e.StockLeft != 5 || e.Threshold != 5 || !e.At.Equal(at) {
		t.Fatalf("event %+v, want product %d, 5 left of threshold 5, at %v", e, p.ID(), at)
	}
	if s := f.stockState(t, p.ID()); s != domain.StockStateLow {
		t.Fatalf("stock state %q, want low", s)
	}
	f.sell(t, p.ID(), 5)
	if n := f.watch(t); n != 1 {
		t.Fatalf("watch at 0 left: %d events, want 1", n)
	}
	if n := f.watch(t); n != 0 {
		t.Fatalf("watch again at 0 left: %d events, want 0", n)
	}
	es = f.stockEvents(t, domain.TopicProductStock)
	if got := eventTypes(es); !slices.Equal(got, []string{domain.EventLowStock, domain.EventSoldOut}) {
		t.Fatalf("events %v, want low_stock then sold_out", got)
	}
	if es[1].StockLeft != 0 || f.stockState(t, p.ID()) != domain.StockStateSoldOut {
		t.Fatalf("sold-out event %+v, state %q", es[1], f.stockState(t, p.ID()))
	}
	if len(f.stockEvents(t, domain.TopicWebhookStock)) != 0 {
		t.Fatal("webhook rows recorded without a webhook")
	}
	f.assertInvariants(t, p.ID())
}

// Stock that hovers around the threshold (units taken and given back) fires product.low_stock
// once and nothing more until it climbs above the threshold's band: then product.restocked,
// once.
func TestStockWatchHoveringMakesNoStorm(t *testing.T) {
	f := newFixture(t)
	const threshold = 8 // band 1: restocked above 9
	p := f.stockProduct(t, threshold, 12)
	held := f.sell(t, p.ID(), 4) // 8 left
	if n := f.watch(t); n != 1 {
		t.Fatalf("at the threshold: %d events, want 1", n)
	}
	for i := range 5 {
		f.giveBack(t, held[0]) // 9 left: inside the band
		held = held[1:]
		if n := f.watch(t); n != 0 {
			t.Fatalf("cycle %d, 9 left: %d events, want none", i, n)
		}
		held = append(held, f.sell(t, p.ID(), 1)...) // 8 left
		if n := f.watch(t); n != 0 {
			t.Fatalf("cycle %d, 8 left again: %d events, want none", i, n)
		}
	}
	f.giveBack(t, held[:2]...) // 10 left: above threshold + band
	if n := f.watch(t); n != 1 {
		t.Fatalf("above the band: %d events, want 1", n)
	}
	if got := eventTypes(f.stockEvents(t, domain.TopicProductStock)); !slices.Equal(got, []string{domain.EventLowStock, domain.EventRestocked}) {
		t.Fatalf("events %v, want low_stock then restocked", got)
	}
	f.assertInvariants(t, p.ID())
}

// A product that sells out between two samples gets product.low_stock and then
// product.sold_out from the one sample that sees it; importing codes brings product.restocked
// once the stock is above the band.
func TestStockWatchFastSellOutAndRestock(t *testing.T) {
	f := newFixture(t)
	p := f.stockProduct(t, 3, 10)
	f.sell(t, p.ID(), 10)
	if n := f.watch(t); n != 2 {
		t.Fatalf("normal to sold out in one sample: %d events, want 2", n)
	}
	f.addCodes(t, p.ID(), 4) // 4 left: threshold 3 + band 1, not above it
	if n := f.watch(t); n != 0 {
		t.Fatalf("4 left after an import: %d events, want none", n)
	}
	f.addCodes(t, p.ID(), 1)
	if n := f.watch(t); n != 1 {
		t.Fatalf("5 left after an import: %d events, want 1", n)
	}
	es := f.stockEvents(t, domain.TopicProductStock)
	if got := eventTypes(es); !slices.Equal(got, []string{domain.EventLowStock, domain.EventSoldOut, domain.EventRestocked}) {
		t.Fatalf("events %v, want low_stock, sold_out, restocked", got)
	}
	if es[0].EventID == es[1].EventID || es[2].StockLeft != 5 || f.stockState(t, p.ID()) != domain.StockStateNormal {
		t.Fatalf("events %+v, state %q", es, f.stockState(t, p.ID()))
	}
}

// Without a threshold only selling out and coming back are events.
func TestStockWatchWithoutThreshold(t *testing.T) {
	f := newFixture(t)
	p := f.stockProduct(t, 0, 2)
	f.sell(t, p.ID(), 1)
	if n := f.watch(t); n != 0 {
		t.Fatalf("1 left without a threshold: %d events", n)
	}
	f.sell(t, p.ID(), 1)
	f.watch(t)
	f.addCodes(t, p.ID(), 2) // band 1: above 1
	f.watch(t)
	if got := eventTypes(f.stockEvents(t, domain.TopicProductStock)); !slices.Equal(got, []string{domain.EventSoldOut, domain.EventRestocked}) {
		t.Fatalf("events %v, want sold_out then restocked", got)
	}
}

// A product created empty is evaluated once it has stock: its first import is no
// product.restocked.
func TestStockWatchWaitsForTheFirstStock(t *testing.T) {
	f := newFixture(t)
	p, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "gift card", Price: testPrice, MaxPerOrder: 5,
		LowStockThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n := f.watch(t); n != 0 || f.stockState(t, p.ID()) != domain.StockStateNone {
		t.Fatalf("empty product: %d events, state %q; want none, not evaluated", n, f.stockState(t, p.ID()))
	}
	f.addCodes(t, p.ID(), 10)
	if n := f.watch(t); n != 0 || f.stockState(t, p.ID()) != domain.StockStateNormal {
		t.Fatalf("after the first import: %d events, state %q; want none, normal", n, f.stockState(t, p.ID()))
	}
}

// A product the gate does not know (Redis lost it) is left alone: no state, no event, until it
// is back.
func TestStockWatchSkipsProductsTheGateLost(t *testing.T) {
	f := newFixture(t)
	p := f.stockProduct(t, 5, 10)
	f.gate.Flush()
	if n := f.watch(t); n != 0 || f.stockState(t, p.ID()) != domain.StockStateNormal {
		t.Fatalf("with the gate lost: %d events, state %q; want none, normal", n, f.stockState(t, p.ID()))
	}
}

// The events reach the broker through the outbox relay and, with a webhook, the storefront
// through the webhook relay, with the event's id and type.
func TestStockEventsReachBrokerAndWebhook(t *testing.T) {
	hook := memory.NewNotifier()
	f := newFixture(t, withNotifier(hook))
	p := f.stockProduct(t, 2, 3)
	f.sell(t, p.ID(), 3)
	if n := f.watch(t); n != 2 {
		t.Fatalf("sold out: %d events, want 2", n)
	}
	if _, err := f.shop.Relay.RelayOutbox(f.ctx); err != nil {
		t.Fatalf("RelayOutbox: %v", err)
	}
	var published []domain.StockEvent
	for _, m := range f.pub.Published() {
		if m.Topic != domain.TopicProductStock {
			continue
		}
		e, err := application.DecodeStockEvent(m.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if m.Key != fmt.Sprint(p.ID()) {
			t.Fatalf("published key %q, want the product id", m.Key)
		}
		published = append(published, e)
	}
	if got := eventTypes(published); !slices.Equal(got, []string{domain.EventLowStock, domain.EventSoldOut}) {
		t.Fatalf("published %v, want low_stock then sold_out", got)
	}
	if n := relayWebhooks(t, f); n != 2 {
		t.Fatalf("RelayWebhooks sent %d, want 2", n)
	}
	sent := hook.Sent()
	if len(sent) != 2 {
		t.Fatalf("webhook got %d notifications, want 2", len(sent))
	}
	// The webhook relay sends several at once, so in any order: match them by id.
	byID := map[string]domain.StockEvent{}
	for _, e := range published {
		byID[e.EventID] = e
	}
	for i, n := range sent {
		var e domain.StockEvent
		if err := json.Unmarshal(n.Data, &e); err != nil {
			t.Fatal(err)
		}
		want, ok := byID[n.ID]
		if !ok || n.Type != want.Type || e != want || n.Attempt != 1 {
			t.Fatalf("notification %d: %+v (data %+v), want one of %v", i, n, e, published)
		}
		delete(byID, n.ID)
	}
	// A paid order's notification keeps its own type beside them.
	p2 := f.createProduct(t, 1, 5)
	o := f.mustPlace(t, "alice", p2.ID(), 1)
	f.mustPay(t, o.No())
	relayWebhooks(t, f)
	if last := hook.Sent()[2]; last.Type != domain.TopicDelivered || last.ID != "delivered:"+string(o.No()) {
		t.Fatalf("delivery notification %+v", last)
	}
}

// Instances watching one ledger and one gate side by side record each crossing once: N
// watchers run at every step of a sale, and the outbox holds exactly one event per crossing.
func TestStockWatchInstancesRecordEachCrossingOnce(t *testing.T) {
	hook := memory.NewNotifier()
	f := newFixture(t, withNotifier(hook))
	const instances = 8
	shops := []*application.App{f.shop}
	for range instances - 1 {
		s, err := application.New(f.cfg, application.Deps{Ledger: f.ledger, Gate: f.gate, Queue: f.queue,
			Publisher: f.pub, Notifier: hook, Verifier: f.signer, Alerter: f.alerts, Clock: f.now, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		shops = append(shops, s)
	}
	watchAll := func() int {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
		)
		for _, s := range shops {
			for range 3 { // goroutines of one instance too
				wg.Add(1)
				go func() {
					defer wg.Done()
					n, err := s.Catalogue.WatchStock(f.ctx)
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					total += n
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		return total
	}
	p, err := f.shop.Catalogue.CreateProduct(f.ctx, application.NewProduct{Name: "gift card", Price: testPrice, MaxPerOrder: 100,
		LowStockThreshold: 10})
	if err != nil {
		t.Fatal(err)
	}
	f.addCodes(t, p.ID(), 30)
	want := []string{}
	step := func(name string, events ...string) {
		t.Helper()
		f.clock.Advance(time.Millisecond)
		want = append(want, events...)
		for round := range 3 {
			wantN := len(events)
			if round > 0 {
				wantN = 0 // recorded already
			}
			if n := watchAll(); n != wantN {
				t.Fatalf("%s, round %d: the instances recorded %d events, want %d", name, round, n, wantN)
			}
		}
	}
	step("first sample")
	held := f.sell(t, p.ID(), 20)
	step("10 left", domain.EventLowStock)
	f.giveBack(t, held[0])
	step("11 left: inside the band (threshold 10, band 1)")
	f.sell(t, p.ID(), 11)
	step("sold out", domain.EventSoldOut)
	f.addCodes(t, p.ID(), 20)
	step("20 left", domain.EventRestocked)
	f.sell(t, p.ID(), 20)
	step("sold out again", domain.EventLowStock, domain.EventSoldOut)

	es := f.stockEvents(t, domain.TopicProductStock)
	if got := eventTypes(es); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	hooks := f.stockEvents(t, domain.TopicWebhookStock)
	ids := map[string]bool{}
	for i, e := range es {
		if ids[e.EventID] || hooks[i] != e {
			t.Fatalf("event %d %+v: a repeated id, or webhook row %+v differs", i, e, hooks[i])
		}
		ids[e.EventID] = true
	}
}

// A webhook row whose payload names a type the relay does not know is not sent under a wrong
// type: it fails and waits for its retry, and the storefront hears nothing.
func TestWebhookRefusesAnUnknownEventType(t *testing.T) {
	hook := memory.NewNotifier()
	f := newFixture(t, withNotifier(hook))
	m := domain.OutboxMessage{Topic: domain.TopicWebhookStock, Key: "1", At: f.shopNow(),
		Payload: []byte(`{"event_id":"x:1","type":"product.vanished","product_id":1}`)}
	if err := f.ledger.Outbox().Add(f.ctx, m); err != nil {
		t.Fatal(err)
	}
	if n := relayWebhooks(t, f); n != 0 || hook.Attempts() != 0 {
		t.Fatalf("sent %d, storefront called %d times; want nothing", n, hook.Attempts())
	}
	if n, _ := f.shop.Relay.WebhookBacklog(f.ctx); n != 1 {
		t.Fatalf("webhook backlog %d, want the row kept", n)
	}
}

// The low-stock threshold raises one low_stock alert per crossing, for the product, whatever
// the number of watches; a sold-out crossing raises none of its own, and a crossing after a
// restock raises the next.
func TestStockWatchRaisesALowStockAlertPerCrossing(t *testing.T) {
	f := newFixture(t)
	p := f.stockProduct(t, 3, 6)
	lowStock := func() []domain.Alert {
		var out []domain.Alert
		for _, a := range f.alerts.Alerts() {
			if a.Kind == application.AlertLowStock {
				out = append(out, a)
			}
		}
		return out
	}
	held := f.sell(t, p.ID(), 2) // 4 left, above 3
	f.watch(t)
	if got := lowStock(); len(got) != 0 {
		t.Fatalf("4 left of threshold 3 raised %v", got)
	}
	held = append(held, f.sell(t, p.ID(), 1)...) // 3 left
	for range 3 {
		f.watch(t)
	}
	got := lowStock()
	if len(got) != 1 || got[0].Product != p.ID() || got[0].Message != "gift card: 3 left, at or below the low-stock threshold of 3" {
		t.Fatalf("at the threshold the alerts are %+v, want one low_stock for product %d", got, p.ID())
	}
	f.sell(t, p.ID(), 3) // sold out
	f.watch(t)
	if n := len(lowStock()); n != 1 {
		t.Fatalf("sold out: %d low_stock alerts, want still 1", n)
	}
	f.giveBack(t, held...) // 3 back: low again, no restock above the band
	f.watch(t)
	if n := len(lowStock()); n != 1 {
		t.Fatalf("back to 3 left: %d low_stock alerts, want 1 (no new crossing of the threshold)", n)
	}
}
