package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"cardshop/domain"
)

// couponStore keeps the coupons in coupons and their products in coupon_products. A coupon's
// products never change once it is stored, and a coupon is never deleted, so a read of the
// two tables outside a transaction sees every coupon it lists whole: the create wrote both in
// one transaction.
type couponStore struct{ s *store }

type couponRow struct {
	Code           string       `bun:"code"`
	Kind           uint8        `bun:"kind"`
	Value          int64        `bun:"value"`
	MinAmount      int64        `bun:"min_amount"`
	ValidFrom      sql.NullTime `bun:"valid_from"`
	ValidUntil     sql.NullTime `bun:"valid_until"`
	UsesPerProduct int64        `bun:"uses_per_product"`
	UsesPerBuyer   int64        `bun:"uses_per_buyer"`
	Disabled       bool         `bun:"disabled"`
	CreatedAt      time.Time    `bun:"created_at"`
}

const couponColumns = "code, kind, value, min_amount, valid_from, valid_until, uses_per_product, uses_per_buyer, disabled, created_at"

type couponProductRow struct {
	Code      string `bun:"code"`
	ProductID int64  `bun:"product_id"`
}

func (r couponRow) coupon(products []domain.ProductID) domain.Coupon {
	c := domain.Coupon{Code: domain.CouponCode(r.Code), Kind: domain.CouponKind(r.Kind), Value: r.Value,
		MinAmount: domain.Money(r.MinAmount), Products: products, UsesPerProduct: r.UsesPerProduct,
		UsesPerBuyer: r.UsesPerBuyer, Disabled: r.Disabled, CreatedAt: r.CreatedAt.UTC()}
	if r.ValidFrom.Valid {
		c.ValidFrom = r.ValidFrom.Time.UTC()
	}
	if r.ValidUntil.Valid {
		c.ValidUntil = r.ValidUntil.Time.UTC()
	}
	return c
}

// CreateCoupon writes the coupon's row and its products' rows in one transaction: the primary
// key refuses a taken code, whoever races to write it.
func (r couponStore) CreateCoupon(ctx context.Context, c domain.Coupon) error {
	if err := c.Check(); err != nil {
		return err
	}
	op := "create coupon " + string(c.Code)
	return r.s.atomic(ctx, func(s *store) error {
		_, err := s.exec(ctx, op, "INSERT INTO coupons ("+couponColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			string(c.Code), uint8(c.Kind), c.Value, int64(c.MinAmount), nullTime(c.ValidFrom), nullTime(c.ValidUntil),
			c.UsesPerProduct, c.UsesPerBuyer, c.Disabled, c.CreatedAt.UTC())
		if _, dup := duplicateKey(err); dup {
			return fmt.Errorf("%s: %w", op, domain.ErrCouponExists)
		}
		if err != nil {
			return err
		}
		values := make([]string, len(c.Products))
		args := make([]any, 0, 2*len(c.Products))
		for i, p := range c.Products {
			values[i] = "(?, ?)"
			args = append(args, string(c.Code), int64(p))
		}
		_, err = s.exec(ctx, op, "INSERT INTO coupon_products (code, product_id) VALUES "+strings.Join(values, ", "), args...)
		return err
	})
}

// Coupon reads the coupon's row and its products.
func (r couponStore) Coupon(ctx context.Context, code domain.CouponCode) (domain.Coupon, error) {
	op := "coupon " + string(code)
	var row couponRow
	err := r.s.get(ctx, op, &row, "SELECT "+couponColumns+" FROM coupons WHERE code = ?", string(code))
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Coupon{}, fmt.Errorf("%s: %w", op, domain.ErrCouponNotFound)
	}
	if err != nil {
		return domain.Coupon{}, err
	}
	var ids []int64
	if err := r.s.get(ctx, op, &ids, "SELECT product_id FROM coupon_products WHERE code = ? ORDER BY product_id", string(code)); err != nil {
		return domain.Coupon{}, err
	}
	products := make([]domain.ProductID, len(ids))
	for i, id := range ids {
		products[i] = domain.ProductID(id)
	}
	return row.coupon(products), nil
}

// Coupons reads both tables whole (an operator keeps tens or hundreds of coupons, not
// millions), newest first, then by code.
func (r couponStore) Coupons(ctx context.Context) ([]domain.Coupon, error) {
	const op = "coupons"
	var rows []couponRow
	if err := r.s.get(ctx, op, &rows, "SELECT "+couponColumns+" FROM coupons ORDER BY created_at DESC, code"); err != nil {
		return nil, err
	}
	var prows []couponProductRow
	if err := r.s.get(ctx, op, &prows, "SELECT code, product_id FROM coupon_products ORDER BY code, product_id"); err != nil {
		return nil, err
	}
	products := make(map[string][]domain.ProductID, len(rows))
	for _, p := range prows {
		products[p.Code] = append(products[p.Code], domain.ProductID(p.ProductID))
	}
	out := make([]domain.Coupon, len(rows))
	for i, row := range rows {
		out[i] = row.coupon(products[row.Code])
	}
	return out, nil
}

// SetCouponDisabled is one UPDATE; a code it matched no row of is looked up, since MySQL
// counts only rows it changed (setting the flag it already has changes none).
func (r couponStore) SetCouponDisabled(ctx context.Context, code domain.CouponCode, disabled bool) error {
	op := "set coupon " + string(code) + " disabled"
	n, err := r.s.execN(ctx, op, "UPDATE coupons SET disabled = ? WHERE code = ?", disabled, string(code))
	if err != nil || n == 1 {
		return err
	}
	var one int
	err = r.s.get(ctx, op, &one, "SELECT 1 FROM coupons WHERE code = ?", string(code))
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, domain.ErrCouponNotFound)
	}
	return err
}
