package storefront

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
	"cardshop/domain"
)

//go:embed templates
var templateFS embed.FS

// pages are the parsed templates, one set per page, each with the shared layout. They are
// never executed themselves: render executes a clone with the request's language bound to
// "t" (html/template refuses to clone a template once it has run).
type pages map[string]*template.Template

// funcs are the templates' helpers; "t" and "n" are replaced per request by render (these
// only let the templates parse).
var funcs = template.FuncMap{
	"t":        func(id string, kv ...any) string { return id },
	"n":        func(id string, count int, kv ...any) string { return id },
	"provider": func(p domain.Provider) string { return string(p) },
	"clock":    func(secs int64) string { return clock(secs, "d") },
}

// clock is seconds as a countdown shows them: "1:02:03", or from a day on the days with day,
// the suffix of the page's language (storefront.day_suffix): "2d 1:02:03", "2天 1:02:03".
// countdown.js counts on in the same form.
func clock(secs int64, day string) string {
	secs = max(secs, 0)
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	out := fmt.Sprintf("%d:%02d:%02d", h, m, s)
	if d > 0 {
		out = fmt.Sprintf("%d%s %s", d, day, out)
	}
	return out
}

// parsePages parses every template once, at start: a broken template is a programming error
// that must stop the service, not the first buyer who opens the page.
func parsePages() pages {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	p := pages{}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		p[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n))
	}
	return p
}

// langLink is one entry of the language switch.
type langLink struct {
	Name, Href string
	Current    bool
}

// view is what every page gets: its language, the language switch, the CSRF token of its
// forms (a page with a form asks for it: csrfToken), the page's title (a message id), the
// scripts it loads (paths or the captcha's URL: never inline) and its own data.
type view struct {
	Lang    i18n.Lang
	Title   string
	Switch  []langLink
	CSRF    string
	Refresh int // seconds of a meta refresh; 0: none
	Scripts []string
	Data    any
}

// lang is the request's language: the switch's cookie, else Accept-Language, else the
// configured default.
func (s *shop) lang(c *fiber.Ctx) i18n.Lang {
	return i18n.Negotiate(c.Cookies(langCookie), c.Get(fiber.HeaderAcceptLanguage), s.cfg.Lang)
}

// langCookie remembers the language a visitor chose with the switch, for a year.
const langCookie = "shop_lang"

// switchLang remembers the chosen language and sends the browser back where it was (a path
// of this site only: never another origin).
func (s *shop) switchLang(c *fiber.Ctx) error {
	if l, ok := i18n.Parse(c.Query("to")); ok {
		c.Cookie(&fiber.Cookie{Name: langCookie, Value: string(l), Path: "/", Expires: s.clock.Now().AddDate(1, 0, 0),
			HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: secure(c)})
	}
	return c.Redirect(localPath(c.Query("back")), fiber.StatusSeeOther)
}

// localPath is back when it is a path of this site, "/" otherwise ("//host" and
// "/\host" lead elsewhere).
func localPath(back string) string {
	if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.HasPrefix(back, "/\\") {
		return "/"
	}
	u, err := url.Parse(back)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return back
}

// render answers page with status in the request's language. back is the path the language
// switch returns to. It renders into a buffer first, so a template error answers a plain 500
// rather than half a page.
func (s *shop) render(c *fiber.Ctx, status int, page, back string, v view) error {
	l := s.lang(c)
	v.Lang = l
	for _, o := range i18n.Langs {
		v.Switch = append(v.Switch, langLink{Name: i18n.Name(o), Current: o == l,
			Href: "/lang?" + url.Values{"to": {string(o)}, "back": {back}}.Encode()})
	}
	var b bytes.Buffer
	t, err := s.pages[page].Clone()
	if err == nil {
		err = t.Funcs(template.FuncMap{
			"t":     func(id string, kv ...any) string { return s.msgs.T(l, id, i18n.Args(kv)) },
			"n":     func(id string, count int, kv ...any) string { return s.msgs.N(l, id, count, i18n.Args(kv)) },
			"clock": func(secs int64) string { return clock(secs, s.msgs.T(l, "storefront.day_suffix")) },
			"provider": func(p domain.Provider) string {
				if id := "storefront.provider_" + string(p); s.msgs.Has(l, id) {
					return s.msgs.T(l, id)
				}
				return string(p)
			},
		}).Execute(&b, v)
	}
	if err != nil {
		return s.internal(c, "page "+page, err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderContentLanguage, string(l))
	c.Vary(fiber.HeaderAcceptLanguage, fiber.HeaderCookie)
	return c.Status(status).Send(b.Bytes())
}

// internal logs a failure and answers a plain 500.
func (s *shop) internal(c *fiber.Ctx, what string, err error) error {
	s.log.ErrorContext(c.UserContext(), "storefront: "+what+" failed", "path", c.Path(), "err", err)
	c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
	return c.Status(fiber.StatusInternalServerError).SendString("internal error")
}

// messageData is the message page's: a message id, its data, and where "back" leads.
type messageData struct {
	Message string
	Args    map[string]any
	Back    string
}

// message answers status with a page saying message id msg and a link back to back.
func (s *shop) message(c *fiber.Ctx, status int, msg, back string, args ...any) error {
	return s.render(c, status, "message", back, view{Title: "storefront.title_sorry",
		Data: messageData{Message: msg, Args: i18n.Args(args), Back: back}})
}

// money is an amount in the shop's currency, for pages.
func money(cur domain.Currency, m domain.Money) string {
	return cur.Format(m) + " " + cur.Code
}

// secure reports whether the browser reached the service over TLS (directly, or through a
// proxy that says so): cookies are Secure then.
func secure(c *fiber.Ctx) bool { return c.Protocol() == "https" }

// left is d in whole seconds, at least 0.
func left(d time.Duration) int64 { return max(int64(d/time.Second), 0) }
