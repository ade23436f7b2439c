package storefront_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/storefront"
	"cardshop/application"
	"cardshop/domain"
)

const evil = `<script>alert(1)</script>&"'`

// evilDescription is a description written to break out of its element, its attribute or the
// page: a tag with a handler, a script, a closed paragraph, a comment and a template action,
// over lines and paragraphs. descEscaped are its lines as a page must show them: text.
const evilDescription = `Read me "><img src=x onerror=alert(2)> <script>alert(3)</script>` + "\n" +
	`</p><p onclick=alert(4)>second line & more` + "\n\n" +
	`<!-- comment --> third paragraph ]]> {{.Evil}}`

var descEscaped = []string{
	`Read me &#34;&gt;&lt;img src=x onerror=alert(2)&gt; &lt;script&gt;alert(3)&lt;/script&gt;`,
	`&lt;/p&gt;&lt;p onclick=alert(4)&gt;second line &amp; more`,
	`&lt;!-- comment --&gt; third paragraph ]]&gt; {{.Evil}}`,
}

// every page of a whole purchase, in both languages: the catalogue, the product pages (on
// sale, upcoming), the confirmation, the order page (pending, paid), the QR page, the lookup
// page (empty, failed), refusals and not-found pages.
func everyPage(t *testing.T, h *harness) map[string]resp {
	t.Helper()
	p := h.product(application.NewProduct{Name: evil, Description: evilDescription, Price: 100,
		Tiers: []domain.PriceTier{{MinQty: 2, UnitPrice: 90}}}, 5)
	later := h.product(application.NewProduct{Name: evil + " later", Description: evilDescription, Price: 100,
		Sale: domain.SaleRules{StartsAt: start.Add(time.Hour)}}, 1)
	pages := map[string]resp{}
	for _, lang := range []string{"en", "zh-CN"} {
		b := h.browser(lang)
		pages[lang+" catalogue"] = b.get("/")
		pages[lang+" product"] = b.get(path(p))
		pages[lang+" upcoming"] = b.get(path(later))
		pages[lang+" review"] = b.post("/checkout/review", url.Values{"product": {strings.TrimPrefix(path(p), "/p/")},
			"qty": {"1"}, "email": {lang + "@example.com"}, "provider": {"dev"}})
		confirm := b.post("/checkout", orderForm(t, b, p, "1", lang+"@example.com"))
		pages[lang+" confirm"] = confirm
		no, _ := placed(t, confirm)
		base := "/orders/" + string(no)
		pages[lang+" order pending"] = b.get(base)
		tok := field(t, csrfField, pages[lang+" order pending"].body)
		if r := b.post(base+"/pay", url.Values{"csrf": {tok}, "provider": {"alipay"}}); r.status != 303 {
			t.Fatalf("pay: %s", r)
		}
		pages[lang+" qr"] = b.get(base + "/pay/alipay")
		h.pay(no)
		pages[lang+" order paid"] = b.get(base)
		pages[lang+" lookup"] = b.get("/lookup")
		pages[lang+" lookup failed"] = b.post("/lookup", url.Values{"csrf": {tok}, "order_no": {string(no)}, "email": {"x@example.com"}, "secret": {"x"}})
		pages[lang+" refusal"] = b.post("/checkout", orderFormRaw(t, b, later, "1", "x@example.com"))
		pages[lang+" not found"] = b.get("/no/such/page")
		pages[lang+" csrf"] = b.post("/checkout", url.Values{})
		for name, r := range pages {
			if strings.HasPrefix(name, lang) && r.status >= 500 {
				t.Fatalf("%s: %s", name, r)
			}
		}
	}
	return pages
}

var (
	// anyTag is a start tag as the page has it: text on a page has no "<" left (escaped), and
	// an attribute's value no ">", so an attribute is only ever looked for inside a real tag.
	anyTag       = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	scriptTag    = regexp.MustCompile(`(?i)<script\b[^>]*>`)
	styleAttr    = regexp.MustCompile(`(?i)\sstyle\s*=`)
	handlerAttr  = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	styleElement = regexp.MustCompile(`(?i)<style\b`)
)

// TestEveryPageIsLockedDown: every page has the strict CSP and the other security headers,
// and no page has an inline script, an inline style or an event-handler attribute (the CSP
// would block them; this keeps the pages from needing them).
func TestEveryPageIsLockedDown(t *testing.T) {
	opt, _ := withAlipay(t)
	h := newHarness(t, opt)
	for name, r := range everyPage(t, h) {
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
			"form-action 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", name, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q allows inline code", name, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", name, r.header)
		}
		for _, tag := range scriptTag.FindAllString(r.body, -1) {
			if !strings.Contains(tag, ` src="`) {
				t.Errorf("%s: inline script %s", name, tag)
			}
		}
		if styleElement.MatchString(r.body) {
			t.Errorf("%s: a style element in %s", name, r.body)
		}
		for _, tag := range anyTag.FindAllString(r.body, -1) {
			if styleAttr.MatchString(tag) || handlerAttr.MatchString(tag) {
				t.Errorf("%s: inline style or handler in %s", name, tag)
			}
		}
	}
	for _, f := range []string{"/static/shop/shop.css", "/static/shop/countdown.js", "/static/shop/follow.js", "/static/shop/copy.js"} {
		r := h.do("GET", f, nil)
		wantStatus(t, r, 200)
		if r.header.Get("Content-Security-Policy") == "" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", f, r.header)
		}
	}
}

