package porttest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"cardshop/domain"
)

// RunLedger checks a domain.Ledger (products, orders, cards, flow, outbox, payments, the
// notification log, operators, the audit log and transactions) against the ports' contracts. newLedger returns the
// ledger under test; it is called once per case and may return the same shared database every
// time.
//
// The outbox cases assert exact changes of the global Backlog, and the notification and audit
// cases read the newest records of the whole log, so nothing else may write to the same
// database's outbox, notification log or audit log while they run.
func RunLedger(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("products", func(t *testing.T) { runProducts(t, newLedger) })
	t.Run("orders", func(t *testing.T) { runOrders(t, newLedger) })
	t.Run("order search", func(t *testing.T) { runOrderSearch(t, newLedger) })
	t.Run("guest orders", func(t *testing.T) { runGuestOrders(t, newLedger) })
	t.Run("cards", func(t *testing.T) { runCards(t, newLedger) })
	t.Run("void", func(t *testing.T) { runVoid(t, newLedger) })
	t.Run("multi-use codes", func(t *testing.T) { runMultiUse(t, newLedger) })
	t.Run("flows", func(t *testing.T) { runFlows(t, newLedger) })
	t.Run("outbox", func(t *testing.T) { runOutbox(t, newLedger) })
	t.Run("payments", func(t *testing.T) { runPayments(t, newLedger) })
	t.Run("notifications", func(t *testing.T) { runNotifications(t, newLedger) })
	t.Run("operators", func(t *testing.T) { runOperators(t, newLedger) })
	t.Run("support", func(t *testing.T) { runSupport(t, newLedger) })
	t.Run("audit", func(t *testing.T) { runAudit(t, newLedger) })
	t.Run("alerts", func(t *testing.T) { runAlerts(t, newLedger) })
	t.Run("blocklist", func(t *testing.T) { runBlocklist(t, newLedger) })
	t.Run("alert channels", func(t *testing.T) { runAlertChannels(t, newLedger) })
	t.Run("channels", func(t *testing.T) { runChannels(t, newLedger) })
	t.Run("coupons", func(t *testing.T) { runCoupons(t, newLedger) })
	t.Run("atomically", func(t *testing.T) { runAtomically(t, newLedger) })
	t.Run("snapshot", func(t *testing.T) { runSnapshot(t, newLedger) })
}

// --- helpers of more than one area; an area's own helpers are in its file ---

