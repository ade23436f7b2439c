package application

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"cardshop/domain"
)

// CatalogueStatus is a product's sale status in the public catalogue. The set is closed per
// version of the API; sale windows add "upcoming" and "ended".
type CatalogueStatus string

// The catalogue statuses, in the order they are decided: a frozen product is paused whatever
// its stock; then a sale window that is over is ended, one not open yet is upcoming (both by
// this instance's clock at the refresh: the gate decides orders by its own); otherwise no
// reservable unit (or no gate record yet) is sold out.
const (
	CatalogueOnSale   CatalogueStatus = "on_sale"
	CatalogueSoldOut  CatalogueStatus = "sold_out"
	CataloguePaused   CatalogueStatus = "paused"
	CatalogueUpcoming CatalogueStatus = "upcoming"
	CatalogueEnded    CatalogueStatus = "ended"
)

// CatalogueItem is what the public catalogue shows of one product: never a code, a buyer, a
// sale-state reason or another internal id.
type CatalogueItem struct {
	ID          domain.ProductID
	Name        string
	Description string       // plain text, lines separated by "\n" (domain.Product.Description)
	Price       domain.Money // the base unit price
	Tiers       []domain.PriceTier
	MinPerOrder int
	MaxPerOrder int
	Group       string // the variant group ("" for a product on its own) and the label in it
	Variant     string
	Sale        domain.SaleRules // the window and the per-buyer limit
	Status      CatalogueStatus
	// Display says which of Stock and StockLevel the catalogue shows: StockExact shows Stock
	// (reservable units, 0 when sold out), StockLevel shows StockLevel (domain.StockLevelOf).
	Display    domain.StockDisplay
	Stock      int64
	StockLevel string
}

// CatalogueSnapshot is one instance's view of the public catalogue. It is immutable: every
// refresh that changes something publishes a new one.
type CatalogueSnapshot struct {
	// Version increases with every published snapshot of this App, so a caller can cache what
	// it derives from one (an encoded body) until the version changes.
	Version  uint64
	Currency domain.Currency
	Items    []CatalogueItem // by id
	// UpdatedAt is when the refresh that first saw this content ran: a refresh that finds
	// nothing changed keeps the snapshot, so its derived ETag stays valid.
	UpdatedAt time.Time

	byID    map[domain.ProductID]int
	byGroup map[string][]int // a group's items, by id
}

// Variants returns the items of a variant group, by id (nil for "" or an unknown group).
func (s *CatalogueSnapshot) Variants(group string) []CatalogueItem {
	if group == "" {
		return nil
	}
	idx := s.byGroup[group]
	out := make([]CatalogueItem, len(idx))
	for i, j := range idx {
		out[i] = s.Items[j]
	}
	return out
}

// Entries returns the catalogue as a shop window shows it: one entry per product on its own
// and one per variant group, in the place of the group's first variant (by id), so a group
// reads as one thing while each variant keeps its own item.
func (s *CatalogueSnapshot) Entries() []CatalogueItem {
	out := make([]CatalogueItem, 0, len(s.Items))
	for _, it := range s.Items {
		if it.Group == "" || s.byGroup[it.Group][0] == s.byID[it.ID] {
			out = append(out, it)
		}
	}
	return out
}

// Item returns the product's entry; ok is false when the catalogue does not list it.
func (s *CatalogueSnapshot) Item(id domain.ProductID) (CatalogueItem, bool) {
	i, ok := s.byID[id]
	if !ok {
		return CatalogueItem{}, false
	}
	return s.Items[i], true
}

// catalogue holds the public catalogue's snapshot and the state of its refresh.
//
// A request refreshes it lazily when it is stale, with a single flight: of any number of
// concurrent requests that find it stale one refreshes and the others answer from the
// snapshot they have (they wait only when there is none yet). So an idle instance makes no
// call, and a busy one makes at most one gate round trip per Config.CatalogueLevelsEvery and
// one ledger read per Config.CatalogueProductsEvery (or after a change of a product on this
// instance), whatever the request rate. A failed refresh keeps the last snapshot, which is
// served until a later refresh succeeds (its UpdatedAt says how old it is).
type catalogue struct {
	snap      atomic.Pointer[CatalogueSnapshot]
	checkedAt atomic.Int64 // unix nanoseconds of the last refresh attempt, by the shop's clock
	stale     atomic.Bool  // a product changed on this instance: read the ledger at the next refresh
	// gateOffset is the gate's clock less this instance's, in nanoseconds, as the last refresh
	// measured it (SaleClock).
	gateOffset atomic.Int64

	mu     sync.Mutex
	flight *catalogueFlight // the refresh under way, nil when none

	// Only the refresh in flight touches these.
	products   []domain.Product
	productsAt time.Time
	version    uint64
}

type catalogueFlight struct {
	done chan struct{}
	snap *CatalogueSnapshot
	err  error
}

// catalogueRefreshTimeout bounds one refresh: it runs on behalf of every waiting request, so
// it does not end with the request that started it.
const catalogueRefreshTimeout = 5 * time.Second

