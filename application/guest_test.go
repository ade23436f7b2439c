package application_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

const testAccessKey = "order-access-key-for-the-tests-0123456789"

// withGuests gives the shop an access key, so it takes guest orders.
func withGuests() option {
	return withConfig(func(c *application.Config) {
		c.OrderAccessKey = testAccessKey
		c.OrderURL = "https://shop.example/orders/{order_no}?key={key}"
	})
}

// placeGuest places a guest order and fails the test on an error.
func (f *fixture) placeGuest(t tester, pid domain.ProductID, qty int, email string) application.GuestPlaced {
	t.Helper()
	g, err := f.shop.Sales.PlaceGuestOrder(f.ctx, application.GuestOrder{Product: pid, Qty: qty, Email: email, Lang: "en",
		IdempotencyKey: f.newKey()})
	if err != nil {
		t.Fatalf("place guest order: %v", err)
	}
	f.track(g.Order)
	return g
}

func TestPlaceGuestOrderKeepsTheNormalisedAddressAndAHashOnly(t *testing.T) {
	f := newFixture(t, withGuests())
	p := f.createProduct(t, 5, 10)
	g, err := f.shop.Sales.PlaceGuestOrder(f.ctx, application.GuestOrder{Product: p.ID(), Qty: 2,
		Email: "  Buyer.One@Example.COM ", Lang: "zh-CN", IdempotencyKey: "guest-key-0001"})
	if err != nil {
		t.Fatalf("place: %v", err)
	}
	stored := f.order(t, g.Order.No())
	if stored.Email() != "Buyer.One@example.com" || stored.Lang() != "zh-CN" {
		t.Errorf("stored address %q, language %q", stored.Email(), stored.Lang())
	}
	if stored.Buyer() != domain.GuestBuyer("Buyer.One@example.com") || !strings.HasPrefix(string(stored.Buyer()), "g.") {
		t.Errorf("buyer %q is not the address's guest buyer", stored.Buyer())
	}
	if len(g.Secret) < 22 || strings.ContainsAny(g.Secret, "+/=") {
		t.Errorf("secret %q is not 128 bits of URL-safe text", g.Secret)
	}
	if stored.AccessHash().IsZero() || strings.Contains(fmt.Sprintf("%+v", stored.Record()), g.Secret) {
		t.Errorf("the ledger must keep only the secret's hash")
	}
	if stored.Status() != domain.StatusPending || stored.Qty() != 2 {
		t.Errorf("stored order %s qty %d", stored.Status(), stored.Qty())
	}
}

func TestPlaceGuestOrderRefusesABadAddressOrLanguage(t *testing.T) {
	f := newFixture(t, withGuests())
	p := f.createProduct(t, 5, 10)
	for _, c := range []struct{ email, lang string }{
		{"", "en"}, {"no-at-sign", "en"}, {"a@b", "en"}, {"a b@example.com", "en"}, {"a@example..com", "en"},
		{"<a>@example.com", "en"}, {strings.Repeat("a", 250) + "@x.com", "en"}, {"a@example.com", "fr"}, {"a@example.com", ""},
	} {
		_, err := f.shop.Sales.PlaceGuestOrder(f.ctx, application.GuestOrder{Product: p.ID(), Qty: 1, Email: c.email,
			Lang: c.lang, IdempotencyKey: f.newKey()})
		if !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%q/%q: %v, want a validation error", c.email, c.lang, err)
		}
	}
	if l := f.levels(t, p.ID()); l.Sold != 0 {
		t.Errorf("refused orders reserved %d units", l.Sold)
	}
}

func TestPlaceGuestOrderNeedsAnAccessKey(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 5, 10)
	_, err := f.shop.Sales.PlaceGuestOrder(f.ctx, application.GuestOrder{Product: p.ID(), Qty: 1, Email: "a@example.com",
		Lang: "en", IdempotencyKey: f.newKey()})
	if err == nil {
		t.Fatal("a shop without an access key took a guest order")
	}
}

