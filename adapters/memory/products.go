package memory

import (
	"context"
	"fmt"
	"sort"

	"cardshop/domain"
)

type productCatalog struct{ s *store }

func (c productCatalog) Create(_ context.Context, p domain.Product) (domain.Product, error) {
	if p.ID() < 0 {
		return domain.Product{}, domain.Invalid("id", "must be positive")
	}
	release, err := c.s.acquire()
	if err != nil {
		return domain.Product{}, err
	}
	defer release()
	d := c.s.data
	id := p.ID()
	if id == 0 {
		id = d.nextProduct
	} else if _, taken := d.products[id]; taken {
		return domain.Product{}, fmt.Errorf("create product %d: %w", id, domain.ErrProductExists)
	}
	if id >= d.nextProduct {
		d.nextProduct = id + 1
	}
	p = p.WithID(id)
	put(c.s, d.products, id, p)
	return p, nil
}

func (c productCatalog) Product(_ context.Context, id domain.ProductID) (domain.Product, error) {
	release, err := c.s.acquire()
	if err != nil {
		return domain.Product{}, err
	}
	defer release()
	p, ok := c.s.data.products[id]
	if !ok {
		return domain.Product{}, fmt.Errorf("product %d: %w", id, domain.ErrProductNotFound)
	}
	return p, nil
}

func (c productCatalog) Products(_ context.Context) ([]domain.Product, error) {
	release, err := c.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]domain.Product, 0, len(c.s.data.products))
	for _, p := range c.s.data.products {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out, nil
}

func (c productCatalog) SetFrozen(_ context.Context, id domain.ProductID, frozen bool, reason string) error {
	release, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	p, ok := c.s.data.products[id]
	if !ok {
		return fmt.Errorf("freeze product %d: %w", id, domain.ErrProductNotFound)
	}
	if frozen {
		p.Freeze(reason)
	} else {
		p.Unfreeze()
	}
	put(c.s, c.s.data.products, id, p)
	return nil
}

func (c productCatalog) Update(_ context.Context, p domain.Product) error {
	release, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	stored, ok := c.s.data.products[p.ID()]
	if !ok {
		return fmt.Errorf("update product %d: %w", p.ID(), domain.ErrProductNotFound)
	}
	revised, err := stored.Revise(p.Revision())
	if err != nil {
		return fmt.Errorf("update product %d: %w", p.ID(), err)
	}
	put(c.s, c.s.data.products, p.ID(), revised)
	return nil
}

func (c productCatalog) SwapStockState(_ context.Context, id domain.ProductID, from, to domain.StockState) (bool, error) {
	release, err := c.s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	p, ok := c.s.data.products[id]
	if !ok {
		return false, fmt.Errorf("stock state of product %d: %w", id, domain.ErrProductNotFound)
	}
	if p.StockState() != from {
		return false, nil
	}
	r := p.Record()
	r.StockState = to
	put(c.s, c.s.data.products, id, domain.RehydrateProduct(r))
	return true, nil
}

// LockFrozen reads the frozen flag: a transaction holds the ledger's one mutex throughout, so
// it is already alone.
func (c productCatalog) LockFrozen(_ context.Context, id domain.ProductID) (bool, error) {
	release, err := c.s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	p, ok := c.s.data.products[id]
	if !ok {
		return false, fmt.Errorf("lock product %d: %w", id, domain.ErrProductNotFound)
	}
	return p.Frozen(), nil
}
