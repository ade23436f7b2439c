package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cardshop/domain"
)

type productCatalog struct{ s *store }

type productRow struct {
	ID           int64        `bun:"id"`
	Name         string       `bun:"name"`
	Description  string       `bun:"description"`
	Price        int64        `bun:"price"`
	MinPerOrder  int          `bun:"min_per_order"`
	MaxPerOrder  int          `bun:"max_per_order"`
	CodeUses     int          `bun:"code_uses"`
	Group        string       `bun:"variant_group"`
	Variant      string       `bun:"variant_label"`
	PriceTiers   string       `bun:"price_tiers"`
	StockDisplay string       `bun:"stock_display"`
	StartsAt     sql.NullTime `bun:"starts_at"`
	EndsAt       sql.NullTime `bun:"ends_at"`
	BuyerLimit   int          `bun:"buyer_limit"`
	RefundFrees  bool         `bun:"refund_releases_limit"`
	LowStock     int          `bun:"low_stock_threshold"`
	StockState   string       `bun:"stock_state"`
	Frozen       bool         `bun:"frozen"`
	FrozenReason string       `bun:"frozen_reason"`
	CreatedAt    time.Time    `bun:"created_at"`
}

const productColumns = "id, name, description, price, min_per_order, max_per_order, code_uses, variant_group, variant_label, price_tiers, stock_display, starts_at, ends_at, buyer_limit, " +
	"refund_releases_limit, low_stock_threshold, stock_state, frozen, frozen_reason, created_at"

func fromNull(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// tierJSON is one quantity price as the price_tiers column stores it.
type tierJSON struct {
	MinQty    int   `json:"min_qty"`
	UnitPrice int64 `json:"unit_price"`
}

func encodeTiers(tiers []domain.PriceTier) string {
	out := make([]tierJSON, len(tiers))
	for i, t := range tiers {
		out[i] = tierJSON{MinQty: t.MinQty, UnitPrice: int64(t.UnitPrice)}
	}
	b, _ := json.Marshal(out) // a slice of plain structs always encodes
	return string(b)
}

func decodeTiers(s string) ([]domain.PriceTier, error) {
	var in []tierJSON
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, fmt.Errorf("price_tiers %q: %w", s, err)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]domain.PriceTier, len(in))
	for i, t := range in {
		out[i] = domain.PriceTier{MinQty: t.MinQty, UnitPrice: domain.Money(t.UnitPrice)}
	}
	return out, nil
}

func (r productRow) product() (domain.Product, error) {
	tiers, err := decodeTiers(r.PriceTiers)
	if err != nil {
		return domain.Product{}, fmt.Errorf("product %d: %w", r.ID, err)
	}
	return domain.RehydrateProduct(domain.ProductRecord{ID: domain.ProductID(r.ID), Name: r.Name, Description: r.Description,
		Price: domain.Money(r.Price), MinPerOrder: r.MinPerOrder, MaxPerOrder: r.MaxPerOrder,
		CodeUses: r.CodeUses, SharedKey: r.CodeUses == domain.UnlimitedUses, Group: r.Group, Variant: r.Variant, Tiers: tiers,
		StockDisplay:        domain.StockDisplay(r.StockDisplay),
		Sale:                domain.SaleRules{StartsAt: fromNull(r.StartsAt), EndsAt: fromNull(r.EndsAt), BuyerLimit: r.BuyerLimit},
		RefundReleasesLimit: r.RefundFrees, LowStockThreshold: r.LowStock, StockState: domain.StockState(r.StockState),
		Frozen:       r.Frozen,
		FrozenReason: r.FrozenReason, CreatedAt: r.CreatedAt}), nil
}

// Create lets AUTO_INCREMENT assign a zero id.
func (c productCatalog) Create(ctx context.Context, p domain.Product) (domain.Product, error) {
	if p.ID() < 0 {
		return domain.Product{}, domain.Invalid("id", "must be positive")
	}
	r := p.Record()
	var id any
	if r.ID != 0 {
		id = int64(r.ID)
	}
	op := fmt.Sprintf("create product %d", r.ID)
	res, err := c.s.exec(ctx, op,
		"INSERT INTO products ("+productColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		id, r.Name, r.Description, int64(r.Price), r.MinPerOrder, r.MaxPerOrder, r.CodeUses, r.Group, r.Variant, encodeTiers(r.Tiers), string(r.StockDisplay),
		nullTime(r.Sale.StartsAt), nullTime(r.Sale.EndsAt), r.Sale.BuyerLimit, r.RefundReleasesLimit,
		r.LowStockThreshold, string(r.StockState), r.Frozen, r.FrozenReason, r.CreatedAt.UTC())
	if _, dup := duplicateKey(err); dup {
		return domain.Product{}, fmt.Errorf("%s: %w", op, domain.ErrProductExists)
	}
	if err != nil {
		return domain.Product{}, err
	}
	if r.ID == 0 {
		newID, err := res.LastInsertId()
		if err != nil {
			return domain.Product{}, c.s.failed(op, err)
		}
		p = p.WithID(domain.ProductID(newID))
	}
	return p, nil
}