func TestGuestReplayAnswersTheSameOrderAndSecret(t *testing.T) {
	f := newFixture(t, withGuests())
	p := f.createProduct(t, 5, 10)
	cmd := application.GuestOrder{Product: p.ID(), Qty: 1, Email: "a@example.com", Lang: "en", IdempotencyKey: "double-submit-1"}
	first, err := f.shop.Sales.PlaceGuestOrder(f.ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.shop.Sales.PlaceGuestOrder(f.ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.Order.No() != first.Order.No() || again.Secret != first.Secret {
		t.Errorf("replay: %v %s %q, first %s %q", again.Replayed, again.Order.No(), again.Secret, first.Order.No(), first.Secret)
	}
	cmd.Qty = 2
	if _, err := f.shop.Sales.PlaceGuestOrder(f.ctx, cmd); !errors.Is(err, domain.ErrIdempotencyMismatch) {
		t.Errorf("same key, other qty: %v", err)
	}
	other, err := f.shop.Sales.PlaceGuestOrder(f.ctx, application.GuestOrder{Product: p.ID(), Qty: 1, Email: "a@example.com",
		Lang: "en", IdempotencyKey: "double-submit-2"})
	if err != nil {
		t.Fatal(err)
	}
	if other.Secret == first.Secret {
		t.Error("two orders share one secret")
	}
}

// TestGuestBuyerLimitHoldsPerAddress places guest orders from many goroutines at once, with
// the same address written in different cases and spaces: the per-buyer cap counts them as
// one buyer, and another address has a budget of its own.
func TestGuestBuyerLimitHoldsPerAddress(t *testing.T) {
	f := newFixture(t, withGuests(), withConfig(func(c *application.Config) { c.BuyerCap = 3; c.BuyerWindow = time.Hour }))
	p := f.createProduct(t, 5, 100)
	spellings := []string{"same@example.com", " same@EXAMPLE.com", "same@Example.Com "}
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		placed      int
		limited     int
		unexpected  []error
		otherPlaced int
	)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			email := spellings[i%len(spellings)]
			if i%10 == 9 {
				email = "other@example.com"
			}
			_, err := f.shop.Sales.PlaceGuestOrder(f.ctx, application.GuestOrder{Product: p.ID(), Qty: 1, Email: email,
				Lang: "en", IdempotencyKey: fmt.Sprintf("conc-key-%04d", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && email == "other@example.com":
				otherPlaced++
			case err == nil:
				placed++
			case errors.Is(err, domain.ErrBuyerLimit):
				limited++
			default:
				unexpected = append(unexpected, err)
			}
		}()
	}
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("unexpected errors: %v", unexpected)
	}
	if placed != 3 || otherPlaced != 3 {
		t.Errorf("placed %d for one address and %d for the other; the cap is 3 per address", placed, otherPlaced)
	}
	if limited != 40-6 {
		t.Errorf("%d refused with ErrBuyerLimit, want %d", limited, 40-6)
	}
}

func TestGuestOrderNeedsItsSecret(t *testing.T) {
	f := newFixture(t, withGuests())
	p := f.createProduct(t, 5, 10)
	g := f.placeGuest(t, p.ID(), 2, "buyer@example.com")
	other := f.placeGuest(t, p.ID(), 1, "buyer@example.com")
	api := f.mustPlace(t, "api-buyer", p.ID(), 1)

	if _, err := f.shop.Sales.GuestOrderStatus(f.ctx, g.Order.No(), g.Secret); err != nil {
		t.Fatalf("status with the secret: %v", err)
	}
	for name, c := range map[string]struct {
		no     domain.OrderNo
		secret string
	}{
		"wrong secret":         {g.Order.No(), g.Secret[:len(g.Secret)-1] + "x"},
		"another order's":      {g.Order.No(), other.Secret},
		"empty secret":         {g.Order.No(), ""},
		"missing order":        {"250301120000000012345678", g.Secret},
		"an API order":         {api.No(), g.Secret},
		"an API order, no key": {api.No(), ""},
	} {
		if _, err := f.shop.Sales.GuestOrder(f.ctx, c.no, c.secret); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("%s: GuestOrder answered %v", name, err)
		}
		if _, err := f.shop.Sales.GuestOrderStatus(f.ctx, c.no, c.secret); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("%s: GuestOrderStatus answered %v", name, err)
		}
	}
}

func TestGuestOrderShowsTheCodesOnceAndRecordsTheReveal(t *testing.T) {
	f := newFixture(t, withGuests())
	p := f.createProduct(t, 5, 10)
	g := f.placeGuest(t, p.ID(), 2, "buyer@example.com")

	v, err := f.shop.Sales.GuestOrder(f.ctx, g.Order.No(), g.Secret)
	if err != nil || len(v.Cards) != 0 || v.Order.Revealed() {
		t.Fatalf("unpaid order page: %d codes, revealed %v, %v", len(v.Cards), v.Order.Revealed(), err)
	}
	f.mustPay(t, g.Order.No())
	st, err := f.shop.Sales.GuestOrderStatus(f.ctx, g.Order.No(), g.Secret)
	if err != nil || st.Status() != domain.StatusPaid || st.Revealed() {
		t.Fatalf("status of the paid order: %s revealed %v, %v", st.Status(), st.Revealed(), err)
	}
	if f.order(t, g.Order.No()).Revealed() {
		t.Fatal("polling the status recorded a reveal")
	}
	v, err = f.shop.Sales.GuestOrder(f.ctx, g.Order.No(), g.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Cards) != 2 || !v.Order.Revealed() || !f.order(t, g.Order.No()).Revealed() {
		t.Errorf("order page of the paid order: %d codes, revealed %v (stored %v)", len(v.Cards), v.Order.Revealed(),
			f.order(t, g.Order.No()).Revealed())
	}
	sold := f.soldCards(t, g.Order.No())
	for i := range sold {
		if v.Cards[i].Code.Reveal() != sold[i].Code.Reveal() {
			t.Errorf("code %d is not the order's", i)
		}
	}
}