// TestOperatorTextIsEscaped: a product named like a script, and described like one, is text
// on every page that shows it, never markup: the name wherever the product is named, the
// description's first line on the catalogue, its lines (with line breaks and paragraphs of the
// page's own) on the product pages.
func TestOperatorTextIsEscaped(t *testing.T) {
	opt, _ := withAlipay(t)
	h := newHarness(t, opt)
	escaped := `&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#34;&#39;`
	for name, r := range everyPage(t, h) {
		for _, raw := range []string{"<script>alert", `&"'`, "<img src=x", "<p onclick", "<!-- comment"} {
			if strings.Contains(r.body, raw) {
				t.Errorf("%s: operator text is not escaped: %q", name, raw)
			}
		}
		for _, show := range []string{"catalogue", "product", "review", "confirm", "order pending", "order paid", "qr"} {
			if strings.HasSuffix(name, " "+show) && !strings.Contains(r.body, escaped) {
				t.Errorf("%s: the escaped name is missing", name)
			}
		}
		if strings.HasSuffix(name, " catalogue") && (!strings.Contains(r.body, `<span class="excerpt">`+descEscaped[0]+`</span>`) ||
			strings.Contains(r.body, descEscaped[1])) {
			t.Errorf("%s: the excerpt is not the description's first line, escaped: %s", name, r.body)
		}
		if strings.HasSuffix(name, " product") || strings.HasSuffix(name, " upcoming") {
			// Lines joined by the page's <br>, paragraphs in the page's <p>.
			want := "<p>" + descEscaped[0] + "<br>" + descEscaped[1] + "</p>"
			if !strings.Contains(r.body, want) || !strings.Contains(r.body, "<p>"+descEscaped[2]+"</p>") {
				t.Errorf("%s: the description is not shown escaped, in its lines and paragraphs: %s", name, r.body)
			}
		}
	}
}

// TestCaptchaWidgetOpensItsOrigins: with a widget configured the form shows it and the CSP
// lets its script and frame in, and nothing else.
func TestCaptchaWidgetOpensItsOrigins(t *testing.T) {
	h := newHarness(t, option{cfg: func(c *storefront.Config) {
		c.Widget = storefront.Widget{Provider: storefront.WidgetTurnstile, SiteKey: `site"key`}
	}})
	p := h.product(application.NewProduct{Name: "Guarded", Price: 100}, 1)
	b := h.browser("en")
	if strings.Contains(b.get(path(p)).body, "cf-turnstile") {
		t.Error("the product page shows the widget: it belongs to the review page, which places the order")
	}
	r := b.post("/checkout/review", url.Values{"product": {strings.TrimPrefix(path(p), "/p/")}, "qty": {"1"},
		"email": {"w@example.com"}, "provider": {"dev"}})
	wantContains(t, r, `class="cf-turnstile" data-sitekey="site&#34;key"`,
		`<script src="https://challenges.cloudflare.com/turnstile/v0/api.js" defer>`)
	csp := r.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self' https://challenges.cloudflare.com") ||
		!strings.Contains(csp, "frame-src https://challenges.cloudflare.com") {
		t.Fatalf("CSP %q", csp)
	}
	plain := newHarness(t)
	if csp := plain.browser("en").get("/").header.Get("Content-Security-Policy"); strings.Contains(csp, "cloudflare") || strings.Contains(csp, "frame-src") {
		t.Fatalf("CSP without a widget %q", csp)
	}
}

// TestLanguageSwitch: the switch remembers the choice in a cookie and goes back to a path of
// this site only.
func TestLanguageSwitch(t *testing.T) {
	h := newHarness(t)
	b := h.browser("en")
	r := b.get("/lang?to=zh-CN&back=%2Flookup")
	wantStatus(t, r, 303)
	if r.header.Get("Location") != "/lookup" {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	wantContains(t, b.get("/lookup"), `lang="zh-CN"`, "查询订单")
	for _, back := range []string{"//evil.example/", "https://evil.example/", `/\evil.example`, "lookup"} {
		r := b.get("/lang?to=en&back=" + url.QueryEscape(back))
		if loc := r.header.Get("Location"); loc != "/" {
			t.Errorf("back %q: Location %q", back, loc)
		}
	}
	wantContains(t, b.get("/lookup"), `lang="en"`, "Find my order")
}
