package storefront

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/text/width"

	"cardshop/application"
	"cardshop/domain"
)

// tierView is a quantity price as shown.
type tierView struct {
	MinQty int
	Price  string
}

// itemView is a product as the catalogue and product pages show it.
type itemView struct {
	ID          domain.ProductID
	Name        string
	Description [][]string // paragraphs (split at blank lines) of lines, as the product page shows them
	Excerpt     string     // the description's first line, cut to excerptWidth; "" when none
	Price       string
	Tiers       []tierView
	Status      application.CatalogueStatus
	StatusText  string // message id
	Stock       string // message id of the stock display
	StockCount  int64
	MinPerOrder int
	MaxPerOrder int
	BuyerLimit  int
	StartsAt    time.Time
	EndsAt      time.Time
}

// OnSale and Upcoming are for templates.
func (v itemView) OnSale() bool   { return v.Status == application.CatalogueOnSale }
func (v itemView) Upcoming() bool { return v.Status == application.CatalogueUpcoming }

// viewOf is what the pages show of a catalogue entry: never a code, a stock count the
// product chose to hide, or an operator's freeze reason.
func viewOf(cur domain.Currency, it application.CatalogueItem) itemView {
	v := itemView{ID: it.ID, Name: it.Name, Description: paragraphs(it.Description), Excerpt: excerpt(it.Description),
		Price: money(cur, it.Price), Status: it.Status,
		StatusText: "storefront.status_" + string(it.Status), MinPerOrder: it.MinPerOrder, MaxPerOrder: it.MaxPerOrder,
		BuyerLimit: it.Sale.BuyerLimit, StartsAt: it.Sale.StartsAt, EndsAt: it.Sale.EndsAt}
	for _, t := range it.Tiers {
		v.Tiers = append(v.Tiers, tierView{MinQty: t.MinQty, Price: money(cur, t.UnitPrice)})
	}
	if it.Display == domain.StockLevel {
		v.Stock = "storefront.stock_" + it.StockLevel
	} else {
		v.Stock, v.StockCount = "storefront.stock_exact", it.Stock
	}
	return v
}

// paragraphs is a description as the product page shows it: paragraphs at blank lines, each
// a list of its lines (the page puts a line break between them). The text stays text: the
// template escapes every line.
func paragraphs(desc string) [][]string {
	var out [][]string
	var para []string
	for _, line := range strings.Split(desc, "\n") {
		if strings.TrimSpace(line) == "" {
			if para != nil {
				out, para = append(out, para), nil
			}
			continue
		}
		para = append(para, strings.TrimRight(line, " \t"))
	}
	if para != nil {
		out = append(out, para)
	}
	return out
}

// excerptWidth bounds the catalogue's excerpt of a description, in columns: a character of
// East Asian width (Chinese, Japanese, Korean, full-width forms) takes two, so an excerpt
// fills about two lines of a phone's card in either language.
const excerptWidth = 90

// excerpt is what the catalogue card shows of a description: its first non-blank line, cut at
// excerptWidth columns with "…" — at the last space when the cut falls inside a word and a
// space is near (text of words; Chinese has no spaces and is cut at the character).
func excerpt(desc string) string {
	var first string
	for line := range strings.SplitSeq(desc, "\n") {
		if first = strings.TrimSpace(line); first != "" {
			break
		}
	}
	width := 0
	for i, r := range first {
		width += runeWidth(r)
		if width <= excerptWidth {
			continue
		}
		cut := first[:i]
		if r != ' ' && r != '\t' {
			if sp := strings.LastIndexAny(cut, " \t"); sp >= len(cut)*2/3 {
				cut = cut[:sp]
			}
		}
		return strings.TrimSpace(cut) + "…"
	}
	return first
}

// runeWidth is 2 for a character shown at double width (East Asian wide and full-width, by
// Unicode's East Asian Width property), 1 otherwise: close enough to cut an excerpt, never to
// lay out text.
func runeWidth(r rune) int {
	if k := width.LookupRune(r).Kind(); k == width.EastAsianWide || k == width.EastAsianFullwidth {
		return 2
	}
	return 1
}

// entryView is one card of the catalogue page: a product on its own, or a variant group shown
// as one card (Variants > 0) that links to the variant a buyer most likely wants.
type entryView struct {
	itemView
	Variants  int  // the group's number of variants; 0 for a product on its own
	PriceFrom bool // the group's variants differ in price: Price is the lowest
}

