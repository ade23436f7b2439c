package console_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/console"
	"cardshop/adapters/paysig"
	"cardshop/application"
	"cardshop/domain"
)

func TestLoginSetsAStrictHttpOnlySessionCookie(t *testing.T) {
	h := newHarness(t, 0)
	tok := h.operator("alice", domain.RoleOperator)

	r := h.postForm("/console/login", url.Values{"token": {tok}}, "")
	wantStatus(t, r, fiber.StatusSeeOther)
	cookies := (&http.Response{Header: r.header}).Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", r.header.Values("Set-Cookie"))
	}
	c := cookies[0]
	if c.Name != console.CookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/console" || c.Secure {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/console, not Secure over plain http", c)
	}
	if want := start.Add(console.SessionTTL); !c.Expires.Equal(want) {
		t.Errorf("cookie expires %v, want %v", c.Expires, want)
	}

	b := &browser{h: h, cookie: c.Name + "=" + c.Value}
	home := b.get("/console")
	wantStatus(t, home, 200)
	if !strings.Contains(home.body, "alice") || !strings.Contains(home.body, "operator") {
		t.Fatalf("home does not name the operator and role: %s", home.body)
	}

	// Behind a TLS-terminating proxy the cookie is Secure.
	r = h.postForm("/console/login", url.Values{"token": {tok}}, "", "X-Forwarded-Proto", "https")
	if c := (&http.Response{Header: r.header}).Cookies(); len(c) != 1 || !c[0].Secure {
		t.Fatalf("over https the cookie must be Secure: %v", r.header.Values("Set-Cookie"))
	}
}

func TestLoginWithTheSharedAdminToken(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(adminToken)
	home := b.get("/console")
	if !strings.Contains(home.body, string(domain.LegacyAdmin)) || !strings.Contains(home.body, "admin") {
		t.Fatalf("home: %s", home.body)
	}
}

func TestLoginWithABadTokenShowsAnErrorAndSetsNoCookie(t *testing.T) {
	h := newHarness(t, 0)
	tok := h.operator("alice", domain.RoleOperator)
	for _, bad := range []string{"", "nobody.secret", tok + "x", "alice.", adminToken + "x"} {
		r := h.postForm("/console/login", url.Values{"token": {bad}}, "")
		wantStatus(t, r, fiber.StatusUnauthorized)
		if !strings.Contains(r.body, "not valid") {
			t.Errorf("token %q: no error shown: %s", bad, r.body)
		}
		for _, c := range (&http.Response{Header: r.header}).Cookies() {
			if c.Name == console.CookieName && c.Value != "" {
				t.Errorf("token %q: a session cookie was set", bad)
			}
		}
	}
}

func TestLoginAttemptsAreRateLimitedPerIP(t *testing.T) {
	h := newHarness(t, 3)
	tok := h.operator("alice", domain.RoleOperator)
	for range 3 {
		wantStatus(t, h.postForm("/console/login", url.Values{"token": {"alice.wrong"}}, ""), fiber.StatusUnauthorized)
	}
	// Over the limit even the right token is not checked: 429 and no session.
	r := h.postForm("/console/login", url.Values{"token": {tok}}, "")
	wantStatus(t, r, fiber.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" || strings.Contains(strings.Join(r.header.Values("Set-Cookie"), ";"), "cardshop_console=ey") {
		t.Fatalf("429 without Retry-After or with a session: %v", r.header)
	}
	h.clock.Advance(time.Minute)
	wantStatus(t, h.postForm("/console/login", url.Values{"token": {tok}}, ""), fiber.StatusSeeOther)
}

// consolePages are every page of the console with a session, for a product and an order.
func consolePages(product domain.ProductID, order string) []string {
	p := "/console/products/" + itoa(int64(product))
	o := "/console/orders/" + order
	return []string{"/console", "/console/products", "/console/products/new", p, p + "/edit", "/console/orders",
		o, o + "/refund", o + "/fulfil", "/console/audit"}
}

// consolePosts are every write of the console.
func consolePosts(product domain.ProductID, order string) []string {
	p := "/console/products/" + itoa(int64(product))
	o := "/console/orders/" + order
	return []string{"/console/logout", "/console/products", p, p + "/freeze", p + "/unfreeze", o + "/refund", o + "/fulfil",
		o + "/mail", p + "/codes/void/confirm", p + "/codes/void", "/console/settings", "/console/alerts/1/ack"}
}