func TestLookupGuestOrderNeedsNumberAddressAndSecret(t *testing.T) {
	f := newFixture(t, withGuests())
	p := f.createProduct(t, 5, 10)
	g := f.placeGuest(t, p.ID(), 1, "Look.Up@Example.com")
	other := f.placeGuest(t, p.ID(), 1, "someone@example.com")

	o, err := f.shop.Sales.LookupGuestOrder(f.ctx, g.Order.No(), " Look.Up@EXAMPLE.COM", g.Secret)
	if err != nil || o.No() != g.Order.No() {
		t.Fatalf("lookup with the right three: %v", err)
	}
	for name, c := range map[string]struct {
		no            domain.OrderNo
		email, secret string
	}{
		"wrong address":       {g.Order.No(), "someone@example.com", g.Secret},
		"local part's case":   {g.Order.No(), "look.up@example.com", g.Secret},
		"invalid address":     {g.Order.No(), "not an address", g.Secret},
		"wrong secret":        {g.Order.No(), "Look.Up@example.com", other.Secret},
		"missing order":       {"250301120000000012345678", "Look.Up@example.com", g.Secret},
		"another's number":    {other.Order.No(), "Look.Up@example.com", g.Secret},
		"everything is empty": {"", "", ""},
	} {
		if _, err := f.shop.Sales.LookupGuestOrder(f.ctx, c.no, c.email, c.secret); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSaleClockFollowsTheGate: the gate's clock runs 3 s ahead of the instance's; after a
// catalogue refresh SaleClock tells the gate's time.
func TestSaleClockFollowsTheGate(t *testing.T) {
	clock := memory.NewFakeClock(t0)
	f := newFixture(t, withGuests(), withClock(clock), withGate(func(*memory.Gate) domain.StockGate {
		return memory.NewGate(aheadClock{clock, 3 * time.Second})
	}))
	if d := f.shop.Sales.SaleClock(f.ctx).Sub(f.shopNow()); d != 0 {
		t.Errorf("before any refresh SaleClock is %v off the instance's clock", d)
	}
	if _, err := f.shop.Sales.Catalogue(f.ctx); err != nil {
		t.Fatal(err)
	}
	if d := f.shop.Sales.SaleClock(f.ctx).Sub(f.shopNow()); d != 3*time.Second {
		t.Errorf("after a refresh SaleClock is %v ahead, want the gate's 3s", d)
	}
}

// aheadClock is a clock d ahead of c.
type aheadClock struct {
	c domain.Clock
	d time.Duration
}

func (a aheadClock) Now() time.Time { return a.c.Now().Add(a.d) }

// readCounter is a ledger that counts the reads of orders by number.
type readCounter struct {
	domain.Ledger
	reads atomic.Int64
}

func (r *readCounter) Orders() domain.OrderRepo { return countedOrders{r.Ledger.Orders(), &r.reads} }

type countedOrders struct {
	domain.OrderRepo
	reads *atomic.Int64
}

func (c countedOrders) Order(ctx context.Context, no domain.OrderNo) (domain.Order, error) {
	c.reads.Add(1)
	return c.OrderRepo.Order(ctx, no)
}

// TestGuestChecksDoTheSameWorkFoundOrNot: a lookup or an order page of a missing order reads
// the ledger as often as one of an existing order with a wrong secret or address (once), and
// answers the same error text: nothing tells them apart but the database's own timing.
func TestGuestChecksDoTheSameWorkFoundOrNot(t *testing.T) {
	var counter *readCounter
	f := newFixture(t, withGuests(), withLedger(func(l *memory.Ledger) domain.Ledger {
		counter = &readCounter{Ledger: l}
		return counter
	}))
	p := f.createProduct(t, 5, 10)
	g := f.placeGuest(t, p.ID(), 1, "same@example.com")
	missing := domain.OrderNo("250301120000000012345678")
	type call func() error
	lookup := func(no domain.OrderNo, email, secret string) call {
		return func() error { _, err := f.shop.Sales.LookupGuestOrder(f.ctx, no, email, secret); return err }
	}
	page := func(no domain.OrderNo, secret string) call {
		return func() error { _, err := f.shop.Sales.GuestOrder(f.ctx, no, secret); return err }
	}
	var texts []string
	for name, c := range map[string]call{
		"lookup, missing order":    lookup(missing, "same@example.com", g.Secret),
		"lookup, wrong secret":     lookup(g.Order.No(), "same@example.com", "wrong"),
		"lookup, wrong address":    lookup(g.Order.No(), "other@example.com", g.Secret),
		"lookup, invalid address":  lookup(g.Order.No(), "not an address", g.Secret),
		"page, missing order":      page(missing, g.Secret),
		"page, wrong secret":       page(g.Order.No(), "wrong"),
		"page, another's secret":   page(g.Order.No(), f.placeGuest(t, p.ID(), 1, "x@example.com").Secret),
		"page, API order's number": page(f.mustPlace(t, "api-buyer", p.ID(), 1).No(), g.Secret),
	} {
		before := counter.reads.Load()
		err := c()
		if !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if n := counter.reads.Load() - before; n != 1 {
			t.Errorf("%s read the order %d times, want 1", name, n)
		}
		texts = append(texts, err.Error())
	}
	for _, s := range texts {
		if s != texts[0] {
			t.Errorf("answers differ: %q and %q", s, texts[0])
		}
	}
}
