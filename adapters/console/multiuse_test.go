package console_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// The product form sets the sales per code on a new product and shows them read-only on the
// edit form; a change is refused with the field named and changes nothing.
func TestProductFormSetsCodeUsesOnce(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(h.operator("otto", domain.RoleOperator))
	form := url.Values{"name": {"Shared licence"}, "price": {"5.00"}, "max_per_order": {"2"}, "code_uses": {"3"}}
	wantStatus(t, b.post("/console/products", form), fiber.StatusSeeOther)
	ps, _ := h.shop.Catalogue.Products(context.Background())
	if len(ps) != 1 || ps[0].CodeUses() != 3 {
		t.Fatalf("created %d products, %+v", len(ps), ps[0].Record())
	}
	pp := "/console/products/" + itoa(int64(ps[0].ID()))
	edit := b.get(pp + "/edit")
	if !strings.Contains(edit.body, `name="code_uses" value="3"`) || !strings.Contains(edit.body, "readonly") {
		t.Fatalf("edit form does not show the code uses read-only: %s", edit.body)
	}
	wantStatus(t, b.post(pp, form), fiber.StatusSeeOther) // unchanged: accepted
	if codes := b.get(pp + "/codes"); !strings.Contains(codes.body, "up to 3 times") {
		t.Fatalf("codes screen does not say the counts are uses: %s", codes.body)
	}
	form.Set("code_uses", "4")
	r := b.post(pp, form)
	wantStatus(t, r, 400)
	if !strings.Contains(r.body, "code_uses") || h.reload(ps[0].ID()).CodeUses() != 3 {
		t.Fatalf("a change of the code uses: %s", r.body)
	}
	form.Set("code_uses", "0")
	form.Set("name", "Shared key")
	wantStatus(t, b.post("/console/products", form), fiber.StatusSeeOther)
	ps, _ = h.shop.Catalogue.Products(context.Background())
	if len(ps) != 2 || ps[1].CodeUses() != domain.UnlimitedUses {
		t.Fatalf("a shared key product: %+v", ps[len(ps)-1].Record())
	}
	if page := b.get("/console/products/" + itoa(int64(ps[1].ID()))); !strings.Contains(page.body, "Unlimited") {
		t.Fatalf("product page does not say unlimited: %s", page.body)
	}
}
