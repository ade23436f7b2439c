package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type blockJSON struct {
	ID      int64     `json:"id"`
	Kind    string    `json:"kind"`
	Value   string    `json:"value"`
	Note    string    `json:"note"`
	AddedBy string    `json:"added_by"`
	AddedAt time.Time `json:"added_at"`
}

type blockListJSON struct {
	Entries []blockJSON `json:"entries"`
}

func (h *harness) blocklist(token string) []blockJSON {
	h.t.Helper()
	r := h.as(token, "GET", "/admin/blocklist", "")
	wantStatus(h.t, r, 200)
	var l blockListJSON
	r.decode(h.t, &l)
	return l.Entries
}

func (h *harness) addBlock(token, kind, value, note string) blockJSON {
	h.t.Helper()
	r := h.as(token, "POST", "/admin/blocklist", fmt.Sprintf(`{"kind":%q,"value":%q,"note":%q}`, kind, value, note))
	wantStatus(h.t, r, 201)
	var e blockJSON
	r.decode(h.t, &e)
	return e
}

// TestBlocklistAdminAPI: an operator adds entries of every kind (stored normalised, with who
// and when), a viewer lists them but may not add or remove (403, audited), an operator removes
// one; every write is in the audit log as blocklist.add or blocklist.remove.
func TestBlocklistAdminAPI(t *testing.T) {
	h := newHarness(t)
	otto, vic := h.newOperator("otto", "operator"), h.newOperator("vic", "viewer")
	ip := h.addBlock(otto, "ip", "198.51.100.77/24", "scalper farm")
	if ip.Value != "198.51.100.0/24" || ip.Kind != "ip" || ip.Note != "scalper farm" || ip.AddedBy != "otto" || !ip.AddedAt.Equal(start) {
		t.Fatalf("added %+v", ip)
	}
	v6 := h.addBlock(otto, "ip", "2001:DB8:BAD::/48", "")
	mail := h.addBlock(otto, "email", "Bot@Example.COM", "")
	dom := h.addBlock(otto, "email_domain", "Mailinator.com", "disposable")
	if v6.Value != "2001:db8:bad::/48" || mail.Value != "bot@example.com" || dom.Value != "mailinator.com" {
		t.Fatalf("values not normalised: %q %q %q", v6.Value, mail.Value, dom.Value)
	}
	if got := h.blocklist(vic); len(got) != 4 || got[0] != ip || got[3] != dom {
		t.Fatalf("viewer's list = %+v", got)
	}
	wantError(t, h.as(vic, "POST", "/admin/blocklist", `{"kind":"ip","value":"10.0.0.1"}`), 403, "forbidden")
	wantError(t, h.as(vic, "DELETE", fmt.Sprintf("/admin/blocklist/%d", ip.ID), ""), 403, "forbidden")
	wantStatus(t, h.as(otto, "DELETE", fmt.Sprintf("/admin/blocklist/%d", mail.ID), ""), 204)
	if got := h.blocklist(vic); len(got) != 3 {
		t.Fatalf("after a removal: %+v", got)
	}

	adds := h.auditOf("blocklist.add").Entries
	if len(adds) != 5 {
		t.Fatalf("%d blocklist.add entries, want 5 (4 added, 1 refused): %+v", len(adds), adds)
	}
	if e := adds[0]; e.Operator != "vic" || e.Result != "403 forbidden" {
		t.Fatalf("the refused add is recorded as %+v", e)
	}
	if e := adds[1]; e.Operator != "otto" || e.Result != "201" || !strings.Contains(e.Params, `"disposable"`) ||
		!strings.Contains(e.Params, fmt.Sprintf(`"id":%d`, dom.ID)) {
		t.Fatalf("the last add is recorded as %+v", e)
	}
	removes := h.auditOf("blocklist.remove").Entries
	if len(removes) != 2 {
		t.Fatalf("%d blocklist.remove entries, want 2: %+v", len(removes), removes)
	}
	if e := removes[0]; e.Operator != "otto" || e.Result != "204" || e.Target != fmt.Sprintf("blocklist %d", mail.ID) ||
		!strings.Contains(e.Params, `"bot@example.com"`) {
		t.Fatalf("the removal is recorded as %+v", e)
	}
	if e := removes[1]; e.Operator != "vic" || e.Result != "403 forbidden" {
		t.Fatalf("the refused removal is recorded as %+v", e)
	}
}

// TestBlocklistBadInputChangesNothing: a bad kind, value or note is 400 invalid_block_entry,
// a body that is not the object described 400 invalid_request, a second entry of a value 409
// block_exists, an unknown or malformed id 404 block_not_found or 400; the list stays as it was.
func TestBlocklistBadInputChangesNothing(t *testing.T) {
	h := newHarness(t)
	otto := h.newOperator("otto", "operator")
	kept := h.addBlock(otto, "ip", "203.0.113.0/24", "")
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"kind":"phone","value":"123"}`, 400, "invalid_block_entry"},
		{`{"kind":"ip","value":"300.1.1.1"}`, 400, "invalid_block_entry"},
		{`{"kind":"ip","value":"10.0.0.0/33"}`, 400, "invalid_block_entry"},
		{`{"kind":"email","value":"no-at-sign"}`, 400, "invalid_block_entry"},
		{`{"kind":"email_domain","value":"a@b.example"}`, 400, "invalid_block_entry"},
		{`{"kind":"ip","value":""}`, 400, "invalid_block_entry"},
		{fmt.Sprintf(`{"kind":"ip","value":"10.0.0.1","note":%q}`, strings.Repeat("n", 501)), 400, "invalid_block_entry"},
		{`{"kind":"ip","value":"10.0.0.1","extra":1}`, 400, "invalid_request"},
		{`{"kind":"ip","value":10}`, 400, "invalid_request"},
		{`{"kind":"ip","value":"203.0.113.9/24"}`, 409, "block_exists"},
	} {
		wantError(t, h.as(otto, "POST", "/admin/blocklist", c.body), c.status, c.code)
	}
	wantError(t, h.as(otto, "DELETE", "/admin/blocklist/x", ""), 400, "invalid_request")
	wantError(t, h.as(otto, "DELETE", "/admin/blocklist/0", ""), 400, "invalid_request")
	wantError(t, h.as(otto, "DELETE", "/admin/blocklist/999", ""), 404, "block_not_found")
	if got := h.blocklist(otto); len(got) != 1 || got[0] != kept {
		t.Fatalf("after bad input the list is %+v, want only %+v", got, kept)
	}
}

// TestOrderFromABlockedAddressIsRefused: POST /api/order from an address on the IP blocklist
// is 403 buyer_blocked and reserves nothing; once the entry is removed the same request places
// the order. (app.Test's client address is 0.0.0.0.)
func TestOrderFromABlockedAddressIsRefused(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 500, 5)
	h.importCodes(1, "CODE-1", "CODE-2")
	e := h.addBlock(adminToken, "ip", "0.0.0.0", "")
	tok := h.token("alice")
	wantError(t, h.order(tok, "key-00000001", `{"product_id":1,"qty":1}`), 403, "buyer_blocked")
	if l := h.levels(1); l.Sold != 0 {
		t.Fatalf("a refused order reserved %d units", l.Sold)
	}
	wantStatus(t, h.admin("DELETE", fmt.Sprintf("/admin/blocklist/%d", e.ID), ""), 204)
	h.placeOrder(tok, "key-00000001", 1, 1)
}
