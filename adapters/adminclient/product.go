package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// productTimeout bounds one product call: a change of the per-buyer limit has the service
// rebuild the product's gate before it answers.
const productTimeout = time.Minute

// Tier is a quantity price: UnitPrice a unit from MinQty units on (PriceTier in openapi.json).
type Tier struct {
	MinQty    int   `json:"min_qty"`
	UnitPrice int64 `json:"unit_price"`
}

// Product is a product as the admin API answers it (Product in openapi.json).
type Product struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	Description  string `json:"description"` // plain text, "\n" between lines; "" when none
	Price        int64  `json:"price"`       // minor units
	MinPerOrder  int    `json:"min_per_order"`
	MaxPerOrder  int    `json:"max_per_order"`
	CodeUses     int    `json:"code_uses"` // sales per code; 0: a shared key, unlimited
	Group        string `json:"group"`     // the variant group; "" for a product on its own
	Variant      string `json:"variant"`   // the label in the group
	Tiers        []Tier `json:"tiers"`
	StockDisplay string `json:"stock_display"` // "exact" or "level"
	// StartsAt and EndsAt bound the sale window; nil: no bound.
	StartsAt            *time.Time `json:"starts_at"`
	EndsAt              *time.Time `json:"ends_at"`
	BuyerLimit          int        `json:"buyer_limit"` // 0: no limit
	RefundReleasesLimit bool       `json:"refund_releases_limit"`
	LowStockThreshold   int        `json:"low_stock_threshold"` // 0: no low-stock event
	StockState          string     `json:"stock_state"`         // "" before the first stock event
	Frozen              bool       `json:"frozen"`
	FrozenReason        string     `json:"frozen_reason"`
	CreatedAt           time.Time  `json:"created_at"`
}

// NewProduct is a product to create (CreateProductRequest in openapi.json). ID 0 lets the
// service choose; the zero value of every other optional field is the service's default (no
// tiers, exact stock, no window bound, no limit, no low-stock event).
type NewProduct struct {
	ID                  int64      `json:"id,omitempty"`
	Name                string     `json:"name"`
	Description         string     `json:"description,omitempty"`
	Price               int64      `json:"price"`
	MinPerOrder         int        `json:"min_per_order,omitempty"`
	MaxPerOrder         int        `json:"max_per_order"`
	CodeUses            *int       `json:"code_uses,omitempty"` // nil: 1; 0: a shared key
	Group               string     `json:"group,omitempty"`
	Variant             string     `json:"variant,omitempty"`
	Tiers               []Tier     `json:"tiers,omitempty"`
	StockDisplay        string     `json:"stock_display,omitempty"`
	StartsAt            *time.Time `json:"starts_at,omitempty"`
	EndsAt              *time.Time `json:"ends_at,omitempty"`
	BuyerLimit          int        `json:"buyer_limit,omitempty"`
	RefundReleasesLimit bool       `json:"refund_releases_limit,omitempty"`
	LowStockThreshold   int        `json:"low_stock_threshold,omitempty"`
}

// ProductPatch is a change of a product (PATCH /admin/products/{id}): only the fields that
// are not nil are sent, and the service leaves the others as they are. Tiers pointing to an
// empty slice removes the quantity prices; StartsAt or EndsAt pointing to the zero time
// removes that bound of the sale window (sent as null).
type ProductPatch struct {
	Name                *string
	Description         *string // "" removes it
	Price               *int64
	MinPerOrder         *int
	MaxPerOrder         *int
	Group               *string
	Variant             *string
	Tiers               *[]Tier
	StockDisplay        *string
	StartsAt            *time.Time
	EndsAt              *time.Time
	BuyerLimit          *int
	RefundReleasesLimit *bool
	LowStockThreshold   *int
}

// body is the patch's JSON object: the fields set, a zero bound as null, empty tiers as [].
func (p ProductPatch) body() map[string]any {
	m := map[string]any{}
	if p.Name != nil {
		m["name"] = *p.Name
	}
	if p.Description != nil {
		m["description"] = *p.Description
	}
	if p.Price != nil {
		m["price"] = *p.Price
	}
	if p.MinPerOrder != nil {
		m["min_per_order"] = *p.MinPerOrder
	}
	if p.MaxPerOrder != nil {
		m["max_per_order"] = *p.MaxPerOrder
	}
	if p.Group != nil {
		m["group"] = *p.Group
	}
	if p.Variant != nil {
		m["variant"] = *p.Variant
	}
	if p.Tiers != nil {
		tiers := *p.Tiers
		if tiers == nil {
			tiers = []Tier{} // [] removes them; null would leave them as they are
		}
		m["tiers"] = tiers
	}
	if p.StockDisplay != nil {
		m["stock_display"] = *p.StockDisplay
	}
	for name, t := range map[string]*time.Time{"starts_at": p.StartsAt, "ends_at": p.EndsAt} {
		if t == nil {
			continue
		}
		if t.IsZero() {
			m[name] = nil
		} else {
			m[name] = *t
		}
	}
	if p.BuyerLimit != nil {
		m["buyer_limit"] = *p.BuyerLimit
	}
	if p.RefundReleasesLimit != nil {
		m["refund_releases_limit"] = *p.RefundReleasesLimit
	}
	if p.LowStockThreshold != nil {
		m["low_stock_threshold"] = *p.LowStockThreshold
	}
	return m
}

// CreateProduct creates a product (POST /admin/products) and returns it as the service
// stored it.
func (c *Client) CreateProduct(ctx context.Context, p NewProduct) (Product, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return Product{}, err
	}
	return c.productCall(ctx, http.MethodPost, c.base+"/admin/products", body, http.StatusCreated)
}

// UpdateProduct changes a product (PATCH /admin/products/{id}), sending only the fields the
// patch sets, and returns the product as it is now.
func (c *Client) UpdateProduct(ctx context.Context, id int64, patch ProductPatch) (Product, error) {
	body, err := json.Marshal(patch.body())
	if err != nil {
		return Product{}, err
	}
	return c.productCall(ctx, http.MethodPatch, fmt.Sprintf("%s/admin/products/%d", c.base, id), body, http.StatusOK)
}

// Product reads a product (GET /admin/products/{id}).
func (c *Client) Product(ctx context.Context, id int64) (Product, error) {
	return c.productCall(ctx, http.MethodGet, fmt.Sprintf("%s/admin/products/%d", c.base, id), nil, http.StatusOK)
}

// productCall sends one product request and decodes the product the service answers.
func (c *Client) productCall(ctx context.Context, method, url string, body []byte, ok int) (Product, error) {
	answer, err := c.adminJSON(ctx, &http.Client{Timeout: productTimeout}, method, url, body, ok)
	if err != nil {
		return Product{}, err
	}
	var p Product
	if err := json.Unmarshal(answer, &p); err != nil {
		return Product{}, fmt.Errorf("unreadable answer %q: %w", answer, err)
	}
	return p, nil
}
