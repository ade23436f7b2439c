package console

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// importHistoryLen is how many of a product's past imports the codes screen lists.
const importHistoryLen = 20

// cardStatuses are the card states in the order the codes screen lists them, each shown
// even at zero.
var cardStatuses = []domain.CardStatus{domain.CardUnsold, domain.CardRecycled, domain.CardSold, domain.CardVoid}

// codesData is a product's codes screen: its pool's counts by status (never a code), the
// gate's numbers, the imports running on this instance and the import history.
type codesData struct {
	Product   domain.Product
	Cards     []cardCount
	Sellable  int64
	Gate      domain.GateLevels
	GateOK    bool
	Running   []importState
	History   []importEntry
	MaxUpload int64
}

// importEntry is one past import as the history shows it: its audit entry and the counts the
// entry recorded (Known false for an entry without them: a refusal, or an older entry).
type importEntry struct {
	Entry  domain.AuditEntry
	Counts webkit.ImportAudit
	Known  bool
}

// NotImported counts the lines the import did not import.
func (e importEntry) NotImported() int {
	c := e.Counts
	return c.Duplicates + c.InPool + c.Invalid + c.Comments + c.Headers + c.Unterminated
}

// codes shows a product's codes screen (viewer); an operator also gets the import form.
func (k *console) codes(c *fiber.Ctx) error { return k.codesPage(c, fiber.StatusOK, "") }

func (k *console) codesPage(c *fiber.Ctx, status int, errMsg string) error {
	return k.codesView(c, status, errMsg, "")
}

// codesPageNotice answers the codes screen with a notice (what a write did).
func (k *console) codesPageNotice(c *fiber.Ctx, notice string) error {
	return k.codesView(c, fiber.StatusOK, "", notice)
}

func (k *console) codesView(c *fiber.Ctx, status int, errMsg, notice string) error {
	id, err := productID(c)
	if err != nil {
		return k.fail(c, err)
	}
	ctx := c.UserContext()
	p, err := k.catalogue.Product(ctx, id)
	if err != nil {
		return k.fail(c, err)
	}
	counts, err := k.catalogue.CardCounts(ctx, id)
	if err != nil {
		return k.fail(c, err)
	}
	levels, err := k.catalogue.StockLevels(ctx, id)
	if err != nil {
		return k.fail(c, err)
	}
	d := codesData{Product: p, Running: k.jobs.running(id), MaxUpload: k.cfg.MaxImportBytes}
	d.Gate, d.GateOK = levels[id]
	for _, s := range cardStatuses {
		d.Cards = append(d.Cards, cardCount{s.String(), counts[s]})
		if s.Sellable() {
			d.Sellable += counts[s]
		}
	}
	for s, n := range counts {
		if !slices.Contains(cardStatuses, s) {
			d.Cards = append(d.Cards, cardCount{s.String(), n})
		}
	}
	if d.History, err = k.importHistory(c, id); err != nil {
		return k.fail(c, err)
	}
	return k.render(c, status, "codes", view{Title: k.tr(c, "console.codes.title", "Name", p.Name()), Error: errMsg, Notice: notice, Data: d})
}

// importHistory is the product's last imports, newest first, from the audit log: every
// product.import entry of the product, through the API, the CLI or the console, with the
// counts it recorded.
func (k *console) importHistory(c *fiber.Ctx, id domain.ProductID) ([]importEntry, error) {
	entries, err := k.operators.AuditLog(c.UserContext(), domain.AuditFilter{Action: "product.import",
		Target: fmt.Sprintf("product %d", id), Limit: importHistoryLen})
	if err != nil {
		return nil, err
	}
	out := make([]importEntry, len(entries))
	for i, e := range entries {
		out[i].Entry = e
		if e.Params != "" {
			out[i].Known = json.Unmarshal([]byte(e.Params), &out[i].Counts) == nil
		}
	}
	return out, nil
}
