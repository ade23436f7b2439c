package storefront_test

import (
	"context"
	"sync/atomic"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

// countingLedger is the memory ledger counting every use of its stores and transactions.
type countingLedger struct {
	domain.Ledger
	uses *atomic.Int64
}

func (l countingLedger) Products() domain.ProductCatalog { l.uses.Add(1); return l.Ledger.Products() }
func (l countingLedger) Orders() domain.OrderRepo        { l.uses.Add(1); return l.Ledger.Orders() }
func (l countingLedger) Cards() domain.CardVault         { l.uses.Add(1); return l.Ledger.Cards() }
func (l countingLedger) Payments() domain.PaymentRepo    { l.uses.Add(1); return l.Ledger.Payments() }
func (l countingLedger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	l.uses.Add(1)
	return l.Ledger.Atomically(ctx, fn)
}

func (l countingLedger) Snapshot(ctx context.Context, fn func(tx domain.Store) error) error {
	l.uses.Add(1)
	return l.Ledger.Snapshot(ctx, fn)
}

// TestCataloguePagesReadNoDatabase: once the snapshot is made, the catalogue and product
// pages — however many, in both languages — use the ledger not once.
func TestCataloguePagesReadNoDatabase(t *testing.T) {
	var uses atomic.Int64
	h := newHarness(t, option{deps: func(d *application.Deps) { d.Ledger = countingLedger{d.Ledger, &uses} }})
	p := h.product(application.NewProduct{Name: "Busy", Price: 100}, 5)
	en, zh := h.browser("en"), h.browser("zh-CN")
	wantStatus(t, en.get("/"), 200)
	wantStatus(t, en.get(path(p)), 200)
	before := uses.Load()
	if before == 0 {
		t.Fatal("the first pages made the snapshot without the ledger: the count is broken")
	}
	for range 50 {
		for _, b := range []*browser{en, zh} {
			wantStatus(t, b.get("/"), 200)
			wantStatus(t, b.get(path(p)), 200)
		}
	}
	if n := uses.Load() - before; n != 0 {
		t.Fatalf("200 catalogue and product pages used the ledger %d times", n)
	}
}
