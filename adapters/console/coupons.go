package console

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// couponForm is the create form's fields as typed: a refused create shows them back.
type couponForm struct {
	Code, Kind, Value, MinAmount string
	Products                     []domain.ProductID
	ValidFrom, ValidUntil        string
	UsesPerProduct, UsesPerBuyer string
}

func readCouponForm(c *fiber.Ctx) couponForm {
	f := couponForm{Code: formValue(c, "code"), Kind: formValue(c, "kind"), Value: formValue(c, "value"),
		MinAmount: formValue(c, "min_amount"), ValidFrom: formValue(c, "valid_from"), ValidUntil: formValue(c, "valid_until"),
		UsesPerProduct: formValue(c, "uses_per_product"), UsesPerBuyer: formValue(c, "uses_per_buyer")}
	for _, s := range formValues(c, "products") {
		if id, err := strconv.ParseInt(s, 10, 64); err == nil && id > 0 {
			f.Products = append(f.Products, domain.ProductID(id))
		}
	}
	return f
}

// params is what the audit log records of the form (the code under "coupon": a field named
// "code" is never recorded, codes being secret elsewhere), with the zone its times were read in.
func (f couponForm) params(loc *time.Location) map[string]string {
	ids := make([]string, len(f.Products))
	for i, p := range f.Products {
		ids[i] = strconv.FormatInt(int64(p), 10)
	}
	return map[string]string{"coupon": strings.ToUpper(strings.TrimSpace(f.Code)), "kind": f.Kind, "value": f.Value,
		"min_amount": f.MinAmount, "products": strings.Join(ids, ","), "valid_from": f.ValidFrom, "valid_until": f.ValidUntil,
		"uses_per_product": f.UsesPerProduct, "uses_per_buyer": f.UsesPerBuyer, "time_zone": loc.String()}
}

// Selected reports whether the form names product p (the template's checkboxes).
func (f couponForm) Selected(p domain.ProductID) bool { return slices.Contains(f.Products, p) }

// coupon reads the typed fields into a coupon; a field that is not even a number, an amount or
// a time is ErrInvalidInput naming it. A fixed value and the minimum are amounts of the shop's
// currency ("5.00"), a percentage a whole number.
func (f couponForm) coupon(cur domain.Currency, loc *time.Location) (domain.Coupon, error) {
	c := domain.Coupon{Code: domain.CouponCode(f.Code), Products: f.Products}
	var err error
	if c.Kind, err = domain.ParseCouponKind(f.Kind); err != nil {
		return c, invalid("kind", "console.coupons.err.kind")
	}
	switch v := strings.TrimSpace(f.Value); c.Kind {
	case domain.CouponPercent:
		if c.Value, err = strconv.ParseInt(v, 10, 64); err != nil {
			return c, invalid("value", "console.coupons.err.percent")
		}
	case domain.CouponFixed:
		m, err := cur.ParseAmount(v)
		if err != nil {
			return c, invalid("value", "console.err.amount", "Currency", cur.Code, "Example", cur.Format(500))
		}
		c.Value = int64(m)
	}
	if s := strings.TrimSpace(f.MinAmount); s != "" {
		if c.MinAmount, err = cur.ParseAmount(s); err != nil {
			return c, invalid("min_amount", "console.err.amount", "Currency", cur.Code, "Example", cur.Format(1000))
		}
	}
	for _, n := range []struct {
		field, s string
		dst      *int64
	}{{"uses_per_product", f.UsesPerProduct, &c.UsesPerProduct}, {"uses_per_buyer", f.UsesPerBuyer, &c.UsesPerBuyer}} {
		if s := strings.TrimSpace(n.s); s != "" {
			if *n.dst, err = strconv.ParseInt(s, 10, 64); err != nil {
				return c, invalid(n.field, "console.err.whole_number")
			}
		}
	}
	if c.ValidFrom, err = formTime(strings.TrimSpace(f.ValidFrom), "valid_from", loc); err != nil {
		return c, err
	}
	c.ValidUntil, err = formTime(strings.TrimSpace(f.ValidUntil), "valid_until", loc)
	return c, err
}

// couponReasons are the message ids of domain.Coupon.Check's and CreateCoupon's reasons, so a
// refused coupon is said in the operator's language.
var couponReasons = map[string]string{
	"must be 3 to 32 of A-Z, 0-9, '-' and '_'":   "console.coupons.err.code",
	"a percentage must be 1 to 99":               "console.coupons.err.percent",
	"a fixed discount must be a positive amount": "console.coupons.err.fixed",
	"must not be negative":                       "console.coupons.err.negative",
	"must be after valid_from":                   "console.coupons.err.until",
	"must be 0 (no limit) or a positive count":   "console.coupons.err.count",
	"must be positive product ids":               "console.coupons.err.products",
	"must name 1 to 200 products":                "console.coupons.err.products",
	`must be "percent" or "fixed"`:               "console.coupons.err.kind",
	"must be 3 to 32 characters":                 "console.coupons.err.code",
	"may hold only letters, digits, '-' and '_'": "console.coupons.err.code",
}

