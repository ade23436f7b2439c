package application_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

// countingLedger counts the product reads that reach the ledger.
type countingLedger struct {
	*memory.Ledger
	lists, reads atomic.Int64
}

func (l *countingLedger) Products() domain.ProductCatalog {
	return countingCatalog{ProductCatalog: l.Ledger.Products(), l: l}
}

type countingCatalog struct {
	domain.ProductCatalog
	l *countingLedger
}

func (c countingCatalog) Products(ctx context.Context) ([]domain.Product, error) {
	c.l.lists.Add(1)
	return c.ProductCatalog.Products(ctx)
}

func (c countingCatalog) Product(ctx context.Context, id domain.ProductID) (domain.Product, error) {
	c.l.reads.Add(1)
	return c.ProductCatalog.Product(ctx, id)
}

// countingGate counts LevelsMany calls; block, when set, holds each call until it is closed.
type countingGate struct {
	*memory.Gate
	many  atomic.Int64
	fail  atomic.Bool
	block chan struct{}
}

func (g *countingGate) LevelsMany(ctx context.Context, ids []domain.ProductID) (map[domain.ProductID]domain.GateLevels, error) {
	g.many.Add(1)
	if g.block != nil {
		<-g.block
	}
	if g.fail.Load() {
		return nil, domain.ErrUnavailable
	}
	return g.Gate.LevelsMany(ctx, ids)
}

type catalogueFixture struct {
	*fixture
	ledger *countingLedger
	gate   *countingGate
}

func newCatalogueFixture(t *testing.T, block chan struct{}) *catalogueFixture {
	cf := &catalogueFixture{}
	cf.fixture = newFixture(t,
		withLedger(func(l *memory.Ledger) domain.Ledger { cf.ledger = &countingLedger{Ledger: l}; return cf.ledger }),
		withGate(func(g *memory.Gate) domain.StockGate { cf.gate = &countingGate{Gate: g, block: block}; return cf.gate }))
	return cf
}

func (f *catalogueFixture) catalogue(t *testing.T) *application.CatalogueSnapshot {
	t.Helper()
	snap, err := f.shop.Sales.Catalogue(f.ctx)
	if err != nil {
		t.Fatalf("Catalogue: %v", err)
	}
	return snap
}

func item(t *testing.T, snap *application.CatalogueSnapshot, id domain.ProductID) application.CatalogueItem {
	t.Helper()
	it, ok := snap.Item(id)
	if !ok {
		t.Fatalf("the catalogue does not list product %d", id)
	}
	return it
}

// TestCatalogueStatuses: on sale with stock, sold out at zero stock, paused when frozen
// (whatever the stock); the stock as a number or as a level, per product.
func TestCatalogueStatuses(t *testing.T) {
	f := newCatalogueFixture(t, nil)
	onSale := f.createProduct(t, 5, 12)
	soldOut := f.createProduct(t, 5, 1)
	f.mustPlace(t, "buyer-1", soldOut.ID(), 1)
	paused := f.createProduct(t, 5, 3)
	if err := f.shop.Catalogue.FreezeProduct(f.ctx, paused.ID(), "audit"); err != nil {
		t.Fatal(err)
	}
	display := domain.StockLevel
	tiers := []domain.PriceTier{{MinQty: 3, UnitPrice: testPrice - 100}}
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, onSale.ID(), application.ProductPatch{StockDisplay: &display, Tiers: &tiers}); err != nil {
		t.Fatal(err)
	}
	snap := f.catalogue(t)
	if len(snap.Items) != 3 || snap.Currency != f.shop.Config().Currency {
		t.Fatalf("catalogue has %d items in %v, want 3 in the shop's currency", len(snap.Items), snap.Currency)
	}
	got := item(t, snap, onSale.ID())
	if got.Status != application.CatalogueOnSale || got.Display != domain.StockLevel || got.StockLevel != "plenty" ||
		got.Stock != 0 || len(got.Tiers) != 1 || got.Tiers[0] != tiers[0] || got.Price != testPrice || got.MaxPerOrder != 5 {
		t.Errorf("on-sale product: %+v", got)
	}
	if got := item(t, snap, soldOut.ID()); got.Status != application.CatalogueSoldOut || got.Display != domain.StockExact || got.Stock != 0 {
		t.Errorf("sold-out product: %+v", got)
	}
	if got := item(t, snap, paused.ID()); got.Status != application.CataloguePaused || got.Stock != 3 {
		t.Errorf("paused product: %+v", got)
	}
}

