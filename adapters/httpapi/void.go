package httpapi

import (
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/strictjson"
	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// maxVoidBody bounds a void's body: MaxVoidCodes codes of at most MaxCodeLength characters,
// quoted and separated, and the reason.
const maxVoidBody = application.MaxVoidCodes*(domain.MaxCodeLength+4) + 4<<10

// voidRequest is the body of POST /admin/products/{id}/codes/void.
type voidRequest struct {
	Codes  []string `json:"codes"`
	Reason string   `json:"reason"`
}

// voidResponse counts what a void did; it never holds a code.
type voidResponse struct {
	Voided      int    `json:"voided"`
	NotFound    int    `json:"not_found"`
	NotVoidable int    `json:"not_voidable"`
	Ref         string `json:"ref,omitempty"`
}

// voidCodes answers POST /admin/products/{id}/codes/void: the given codes of a frozen product
// that are sellable become VOID (application.Catalogue.VoidCodes). A code that is not a code is refused by its
// position in the list, never echoed. The audit entry records the reason and the counts,
// never a code (the route records no body).
func (s *Server) voidCodes(c *fiber.Ctx) error {
	id, err := productParam(c)
	if err != nil {
		return err
	}
	b, err := webkit.ReadBody(c, maxVoidBody)
	if err != nil {
		return err
	}
	var req voidRequest
	if err := strictjson.Decode(b, &req); err != nil {
		return err
	}
	if len(req.Codes) > application.MaxVoidCodes {
		return domain.Invalid("codes", fmt.Sprintf("at most %d codes per void", application.MaxVoidCodes))
	}
	codes := make([]domain.CardCode, len(req.Codes))
	for i, raw := range req.Codes {
		code, err := domain.ParseCardCode(raw)
		if err == nil && code.IsZero() {
			err = domain.Invalid("code", "empty")
		}
		if err != nil {
			return domain.Invalid(fmt.Sprintf("codes[%d]", i), reasonOf(err))
		}
		codes[i] = code
	}
	res, err := s.products.VoidCodes(c.UserContext(), id, codes, req.Reason)
	c.Locals(auditOutcomeKey, map[string]any{"reason": clipReason(req.Reason), "given": len(codes), "voided": res.Voided,
		"not_found": res.NotFound, "not_voidable": res.NotVoidable})
	if err != nil {
		return err
	}
	return c.JSON(voidResponse{Voided: res.Voided, NotFound: res.NotFound, NotVoidable: res.NotVoidable, Ref: res.Ref})
}

// reasonOf is a validation error's reason (it never holds the input), or a generic one.
func reasonOf(err error) string {
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return "not a code"
}

// clipReason bounds the reason the audit entry records (a reason over the limit is refused,
// but its entry is written all the same).
func clipReason(r string) string {
	if rs := []rune(r); len(rs) > application.MaxVoidReason {
		return string(rs[:application.MaxVoidReason]) + "…"
	}
	return r
}