func cmpInt[T ~int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func createProduct(t *testing.T, l domain.Store) domain.Product {
	t.Helper()
	p, err := domain.NewProduct(NewProductID(), "porttest product", 199, 10, now())
	if err != nil {
		t.Fatal(err)
	}
	created, err := l.Products().Create(t.Context(), p)
	if err != nil {
		t.Fatalf("Create product: %v", err)
	}
	if created.ID() != p.ID() {
		t.Fatalf("Create changed the explicit id %d to %d", p.ID(), created.ID())
	}
	return created
}

func productRecord(p domain.Product) domain.ProductRecord {
	r := p.Record()
	r.CreatedAt = r.CreatedAt.UTC()
	return r
}

func wantProduct(t *testing.T, l domain.Store, want domain.Product) {
	t.Helper()
	got, err := l.Products().Product(t.Context(), want.ID())
	if err != nil {
		t.Fatalf("Product(%d): %v", want.ID(), err)
	}
	if !reflect.DeepEqual(productRecord(got), productRecord(want)) {
		t.Fatalf("Product(%d) = %+v, want %+v", want.ID(), productRecord(got), productRecord(want))
	}
}

// newOrder is a new PENDING order of qty units of p placed at at, expiring 15 minutes later.
func newOrder(t *testing.T, p domain.Product, qty int, at time.Time) domain.Order {
	t.Helper()
	o, err := domain.NewOrder(newOrderNo(), newBuyer(), p, qty, newKey(), at, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func insertOrder(t *testing.T, l domain.Store, o domain.Order) {
	t.Helper()
	if err := l.Orders().Insert(t.Context(), o); err != nil {
		t.Fatalf("Insert order: %v", err)
	}
}

func orderRecord(o domain.Order) domain.OrderRecord {
	r := o.Record()
	for _, ts := range []*time.Time{&r.CreatedAt, &r.ExpiresAt, &r.PaidAt, &r.EndedAt, &r.UpdatedAt, &r.RevealedAt} {
		*ts = ts.UTC()
	}
	return r
}

func sameOrder(t *testing.T, got, want domain.Order) {
	t.Helper()
	if orderRecord(got) != orderRecord(want) {
		t.Fatalf("order = %+v, want %+v", orderRecord(got), orderRecord(want))
	}
}

func wantOrder(t *testing.T, l domain.Store, want domain.Order) {
	t.Helper()
	got, err := l.Orders().Order(t.Context(), want.No())
	if err != nil {
		t.Fatalf("Order(%s): %v", want.No(), err)
	}
	sameOrder(t, got, want)
}

func newCodes(t *testing.T, n int) []domain.CardCode {
	t.Helper()
	out := make([]domain.CardCode, n)
	for i := range out {
		c, err := domain.ParseCardCode(fmt.Sprintf("PT-%016X-%04d", rand.Uint64(), i))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c
	}
	return out
}

func importCodes(t *testing.T, l domain.Store, p domain.ProductID, codes []domain.CardCode, want domain.ImportResult) {
	t.Helper()
	got, err := l.Cards().Import(t.Context(), p, codes, 1)
	if err != nil || got.Added != want.Added || got.Duplicates != want.Duplicates || got.InPool != want.InPool {
		t.Fatalf("Import = %+v, %v; want %+v", got, err, want)
	}
	if want.Outcomes != nil && !slices.Equal(got.Outcomes, want.Outcomes) {
		t.Fatalf("Import outcomes = %v, want %v", got.Outcomes, want.Outcomes)
	}
	n := map[domain.ImportOutcome]int{}
	for _, o := range got.Outcomes {
		n[o]++
	}
	if len(got.Outcomes) != len(codes) || n[domain.ImportAdded] != got.Added || n[domain.ImportDuplicate] != got.Duplicates ||
		n[domain.ImportInPool] != got.InPool {
		t.Fatalf("Import outcomes %v do not match the counts %+v of %d codes", got.Outcomes, got, len(codes))
	}
}

func allocate(t *testing.T, l domain.Store, p domain.ProductID, no domain.OrderNo, qty int) []domain.Card {
	t.Helper()
	got, err := l.Cards().Allocate(t.Context(), p, no, qty)
	if err != nil {
		t.Fatalf("Allocate(%d): %v", qty, err)
	}
	return got
}

func ids(cards []domain.Card) []int64 {
	out := make([]int64, len(cards))
	for i, c := range cards {
		out[i] = c.ID
	}
	return out
}

func wantCounts(t *testing.T, l domain.Store, p domain.ProductID, want domain.CardCounts) {
	t.Helper()
	got, err := l.Cards().Counts(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []domain.CardStatus{domain.CardUnsold, domain.CardSold, domain.CardRecycled, domain.CardVoid} {
		if got[st] != want[st] {
			t.Fatalf("Counts = %v, want %v", got, want)
		}
	}
}

// farFuture is a time every message is due by.
func farFuture() time.Time { return now().AddDate(100, 0, 0) }

func backlog(t *testing.T, l domain.Store) int64 {
	t.Helper()
	n, err := l.Outbox().Backlog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pendingWithKey returns the unsent messages with key, due or not, earliest due first. It asks
// for the whole backlog, because a shared outbox may hold older messages of other tests.
func pendingWithKey(t *testing.T, l domain.Store, key string) []domain.OutboxMessage {
	t.Helper()
	n := backlog(t, l)
	all, err := l.Outbox().Pending(t.Context(), farFuture(), int(n)+100)
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.OutboxMessage
	for _, m := range all {
		if m.Key == key {
			m.Payload = bytes.Clone(m.Payload)
			out = append(out, m)
		}
	}
	return out
}