func TestEveryPageWithoutAValidSessionRedirectsToLogin(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	no := h.paidOrder(p, []string{"CODE-A"}, 1)
	good := h.login(h.operator("alice", domain.RoleAdmin)).cookie
	payload, mac, _ := strings.Cut(strings.TrimPrefix(good, console.CookieName+"="), ".")
	for name, cookie := range map[string]string{
		"none":     "",
		"garbage":  console.CookieName + "=garbage",
		"bad mac":  console.CookieName + "=" + payload + "." + strings.Repeat("A", len(mac)),
		"no mac":   console.CookieName + "=" + payload,
		"spliced":  console.CookieName + "=" + payload[:len(payload)-2] + "Q." + mac,
		"foreign":  console.CookieName + "=" + forgedCookie(t, "another-secret-0123456789", "alice"),
		"a forger": console.CookieName + "=" + forgedCookie(t, "", "alice"),
	} {
		for _, page := range consolePages(p.ID(), no) {
			var hdr []string
			if cookie != "" {
				hdr = []string{"Cookie", cookie}
			}
			wantLoginRedirectf(t, h.do("GET", page, nil, hdr...), name, page)
		}
		for _, post := range consolePosts(p.ID(), no) {
			wantLoginRedirectf(t, h.postForm(post, url.Values{"reason": {"x"}}, cookie), name, post)
		}
	}
	if h.reload(p.ID()).Frozen() || h.orderStatus(no) != domain.StatusPaid {
		t.Fatal("a request without a session changed something")
	}

	// A session expires after SessionTTL.
	h.clock.Advance(console.SessionTTL)
	wantLoginRedirect(t, h.do("GET", "/console", nil, "Cookie", good))
}

func wantLoginRedirectf(t *testing.T, r resp, name, target string) {
	t.Helper()
	if r.status != fiber.StatusSeeOther || r.header.Get("Location") != "/console/login" {
		t.Errorf("%s: %s: want a redirect to the login page, got %d", name, target, r.status)
	}
}

func TestEveryPostNeedsTheSessionsCSRFToken(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	no := h.paidOrder(p, []string{"CODE-A"}, 1)
	b := h.login(adminToken)
	other := h.login(h.operator("mallory", domain.RoleAdmin)) // another session's token is not this one's
	before := len(h.audit())

	for _, post := range consolePosts(p.ID(), no) {
		form := url.Values{"reason": {"forged"}, "name": {"Forged"}, "price": {"1.00"}, "max_per_order": {"1"}}
		for name, tok := range map[string]string{"none": "", "forged": "AAAA", "another session's": other.csrf,
			"almost": b.csrf[:len(b.csrf)-1]} {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			if tok != "" {
				f.Set("csrf", tok)
			}
			r := h.postForm(post, f, b.cookie)
			if r.status != fiber.StatusForbidden {
				t.Errorf("%s with %s token: status %d, want 403", post, name, r.status)
			}
		}
		// The right token from another site's page: refused by its Origin.
		f := url.Values{"csrf": {b.csrf}, "reason": {"forged"}}
		if r := h.postForm(post, f, b.cookie, "Origin", "https://evil.example"); r.status != fiber.StatusForbidden {
			t.Errorf("%s from another origin: status %d, want 403", post, r.status)
		}
	}
	if h.reload(p.ID()).Frozen() || h.orderStatus(no) != domain.StatusPaid {
		t.Fatal("a forged post changed something")
	}
	if ps, _ := h.shop.Catalogue.Products(context.Background()); len(ps) != 1 {
		t.Fatalf("a forged post created a product: %d products", len(ps))
	}
	if n := len(h.audit()); n != before {
		t.Fatalf("forged posts reached the audit log: %d entries, had %d", n, before)
	}
	// The session still works with its own token, from its own origin.
	r := h.postForm("/console/products/"+itoa(int64(p.ID()))+"/freeze", url.Values{"csrf": {b.csrf}, "reason": {"ok"}},
		b.cookie, "Origin", "http://example.com")
	wantStatus(t, r, 200)
	if !h.reload(p.ID()).Frozen() {
		t.Fatal("a valid post did not freeze")
	}
}