// entriesOf is the catalogue page's cards: one per product on its own and one per group, in
// the snapshot's order (a group where its first variant is). A group's card shows the group's
// name, its lowest price, and the status of the variant it links to: the first on sale, else
// the first coming soon, else the first.
func entriesOf(snap *application.CatalogueSnapshot) []entryView {
	entries := snap.Entries()
	out := make([]entryView, 0, len(entries))
	for _, it := range entries {
		if it.Group == "" {
			out = append(out, entryView{itemView: viewOf(snap.Currency, it)})
			continue
		}
		vs := snap.Variants(it.Group)
		lowest, highest := vs[0].Price, vs[0].Price
		for _, v := range vs {
			lowest, highest = min(lowest, v.Price), max(highest, v.Price)
		}
		e := entryView{itemView: viewOf(snap.Currency, featured(vs)), Variants: len(vs), PriceFrom: lowest != highest}
		e.Name, e.Price, e.Tiers = it.Group, money(snap.Currency, lowest), nil
		out = append(out, e)
	}
	return out
}

// featured is the variant a group's card links to: the first on sale, else the first coming
// soon, else the first.
func featured(vs []application.CatalogueItem) application.CatalogueItem {
	for _, want := range []application.CatalogueStatus{application.CatalogueOnSale, application.CatalogueUpcoming} {
		for _, v := range vs {
			if v.Status == want {
				return v
			}
		}
	}
	return vs[0]
}

// variantView is one variant in a product page's picker.
type variantView struct {
	itemView
	Label    string
	Selected bool // the variant whose page this is
}

// catalogueBody is one rendered catalogue page: its snapshot's version, language and ETag.
type catalogueBody struct {
	version uint64
	body    []byte
	etag    string
}

// etagCache keeps the last rendered page of each cached key (a page and a language): a
// snapshot is immutable, so such a page is rendered once per version, whatever the request rate.
type etagCache struct {
	mu    sync.Mutex
	pages map[string]catalogueBody
}

func (e *etagCache) get(key string, version uint64) (catalogueBody, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.pages[key]
	return b, ok && b.version == version
}

func (e *etagCache) put(key string, b catalogueBody) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pages == nil {
		e.pages = map[string]catalogueBody{}
	}
	if cur, ok := e.pages[key]; !ok || cur.version <= b.version {
		e.pages[key] = b
	}
}

// cataloguePage is GET /: every product of the public snapshot with its price, stock and
// status. No database and no gate call per request (the snapshot refreshes itself); the page
// is rendered once per snapshot and language, and answered 304 to a browser that has it.
func (s *shop) cataloguePage(c *fiber.Ctx) error {
	snap, err := s.sales.Catalogue(c.UserContext())
	if err != nil {
		return s.unavailable(c, err)
	}
	return s.snapshotPage(c, "/", snap.Version, true, func() error {
		return s.render(c, fiber.StatusOK, "catalogue", "/", view{Title: "storefront.title_catalogue", Data: entriesOf(snap)})
	})
}

// providersKey names a list of providers in a cache key.
func providersKey(ps []domain.Provider) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(string(p))
		b.WriteByte(',')
	}
	return b.String()
}

