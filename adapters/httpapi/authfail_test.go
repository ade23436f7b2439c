package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
	"cardshop/adapters/ratelimit"
	"cardshop/adapters/webkit"
	"cardshop/application"
)

// auditOf reads the audit entries of one action, newest first.
func (h *harness) auditOf(action string) auditPageJSON {
	h.t.Helper()
	var page auditPageJSON
	r := h.admin("GET", "/admin/audit?limit=1000&action="+action, "")
	wantStatus(h.t, r, 200)
	r.decode(h.t, &page)
	return page
}

// Every read of an order's codes through GET /admin/orders/{no} is audited: who, from where,
// the order, how many codes and their card ids, never a code. A read without codes, and a
// viewer's refused read, write nothing.
func TestAnOperatorsReadOfAnOrdersCodesIsAudited(t *testing.T) {
	h := newHarness(t)
	olga := h.newOperator("olga", "operator")
	vic := h.newOperator("vic", "viewer")
	h.createProduct(1, 500, 5)
	h.importCodes(1, "SECRET-CODE-1", "SECRET-CODE-2")
	o := h.placeOrder(h.token("alice"), "key-00000001", 1, 2)
	h.pay(o)

	wantStatus(t, h.as(olga, "GET", "/admin/orders/"+o.OrderNo+"?codes=false", ""), 200)
	wantError(t, h.as(vic, "GET", "/admin/orders/"+o.OrderNo, ""), 403, "forbidden")
	if got := h.auditOf(application.ActionCodesRead); len(got.Entries) != 0 {
		t.Fatalf("reads that showed no code were audited: %+v", got.Entries)
	}
	r := h.as(olga, "GET", "/admin/orders/"+o.OrderNo, "")
	wantStatus(t, r, 200)
	if !strings.Contains(string(r.body), "SECRET-CODE-1") {
		t.Fatalf("the read showed no code: %s", r.body)
	}
	got := h.auditOf(application.ActionCodesRead)
	if len(got.Entries) != 1 {
		t.Fatalf("%d %s entries, want 1", len(got.Entries), application.ActionCodesRead)
	}
	e := got.Entries[0]
	if e.Operator != "olga" || e.Role != "operator" || e.Target != "order "+o.OrderNo || e.Result != "200" ||
		e.ClientAddr == "" || e.Params != `{"cards":2,"ids":"1-2"}` {
		t.Fatalf("entry %+v: want olga (operator), order %s, 200, a client address, 2 cards with ids 1-2", e, o.OrderNo)
	}
	all := string(h.admin("GET", "/admin/audit?limit=1000", "").body)
	if strings.Contains(all, "SECRET-CODE") {
		t.Fatalf("the audit log holds a code: %s", all)
	}
}

// A refused admin token is a warning in the log and an audit entry naming the client and the
// operator the token claimed, never its secret.
func TestARefusedAdminTokenIsLoggedAndAuditedWithoutTheSecret(t *testing.T) {
	h := newHarness(t)
	olga := h.newOperator("olga", "operator")
	name, secret, _ := strings.Cut(olga, ".")
	wrong := name + "." + strings.Repeat("B", len(secret))
	wantError(t, h.as(wrong, "GET", "/admin/whoami", ""), 401, "unauthorized")
	wantError(t, h.as(adminToken+"x", "GET", "/admin/products", ""), 401, "unauthorized")
	wantError(t, h.do("GET", "/admin/products", nil), 401, "unauthorized")

	got := h.auditOf(webkit.ActionAuthFailed)
	if len(got.Entries) != 3 {
		t.Fatalf("%d %s entries, want 3: %+v", len(got.Entries), webkit.ActionAuthFailed, got.Entries)
	}
	for i, target := range []string{"", "", "operator olga"} {
		e := got.Entries[i]
		if e.Target != target || e.Operator != "" || e.Result != "401 unauthorized" || e.ClientAddr == "" {
			t.Errorf("entry %d = %+v, want target %q, no operator, 401, a client address", i, e, target)
		}
	}
	logs := h.logs.String()
	if n := strings.Count(logs, `"msg":"authentication refused"`); n != 3 || !strings.Contains(logs, `"claimed_operator":"olga"`) {
		t.Fatalf("%d log lines of refused tokens, want 3 naming olga once:\n%s", n, logs)
	}
	all := logs + string(h.admin("GET", "/admin/audit?limit=1000", "").body)
	for _, s := range []string{secret, strings.Repeat("B", len(secret)), adminToken} {
		if strings.Contains(all, s) {
			t.Fatalf("the log or the audit log holds %q", s)
		}
	}
}

// An anonymous flood of bad tokens cannot grow the audit log without bound: per client
// address at most AdminAuthFailuresPerIP entries a window (through the Limiter), per instance
// at most AuthFailuresPerInstance; what is left out is counted once, in the next window.
func TestRefusedTokensAreAuditedWithinBounds(t *testing.T) {
	for _, c := range []struct {
		name    string
		limiter bool
		sent    int
		want    int
	}{
		{"per address", true, httpapi.AdminAuthFailuresPerIP + 15, httpapi.AdminAuthFailuresPerIP},
		{"per instance", false, webkit.AuthFailuresPerInstance + 30, webkit.AuthFailuresPerInstance},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h *harness
			h = newHarness(t, func(cfg *httpapi.Config) {
				if c.limiter {
					cfg.RateLimits.Limiter = ratelimit.NewMemory(func() time.Time { return h.clock.Now() })
				}
			})
			for range c.sent {
				wantError(t, h.as("nobody.x", "GET", "/admin/whoami", ""), 401, "unauthorized")
			}
			if got := h.auditOf(webkit.ActionAuthFailed); len(got.Entries) != c.want {
				t.Fatalf("%d entries after %d refusals, want %d", len(got.Entries), c.sent, c.want)
			}
			if n := strings.Count(h.logs.String(), `"msg":"authentication refused"`); n != c.want {
				t.Fatalf("%d log lines after %d refusals, want %d", n, c.sent, c.want)
			}
			h.clock.Advance(webkit.AuthFailureWindow)
			wantError(t, h.as("nobody.x", "GET", "/admin/whoami", ""), 401, "unauthorized")
			if got := h.auditOf(webkit.ActionAuthFailed); len(got.Entries) != c.want+1 {
				t.Fatalf("%d entries in the next window, want %d", len(got.Entries), c.want+1)
			}
			unrecorded := h.auditOf(webkit.ActionAuthUnrecorded)
			if len(unrecorded.Entries) != 1 || unrecorded.Entries[0].Params != fmt.Sprintf(`{"count":%d}`, c.sent-c.want) {
				t.Fatalf("the count of unrecorded refusals: %+v, want one of %d", unrecorded.Entries, c.sent-c.want)
			}
		})
	}
}
