package httpapi

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// blockEntryResponse is one blocklist entry.
type blockEntryResponse struct {
	ID      int64     `json:"id"`
	Kind    string    `json:"kind"`
	Value   string    `json:"value"`
	Note    string    `json:"note"`
	AddedBy string    `json:"added_by"`
	AddedAt time.Time `json:"added_at"`
}

func newBlockEntryResponse(e domain.BlockEntry) blockEntryResponse {
	return blockEntryResponse{ID: e.ID, Kind: string(e.Kind), Value: e.Value, Note: e.Note, AddedBy: string(e.AddedBy),
		AddedAt: e.AddedAt.UTC()}
}

// listBlocklist answers GET /admin/blocklist: every entry, by id.
func (s *Server) listBlocklist(c *fiber.Ctx) error {
	es, err := s.guard.Blocklist(c.UserContext())
	if err != nil {
		return err
	}
	out := struct {
		Entries []blockEntryResponse `json:"entries"`
	}{Entries: make([]blockEntryResponse, len(es))}
	for i, e := range es {
		out.Entries[i] = newBlockEntryResponse(e)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(out)
}

// addBlock answers POST /admin/blocklist {"kind", "value", "note"}: 201 and the entry as
// stored (its value normalised); 400 invalid_block_entry for a bad kind, value or note, 409
// block_exists for an entry of that kind and value.
func (s *Server) addBlock(c *fiber.Ctx) error {
	var req struct {
		Kind  string `json:"kind"`
		Value string `json:"value"`
		Note  string `json:"note"`
	}
	if err := s.decodeJSON(c, &req, false); err != nil {
		return err
	}
	e, err := s.guard.AddBlock(c.UserContext(), identityOf(c).Name, req.Kind, req.Value, req.Note)
	if err != nil {
		return err
	}
	c.Locals(auditOutcomeKey, map[string]any{"id": e.ID, "value": e.Value})
	return c.Status(fiber.StatusCreated).JSON(newBlockEntryResponse(e))
}

// removeBlock answers DELETE /admin/blocklist/{block_id}: 204; 404 block_not_found. The
// audit entry records what was removed.
func (s *Server) removeBlock(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("block_id"), 10, 64)
	if err != nil || id < 1 {
		return domain.Invalid("block_id", "must be a positive entry id")
	}
	e, err := s.guard.RemoveBlock(c.UserContext(), id)
	if err != nil {
		return err
	}
	c.Locals(auditOutcomeKey, map[string]any{"kind": string(e.Kind), "value": e.Value})
	return c.SendStatus(fiber.StatusNoContent)
}

// blockIP refuses an order from a blocked client address (403 buyer_blocked, which list is
// not told), from this instance's snapshot of the blocklists: no round trip.
func (s *Server) blockIP(c *fiber.Ctx) error {
	if err := s.guard.CheckIP(c.UserContext(), webkit.ClientIP(c)); err != nil {
		return err
	}
	return c.Next()
}