// TestCatalogueReadsNoLedgerPerRequest: any number of requests within the refresh interval
// make no ledger call and no gate call beyond the one refresh; the next interval makes one
// gate call, and the ledger is read again only when its own interval has passed.
func TestCatalogueReadsNoLedgerPerRequest(t *testing.T) {
	f := newCatalogueFixture(t, nil)
	p := f.createProduct(t, 5, 20)
	cfg := f.shop.Config()
	lists, reads := f.ledger.lists.Load(), f.ledger.reads.Load()
	first := f.catalogue(t)
	for range 1000 {
		if snap := f.catalogue(t); snap != first {
			t.Fatal("a request within the interval got another snapshot")
		}
	}
	if n := f.ledger.lists.Load() - lists; n != 1 {
		t.Fatalf("%d ledger lists for 1001 requests, want 1 (the first refresh)", n)
	}
	if n := f.ledger.reads.Load() - reads; n != 0 {
		t.Fatalf("%d ledger product reads for the catalogue, want none", n)
	}
	if n := f.gate.many.Load(); n != 1 {
		t.Fatalf("%d gate calls for 1001 requests, want 1", n)
	}

	f.mustPlace(t, "buyer-1", p.ID(), 2)
	f.clock.Advance(cfg.CatalogueLevelsEvery)
	for range 100 {
		f.catalogue(t)
	}
	if n := f.gate.many.Load(); n != 2 {
		t.Fatalf("%d gate calls after one interval, want 2", n)
	}
	if n := f.ledger.lists.Load() - lists; n != 1 {
		t.Fatalf("%d ledger lists before the product interval passed, want 1", n)
	}
	snap := f.catalogue(t)
	if got := item(t, snap, p.ID()); got.Stock != 18 || snap == first || snap.Version <= first.Version {
		t.Fatalf("after an order of 2: stock %d (version %d after %d), want 18 in a new snapshot", got.Stock, snap.Version, first.Version)
	}

	f.clock.Advance(cfg.CatalogueProductsEvery)
	f.catalogue(t)
	if n := f.ledger.lists.Load() - lists; n != 2 {
		t.Fatalf("%d ledger lists after the product interval, want 2", n)
	}
}

// TestCatalogueKeepsAnUnchangedSnapshot: a refresh that finds nothing changed keeps the
// snapshot (same version and time), so what is derived from it (an ETag) stays valid.
func TestCatalogueKeepsAnUnchangedSnapshot(t *testing.T) {
	f := newCatalogueFixture(t, nil)
	f.createProduct(t, 5, 3)
	first := f.catalogue(t)
	f.clock.Advance(f.shop.Config().CatalogueLevelsEvery)
	if again := f.catalogue(t); again != first || f.gate.many.Load() != 2 {
		t.Fatalf("an unchanged refresh published %+v (gate calls %d), want the first snapshot", again, f.gate.many.Load())
	}
}

// TestCatalogueRefreshIsASingleFlight: many concurrent requests that find no snapshot make one
// gate call, and all get its snapshot.
func TestCatalogueRefreshIsASingleFlight(t *testing.T) {
	block := make(chan struct{})
	f := newCatalogueFixture(t, block)
	f.createProduct(t, 5, 3)
	const n = 50
	var wg sync.WaitGroup
	snaps := make([]*application.CatalogueSnapshot, n)
	started := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			snaps[i], _ = f.shop.Sales.Catalogue(f.ctx)
		}()
	}
	for range n {
		<-started
	}
	close(block)
	wg.Wait()
	if got := f.gate.many.Load(); got != 1 {
		t.Fatalf("%d gate calls for %d concurrent requests, want 1", got, n)
	}
	for i, s := range snaps {
		if s == nil || s != snaps[0] {
			t.Fatalf("request %d got %p, want the one snapshot %p", i, s, snaps[0])
		}
	}
}

// TestCatalogueServesTheLastSnapshotWhenTheGateFails: a failed refresh keeps the last snapshot
// and is not retried before the interval passes; with no snapshot yet the request fails.
func TestCatalogueServesTheLastSnapshotWhenTheGateFails(t *testing.T) {
	f := newCatalogueFixture(t, nil)
	f.createProduct(t, 5, 3)
	f.gate.fail.Store(true)
	if _, err := f.shop.Sales.Catalogue(f.ctx); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("Catalogue with the gate down and no snapshot: err = %v, want ErrUnavailable", err)
	}
	f.clock.Advance(f.shop.Config().CatalogueLevelsEvery)
	f.gate.fail.Store(false)
	first := f.catalogue(t)
	f.gate.fail.Store(true)
	f.clock.Advance(f.shop.Config().CatalogueLevelsEvery)
	calls := f.gate.many.Load()
	for range 10 {
		if snap := f.catalogue(t); snap != first {
			t.Fatal("a failed refresh replaced the snapshot")
		}
	}
	if got := f.gate.many.Load() - calls; got != 1 {
		t.Fatalf("%d gate calls while the gate is down within one interval, want 1", got)
	}
}

// TestCatalogueSeesAChangeOnThisInstanceAtOnce: an update, a freeze or a new product on this
// instance shows in the next answer, without waiting for the product interval.
func TestCatalogueSeesAChangeOnThisInstanceAtOnce(t *testing.T) {
	f := newCatalogueFixture(t, nil)
	p := f.createProduct(t, 5, 3)
	f.catalogue(t)
	name := "renamed"
	if _, err := f.shop.Catalogue.UpdateProduct(f.ctx, p.ID(), application.ProductPatch{Name: &name}); err != nil {
		t.Fatal(err)
	}
	if got := item(t, f.catalogue(t), p.ID()); got.Name != name {
		t.Fatalf("name after an update = %q, want %q", got.Name, name)
	}
	q := f.createProduct(t, 5, 0)
	if got := item(t, f.catalogue(t), q.ID()); got.Status != application.CatalogueSoldOut {
		t.Fatalf("new product without codes: %+v", got)
	}
	if err := f.shop.Catalogue.FreezeProduct(f.ctx, p.ID(), ""); err != nil {
		t.Fatal(err)
	}
	if got := item(t, f.catalogue(t), p.ID()); got.Status != application.CataloguePaused {
		t.Fatalf("frozen product: %+v", got)
	}
}
