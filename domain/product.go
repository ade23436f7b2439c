package domain

import (
	"strings"
	"time"
	"unicode/utf8"
)

// ProductID identifies a product. It is positive.
type ProductID int64

// MaxQtyLimit is the highest per-order limit a product may have.
const MaxQtyLimit = 1000

// Product is something the shop sells: a price and a pool of card codes.
type Product struct {
	id           ProductID
	name         string
	price        Money
	maxPerOrder  int
	frozen       bool
	frozenReason string
	createdAt    time.Time
}

// NewProduct validates a new product. id may be 0: the catalogue then assigns one.
func NewProduct(id ProductID, name string, price Money, maxPerOrder int, at time.Time) (Product, error) {
	name = strings.TrimSpace(name)
	switch {
	case id < 0:
		return Product{}, Invalid("id", "must be positive")
	case name == "" || utf8.RuneCountInString(name) > 128:
		return Product{}, Invalid("name", "must be 1 to 128 characters")
	case price <= 0:
		return Product{}, Invalid("price", "must be a positive number of minor units")
	case maxPerOrder < 1 || maxPerOrder > MaxQtyLimit:
		return Product{}, Invalid("max_per_order", "must be between 1 and 1000")
	}
	return Product{id: id, name: name, price: price, maxPerOrder: maxPerOrder, createdAt: at}, nil
}

// ProductRecord is a product as stored; RehydrateProduct turns it back into a Product.
type ProductRecord struct {
	ID           ProductID
	Name         string
	Price        Money
	MaxPerOrder  int
	Frozen       bool
	FrozenReason string
	CreatedAt    time.Time
}

// RehydrateProduct rebuilds a product from storage without re-validating it.
func RehydrateProduct(r ProductRecord) Product {
	return Product{id: r.ID, name: r.Name, price: r.Price, maxPerOrder: r.MaxPerOrder,
		frozen: r.Frozen, frozenReason: r.FrozenReason, createdAt: r.CreatedAt}
}

// Record returns the storable form of p.
func (p Product) Record() ProductRecord {
	return ProductRecord{ID: p.id, Name: p.name, Price: p.price, MaxPerOrder: p.maxPerOrder,
		Frozen: p.frozen, FrozenReason: p.frozenReason, CreatedAt: p.createdAt}
}

// WithID returns p with the id the catalogue assigned.
func (p Product) WithID(id ProductID) Product { p.id = id; return p }

// ID returns the product id.
func (p Product) ID() ProductID { return p.id }

// Name returns the display name.
func (p Product) Name() string { return p.name }

// Price returns the unit price.
func (p Product) Price() Money { return p.price }

// MaxPerOrder returns the per-order quantity limit.
func (p Product) MaxPerOrder() int { return p.maxPerOrder }

// Frozen reports whether sales are stopped.
func (p Product) Frozen() bool { return p.frozen }

// FrozenReason says why the product is frozen.
func (p Product) FrozenReason() string { return p.frozenReason }

// CreatedAt returns when the product was created.
func (p Product) CreatedAt() time.Time { return p.createdAt }

// Freeze stops sales with a reason.
func (p *Product) Freeze(reason string) {
	p.frozen, p.frozenReason = true, strings.TrimSpace(reason)
}

// Unfreeze resumes sales.
func (p *Product) Unfreeze() { p.frozen, p.frozenReason = false, "" }

// CheckQty returns ErrQtyOutOfRange unless 1 <= qty <= the per-order limit.
func (p Product) CheckQty(qty int) error {
	if qty < 1 || qty > p.maxPerOrder {
		return ErrQtyOutOfRange
	}
	return nil
}

// Amount returns the price of qty units.
func (p Product) Amount(qty int) (Money, error) { return p.price.Times(qty) }