// snapshotPage answers a page made from the catalogue snapshot alone (the same for every
// visitor of a language: no cookie, no token): from the cache when cache is true and this
// version was rendered before, else rendered; with a strong ETag of its body, and 304 without
// a body to a browser that has it. A page that changes by the second (a countdown) is not
// cached but still revalidates.
func (s *shop) snapshotPage(c *fiber.Ctx, path string, version uint64, cache bool, render func() error) error {
	l := s.lang(c)
	// The payment providers offered are in the product page's form, and change without a new
	// snapshot (channels configured in the console): a page is cached per provider list too.
	key := string(l) + " " + path + " " + providersKey(s.payments.Providers())
	page, ok := catalogueBody{}, false
	if cache {
		page, ok = s.etags.get(key, version)
	}
	if !ok {
		if err := render(); err != nil {
			return err
		}
		if c.Response().StatusCode() != fiber.StatusOK {
			return nil
		}
		body := bytes.Clone(c.Response().Body())
		sum := sha256.Sum256(body)
		page = catalogueBody{version: version, body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		if cache {
			s.etags.put(key, page)
		}
	}
	c.Set(fiber.HeaderETag, page.etag)
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderContentLanguage, string(l))
	c.Vary(fiber.HeaderAcceptLanguage, fiber.HeaderCookie)
	if c.Get(fiber.HeaderIfNoneMatch) == page.etag {
		c.Response().ResetBody()
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Status(fiber.StatusOK).Send(page.body)
}

// productData is the product page's. A variant's page names its group and lists every
// variant of it (Variants, the picker), each a link to its own page.
type productData struct {
	Item      itemView
	Group     string
	Variants  []variantView
	Remaining int64 // seconds until the start by the gate's clock, when upcoming
	Form      *checkoutForm
}

// checkoutForm is what the product page's order form needs. It holds no token and no key:
// the page is the same for every visitor (cached, ETag), and the form only asks for the review
// page, which carries the CSRF token and the order's idempotency key (see review).
type checkoutForm struct {
	Providers []domain.Provider
	MinQty    int // the input's default and lower bound: the product's minimum per order
	MaxQty    int
	Hidden    bool // upcoming: the countdown's script reveals it at the start
}

// productPage is GET /p/{id}: one product of the snapshot, its tiers and limits, and the
// order form while it is on sale or about to be (with a countdown by the gate's clock). A
// variant's page is its group's page too: a picker lists every variant of the group with its
// own price, status and stock, each a link to its own page (no script), this one selected. Like
// the catalogue it reads no database and answers 304 to a browser that has it; a countdown
// page is rendered each time (its seconds change), any other once per snapshot and language.
func (s *shop) productPage(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil || id <= 0 {
		return s.message(c, fiber.StatusNotFound, "storefront.no_product", "/")
	}
	snap, err := s.sales.Catalogue(c.UserContext())
	if err != nil {
		return s.unavailable(c, err)
	}
	it, ok := snap.Item(domain.ProductID(id))
	if !ok {
		return s.message(c, fiber.StatusNotFound, "storefront.no_product", "/")
	}
	d := productData{Item: viewOf(snap.Currency, it), Group: it.Group}
	for _, v := range snap.Variants(it.Group) {
		d.Variants = append(d.Variants, variantView{itemView: viewOf(snap.Currency, v), Label: v.Variant, Selected: v.ID == it.ID})
	}
	if it.Status == application.CatalogueUpcoming {
		// The snapshot's status is by this instance's clock at its refresh; the countdown is by
		// the gate's, which decides the orders.
		if rem := it.Sale.StartsAt.Sub(s.sales.SaleClock(c.UserContext())); rem > 0 {
			d.Remaining = max(left(rem+time.Second-1), 1)
		} else {
			d.Item.Status, d.Item.StatusText = application.CatalogueOnSale, "storefront.status_on_sale"
		}
	}
	if d.Item.Status == application.CatalogueOnSale || d.Item.Status == application.CatalogueUpcoming {
		d.Form = &checkoutForm{Providers: s.payments.Providers(), MinQty: max(it.MinPerOrder, 1), MaxQty: maxQty(it),
			Hidden: d.Item.Status == application.CatalogueUpcoming}
	}
	v := view{Title: "storefront.title_product", Data: d}
	if d.Remaining > 0 {
		v.Scripts = append(v.Scripts, "/static/shop/countdown.js")
	}
	return s.snapshotPage(c, c.Path(), snap.Version, d.Remaining == 0, func() error {
		return s.render(c, fiber.StatusOK, "product", c.Path(), v)
	})
}

// maxQty is the most units one order of the product may hold: its per-order limit, and its
// per-buyer limit when lower.
func maxQty(it application.CatalogueItem) int {
	n := it.MaxPerOrder
	if it.Sale.BuyerLimit > 0 {
		n = min(n, it.Sale.BuyerLimit)
	}
	return n
}

// withWidget adds the human-check widget's script to the page.
func withWidget(v *view, w Widget) {
	switch w.Provider {
	case WidgetTurnstile:
		v.Scripts = append(v.Scripts, "https://challenges.cloudflare.com/turnstile/v0/api.js")
	case WidgetHCaptcha:
		v.Scripts = append(v.Scripts, "https://js.hcaptcha.com/1/api.js")
	}
}

// unavailable answers a page saying the shop cannot answer now.
func (s *shop) unavailable(c *fiber.Ctx, err error) error {
	s.log.WarnContext(c.UserContext(), "storefront: page not served", "path", c.Path(), "err", err)
	c.Set(fiber.HeaderRetryAfter, "5")
	return s.message(c, fiber.StatusServiceUnavailable, "storefront.unavailable", c.Path())
}
