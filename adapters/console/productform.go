package console

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// productForm is the product form's fields as typed: a form with an error shows them back
// unchanged, so the operator fixes one field rather than typing everything again.
type productForm struct {
	ID                              domain.ProductID // 0 on the new product form
	Name, Price, MaxPerOrder, Tiers string
	Description                     string
	MinPerOrder, Group, Variant     string
	StockDisplay, StartsAt, EndsAt  string
	BuyerLimit, LowStock            string
	CodeUses                        string // shown read-only once the product exists: it never changes
	RefundReleasesLimit             bool
}

// formOf fills the form with a product's values.
func formOf(p domain.Product, cur domain.Currency, loc *time.Location) productForm {
	var tiers []string
	for _, t := range p.Tiers() {
		tiers = append(tiers, fmt.Sprintf("%d %s", t.MinQty, cur.Format(t.UnitPrice)))
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.In(loc).Format(formTimeLayout + ":05")
	}
	return productForm{ID: p.ID(), Name: p.Name(), Description: p.Description(), Price: cur.Format(p.Price()), MaxPerOrder: strconv.Itoa(p.MaxPerOrder()),
		MinPerOrder: strconv.Itoa(p.MinPerOrder()), Group: p.Group(), Variant: p.Variant(),
		Tiers: strings.Join(tiers, "\n"), StockDisplay: string(p.StockDisplay()), StartsAt: at(p.Sale().StartsAt),
		EndsAt: at(p.Sale().EndsAt), BuyerLimit: strconv.Itoa(p.Sale().BuyerLimit),
		LowStock: strconv.Itoa(p.LowStockThreshold()), CodeUses: strconv.Itoa(p.CodeUses()),
		RefundReleasesLimit: p.RefundReleasesLimit()}
}

func readForm(c *fiber.Ctx) productForm {
	return productForm{Name: formValue(c, "name"), Description: formValue(c, "description"), Price: formValue(c, "price"), MaxPerOrder: formValue(c, "max_per_order"),
		MinPerOrder: formValue(c, "min_per_order"), Group: formValue(c, "group"), Variant: formValue(c, "variant"),
		Tiers: formValue(c, "tiers"), StockDisplay: formValue(c, "stock_display"), StartsAt: formValue(c, "starts_at"),
		EndsAt: formValue(c, "ends_at"), BuyerLimit: formValue(c, "buyer_limit"), LowStock: formValue(c, "low_stock_threshold"),
		CodeUses: formValue(c, "code_uses"), RefundReleasesLimit: formValue(c, "refund_releases_limit") == "on"}
}

// params is what the audit log records of the form (nothing in it is secret), with the zone
// its sale times were read in. Of the description it keeps the first auditDescription
// characters, so the entry stays within maxAuditParams with every other field whole.
func (f productForm) params(loc *time.Location) map[string]string {
	return map[string]string{"name": f.Name, "description": clip(f.Description, auditDescription), "price": f.Price, "min_per_order": f.MinPerOrder, "max_per_order": f.MaxPerOrder,
		"group": f.Group, "variant": f.Variant, "tiers": f.Tiers,
		"stock_display": f.StockDisplay, "starts_at": f.StartsAt, "ends_at": f.EndsAt, "buyer_limit": f.BuyerLimit,
		"low_stock_threshold": f.LowStock, "code_uses": f.CodeUses, "refund_releases_limit": strconv.FormatBool(f.RefundReleasesLimit),
		"time_zone": loc.String()}
}

// auditDescription is how many characters of a description the audit log keeps.
const auditDescription = 200

// clip is s cut to its first n characters, with "…" when it was longer.
func clip(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i] + "…"
		}
		n--
	}
	return s
}

// parsed is the form read into the use case's terms; the use case validates the values.
type parsed struct {
	price                   domain.Money
	minPerOrder             int // 0 (left empty): 1
	maxPerOrder, buyerLimit int
	lowStock                int
	codeUses                *int // nil when the form has no value (left empty: 1 on a new product)
	tiers                   []domain.PriceTier
	display                 domain.StockDisplay
	startsAt, endsAt        time.Time
}

// parse reads the typed fields; a field that is not even a number or a time is ErrInvalidInput
// naming it. Amounts are decimals of the shop's currency ("19.99"), as the operator thinks of them.
func (f productForm) parse(cur domain.Currency, loc *time.Location) (parsed, error) {
	var p parsed
	var err error
	if p.price, err = cur.ParseAmount(strings.TrimSpace(f.Price)); err != nil {
		return p, invalid("price", "console.err.amount", "Currency", cur.Code, "Example", cur.Format(1999))
	}
	for _, n := range []struct {
		field, s string
		dst      *int
	}{{"min_per_order", f.MinPerOrder, &p.minPerOrder}, {"max_per_order", f.MaxPerOrder, &p.maxPerOrder}, {"buyer_limit", f.BuyerLimit, &p.buyerLimit},
		{"low_stock_threshold", f.LowStock, &p.lowStock}} {
		if *n.dst, err = optionalInt(n.s); err != nil {
			return p, invalid(n.field, "console.err.whole_number")
		}
	}
	if strings.TrimSpace(f.MinPerOrder) == "" {
		p.minPerOrder = 1 // a form without the field (or left empty) asks for no minimum
	}
	if strings.TrimSpace(f.CodeUses) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(f.CodeUses))
		if err != nil {
			return p, invalid("code_uses", "console.err.whole_number")
		}
		p.codeUses = &n
	}
	if p.tiers, err = parseTiers(f.Tiers, cur); err != nil {
		return p, err
	}
	if p.display, err = domain.ParseStockDisplay(f.StockDisplay); err != nil {
		return p, err
	}
	if p.startsAt, err = formTime(strings.TrimSpace(f.StartsAt), "starts_at", loc); err != nil {
		return p, err
	}
	p.endsAt, err = formTime(strings.TrimSpace(f.EndsAt), "ends_at", loc)
	return p, err
}

