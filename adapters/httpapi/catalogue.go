package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// catalogueCacheControl lets a browser or a CDN reuse a catalogue answer for a second: about
// the age of the instance's own snapshot, so a shared cache adds little staleness.
const catalogueCacheControl = "public, max-age=1"

type tierJSON struct {
	MinQty    int   `json:"min_qty"`
	UnitPrice int64 `json:"unit_price"`
}

func tiersJSON(tiers []domain.PriceTier) []tierJSON {
	out := make([]tierJSON, len(tiers))
	for i, t := range tiers {
		out[i] = tierJSON{MinQty: t.MinQty, UnitPrice: int64(t.UnitPrice)}
	}
	return out
}

func domainTiers(in []tierJSON) []domain.PriceTier {
	out := make([]domain.PriceTier, len(in))
	for i, t := range in {
		out[i] = domain.PriceTier{MinQty: t.MinQty, UnitPrice: domain.Money(t.UnitPrice)}
	}
	return out
}

// catalogueProduct is a product as the public catalogue shows it: exactly one of stock and
// stock_level, as the product's stock_display says.
type catalogueProduct struct {
	ID           int64      `json:"id"`
	Name         string     `json:"name"`
	Description  string     `json:"description"` // plain text, "\n" between lines; "" when none
	Price        int64      `json:"price"`
	Currency     string     `json:"currency"`
	Tiers        []tierJSON `json:"tiers"`
	MinPerOrder  int        `json:"min_per_order"`
	MaxPerOrder  int        `json:"max_per_order"`
	Group        string     `json:"group,omitempty"`
	Variant      string     `json:"variant,omitempty"`
	BuyerLimit   int        `json:"buyer_limit"`
	StartsAt     *time.Time `json:"starts_at"`
	EndsAt       *time.Time `json:"ends_at"`
	Status       string     `json:"status"`
	StockDisplay string     `json:"stock_display"`
	Stock        *int64     `json:"stock,omitempty"`
	StockLevel   string     `json:"stock_level,omitempty"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

type catalogueList struct {
	Products  []catalogueProduct `json:"products"`
	UpdatedAt time.Time          `json:"updated_at"`
}

// cachedBody is an encoded answer and its strong ETag.
type cachedBody struct {
	body []byte
	etag string
}

func newCachedBody(v any) (cachedBody, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return cachedBody{}, err
	}
	sum := sha256.Sum256(b)
	return cachedBody{body: b, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`}, nil
}

// renderedCatalogue is one snapshot encoded: the list and each product, so a request only
// compares a tag or copies bytes.
type renderedCatalogue struct {
	version uint64
	list    cachedBody
	items   map[domain.ProductID]cachedBody
}

func renderCatalogue(snap *application.CatalogueSnapshot) (*renderedCatalogue, error) {
	r := &renderedCatalogue{version: snap.Version, items: make(map[domain.ProductID]cachedBody, len(snap.Items))}
	list := catalogueList{Products: make([]catalogueProduct, 0, len(snap.Items)), UpdatedAt: snap.UpdatedAt.UTC()}
	for _, it := range snap.Items {
		p := catalogueProduct{ID: int64(it.ID), Name: it.Name, Description: it.Description, Price: int64(it.Price), Currency: snap.Currency.Code,
			Tiers: tiersJSON(it.Tiers), MinPerOrder: it.MinPerOrder, MaxPerOrder: it.MaxPerOrder,
			Group: it.Group, Variant: it.Variant, BuyerLimit: it.Sale.BuyerLimit,
			StartsAt: optionalTime(it.Sale.StartsAt), EndsAt: optionalTime(it.Sale.EndsAt), Status: string(it.Status),
			StockDisplay: string(it.Display), UpdatedAt: list.UpdatedAt}
		if it.Display == domain.StockLevel {
			p.StockLevel = it.StockLevel
		} else {
			stock := it.Stock
			p.Stock = &stock
		}
		if it.Status != application.CatalogueEnded { // the list shows what can still be bought
			list.Products = append(list.Products, p)
		}
		b, err := newCachedBody(p)
		if err != nil {
			return nil, err
		}
		r.items[it.ID] = b
	}
	var err error
	r.list, err = newCachedBody(list)
	return r, err
}

// catalogue returns the current snapshot encoded, encoding it once per snapshot version.
func (s *Server) catalogue(c *fiber.Ctx) (*renderedCatalogue, error) {
	snap, err := s.sales.Catalogue(c.UserContext())
	if err != nil {
		return nil, err
	}
	if r := s.rendered.Load(); r != nil && r.version == snap.Version {
		return r, nil
	}
	r, err := renderCatalogue(snap)
	if err != nil {
		return nil, err
	}
	s.rendered.Store(r) // a racing request may store the same version: either copy serves
	return r, nil
}

// optionalTime is nil for the zero time (no bound), else t in UTC.
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// listCatalogue answers GET /api/products: every product of the catalogue whose sale has not
// ended (on sale, upcoming, sold out or paused), by id. An ended product is still found by id.
func (s *Server) listCatalogue(c *fiber.Ctx) error {
	r, err := s.catalogue(c)
	if err != nil {
		return err
	}
	return sendCached(c, r.list)
}

// getCatalogueProduct answers GET /api/products/{id}.
func (s *Server) getCatalogueProduct(c *fiber.Ctx) error {
	id, err := productParam(c)
	if err != nil {
		return err
	}
	r, err := s.catalogue(c)
	if err != nil {
		return err
	}
	b, ok := r.items[id]
	if !ok {
		return domain.ErrProductNotFound
	}
	return sendCached(c, b)
}

// sendCached sends b with its ETag and the catalogue's Cache-Control, or 304 without a body
// when If-None-Match names the tag.
func sendCached(c *fiber.Ctx, b cachedBody) error {
	c.Set(fiber.HeaderCacheControl, catalogueCacheControl)
	c.Set(fiber.HeaderETag, b.etag)
	if etagMatches(c.Get(fiber.HeaderIfNoneMatch), b.etag) {
		c.Status(fiber.StatusNotModified)
		return nil
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b.body)
}

// etagMatches applies If-None-Match's weak comparison (RFC 9110 13.1.2): "*", or any listed
// tag equal to etag once a W/ prefix is removed.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