func TestRolesAreCheckedOnTheServer(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	no := h.paidOrder(p, []string{"CODE-A", "CODE-B"}, 1)
	viewer := h.login(h.operator("vera", domain.RoleViewer))
	oper := h.login(h.operator("otto", domain.RoleOperator))
	admin := h.login(h.operator("ada", domain.RoleAdmin))
	pp := "/console/products/" + itoa(int64(p.ID()))
	op := "/console/orders/" + no

	for _, post := range []string{pp + "/freeze", "/console/products", pp, op + "/refund", op + "/fulfil"} {
		wantStatus(t, viewer.post(post, url.Values{"reason": {"x"}, "name": {"New"}, "price": {"1.00"}, "max_per_order": {"1"}}), 403)
	}
	for _, page := range []string{"/console/products/new", pp + "/edit", op + "/refund", op + "/fulfil"} {
		wantStatus(t, viewer.get(page), 403)
	}
	wantStatus(t, oper.get(op+"/refund"), 403)
	wantStatus(t, oper.post(op+"/refund", url.Values{"reason": {"x"}}), 403)
	if h.reload(p.ID()).Frozen() || h.orderStatus(no) != domain.StatusPaid {
		t.Fatal("a forbidden action changed something")
	}
	if ps, _ := h.shop.Catalogue.Products(context.Background()); len(ps) != 1 {
		t.Fatalf("a viewer created a product: %d products", len(ps))
	}
	// The refusals are in the audit log, as the API records them.
	e := h.audit()[0]
	if e.Operator != "otto" || e.Action != "order.refund" || e.Result != "403 forbidden" || e.Target != "order "+no {
		t.Fatalf("refused refund's entry: %+v", e)
	}

	wantStatus(t, oper.post(pp+"/freeze", url.Values{"reason": {"checking"}}), 200)
	if !h.reload(p.ID()).Frozen() {
		t.Fatal("an operator could not freeze")
	}
	wantStatus(t, admin.get(op+"/refund"), 200)
	r := admin.post(op+"/refund", url.Values{"reason": {"buyer asked"}, "void": {"on"}})
	wantStatus(t, r, 200)
	if st := h.orderStatus(no); st != domain.StatusRefunded {
		t.Fatalf("after an admin's refund the order is %s", st)
	}
	if !strings.Contains(r.body, "Refunded: 1 code(s) voided, 0 recycled.") {
		t.Errorf("the refund's page does not say where the codes went: %s", r.body)
	}
}

func TestARoleChangeAppliesToTheNextRequest(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	b := h.login(h.operator("otto", domain.RoleOperator))
	if _, err := h.shop.Admin.SetOperatorRole(context.Background(), "otto", "viewer"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, b.post("/console/products/"+itoa(int64(p.ID()))+"/freeze", url.Values{"reason": {"x"}}), 403)
}

func TestRotatingOrRemovingAnOperatorLogsItsSessionsOut(t *testing.T) {
	h := newHarness(t, 0)
	ctx := context.Background()
	alice := h.login(h.operator("alice", domain.RoleOperator))
	bob := h.login(h.operator("bob", domain.RoleOperator))
	legacy := h.login(adminToken)
	h.clock.Advance(time.Second)

	_, newTok, err := h.shop.Admin.RotateOperator(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.shop.Admin.RemoveOperator(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	r := alice.get("/console")
	wantLoginRedirect(t, r)
	if !strings.Contains(strings.Join(r.header.Values("Set-Cookie"), ";"), console.CookieName+"=;") {
		t.Errorf("the revoked session's cookie was not cleared: %v", r.header.Values("Set-Cookie"))
	}
	wantLoginRedirect(t, bob.get("/console"))
	wantStatus(t, legacy.get("/console"), 200) // the shared token's sessions last until they expire

	// The new token logs in again.
	wantStatus(t, h.login(newTok).get("/console"), 200)
}

func TestLogoutClearsTheCookie(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(adminToken)
	r := b.post("/console/logout", nil)
	wantLoginRedirect(t, r)
	c := (&http.Response{Header: r.header}).Cookies()
	if len(c) != 1 || c[0].Value != "" || c[0].MaxAge >= 0 && c[0].Expires.After(start) {
		t.Fatalf("logout cookie %v", r.header.Values("Set-Cookie"))
	}
}

func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	no := h.paidOrder(p, []string{"CODE-A"}, 1)
	b := h.login(adminToken)
	answers := map[string]resp{
		"login":          h.do("GET", "/console/login", nil),
		"bad login":      h.postForm("/console/login", url.Values{"token": {"x"}}, ""),
		"no session":     h.do("GET", "/console/products", nil),
		"missing page":   b.get("/console/nothing-here"),
		"missing order":  b.get("/console/orders/NOPE"),
		"forbidden post": b.postFormNoToken("/console/products/1/freeze"),
		"stylesheet":     h.do("GET", "/console/static/console.css", nil),
	}
	for _, page := range consolePages(p.ID(), no) {
		answers[page] = b.get(page)
	}
	for name, r := range answers {
		if got := r.header.Get("Content-Security-Policy"); got != "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'" {
			t.Errorf("%s: CSP %q", name, got)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", name, r.header)
		}
		if name != "stylesheet" && r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q", name, r.header.Get("Cache-Control"))
		}
		if strings.Contains(r.body, "<script>") || strings.Contains(r.body, "style=") || strings.Contains(r.body, "<style") {
			t.Errorf("%s: inline script or style", name)
		}
	}
	if css := answers["stylesheet"]; css.status != 200 || !strings.HasPrefix(css.header.Get("Content-Type"), "text/css") {
		t.Errorf("stylesheet: %d %q", css.status, css.header.Get("Content-Type"))
	}
	if r := answers["missing order"]; r.status != 404 {
		t.Errorf("missing order: %d", r.status)
	}
}

