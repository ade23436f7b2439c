package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/console"
	"cardshop/domain"
)

// zoneCookie is the name=value of the response's time zone cookie, and the cookie itself.
func zoneCookie(t *testing.T, r resp) (string, *http.Cookie) {
	t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == console.ZoneCookieName {
			return c.Name + "=" + c.Value, c
		}
	}
	t.Fatalf("no zone cookie: %v", r.header.Values("Set-Cookie"))
	return "", nil
}

func TestTimesAreShownAndReadInTheOperatorsZone(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(h.operator("otto", domain.RoleOperator))

	// Until a zone is picked, the service's (UTC here) is used.
	if s := b.get("/console/settings"); !strings.Contains(s.body, `value="UTC"`) {
		t.Fatalf("default zone not shown: %s", s.body)
	}
	r := b.post("/console/settings", url.Values{"time_zone": {"Asia/Shanghai"}})
	wantStatus(t, r, fiber.StatusSeeOther)
	tz, c := zoneCookie(t, r)
	if c.Value != "Asia/Shanghai" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/console" {
		t.Fatalf("zone cookie %+v", c)
	}
	b.cookie += "; " + tz

	// A sale start typed in Shanghai (UTC+8) is stored as that instant, and shown back in it.
	form := url.Values{"name": {"Steam 50"}, "price": {"50.00"}, "max_per_order": {"3"}, "starts_at": {"2025-03-02T18:00"}}
	wantStatus(t, b.post("/console/products", form), fiber.StatusSeeOther)
	ps, _ := h.shop.Catalogue.Products(t.Context())
	if len(ps) != 1 || !ps[0].Sale().StartsAt.Equal(time.Date(2025, 3, 2, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("stored %+v", ps[0].Record())
	}
	edit := b.get("/console/products/" + itoa(int64(ps[0].ID())) + "/edit")
	for _, want := range []string{`value="2025-03-02T18:00:00"`, "Sale starts (Asia/Shanghai"} {
		if !strings.Contains(edit.body, want) {
			t.Fatalf("edit form lacks %q: %s", want, edit.body)
		}
	}
	// The audit log shows the entry at the harness clock's 12:00 UTC as 20:00 CST, and records
	// the zone the form's times were read in.
	audit := b.get("/console/audit")
	if !strings.Contains(audit.body, "2025-03-01 20:00:00 CST") {
		t.Fatalf("audit time not in Shanghai time: %s", audit.body)
	}
	if e := h.audit()[0]; !strings.Contains(e.Params, `"time_zone":"Asia/Shanghai"`) {
		t.Fatalf("audit params %s", e.Params)
	}
	// The audit filter's times are read in the zone too: 19:59 to 20:01 Shanghai holds it.
	if r := b.get("/console/audit?from=2025-03-01T19:59&to=2025-03-01T20:01"); !strings.Contains(r.body, "product.create") {
		t.Fatalf("filter in the zone missed the entry: %s", r.body)
	}
	if r := b.get("/console/audit?from=2025-03-01T11:59&to=2025-03-01T12:01"); strings.Contains(r.body, "product.create") {
		t.Fatalf("filter read as UTC: %s", r.body)
	}
}

func TestABadZoneIsRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(h.operator("vera", domain.RoleViewer))
	for _, bad := range []string{"Mars/Olympus", "Local", "../../etc/passwd", strings.Repeat("A", 80)} {
		r := b.post("/console/settings", url.Values{"time_zone": {bad}})
		wantStatus(t, r, fiber.StatusBadRequest)
		if !strings.Contains(r.body, "must be a time zone name") || len(r.header.Values("Set-Cookie")) != 0 {
			t.Fatalf("%q: %s %v", bad, r.body, r.header.Values("Set-Cookie"))
		}
	}
	// A cookie that does not name a zone (edited by hand) falls back to the default.
	r := h.do("GET", "/console/audit", nil, "Cookie", b.cookie+"; "+console.ZoneCookieName+"=Nowhere%2FLand")
	wantStatus(t, r, fiber.StatusOK)
	if !strings.Contains(r.body, "From (UTC)") {
		t.Fatalf("bad zone cookie not ignored: %s", r.body)
	}
	// Without the CSRF token the preference is not changed either.
	r = h.postForm("/console/settings", url.Values{"time_zone": {"Europe/Berlin"}}, b.cookie)
	wantStatus(t, r, fiber.StatusForbidden)
}

func TestTheDefaultZoneForgetsThePickedOne(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(h.operator("vera", domain.RoleViewer))
	tz, _ := zoneCookie(t, b.post("/console/settings", url.Values{"time_zone": {"Europe/Berlin"}}))
	b.cookie += "; " + tz
	if s := b.get("/console/settings?saved=1"); !strings.Contains(s.body, "Saved: times are shown in Europe/Berlin.") {
		t.Fatalf("settings after save: %s", s.body)
	}
	_, c := zoneCookie(t, b.post("/console/settings", url.Values{"time_zone": {"default"}}))
	if c.MaxAge >= 0 && !c.Expires.Before(time.Now()) {
		t.Fatalf("default did not clear the cookie: %+v", c)
	}
}