func (c productCatalog) Product(ctx context.Context, id domain.ProductID) (domain.Product, error) {
	var row productRow
	err := c.s.get(ctx, fmt.Sprintf("product %d", id), &row,
		"SELECT "+productColumns+" FROM products WHERE id = ?", int64(id))
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Product{}, fmt.Errorf("product %d: %w", id, domain.ErrProductNotFound)
	}
	if err != nil {
		return domain.Product{}, err
	}
	return row.product()
}

func (c productCatalog) Products(ctx context.Context) ([]domain.Product, error) {
	var rows []productRow
	if err := c.s.get(ctx, "list products", &rows, "SELECT "+productColumns+" FROM products ORDER BY id"); err != nil {
		return nil, err
	}
	out := make([]domain.Product, len(rows))
	for i, r := range rows {
		p, err := r.product()
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// SetFrozen stores the reason as domain.Product.Freeze would (trimmed; empty when unfrozen).
func (c productCatalog) SetFrozen(ctx context.Context, id domain.ProductID, frozen bool, reason string) error {
	reason = strings.TrimSpace(reason)
	if !frozen {
		reason = ""
	}
	op := fmt.Sprintf("freeze product %d", id)
	n, err := c.s.execN(ctx, op, "UPDATE products SET frozen = ?, frozen_reason = ? WHERE id = ?", frozen, reason, int64(id))
	if err != nil || n == 1 {
		return err
	}
	// Zero rows changed: either no such product, or it already had these values.
	var exists int
	err = c.s.get(ctx, op, &exists, "SELECT 1 FROM products WHERE id = ?", int64(id))
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, domain.ErrProductNotFound)
	}
	return err
}

func (c productCatalog) Update(ctx context.Context, p domain.Product) error {
	r := p.Record()
	op := fmt.Sprintf("update product %d", r.ID)
	n, err := c.s.execN(ctx, op, "UPDATE products SET name = ?, description = ?, price = ?, min_per_order = ?, max_per_order = ?, "+
		"variant_group = ?, variant_label = ?, price_tiers = ?, stock_display = ?, "+
		"starts_at = ?, ends_at = ?, buyer_limit = ?, refund_releases_limit = ?, low_stock_threshold = ? WHERE id = ?",
		r.Name, r.Description, int64(r.Price), r.MinPerOrder, r.MaxPerOrder, r.Group, r.Variant, encodeTiers(r.Tiers), string(r.StockDisplay),
		nullTime(r.Sale.StartsAt), nullTime(r.Sale.EndsAt), r.Sale.BuyerLimit, r.RefundReleasesLimit,
		r.LowStockThreshold, int64(r.ID))
	if err != nil || n == 1 {
		return err
	}
	return c.exists(ctx, op, r.ID)
}

// SwapStockState is one conditional UPDATE: of racing instances, one changes the row.
func (c productCatalog) SwapStockState(ctx context.Context, id domain.ProductID, from, to domain.StockState) (bool, error) {
	op := fmt.Sprintf("stock state of product %d", id)
	n, err := c.s.execN(ctx, op, "UPDATE products SET stock_state = ? WHERE id = ? AND stock_state = ?",
		string(to), int64(id), string(from))
	if err != nil || n == 1 {
		return n == 1, err
	}
	return false, c.exists(ctx, op, id)
}

// exists tells an UPDATE that changed no row because the values were already stored (nil)
// from one of an unknown product (ErrProductNotFound).
func (c productCatalog) exists(ctx context.Context, op string, id domain.ProductID) error {
	var one int
	err := c.s.get(ctx, op, &one, "SELECT 1 FROM products WHERE id = ?", int64(id))
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, domain.ErrProductNotFound)
	}
	return err
}

// LockFrozen reads the row with FOR UPDATE: the lock is held until the transaction ends, and
// SetFrozen's UPDATE of the row waits for it.
func (c productCatalog) LockFrozen(ctx context.Context, id domain.ProductID) (bool, error) {
	op := fmt.Sprintf("lock product %d", id)
	var frozen bool
	err := c.s.get(ctx, op, &frozen, "SELECT frozen FROM products WHERE id = ? FOR UPDATE", int64(id))
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("%s: %w", op, domain.ErrProductNotFound)
	}
	return frozen, err
}
