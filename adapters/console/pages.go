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

// pages are the parsed templates, one set per page (each with the shared layout).
type pages map[string]*template.Template

// funcs are the templates' helpers. Times are shown in UTC with the zone named; showing them
// in the operator's own time zone is a later step (it needs a per-operator setting).
var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
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
	Data     any
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
	var b bytes.Buffer
	if err := k.pages[page].Execute(&b, v); err != nil {
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