func optionalInt(s string) (int, error) {
	if s = strings.TrimSpace(s); s == "" {
		return 0, nil
	}
	return strconv.Atoi(s)
}

// parseTiers reads one quantity price a line: "<min qty> <unit price>".
func parseTiers(s string, cur domain.Currency) ([]domain.PriceTier, error) {
	var tiers []domain.PriceTier
	for _, line := range strings.Split(s, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		bad := invalid("tiers", "console.err.tiers", "Example", "10 "+cur.Format(1500))
		if len(fields) != 2 {
			return nil, bad
		}
		qty, err := strconv.Atoi(fields[0])
		if err != nil {
			return nil, bad
		}
		price, err := cur.ParseAmount(fields[1])
		if err != nil {
			return nil, bad
		}
		tiers = append(tiers, domain.PriceTier{MinQty: qty, UnitPrice: price})
	}
	return tiers, nil
}

type formData struct {
	Form     productForm
	Currency domain.Currency
}

func (k *console) formPage(c *fiber.Ctx, status int, f productForm, errMsg string) error {
	title := "console.products.new"
	if f.ID != 0 {
		title = k.tr(c, "console.form.edit_title", "ID", f.ID)
	}
	return k.render(c, status, "productform", view{Title: title, Error: errMsg,
		Data: formData{Form: f, Currency: k.sales.Currency()}})
}

func (k *console) newProductPage(c *fiber.Ctx) error {
	return k.formPage(c, fiber.StatusOK, productForm{MinPerOrder: "1", MaxPerOrder: "1", CodeUses: "1",
		StockDisplay: string(domain.StockExact)}, "")
}

func (k *console) editProductPage(c *fiber.Ctx) error {
	id, err := productID(c)
	if err != nil {
		return k.fail(c, err)
	}
	p, err := k.catalogue.Product(c.UserContext(), id)
	if err != nil {
		return k.fail(c, err)
	}
	return k.formPage(c, fiber.StatusOK, formOf(p, k.sales.Currency(), k.zone(c)), "")
}

// createProduct creates a product through the use case; bad input shows the form again with
// the error and creates nothing.
func (k *console) createProduct(c *fiber.Ctx) error {
	f := readForm(c)
	cur := k.sales.Currency()
	p, err := f.parse(cur, k.zone(c))
	var created domain.Product
	if err == nil {
		uses := 1
		if p.codeUses != nil {
			uses = *p.codeUses
		}
		created, err = k.catalogue.CreateProduct(c.UserContext(), application.NewProduct{Name: f.Name, Description: f.Description, Price: p.price,
			MinPerOrder: p.minPerOrder, MaxPerOrder: p.maxPerOrder, CodeUses: uses, SharedKey: uses == domain.UnlimitedUses,
			Group: f.Group, Variant: f.Variant,
			Tiers: p.tiers, StockDisplay: p.display,
			Sale:                domain.SaleRules{StartsAt: p.startsAt, EndsAt: p.endsAt, BuyerLimit: p.buyerLimit},
			RefundReleasesLimit: f.RefundReleasesLimit, LowStockThreshold: p.lowStock})
	}
	k.record(c, "product.create", f.params(k.zone(c)), err)
	if err != nil {
		return k.formError(c, f, err)
	}
	return c.Redirect("/console/products/"+strconv.FormatInt(int64(created.ID()), 10), fiber.StatusSeeOther)
}

// updateProduct saves the whole form as one patch (every field set: the form shows them all;
// an empty sale bound removes it).
func (k *console) updateProduct(c *fiber.Ctx) error {
	f := readForm(c)
	id, err := productID(c)
	if err != nil {
		return k.fail(c, err)
	}
	f.ID = id
	p, err := f.parse(k.sales.Currency(), k.zone(c))
	if err == nil {
		_, err = k.catalogue.UpdateProduct(c.UserContext(), id, application.ProductPatch{Name: &f.Name, Description: &f.Description, Price: &p.price,
			MinPerOrder: &p.minPerOrder, MaxPerOrder: &p.maxPerOrder, CodeUses: p.codeUses, Group: &f.Group, Variant: &f.Variant,
			Tiers: &p.tiers, StockDisplay: &p.display, StartsAt: &p.startsAt, EndsAt: &p.endsAt, BuyerLimit: &p.buyerLimit, RefundReleasesLimit: &f.RefundReleasesLimit,
			LowStockThreshold: &p.lowStock})
	}
	k.record(c, "product.update", f.params(k.zone(c)), err)
	if err != nil {
		return k.formError(c, f, err)
	}
	return c.Redirect("/console/products/"+strconv.FormatInt(int64(id), 10), fiber.StatusSeeOther)
}

// formError shows the form again with the error (the status the API would answer); a missing
// product or an outage is an error page.
func (k *console) formError(c *fiber.Ctx, f productForm, err error) error {
	status, msg := k.explain(c, err)
	if status == fiber.StatusNotFound || status >= 500 {
		return k.fail(c, err)
	}
	return k.formPage(c, status, f, msg)
}
