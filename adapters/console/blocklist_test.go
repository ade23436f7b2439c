package console_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

func (h *harness) blocks() []domain.BlockEntry {
	h.t.Helper()
	es, err := h.shop.Guard.Blocklist(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return es
}

// An operator adds an entry of each kind (stored normalised, escaped on the page), the page
// lists them with who and when, the entry applies at once to this instance's checks, and a
// removal lifts it; both writes are audited as the API's are.
func TestBlocklistAddListRemove(t *testing.T) {
	h := newHarness(t, 0)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	page := oper.get("/console/blocklist")
	wantStatus(t, page, 200)
	if !strings.Contains(page.body, `action="/console/blocklist"`) || !strings.Contains(page.body, "The blocklists are empty.") {
		t.Fatalf("the empty page: %s", page.body)
	}
	r := oper.post("/console/blocklist", url.Values{"kind": {"ip"}, "value": {"198.51.100.7/24"}, "note": {"<b>farm</b>"}})
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, "Added ip 198.51.100.0/24") || !strings.Contains(r.body, "&lt;b&gt;farm&lt;/b&gt;") ||
		!strings.Contains(r.body, "2025-03-01 12:00:00 UTC by otto") {
		t.Fatalf("after adding: %s", r.body)
	}
	wantStatus(t, oper.post("/console/blocklist", url.Values{"kind": {"email_domain"}, "value": {"Mailinator.COM"}}), 200)
	es := h.blocks()
	if len(es) != 2 || es[0].Value != "198.51.100.0/24" || es[1].Value != "mailinator.com" || es[0].AddedBy != "otto" {
		t.Fatalf("stored %+v", es)
	}
	err := h.shop.Guard.Check(context.Background(), application.BuyerCheck{IP: "198.51.100.99"})
	if err == nil {
		t.Fatal("an address of the range just added passed the check")
	}
	e := h.audit()[0]
	if e.Operator != "otto" || e.Action != "blocklist.add" || e.Result != "200" || !strings.Contains(e.Params, "Mailinator.COM") ||
		strings.Contains(e.Params, "csrf") {
		t.Fatalf("the add's audit entry: %+v", e)
	}

	id := strconv.FormatInt(es[0].ID, 10)
	r = oper.post("/console/blocklist/"+id+"/remove", nil)
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, "Removed ip 198.51.100.0/24.") || strings.Contains(r.body, `id="block-`+id+`"`) {
		t.Fatalf("after removing: %s", r.body)
	}
	if err := h.shop.Guard.Check(context.Background(), application.BuyerCheck{IP: "198.51.100.99"}); err != nil {
		t.Fatalf("the removed range still refuses: %v", err)
	}
	e = h.audit()[0]
	if e.Action != "blocklist.remove" || e.Target != "blocklist "+id || e.Result != "200" || !strings.Contains(e.Params, "198.51.100.0/24") {
		t.Fatalf("the removal's audit entry: %+v", e)
	}
}

// Bad input is said on the page with the form as typed and stores nothing; an unknown entry
// is the not-found page.
func TestBlocklistBadInput(t *testing.T) {
	h := newHarness(t, 0)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	wantStatus(t, oper.post("/console/blocklist", url.Values{"kind": {"ip"}, "value": {"10.0.0.0/8"}}), 200)
	for _, c := range []struct {
		kind, value string
		status      int
	}{
		{"ip", "300.1.2.3", 400},
		{"phone", "123", 400},
		{"email", "no-at-sign", 400},
		{"ip", "10.1.2.3/8", 409},
	} {
		r := oper.post("/console/blocklist", url.Values{"kind": {c.kind}, "value": {c.value}})
		wantStatus(t, r, c.status)
		if !strings.Contains(r.body, `class="error"`) || !strings.Contains(r.body, `value="`+c.value+`"`) {
			t.Errorf("%s %s: no error shown, or the form lost what was typed: %s", c.kind, c.value, r.body)
		}
	}
	if es := h.blocks(); len(es) != 1 {
		t.Fatalf("bad input stored entries: %+v", es)
	}
	wantStatus(t, oper.post("/console/blocklist/999/remove", nil), 404)
	wantStatus(t, oper.post("/console/blocklist/x/remove", nil), 400)
	if e := h.audit()[0]; e.Action != "blocklist.remove" || e.Result != "400 invalid_request" {
		t.Fatalf("the bad removal's audit entry: %+v", e)
	}
}

// A viewer reads the list without the forms and may not write (403, audited); a post without
// the session's CSRF token is refused before anything runs.
func TestBlocklistNeedsTheRoleAndTheCSRFToken(t *testing.T) {
	h := newHarness(t, 0)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	viewer := h.login(h.operator("vera", domain.RoleViewer))
	wantStatus(t, oper.post("/console/blocklist", url.Values{"kind": {"email"}, "value": {"bot@example.com"}}), 200)
	id := strconv.FormatInt(h.blocks()[0].ID, 10)

	list := viewer.get("/console/blocklist")
	wantStatus(t, list, 200)
	if !strings.Contains(list.body, "bot@example.com") || strings.Contains(list.body, `method="post" action="/console/blocklist`) {
		t.Fatalf("a viewer's page lacks the entry or offers a form: %s", list.body)
	}
	wantStatus(t, viewer.post("/console/blocklist", url.Values{"kind": {"ip"}, "value": {"10.0.0.1"}}), 403)
	wantStatus(t, viewer.post("/console/blocklist/"+id+"/remove", nil), 403)
	if e := h.audit()[0]; e.Operator != "vera" || e.Action != "blocklist.remove" || e.Result != "403 forbidden" {
		t.Fatalf("the viewer's refusal is audited as %+v", e)
	}
	for name, tok := range map[string]string{"no": "", "forged": "forged-token", "another session's": viewer.csrf} {
		f := url.Values{}
		if tok != "" {
			f.Set("csrf", tok)
		}
		if r := h.postForm("/console/blocklist/"+id+"/remove", f, oper.cookie); r.status != fiber.StatusForbidden {
			t.Errorf("a removal with %s token: status %d, want 403", name, r.status)
		}
	}
	if es := h.blocks(); len(es) != 1 {
		t.Fatalf("refused posts changed the list: %+v", es)
	}
}

// The dashboard shows this instance's bot defence refusals by reason.
func TestDashboardShowsBotRefusals(t *testing.T) {
	h := newHarness(t, 0)
	if _, err := h.shop.Guard.AddBlock(context.Background(), "otto", "email_domain", "spam.example", ""); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_ = h.shop.Guard.Check(context.Background(), application.BuyerCheck{Email: "x@spam.example"})
	}
	page := h.login(h.operator("vera", domain.RoleViewer)).get("/console/dashboard")
	wantStatus(t, page, 200)
	for _, want := range []string{`<dd data-bot="blocked_domain">2</dd>`, `<dd data-bot="blocked_ip">0</dd>`, `<dd data-bot="human_passed_open">0</dd>`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the dashboard lacks %s", want)
		}
	}
}
