package console_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// A failed login is a warning in the log and an entry in the audit log: the client's address
// and the operator its token claimed, never the token's secret (nor any part of a token not
// shaped as an operator's, such as a mistyped shared admin token).
func TestFailedLoginsAreLoggedAndAuditedWithoutTheSecret(t *testing.T) {
	h := newHarness(t, 0)
	tok := h.operator("alice", domain.RoleOperator)
	name, secret, _ := strings.Cut(tok, ".")
	wrong := name + "." + strings.Repeat("A", len(secret)) // alice's name, another secret
	for _, bad := range []string{wrong, "garbage-token", adminToken + "x"} {
		wantStatus(t, h.postForm("/console/login", url.Values{"token": {bad}}, ""), fiber.StatusUnauthorized)
	}
	var failed []auditJSON
	for _, e := range h.audit() {
		if e.Action == webkit.ActionLoginFailed {
			failed = append(failed, e)
		}
	}
	if len(failed) != 3 {
		t.Fatalf("%d %s entries, want 3: %+v", len(failed), webkit.ActionLoginFailed, h.audit())
	}
	for i, wantTarget := range []string{"", "", "operator alice"} { // newest first
		e := failed[i]
		if e.Target != wantTarget || e.Operator != "" || e.Result != "401 unauthorized" || e.Client == "" {
			t.Errorf("entry %d = %+v, want target %q, no operator, 401, a client address", i, e, wantTarget)
		}
	}
	logs := h.logs.String()
	if n := strings.Count(logs, `"msg":"authentication refused"`); n != 3 {
		t.Fatalf("%d log lines of refused logins, want 3:\n%s", n, logs)
	}
	if !strings.Contains(logs, `"claimed_operator":"alice"`) || !strings.Contains(logs, `"client_addr":"0.0.0.0"`) {
		t.Fatalf("the log does not name the claimed operator and the address:\n%s", logs)
	}
	all := logs + h.do("GET", "/admin/audit", nil, "Authorization", "Bearer "+adminToken).body
	for _, s := range []string{secret, strings.Repeat("A", len(secret)), "garbage-token", adminToken} {
		if strings.Contains(all, s) {
			t.Fatalf("the log or the audit log holds %q", s)
		}
	}
}

// A login over the per-IP limit is logged and audited once per address and window however
// many follow; the refusals left out are counted in the next window's first entry.
func TestLoginRefusalsAreAuditedOncePerWindow(t *testing.T) {
	h := newHarness(t, 2)
	for range 2 {
		wantStatus(t, h.postForm("/console/login", url.Values{"token": {"alice.wrong"}}, ""), fiber.StatusUnauthorized)
	}
	for range 5 {
		wantStatus(t, h.postForm("/console/login", url.Values{"token": {"alice.wrong"}}, ""), fiber.StatusTooManyRequests)
	}
	count := func(action string) int {
		n := 0
		for _, e := range h.audit() {
			if e.Action == action {
				n++
			}
		}
		return n
	}
	if got := count(webkit.ActionLoginRateLimited); got != 1 {
		t.Fatalf("%d %s entries after 5 refusals, want 1", got, webkit.ActionLoginRateLimited)
	}
	if got := count(webkit.ActionLoginFailed); got != 2 {
		t.Fatalf("%d %s entries, want 2", got, webkit.ActionLoginFailed)
	}
	if n := strings.Count(h.logs.String(), `"action":"console.login_rate_limited"`); n != 1 {
		t.Fatalf("%d log lines of refusals, want 1", n)
	}

	h.clock.Advance(time.Minute)
	wantStatus(t, h.postForm("/console/login", url.Values{"token": {"alice.wrong"}}, ""), fiber.StatusUnauthorized)
	entries := h.audit()
	if entries[0].Action != webkit.ActionLoginFailed || entries[1].Action != webkit.ActionAuthUnrecorded ||
		entries[1].Params != `{"count":4}` {
		t.Fatalf("the next window's entries: %+v, %+v; want the 4 unrecorded refusals counted, then the failure",
			entries[1], entries[0])
	}
}