// postFormNoToken posts an empty form with the session but no CSRF token.
func (b *browser) postFormNoToken(target string) resp {
	b.h.t.Helper()
	return b.h.postForm(target, url.Values{}, b.cookie)
}

func TestNoCodeAppearsInAnyPage(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	codes := []string{"SECRET-CODE-0001", "SECRET-CODE-0002", "SECRET-CODE-0003"}
	no := h.paidOrder(p, codes, 2)
	b := h.login(adminToken)
	// A write leaves an audit entry to show too.
	wantStatus(t, b.post("/console/products/"+itoa(int64(p.ID()))+"/freeze", url.Values{"reason": {"check"}}), 200)
	for _, page := range append(consolePages(p.ID(), no), "/console/products/"+itoa(int64(p.ID()))+"/codes") {
		r := b.get(page)
		wantStatus(t, r, 200)
		if strings.Contains(r.body, "SECRET-CODE") {
			t.Errorf("%s shows a code", page)
		}
	}
	// No page read a code, so none wrote the audit entry of a read of codes.
	for _, e := range h.audit() {
		if e.Action == application.ActionCodesRead {
			t.Errorf("a console page is audited as a read of codes: %+v", e)
		}
	}
	order := b.get("/console/orders/" + no)
	for _, want := range []string{"PAID", "39.98 CNY", "19.99 CNY", "UTC"} {
		if !strings.Contains(order.body, want) {
			t.Errorf("order page lacks %q", want)
		}
	}
	// Reading the order in the console is not a reveal.
	v, err := h.shop.Sales.AdminOrder(context.Background(), domain.OrderNo(no))
	if err != nil || v.Order.Revealed() {
		t.Fatalf("the console revealed the codes: %v %v", v.Order.RevealedAt(), err)
	}
}

func TestConsoleWritesAreInTheAuditLog(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	b := h.login(h.operator("otto", domain.RoleOperator))
	pp := "/console/products/" + itoa(int64(p.ID()))
	wantStatus(t, b.post(pp+"/freeze", url.Values{"reason": {"supplier recall"}}), 200)
	wantStatus(t, b.post(pp+"/unfreeze", nil), 200)
	wantStatus(t, b.post(pp+"/unfreeze", nil), 200) // unfreezing twice is no error in the use case

	entries := h.audit()
	if len(entries) < 3 {
		t.Fatalf("entries %+v", entries)
	}
	freeze := entries[2]
	if freeze.Operator != "otto" || freeze.Role != "operator" || freeze.Action != "product.freeze" ||
		freeze.Target != "product "+itoa(int64(p.ID())) || freeze.Result != "200" || freeze.Client == "" {
		t.Fatalf("freeze entry %+v", freeze)
	}
	if freeze.Params != `{"reason":"supplier recall"}` {
		t.Fatalf("freeze params %q (never the csrf token)", freeze.Params)
	}
	if entries[1].Action != "product.unfreeze" {
		t.Fatalf("unfreeze entry %+v", entries[1])
	}
	// The console's audit page shows them, filtered by action.
	r := b.get("/console/audit?action=product.freeze&operator=otto")
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, "supplier recall") || strings.Contains(r.body, "product.unfreeze") {
		t.Fatalf("audit page filtered by action: %s", r.body)
	}
	wantStatus(t, b.get("/console/audit?from=yesterday"), 400)
}