// Catalogue returns the public catalogue: every product of the ledger with its status and
// stock, refreshed as catalogue says. No request reads the ledger or the gate itself.
//
// Errors: ErrUnavailable (no snapshot could be made yet), the context's error while waiting
// for the first one.
func (s *Sales) Catalogue(ctx context.Context) (*CatalogueSnapshot, error) {
	c := &s.catalogue
	now := s.clock.Now()
	snap := c.snap.Load()
	if snap != nil && now.UnixNano()-c.checkedAt.Load() < int64(s.cfg.CatalogueLevelsEvery) {
		return snap, nil
	}
	c.mu.Lock()
	if snap = c.snap.Load(); snap != nil && now.UnixNano()-c.checkedAt.Load() < int64(s.cfg.CatalogueLevelsEvery) {
		c.mu.Unlock()
		return snap, nil
	}
	if f := c.flight; f != nil {
		c.mu.Unlock()
		if snap != nil {
			return snap, nil
		}
		select {
		case <-f.done:
			return f.snap, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &catalogueFlight{done: make(chan struct{})}
	c.flight = f
	c.mu.Unlock()

	f.snap, f.err = s.refreshCatalogue(ctx, snap, now)
	c.mu.Lock()
	c.checkedAt.Store(now.UnixNano())
	if f.err == nil {
		c.snap.Store(f.snap)
	}
	c.flight = nil
	c.mu.Unlock()
	close(f.done)
	if f.err != nil {
		s.log.WarnContext(ctx, "catalogue refresh failed; the last snapshot is served", "err", f.err)
		if snap != nil {
			return snap, nil
		}
	}
	return f.snap, f.err
}

// invalidateCatalogue makes the next catalogue request (and the next stock watch) read the
// products from the ledger, so a change made on this instance shows at once here; other
// instances see it within Config.CatalogueProductsEvery.
func (s *stock) invalidateCatalogue() {
	s.catalogue.stale.Store(true)
	s.catalogue.checkedAt.Store(0)
	s.stockWatch.stale.Store(true)
}

// refreshCatalogue builds the snapshot from the products (read again when due) and one
// LevelsMany of the gate; it returns prev when nothing changed. Only the flight calls it.
func (s *core) refreshCatalogue(ctx context.Context, prev *CatalogueSnapshot, now time.Time) (*CatalogueSnapshot, error) {
	c := &s.catalogue
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogueRefreshTimeout)
	defer cancel()
	if c.stale.Swap(false) || c.products == nil || now.Sub(c.productsAt) >= s.cfg.CatalogueProductsEvery {
		ps, err := s.ledger.Products().Products(ctx)
		if err != nil {
			c.stale.Store(true)
			return nil, fmt.Errorf("catalogue products: %w", err)
		}
		if ps == nil {
			ps = []domain.Product{}
		}
		c.products, c.productsAt = ps, now
	}
	ids := make([]domain.ProductID, len(c.products))
	for i, p := range c.products {
		ids[i] = p.ID()
	}
	levels, err := s.gate.LevelsMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("catalogue stock: %w", err)
	}
	s.measureGateClock(ctx)
	items := make([]CatalogueItem, len(c.products))
	for i, p := range c.products {
		items[i] = catalogueItem(p, levels, now)
	}
	if prev != nil && reflect.DeepEqual(prev.Items, items) {
		return prev, nil
	}
	c.version++
	snap := &CatalogueSnapshot{Version: c.version, Currency: s.cfg.Currency, Items: items, UpdatedAt: now,
		byID: make(map[domain.ProductID]int, len(items)), byGroup: make(map[string][]int)}
	for i, it := range items {
		snap.byID[it.ID] = i
		if it.Group != "" {
			snap.byGroup[it.Group] = append(snap.byGroup[it.Group], i)
		}
	}
	return snap, nil
}

func catalogueItem(p domain.Product, levels map[domain.ProductID]domain.GateLevels, now time.Time) CatalogueItem {
	l, known := levels[p.ID()]
	stock := max(l.Stock, 0)
	it := CatalogueItem{ID: p.ID(), Name: p.Name(), Description: p.Description(), Price: p.Price(), Tiers: p.Tiers(), MinPerOrder: p.MinPerOrder(),
		MaxPerOrder: p.MaxPerOrder(), Group: p.Group(), Variant: p.Variant(), Sale: p.Sale(), Display: p.StockDisplay()}
	switch {
	case p.Frozen() || l.Frozen:
		it.Status = CataloguePaused
	case p.Sale().Phase(now) == domain.SaleOver:
		it.Status = CatalogueEnded
	case p.Sale().Phase(now) == domain.SaleUpcoming:
		it.Status = CatalogueUpcoming
	case !known || stock == 0:
		it.Status = CatalogueSoldOut
	default:
		it.Status = CatalogueOnSale
	}
	if it.Display == domain.StockLevel {
		it.StockLevel = domain.StockLevelOf(stock)
	} else {
		it.Stock = stock
	}
	return it
}
