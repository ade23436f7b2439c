package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/i18n"
	"cardshop/application"
	"cardshop/domain"
)

//go:embed templates
var templateFS embed.FS

// pages are the parsed templates, one set per page (each with the shared layout). They are
// never executed themselves: render executes a clone with the request's "when" (html/template
// refuses to clone a template once it has run).
type pages map[string]*template.Template

// funcs are the templates' helpers. "when" formats a time in the operator's zone: render
// replaces it per request (this one, in UTC, only lets the templates parse).
var funcs = template.FuncMap{
	"when":  whenIn(time.UTC),
	"money": func(c domain.Currency, m domain.Money) string { return c.Format(m) + " " + c.Code },
	"allows": func(id application.Identity, need string) bool {
		return id.Role.Allows(domain.Role(need))
	},
	// "t" and "n" are the request's language's messages (adapters/i18n): replaced per request
	// by render, like "when"; these only let the templates parse.
	"t": func(id string, kv ...any) string { return id },
	"n": func(id string, count any, kv ...any) string { return id },
	// "enum" is a stored value's name (a status, a reason) in the request's language: message
	// prefix+value, or the value itself when the catalogue has no such message.
	"enum": func(prefix string, v any) string { return fmt.Sprint(v) },
	// "reason" is a domain's reason (a line not imported) in the request's language (reasonText).
	"reason": func(s string) string { return s },
	// "check" is the message key of a reconciliation check's name (checkKeys), the name itself
	// when it has none: {{enum "console.check." (check .Name)}}.
	"check": func(name string) string {
		if key, ok := checkKeys[name]; ok {
			return key
		}
		return name
	},
}

// parsePages parses every template once, at start: a broken template is a programming error
// that must stop the service, not the first operator who opens the page.
func parsePages() pages {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	p := pages{}
	for _, n := range names {
		if n == "templates/layout.html" || n == "templates/partials.html" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		p[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", n))
	}
	return p
}

// view is what every page gets: its title, who is logged in (zero on the login page), the
// session's CSRF token for its forms, an error to show, and the page's own data.
type view struct {
	// Title, Error and Notice are message ids of the catalogues (adapters/i18n), shown in the
	// request's language; a text that is no id (an error's own words) is shown as it is.
	Title    string
	Identity application.Identity
	CSRF     string
	Error    string
	Notice   string
	// Zone is the time zone the page shows times in and reads form times in.
	Zone string
	// Lang is the page's language; Switch the language switch's links (render fills both).
	Lang   i18n.Lang
	Switch []langLink
	Data   any
}

// langLink is one entry of the language switch.
type langLink struct {
	Name, Href string
	Current    bool
}

// render answers the page with status. It renders into a buffer first, so a template error
// answers a plain 500 rather than half a page.
func (k *console) render(c *fiber.Ctx, status int, page string, v view) error {
	if v.Identity.Name == "" {
		v.Identity = identityOf(c)
	}
	if v.CSRF == "" {
		v.CSRF = sessionOf(c).CSRF
	}
	loc := k.zone(c)
	v.Zone = loc.String()
	l := k.lang(c)
	v.Lang = l
	back := string(c.Request().URI().RequestURI())
	if c.Method() != fiber.MethodGet {
		back = "/console"
	}
	for _, o := range i18n.Langs {
		v.Switch = append(v.Switch, langLink{Name: i18n.Name(o), Current: o == l,
			Href: "/console/lang?" + url.Values{"to": {string(o)}, "back": {back}}.Encode()})
	}
	v.Title, v.Error, v.Notice = k.text(l, v.Title), k.text(l, v.Error), k.text(l, v.Notice)
	var b bytes.Buffer
	t, err := k.pages[page].Clone()
	if err == nil {
		err = t.Funcs(template.FuncMap{
			"when":   whenIn(loc),
			"t":      func(id string, kv ...any) string { return k.msgs.T(l, id, i18n.Args(kv)) },
			"n":      func(id string, count any, kv ...any) string { return k.msgs.N(l, id, toInt(count), i18n.Args(kv)) },
			"reason": func(s string) string { return k.reasonText(l, s) },
			"enum": func(prefix string, v any) string {
				if id := prefix + fmt.Sprint(v); k.msgs.Has(l, id) {
					return k.msgs.T(l, id)
				}
				return fmt.Sprint(v)
			},
		}).Execute(&b, v)
	}
	if err != nil {
		k.log.ErrorContext(c.UserContext(), "console: page not rendered", "page", page, "err", err)
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		return c.Status(fiber.StatusInternalServerError).SendString("internal error")
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderContentLanguage, string(l))
	return c.Status(status).Send(b.Bytes())
}

// text is s in language l when s is a message id of the catalogues, else s as it is (an
// error's own words, a product's name).
func (k *console) text(l i18n.Lang, s string, kv ...any) string {
	if s != "" && k.msgs.Has(l, s) {
		return k.msgs.T(l, s, i18n.Args(kv))
	}
	return s
}

// toInt is a template's count (an int, int64 or int32) as an int; 0 for anything else.
func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case int32:
		return int(n)
	}
	return 0
}

// langCookie remembers the language an operator chose with the switch, per browser, for a
// year. It is the console's own (path /console): the shop's visitors choose theirs apart.
const langCookie = "console_lang"

// lang is the request's language: the switch's cookie, else Accept-Language, else the
// configured default (Config.Lang).
func (k *console) lang(c *fiber.Ctx) i18n.Lang {
	return i18n.Negotiate(c.Cookies(langCookie), c.Get(fiber.HeaderAcceptLanguage), k.cfg.Lang)
}

// switchLang remembers the chosen language and sends the browser back to the console page it
// was on (a /console path only: never another site). It needs no session, so that the login
// page switches too.
func (k *console) switchLang(c *fiber.Ctx) error {
	if l, ok := i18n.Parse(c.Query("to")); ok {
		c.Cookie(&fiber.Cookie{Name: langCookie, Value: string(l), Path: "/console", Expires: k.clock.Now().AddDate(1, 0, 0),
			HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: secure(c)})
	}
	return c.Redirect(consolePath(c.Query("back")), fiber.StatusSeeOther)
}

// consolePath is back when it is a console path of this site, "/console" otherwise ("//host"
// and "/\host" lead elsewhere).
func consolePath(back string) string {
	u, err := url.Parse(back)
	if err != nil || u.Host != "" || u.Scheme != "" || strings.HasPrefix(back, "//") || strings.Contains(back, "\\") ||
		(u.Path != "/console" && !strings.HasPrefix(u.Path, "/console/")) {
		return "/console"
	}
	return back
}

// errorPage answers status with a page saying msg.
func (k *console) errorPage(c *fiber.Ctx, status int, msg string) error {
	return k.render(c, status, "error", view{Title: "console.error.title", Error: msg})
}
