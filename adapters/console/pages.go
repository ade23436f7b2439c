package console

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

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
	Title    string
	Identity application.Identity
	CSRF     string
	Error    string
	Notice   string
	// Zone is the time zone the page shows times in and reads form times in.
	Zone string
	Data any
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
	var b bytes.Buffer
	t, err := k.pages[page].Clone()
	if err == nil {
		err = t.Funcs(template.FuncMap{"when": whenIn(loc)}).Execute(&b, v)
	}
	if err != nil {
		k.log.ErrorContext(c.UserContext(), "console: page not rendered", "page", page, "err", err)
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		return c.Status(fiber.StatusInternalServerError).SendString("internal error")
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Status(status).Send(b.Bytes())
}

// errorPage answers status with a page saying msg.
func (k *console) errorPage(c *fiber.Ctx, status int, msg string) error {
	return k.render(c, status, "error", view{Title: "Error", Error: msg})
}
