package httpapi

import (
	"context"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// couponRequest is POST /admin/coupons's body.
type couponRequest struct {
	Code           string     `json:"code"`
	Kind           string     `json:"kind"`
	Value          int64      `json:"value"`
	MinAmount      int64      `json:"min_amount"`
	Products       []int64    `json:"products"`
	ValidFrom      *time.Time `json:"valid_from"`
	ValidUntil     *time.Time `json:"valid_until"`
	UsesPerProduct int64      `json:"uses_per_product"`
	UsesPerBuyer   int64      `json:"uses_per_buyer"`
}

// couponUsesResponse is a coupon's uses on one product; Uses is null when the product's stock
// gate could not tell.
type couponUsesResponse struct {
	ProductID int64  `json:"product_id"`
	Uses      *int64 `json:"uses"`
}

// couponResponse is one coupon; Uses only in the list.
type couponResponse struct {
	Code           string               `json:"code"`
	Kind           string               `json:"kind"`
	Value          int64                `json:"value"`
	MinAmount      int64                `json:"min_amount"`
	Products       []int64              `json:"products"`
	ValidFrom      *time.Time           `json:"valid_from,omitempty"`
	ValidUntil     *time.Time           `json:"valid_until,omitempty"`
	UsesPerProduct int64                `json:"uses_per_product"`
	UsesPerBuyer   int64                `json:"uses_per_buyer"`
	Disabled       bool                 `json:"disabled"`
	CreatedAt      time.Time            `json:"created_at"`
	Uses           []couponUsesResponse `json:"uses,omitempty"`
}

func newCouponResponse(c domain.Coupon) couponResponse {
	out := couponResponse{Code: string(c.Code), Kind: c.Kind.String(), Value: c.Value, MinAmount: int64(c.MinAmount),
		Products: make([]int64, len(c.Products)), UsesPerProduct: c.UsesPerProduct, UsesPerBuyer: c.UsesPerBuyer,
		Disabled: c.Disabled, CreatedAt: c.CreatedAt.UTC()}
	for i, p := range c.Products {
		out.Products[i] = int64(p)
	}
	if !c.ValidFrom.IsZero() {
		t := c.ValidFrom.UTC()
		out.ValidFrom = &t
	}
	if !c.ValidUntil.IsZero() {
		t := c.ValidUntil.UTC()
		out.ValidUntil = &t
	}
	return out
}

// listCoupons answers GET /admin/coupons: every coupon, newest first, with its uses on each
// of its products (null where the product's stock gate could not tell).
func (s *Server) listCoupons(c *fiber.Ctx) error {
	all, err := s.coupons.Coupons(c.UserContext())
	if err != nil {
		return err
	}
	out := struct {
		Coupons []couponResponse `json:"coupons"`
	}{Coupons: make([]couponResponse, len(all))}
	for i, l := range all {
		r := newCouponResponse(l.Coupon)
		r.Uses = make([]couponUsesResponse, len(l.Uses))
		for j, u := range l.Uses {
			r.Uses[j] = couponUsesResponse{ProductID: int64(u.Product)}
			if u.Known {
				r.Uses[j].Uses = &u.Uses
			}
		}
		out.Coupons[i] = r
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(out)
}

// createCoupon answers POST /admin/coupons: 201 and the coupon as stored (its code upper-case,
// its products in order); 400 invalid_request naming the field (a product that does not exist
// too), 409 coupon_exists. The audit entry records the code, refused or not.
func (s *Server) createCoupon(c *fiber.Ctx) error {
	var req couponRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		return err
	}
	kind, err := domain.ParseCouponKind(req.Kind)
	if err != nil {
		return err
	}
	in := domain.Coupon{Code: domain.CouponCode(req.Code), Kind: kind, Value: req.Value, MinAmount: domain.Money(req.MinAmount),
		Products: make([]domain.ProductID, len(req.Products)), ValidFrom: timeOrZero(req.ValidFrom),
		ValidUntil: timeOrZero(req.ValidUntil), UsesPerProduct: req.UsesPerProduct, UsesPerBuyer: req.UsesPerBuyer}
	for i, p := range req.Products {
		in.Products[i] = domain.ProductID(p)
	}
	// Recorded whatever the outcome (a field named "code" is left out of every entry).
	c.Locals(auditOutcomeKey, map[string]any{"coupon": strings.ToUpper(strings.TrimSpace(req.Code))})
	cp, err := s.coupons.CreateCoupon(c.UserContext(), in)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(newCouponResponse(cp))
}

// disableCoupon answers POST /admin/coupons/{code}/disable: 204; 404 coupon_not_found.
func (s *Server) disableCoupon(c *fiber.Ctx) error {
	return s.setCouponDisabled(c, s.coupons.DisableCoupon)
}

// enableCoupon answers POST /admin/coupons/{code}/enable: 204; 404 coupon_not_found.
func (s *Server) enableCoupon(c *fiber.Ctx) error {
	return s.setCouponDisabled(c, s.coupons.EnableCoupon)
}

func (s *Server) setCouponDisabled(c *fiber.Ctx, set func(ctx context.Context, code domain.CouponCode) error) error {
	code, err := domain.ParseCouponCode(c.Params("code"))
	if err != nil {
		return domain.ErrCouponNotFound // no coupon can have a malformed code
	}
	if err := set(c.UserContext(), code); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