func TestAuditPagesByBeforeID(t *testing.T) {
	h := newHarness(t, 0)
	ctx := context.Background()
	for i := range 60 {
		if _, err := h.shop.Admin.Record(ctx, domain.AuditEntry{Operator: "otto", Role: domain.RoleOperator,
			Action: "product.update", Target: "product " + itoa(int64(i)), Result: "200"}); err != nil {
			t.Fatal(err)
		}
	}
	b := h.login(adminToken)
	first := b.get("/console/audit")
	if !strings.Contains(first.body, "product 59<") || strings.Contains(first.body, "product 9<") {
		t.Fatalf("first page: %s", first.body)
	}
	if !strings.Contains(first.body, "before_id=11") {
		t.Fatalf("first page has no link to the next: %s", first.body)
	}
	next := b.get("/console/audit?before_id=11")
	if !strings.Contains(next.body, "product 9<") || strings.Contains(next.body, "product 10<") {
		t.Fatalf("second page: %s", next.body)
	}
}

func TestProductFormsCreateAndEditThroughTheUseCases(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(h.operator("otto", domain.RoleOperator))
	form := url.Values{"name": {"Steam 50"}, "price": {"50.00"}, "max_per_order": {"3"}, "tiers": {"2 48.00\n3 47.50"},
		"stock_display": {"level"}, "starts_at": {"2025-03-02T10:00"}, "ends_at": {""}, "buyer_limit": {"6"},
		"refund_releases_limit": {"on"}, "low_stock_threshold": {"10"}}
	r := b.post("/console/products", form)
	wantStatus(t, r, fiber.StatusSeeOther)
	ps, _ := h.shop.Catalogue.Products(context.Background())
	if len(ps) != 1 {
		t.Fatalf("%d products", len(ps))
	}
	p := ps[0]
	if p.Name() != "Steam 50" || p.Price() != 5000 || p.MaxPerOrder() != 3 || len(p.Tiers()) != 2 || p.Tiers()[1].UnitPrice != 4750 ||
		p.StockDisplay() != domain.StockLevel || !p.Sale().StartsAt.Equal(time.Date(2025, 3, 2, 10, 0, 0, 0, time.UTC)) ||
		p.Sale().BuyerLimit != 6 || !p.RefundReleasesLimit() || p.LowStockThreshold() != 10 {
		t.Fatalf("created %+v", p.Record())
	}
	if r.header.Get("Location") != "/console/products/"+itoa(int64(p.ID())) {
		t.Fatalf("redirect to %q", r.header.Get("Location"))
	}

	// The edit form shows the values back; saving it unchanged changes nothing.
	pp := "/console/products/" + itoa(int64(p.ID()))
	edit := b.get(pp + "/edit")
	for _, want := range []string{`value="Steam 50"`, `value="50.00"`, "2 48.00\n3 47.50", `value="2025-03-02T10:00:00"`} {
		if !strings.Contains(edit.body, want) {
			t.Fatalf("edit form lacks %q: %s", want, edit.body)
		}
	}
	form.Set("name", "Steam 50 (EU)")
	form.Set("starts_at", "")
	wantStatus(t, b.post(pp, form), fiber.StatusSeeOther)
	p = h.reload(p.ID())
	if p.Name() != "Steam 50 (EU)" || !p.Sale().StartsAt.IsZero() {
		t.Fatalf("edited %+v", p.Record())
	}
	actions := []string{}
	for _, e := range h.audit() {
		actions = append(actions, e.Action+" "+e.Result)
	}
	if strings.Join(actions, ",") != "product.update 200,product.create 200" {
		t.Fatalf("audit %v", actions)
	}
}

