package console

import (
	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// blocklistData is the Blocklist page: every entry, and the add form as last typed (kept after
// a refusal, so the operator corrects it rather than types it again).
type blocklistData struct {
	Entries []domain.BlockEntry
	Kind    string
	Value   string
	Note    string
}

// blocklist lists the entries with the add form.
func (k *console) blocklist(c *fiber.Ctx) error {
	return k.blocklistPage(c, fiber.StatusOK, blocklistData{Kind: string(domain.BlockIP)}, "", "")
}

// blocklistPage renders the list with d's form, an error or a notice.
func (k *console) blocklistPage(c *fiber.Ctx, status int, d blocklistData, errMsg, notice string) error {
	es, err := k.guard.Blocklist(c.UserContext())
	if err != nil {
		return k.fail(c, err)
	}
	d.Entries = es
	return k.render(c, status, "blocklist", view{Title: "console.blocklist.title", Error: errMsg, Notice: notice, Data: d})
}

// addBlock adds the form's entry; a bad or repeated one is said on the page, with the form as
// typed, and nothing is stored.
func (k *console) addBlock(c *fiber.Ctx) error {
	d := blocklistData{Kind: formValue(c, "kind"), Value: formValue(c, "value"), Note: formValue(c, "note")}
	e, err := k.guard.AddBlock(c.UserContext(), identityOf(c).Name, d.Kind, d.Value, d.Note)
	k.record(c, "blocklist.add", map[string]string{"kind": d.Kind, "value": d.Value, "note": d.Note}, err)
	if err == nil {
		return k.blocklistPage(c, fiber.StatusOK, blocklistData{Kind: d.Kind},
			"", k.tr(c, "console.blocklist.added_notice", "Kind", e.Kind, "Value", e.Value))
	}
	status, msg := k.explain(c, err)
	if status >= 500 {
		return k.fail(c, err)
	}
	return k.blocklistPage(c, status, d, msg, "")
}

// removeBlock removes an entry; an unknown one is the not-found page.
func (k *console) removeBlock(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("block_id"), 10, 64)
	if err != nil || id < 1 {
		err = invalid("block_id", "console.err.positive_id")
	}
	var e domain.BlockEntry
	if err == nil {
		e, err = k.guard.RemoveBlock(c.UserContext(), id)
	}
	k.record(c, "blocklist.remove", map[string]string{"kind": string(e.Kind), "value": e.Value}, err)
	switch {
	case err == nil:
		return k.blocklistPage(c, fiber.StatusOK, blocklistData{Kind: string(domain.BlockIP)}, "", k.tr(c, "console.blocklist.removed_notice", "Kind", e.Kind, "Value", e.Value))
	case errors.Is(err, domain.ErrBlockNotFound):
		return k.fail(c, err)
	}
	status, msg := k.explain(c, err)
	if status >= 500 {
		return k.fail(c, err)
	}
	return k.blocklistPage(c, status, blocklistData{Kind: string(domain.BlockIP)}, msg, "")
}
