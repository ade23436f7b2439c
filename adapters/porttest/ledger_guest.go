package porttest

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// newGuestOrder is a new PENDING guest order of qty units of p for the address.
func newGuestOrder(t *testing.T, p domain.Product, qty int, email domain.Email, at time.Time) domain.Order {
	t.Helper()
	buyer := domain.GuestBuyer(email)
	o, err := domain.NewOrder(newOrderNo(), buyer, p, qty, newKey(), at, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err = o.WithGuest(domain.Guest{Email: email, Lang: domain.LangChinese,
		AccessHash: sha256.Sum256(fmt.Appendf(nil, "secret-%016x", rand.Uint64()))})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// runGuestOrders checks that a guest order's address, language and access hash round-trip,
// through the reads by number, by key and by search, and after its payment and reveal, and
// that an API order keeps none; the orders are inserted from several goroutines at once, so a
// group-committing ledger writes guest and API orders in one batch. It never assumes an empty
// store: the searches are by the run's own buyer and product.
func runGuestOrders(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	l := newLedger(t)
	p := createProduct(t, l)
	at := now()
	email := domain.Email(fmt.Sprintf("pt.%x@example.com", rand.Uint32()))
	var orders []domain.Order
	for i := range 8 {
		if i%2 == 0 {
			orders = append(orders, newGuestOrder(t, p, 1, email, at))
		} else {
			orders = append(orders, newOrder(t, p, 1, at))
		}
	}
	var wg sync.WaitGroup
	for _, o := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := l.Atomically(t.Context(), func(tx domain.Store) error {
				if err := tx.Orders().Insert(t.Context(), o); err != nil {
					return err
				}
				return tx.Flows().Append(t.Context(), domain.FlowEntry{ProductID: p.ID(), Ref: string(o.No()),
					Type: domain.FlowReserve, Qty: 1, At: at})
			})
			if err != nil {
				t.Errorf("insert order %s: %v", o.No(), err)
			}
		}()
	}
	wg.Wait()
	for _, o := range orders {
		wantOrder(t, l, o)
		got, err := l.Orders().OrderByKey(t.Context(), o.Buyer(), o.IdempotencyKey())
		if err != nil {
			t.Fatal(err)
		}
		sameOrder(t, got, o)
		if o.IsGuest() != (got.Email() == email) {
			t.Fatalf("order %s: address %q", o.No(), got.Email())
		}
	}
	found, err := l.Orders().Search(t.Context(), domain.OrderFilter{Buyer: domain.GuestBuyer(email), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 4 {
		t.Fatalf("search by the guest buyer found %d orders, want 4", len(found))
	}
	for _, o := range found {
		if o.Email() != email || o.Lang() != domain.LangChinese || o.AccessHash().IsZero() {
			t.Fatalf("searched guest order %s lost its guest fields: %+v", o.No(), o.Record())
		}
	}
	byProduct, err := l.Orders().Search(t.Context(), domain.OrderFilter{Product: p.ID(), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, o := range byProduct {
		for _, w := range orders {
			if o.No() == w.No() {
				sameOrder(t, o, w)
				seen++
			}
		}
	}
	if seen != len(orders) {
		t.Fatalf("Search by product listed %d of the %d orders", seen, len(orders))
	}

	guest := orders[0]
	paid := guest
	if err := paid.MarkPaid(at.Add(time.Minute), guest.Amount(), "pay-1"); err != nil {
		t.Fatal(err)
	}
	if won, err := l.Orders().Transition(t.Context(), paid, domain.StatusPending); err != nil || !won {
		t.Fatalf("Transition to PAID: %v %v", won, err)
	}
	if set, err := l.Orders().MarkRevealed(t.Context(), guest.No(), at.Add(2*time.Minute)); err != nil || !set {
		t.Fatalf("MarkRevealed: %v %v", set, err)
	}
	got, err := l.Orders().Order(t.Context(), guest.No())
	if err != nil {
		t.Fatal(err)
	}
	if got.Email() != email || got.Lang() != domain.LangChinese || got.AccessHash() != guest.AccessHash() ||
		got.Status() != domain.StatusPaid || !got.Revealed() {
		t.Fatalf("paid guest order: %+v", got.Record())
	}
}