func TestBadFormInputShowsTheErrorAndChangesNothing(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	b := h.login(h.operator("otto", domain.RoleOperator))
	good := url.Values{"name": {"X"}, "price": {"1.00"}, "max_per_order": {"1"}}
	for field, bad := range map[string]string{"price": "abc", "max_per_order": "0", "tiers": "ten 5", "starts_at": "soon",
		"stock_display": "fuzzy", "name": ""} {
		f := url.Values{}
		for k, v := range good {
			f[k] = v
		}
		f.Set(field, bad)
		for _, target := range []string{"/console/products", "/console/products/" + itoa(int64(p.ID()))} {
			r := b.post(target, f)
			wantStatus(t, r, 400)
			if !strings.Contains(r.body, `class="error"`) || !strings.Contains(r.body, field) {
				t.Errorf("%s=%q on %s: no error naming the field: %s", field, bad, target, r.body)
			}
		}
	}
	ps, _ := h.shop.Catalogue.Products(context.Background())
	if len(ps) != 1 || ps[0].Name() != "Gift card" || ps[0].Price() != 1999 || ps[0].MaxPerOrder() != 5 {
		t.Fatalf("bad input changed the products: %d, %+v", len(ps), ps[0].Record())
	}
	wantStatus(t, b.post("/console/products/"+itoa(int64(p.ID()))+"/freeze", url.Values{"reason": {""}}), 400)
	if h.reload(p.ID()).Frozen() {
		t.Fatal("a freeze without a reason froze")
	}
}

func TestOrderLookupAndFulfilConfirmation(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	no := h.paidOrder(p, []string{"CODE-A"}, 1)
	b := h.login(h.operator("otto", domain.RoleOperator))
	r := b.get("/console/orders?no=" + no)
	if r.status != fiber.StatusSeeOther || r.header.Get("Location") != "/console/orders/"+no {
		t.Fatalf("lookup: %s %q", r, r.header.Get("Location"))
	}
	wantStatus(t, b.get("/console/orders?no=not%20a%20number"), 400)
	confirm := b.get("/console/orders/" + no + "/fulfil")
	wantStatus(t, confirm, 200)
	if strings.Contains(confirm.body, `action="/console/orders/`+no+`/fulfil"`) || !strings.Contains(confirm.body, "cannot be fulfilled") ||
		h.orderStatus(no) != domain.StatusPaid {
		t.Fatalf("the confirmation page of a PAID order offers the fulfil, or changed the order: %s", confirm.body)
	}
	// Fulfilling a PAID order is refused by the use case: shown, and recorded with the API's code.
	r = b.post("/console/orders/"+no+"/fulfil", nil)
	wantStatus(t, r, 409)
	if e := h.audit()[0]; e.Action != "order.fulfil" || e.Result != "409 invalid_order_state" {
		t.Fatalf("entry %+v", e)
	}
}

