package console_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

var pendingField = regexp.MustCompile(`name="pending" value="([0-9a-f]+)"`)

// TestConsoleVoidsCodesThroughAConfirmation: an admin pastes codes of a frozen product; the
// confirmation page says how many, never which, and its post voids them once, shows the
// counts and records codes.void with the reason and the counts. No page, refusal or entry
// holds a code; an operator gets neither the form nor the routes; a product on sale is
// refused and nothing changes.
func TestConsoleVoidsCodesThroughAConfirmation(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Leaky", 500)
	codes := []string{"LEAK-SECRET-0001", "LEAK-SECRET-0002", "LEAK-SECRET-0003", "LEAK-SECRET-0004"}
	if _, err := h.shop.Catalogue.ImportCodes(context.Background(), p.ID(), strings.NewReader(strings.Join(codes, "\n")+"\n")); err != nil {
		t.Fatal(err)
	}
	base := "/console/products/" + itoa(int64(p.ID())) + "/codes"
	noCode := func(what string, r resp) {
		t.Helper()
		if strings.Contains(r.body, "LEAK-SECRET") || strings.Contains(r.body, "NOT A CODE") {
			t.Fatalf("%s shows a code: %s", what, r.body)
		}
	}

	otto := h.login(h.operator("otto", domain.RoleOperator))
	page := otto.get(base)
	wantStatus(t, page, 200)
	if strings.Contains(page.body, "/codes/void") {
		t.Fatal("an operator is offered the void form")
	}
	wantStatus(t, otto.post(base+"/void/confirm", url.Values{"codes": {codes[0]}, "reason": {"leak"}}), fiber.StatusForbidden)

	ada := h.login(h.operator("ada", domain.RoleAdmin))
	page = ada.get(base)
	wantStatus(t, page, 200)
	if !strings.Contains(page.body, `action="/console/products/`+itoa(int64(p.ID()))+`/codes/void/confirm"`) {
		t.Fatalf("an admin gets no void form: %s", page.body)
	}
	pasted := "# leaked on a forum\n" + codes[0] + "\n\n " + codes[1] + " \nLEAK-NEVER-IMPORTED\n" + codes[0] + "\n"

	// Bad input: refused on the codes screen, naming the line and never the code.
	for _, tc := range []struct{ name, codes, reason, want string }{
		{"no reason", pasted, " ", "reason: required"},
		{"no codes", "\n# only a comment\n", "leak", "codes: paste at least one code"},
		{"a line that is not a code", codes[0] + "\nNOT A CODE\n", "leak", "line 2 is not a code"},
	} {
		r := ada.post(base+"/void/confirm", url.Values{"codes": {tc.codes}, "reason": {tc.reason}})
		wantStatus(t, r, fiber.StatusBadRequest)
		if !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: the page does not say %q: %s", tc.name, tc.want, r.body)
		}
		noCode(tc.name, r)
	}

	// A product on sale: the confirmation is shown, the void refused, nothing changed.
	confirm := ada.post(base+"/void/confirm", url.Values{"codes": {pasted}, "reason": {"leaked on a forum"}})
	wantStatus(t, confirm, 200)
	noCode("the confirmation", confirm)
	if !strings.Contains(confirm.body, "void 4 codes of Leaky") || !strings.Contains(confirm.body, "2 blank or comment lines were skipped") {
		t.Fatalf("the confirmation does not count the pasted codes: %s", confirm.body)
	}
	zhForm := url.Values{"codes": {pasted}, "reason": {"leaked on a forum"}, "csrf": {ada.csrf}}
	zh := h.do("POST", base+"/void/confirm", strings.NewReader(zhForm.Encode()), "Cookie", ada.cookie,
		"Content-Type", "application/x-www-form-urlencoded", "Accept-Language", "zh-CN")
	if !strings.Contains(zh.body, "即将作废商品「Leaky」（编号 1）的 4 个卡密；已跳过 2 个空行或注释行。") {
		t.Errorf("the confirmation in Chinese does not count the pasted codes: %s", zh.body)
	}
	m := pendingField.FindStringSubmatch(confirm.body)
	if m == nil {
		t.Fatalf("no pending void on the confirmation: %s", confirm.body)
	}
	r := ada.post(base+"/void", url.Values{"pending": {m[1]}})
	wantStatus(t, r, fiber.StatusConflict)
	if !strings.Contains(r.body, "freeze the product first") {
		t.Fatalf("a void of a product on sale: %s", r.body)
	}
	if c, _ := h.shop.Catalogue.CardCounts(context.Background(), p.ID()); c[domain.CardUnsold] != 4 || c[domain.CardVoid] != 0 {
		t.Fatalf("a refused void changed the pool: %v", c)
	}

	if err := h.shop.Catalogue.FreezeProduct(context.Background(), p.ID(), "leak"); err != nil {
		t.Fatal(err)
	}
	// The pending void was taken by its post: it cannot be posted again.
	r = ada.post(base+"/void", url.Values{"pending": {m[1]}})
	wantStatus(t, r, fiber.StatusConflict)
	if !strings.Contains(r.body, "paste them again") {
		t.Fatalf("a pending void posted twice: %s", r.body)
	}
	confirm = ada.post(base+"/void/confirm", url.Values{"codes": {pasted}, "reason": {"leaked on a forum"}})
	m = pendingField.FindStringSubmatch(confirm.body)
	if m == nil {
		t.Fatalf("no pending void on the confirmation: %s", confirm.body)
	}
	// Another admin cannot post this admin's pending void.
	eve := h.login(h.operator("eve", domain.RoleAdmin))
	wantStatus(t, eve.post(base+"/void", url.Values{"pending": {m[1]}}), fiber.StatusConflict)
	r = ada.post(base+"/void", url.Values{"pending": {m[1]}})
	wantStatus(t, r, 200)
	noCode("the result", r)
	if !strings.Contains(r.body, "Voided 2 code(s); 1 not found; 1 not voidable") {
		t.Fatalf("the result does not count: %s", r.body)
	}
	if c, _ := h.shop.Catalogue.CardCounts(context.Background(), p.ID()); c[domain.CardUnsold] != 2 || c[domain.CardVoid] != 2 {
		t.Fatalf("the pool after the void: %v", c)
	}

	var voids []auditJSON
	for _, e := range h.audit() {
		if strings.Contains(e.Params, "LEAK-") {
			t.Fatalf("an audit entry holds a code: %+v", e)
		}
		if e.Action == "codes.void" {
			voids = append(voids, e)
		}
	}
	// Newest first: the void and the refusal of the product on sale. A post of a pending void
	// that is not waiting (used, another admin's) tried no void and records nothing, and
	// neither does the operator's forbidden confirmation (it writes nothing).
	if len(voids) != 2 || voids[0].Operator != "ada" || voids[0].Result != "200" ||
		!strings.Contains(voids[0].Params, `"reason":"leaked on a forum"`) || !strings.Contains(voids[0].Params, `"voided":"2"`) ||
		!strings.Contains(voids[0].Params, `"given":"4"`) || voids[1].Result != "409 product_not_frozen" {
		t.Fatalf("codes.void entries: %+v", voids)
	}
}