// couponError is err with a coupon's English reason replaced by its message id.
func couponError(err error) error {
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	if id, ok := couponReasons[ve.Reason]; ok {
		return invalid(ve.Field, id)
	}
	if p, ok := strings.CutPrefix(ve.Reason, "product "); ok {
		if n, ok := strings.CutSuffix(p, " does not exist"); ok {
			return invalid(ve.Field, "console.coupons.err.no_product", "ID", n)
		}
	}
	return err
}

// couponUse is a coupon's uses on one product as the list shows them.
type couponUse struct {
	Product domain.ProductID
	Name    string // the product's name; empty when it is gone from the catalogue
	Uses    int64
	Known   bool
	Limit   int64 // 0: no limit
}

// couponRow is one coupon of the list.
type couponRow struct {
	Coupon domain.Coupon
	Value  string // "10%" or "5.00 CNY"
	Uses   []couponUse
}

// couponsData is the Coupons page: the list, the products the form offers, and the form as
// last typed.
type couponsData struct {
	Rows     []couponRow
	Products []domain.Product
	Currency domain.Currency
	Form     couponForm
}

// coupons lists the coupons with the create form.
func (k *console) coupons(c *fiber.Ctx) error {
	return k.couponsPage(c, fiber.StatusOK, couponForm{Kind: "percent"}, "", "")
}

// couponsPage renders the list with f, an error or a notice.
func (k *console) couponsPage(c *fiber.Ctx, status int, f couponForm, errMsg, notice string) error {
	all, err := k.couponsSvc.Coupons(c.UserContext())
	if err != nil {
		return k.fail(c, err)
	}
	ps, err := k.catalogue.Products(c.UserContext())
	if err != nil {
		return k.fail(c, err)
	}
	names := make(map[domain.ProductID]string, len(ps))
	for _, p := range ps {
		names[p.ID()] = p.Name()
	}
	cur := k.sales.Currency()
	d := couponsData{Products: ps, Currency: cur, Form: f, Rows: make([]couponRow, len(all))}
	for i, l := range all {
		r := couponRow{Coupon: l.Coupon, Uses: make([]couponUse, len(l.Uses))}
		if l.Kind == domain.CouponPercent {
			r.Value = strconv.FormatInt(l.Value, 10) + "%"
		} else {
			r.Value = cur.Format(domain.Money(l.Value)) + " " + cur.Code
		}
		for j, u := range l.Uses {
			r.Uses[j] = couponUse{Product: u.Product, Name: names[u.Product], Uses: u.Uses, Known: u.Known, Limit: l.UsesPerProduct}
		}
		d.Rows[i] = r
	}
	return k.render(c, status, "coupons", view{Title: "console.coupons.title", Error: errMsg, Notice: notice, Data: d})
}

// createCoupon creates the form's coupon; a refused one is said on the page with the form as
// typed, and nothing is stored.
func (k *console) createCoupon(c *fiber.Ctx) error {
	f := readCouponForm(c)
	loc := k.zone(c)
	in, err := f.coupon(k.sales.Currency(), loc)
	var created domain.Coupon
	if err == nil {
		created, err = k.couponsSvc.CreateCoupon(c.UserContext(), in)
	}
	k.record(c, application.ActionCouponCreate, f.params(loc), err)
	if err == nil {
		return k.couponsPage(c, fiber.StatusOK, couponForm{Kind: f.Kind}, "",
			k.tr(c, "console.coupons.created_notice", "Code", string(created.Code)))
	}
	status, msg := k.explain(c, couponError(err))
	if status >= 500 {
		return k.fail(c, err)
	}
	return k.couponsPage(c, status, f, msg, "")
}

// disableCoupon and enableCoupon flip a coupon; an unknown one is the not-found page.
func (k *console) disableCoupon(c *fiber.Ctx) error {
	return k.setCouponDisabled(c, application.ActionCouponDisable, k.couponsSvc.DisableCoupon, "console.coupons.disabled_notice")
}

func (k *console) enableCoupon(c *fiber.Ctx) error {
	return k.setCouponDisabled(c, application.ActionCouponEnable, k.couponsSvc.EnableCoupon, "console.coupons.enabled_notice")
}

func (k *console) setCouponDisabled(c *fiber.Ctx, action string, set func(ctx context.Context, code domain.CouponCode) error, notice string) error {
	code, err := domain.ParseCouponCode(c.Params("code"))
	if err != nil {
		err = domain.ErrCouponNotFound
	} else {
		err = set(c.UserContext(), code)
	}
	k.record(c, action, nil, err)
	if err != nil {
		return k.fail(c, err)
	}
	return k.couponsPage(c, fiber.StatusOK, couponForm{Kind: "percent"}, "", k.tr(c, notice, "Code", string(code)))
}