// An UNFULFILLED order whose refund is pending at its provider cannot be fulfilled, even with
// stock back: the confirmation page and the order's page say why and offer no fulfil, and a
// POST all the same is refused (409 refund_in_progress) with nothing allocated.
func TestFulfilConfirmationShowsARefundInProgress(t *testing.T) {
	h := newHarness(t, 0)
	ctx := context.Background()
	p := h.product("Gift card", 1999)
	if _, err := h.shop.Catalogue.ImportCodes(ctx, p.ID(), strings.NewReader("CODE-A\n")); err != nil {
		t.Fatal(err)
	}
	no := h.placeOrder(p, "buyer-1", "key-0000001", 1, false)
	h.clock.Advance(h.shop.Config().OrderTimeout + time.Minute)
	if _, err := h.shop.Sales.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	h.placeOrder(p, "buyer-2", "key-0000002", 1, true) // takes the only code
	v, err := h.shop.Sales.AdminOrder(ctx, domain.OrderNo(no))
	if err != nil || v.Order.Status() != domain.StatusClosed {
		t.Fatalf("order %+v, %v; want CLOSED", v.Order.Status(), err)
	}
	// Paid late at a provider: UNFULFILLED, and its refund there is pending.
	body, ts, sig, err := h.signer.SignedBody(paysig.Notice{OrderNo: no, Status: "paid", Amount: int64(v.Order.Amount()),
		PaymentRef: "acme:ref-late"}, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.do("POST", "/api/payments/callback", bytes.NewReader(body), "Content-Type", "application/json",
		paysig.HeaderTimestamp, ts, paysig.HeaderSignature, sig), 200)
	if err := h.ledger.Payments().Create(ctx, domain.Payment{OrderNo: domain.OrderNo(no), Provider: "acme", ProviderRef: "ref-late",
		Amount: v.Order.Amount(), Currency: h.shop.Config().Currency, Status: domain.PaymentRefunding,
		RefundNo: domain.RefundNoOf(domain.OrderNo(no)), RefundVoid: true, CreatedAt: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.shop.Catalogue.ImportCodes(ctx, p.ID(), strings.NewReader("CODE-B\n")); err != nil {
		t.Fatal(err)
	}
	b := h.login(h.operator("otto", domain.RoleOperator))
	confirm := b.get("/console/orders/" + no + "/fulfil")
	wantStatus(t, confirm, 200)
	if strings.Contains(confirm.body, `action="/console/orders/`+no+`/fulfil"`) || !strings.Contains(confirm.body, "cannot be fulfilled") ||
		!strings.Contains(confirm.body, "money is being returned") {
		t.Fatalf("the confirmation page offers the fulfil or does not say why not: %s", confirm.body)
	}
	page := b.get("/console/orders/" + no)
	wantStatus(t, page, 200)
	if strings.Contains(page.body, `href="/console/orders/`+no+`/fulfil"`) || !strings.Contains(page.body, "Fulfil not possible") {
		t.Fatalf("the order's page offers the fulfil: %s", page.body)
	}
	r := b.post("/console/orders/"+no+"/fulfil", nil)
	wantStatus(t, r, 409)
	if e := h.audit()[0]; e.Action != "order.fulfil" || e.Result != "409 refund_in_progress" {
		t.Fatalf("entry %+v", e)
	}
	if h.orderStatus(no) != domain.StatusUnfulfilled {
		t.Fatalf("order %s after the refused fulfil, want UNFULFILLED", h.orderStatus(no))
	}
}

func TestOverviewShowsEachProductsStatusStockAndSold(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	h.paidOrder(p, []string{"CODE-A", "CODE-B", "CODE-C"}, 2)
	frozen := h.product("Old card", 500)
	if err := h.shop.Catalogue.FreezeProduct(context.Background(), frozen.ID(), "retired"); err != nil {
		t.Fatal(err)
	}
	b := h.login(h.operator("vera", domain.RoleViewer))
	home := b.get("/console")
	wantStatus(t, home, 200)
	row := func(name string) string {
		i := strings.Index(home.body, ">"+name+"<")
		if i < 0 {
			t.Fatalf("home does not list %s: %s", name, home.body)
		}
		return home.body[i : i+strings.Index(home.body[i:], "</tr>")]
	}
	gift := row("Gift card")
	for _, want := range []string{`<td data-label="Status">on_sale</td>`, `<td class="num" data-label="Stock left">1</td>`, `<td class="num" data-label="Sold">2</td>`, `data-label="Price">19.99 CNY</td>`} {
		if !strings.Contains(gift, want) {
			t.Errorf("Gift card row lacks %q: %s", want, gift)
		}
	}
	if old := row("Old card"); !strings.Contains(old, "frozen") || !strings.Contains(old, "5.00 CNY") {
		t.Errorf("Old card row: %s", old)
	}
	// A viewer is offered no write.
	if strings.Contains(home.body, "/console/products/new") {
		t.Error("a viewer is offered the new product form")
	}
}

func TestChangingTheSharedAdminTokenEndsItsSessions(t *testing.T) {
	h := newHarness(t, 0)
	cookie := h.login(adminToken).cookie
	// The same shop and secret behind a service restarted with another admin token.
	restarted := fiber.New()
	console.Mount(restarted, console.Config{AdminToken: "another-admin-token-0123", TokenSecret: tokenSecret}, consoleServices(h.shop), h.clock, nil)
	req := httptest.NewRequest("GET", "/console", nil)
	req.Header.Set("Cookie", cookie)
	res, err := restarted.Test(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != fiber.StatusSeeOther || res.Header.Get("Location") != "/console/login" {
		t.Fatalf("a session of the old admin token: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	wantStatus(t, h.do("GET", "/console", nil, "Cookie", cookie), 200)
}

func TestALedgerOutageIsAnErrorPageNotALogout(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(h.operator("otto", domain.RoleOperator))
	h.ledger.down.Store(true)
	r := b.get("/console")
	wantStatus(t, r, fiber.StatusServiceUnavailable)
	if strings.Contains(strings.Join(r.header.Values("Set-Cookie"), ";"), console.CookieName) {
		t.Fatal("an outage cleared the session cookie")
	}
	h.ledger.down.Store(false)
	wantStatus(t, b.get("/console"), 200)
}
