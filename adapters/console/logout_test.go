package console_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// A logout ends the session on the server: a copy of its cookie taken before the logout gets
// the login page on every console route, and writes nothing; so do the identity's other
// sessions (one logout time per identity). A new login works at once, on the same clock.
func TestLogoutEndsACopiedCookieOnEveryRoute(t *testing.T) {
	for _, who := range []string{"operator", "shared admin token"} {
		t.Run(who, func(t *testing.T) {
			h := newHarness(t, 0)
			p := h.product("Gift card", 1999)
			no := h.paidOrder(p, []string{"CODE-A"}, 1)
			tok := adminToken
			if who == "operator" {
				tok = h.operator("alice", domain.RoleAdmin)
			}
			b := h.login(tok)
			other := h.login(tok) // the same identity in another browser
			copied := b.cookie
			stranger := h.login(h.operator("bob", domain.RoleAdmin))
			h.clock.Advance(time.Second)

			wantLoginRedirect(t, b.post("/console/logout", nil))
			for _, page := range consolePages(p.ID(), no) {
				wantLoginRedirectf(t, h.do("GET", page, nil, "Cookie", copied), "copied cookie", page)
			}
			for _, post := range consolePosts(p.ID(), no) {
				form := url.Values{"csrf": {b.csrf}, "reason": {"x"}, "void": {"true"}}
				wantLoginRedirectf(t, h.postForm(post, form, copied), "copied cookie", post)
			}
			if h.reload(p.ID()).Frozen() || h.orderStatus(no) != domain.StatusPaid {
				t.Fatal("a logged-out session changed something")
			}
			wantLoginRedirect(t, other.get("/console"))
			wantStatus(t, stranger.get("/console"), 200) // another identity's session stays

			// A new login works at once, though the clock has not moved since the logout.
			again := h.login(tok)
			wantStatus(t, again.get("/console/products"), 200)
			wantLoginRedirect(t, h.do("GET", "/console", nil, "Cookie", copied))
		})
	}
}

// An instance whose clock lags the one that issued the session still ends it at logout.
func TestLogoutOnALaggingClockEndsTheSession(t *testing.T) {
	h := newHarness(t, 0)
	tok := h.operator("alice", domain.RoleOperator)
	b := h.login(tok)
	h.clock.Set(start.Add(-time.Minute))
	wantLoginRedirect(t, b.post("/console/logout", nil))
	wantLoginRedirect(t, b.get("/console"))
	h.clock.Set(start.Add(time.Minute)) // the login limiter's clock may not run back
	wantStatus(t, h.login(tok).get("/console"), 200)
}

// A logout that cannot be recorded says so, and still clears this browser's cookie.
func TestALogoutThatCannotBeRecordedSaysSo(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(h.operator("alice", domain.RoleOperator))
	h.ledger.logoutDown.Store(true)
	r := b.post("/console/logout", nil)
	wantStatus(t, r, fiber.StatusServiceUnavailable)
	if !strings.Contains(r.body, "could not be recorded") {
		t.Fatalf("logout page: %s", r.body)
	}
	if !strings.Contains(strings.Join(r.header.Values("Set-Cookie"), ";"), "cardshop_console=;") {
		t.Fatalf("the cookie was not cleared: %v", r.header.Values("Set-Cookie"))
	}
	h.ledger.logoutDown.Store(false)
	wantStatus(t, b.get("/console"), 200) // not ended on the server: the page said so
}
