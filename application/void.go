package application

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode/utf8"

	"cardshop/domain"
)

// Limits of one void.
const (
	MaxVoidCodes  = 10000 // codes per call
	MaxVoidReason = 500   // characters of the reason
	// voidBacklog bounds the unsent gate changes a void applies first; with more, the relay is
	// far behind (the gate is down) and the void is refused as unavailable.
	voidBacklog = 10000
)

// VoidResult counts what a void did with the codes it was given: never a code.
type VoidResult struct {
	Voided      int
	Uses        int // the uses the voided codes held (Voided × uses for a multi-use product)
	NotFound    int
	NotVoidable int    // SOLD, VOID already (a repeat in the list included), or another product's
	Ref         string // of the flow row and the gate change; empty when nothing was voided
}

// errVoidBacklog refuses a void while too many gate changes are unsent to apply them first.
var errVoidBacklog = fmt.Errorf("too many gate changes are waiting for the relay: %w", domain.ErrUnavailable)

// VoidCodes takes the given codes of a frozen product out of its pool for good (a leaked
// batch): the product's sellable ones (UNSOLD, RECYCLED) become VOID, with a FlowVoid row and
// an outbox gate change of -n applied after commit; the others are counted, never named. Codes
// are found by their hash and never logged or returned. It refuses the whole void when it
// would take more codes than the gate's stock: the rest are promised to PENDING orders. The
// design (why frozen, the one transaction, the unfreeze) is docs/DESIGN.md, "Voiding codes".
//
// Errors: a ValidationError (no codes, more than MaxVoidCodes, an empty code, no reason or
// one over MaxVoidReason characters), ErrProductNotFound, ErrProductNotFrozen,
// ErrGateNotReady, a VoidExceedsError (ErrVoidExceedsFreeStock), ErrUnavailable (the gate
// cannot be reached or an unsent gate change of the product cannot be applied; nothing changed).
func (s *Catalogue) VoidCodes(ctx context.Context, id domain.ProductID, codes []domain.CardCode, reason string) (VoidResult, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case len(codes) == 0:
		return VoidResult{}, domain.Invalid("codes", "required: at least one code")
	case len(codes) > MaxVoidCodes:
		return VoidResult{}, domain.Invalid("codes", fmt.Sprintf("at most %d codes per void", MaxVoidCodes))
	case reason == "":
		return VoidResult{}, domain.Invalid("reason", "required")
	case utf8.RuneCountInString(reason) > MaxVoidReason:
		return VoidResult{}, domain.Invalid("reason", fmt.Sprintf("at most %d characters", MaxVoidReason))
	}
	for _, c := range codes {
		if c.IsZero() {
			return VoidResult{}, domain.Invalid("codes", "an empty code")
		}
	}
	p, err := s.ledger.Products().Product(ctx, id)
	if err != nil {
		return VoidResult{}, fmt.Errorf("void codes: %w", err)
	}
	if !p.Frozen() {
		return VoidResult{}, fmt.Errorf("void codes of product %d: %w", id, domain.ErrProductNotFrozen)
	}
	if _, err := s.frozenGate(ctx, id); err != nil {
		return VoidResult{}, err
	}
	now := s.clock.Now()
	ref := fmt.Sprintf("void:%s:%08x", now.UTC().Format("20060102150405"), rand.Uint32())
	change := domain.GateChange{Product: id, Ref: ref}
	var res VoidResult
	err = s.ledger.Atomically(ctx, func(tx domain.Store) error {
		res = VoidResult{}
		frozen, err := tx.Products().LockFrozen(ctx, id)
		if err != nil {
			return err
		}
		if !frozen {
			return fmt.Errorf("void codes of product %d: %w", id, domain.ErrProductNotFrozen)
		}
		if err := s.applyUnsent(ctx, tx, id); err != nil {
			return err
		}
		lv, err := s.frozenGate(ctx, id)
		if err != nil {
			return err
		}
		v, err := tx.Cards().Void(ctx, id, codes)
		if err != nil {
			return err
		}
		// Uses, not codes: a multi-use code takes its every sellable use out of the gate.
		if int64(v.Uses) > lv.Stock {
			return &domain.VoidExceedsError{Voidable: v.Uses, Free: lv.Stock}
		}
		res = VoidResult{Voided: v.Voided, Uses: v.Uses, NotFound: v.NotFound, NotVoidable: v.NotVoidable}
		if v.Voided == 0 {
			return nil
		}
		res.Ref = ref
		if err := tx.Flows().Append(ctx, domain.FlowEntry{ProductID: id, Ref: ref, Type: domain.FlowVoid,
			Qty: int64(v.Uses), At: now}); err != nil {
			return err
		}
		change.Stock = -int64(v.Uses)
		m, err := gateChangeMessage(change, now)
		if err != nil {
			return err
		}
		return tx.Outbox().Add(ctx, m)
	})
	if err != nil {
		return VoidResult{}, fmt.Errorf("void codes: %w", err)
	}
	if res.Voided > 0 {
		s.applyGate(ctx, change)
		s.invalidateCatalogue()
		s.log.InfoContext(ctx, "codes voided", "product", id, "voided", res.Voided, "not_found", res.NotFound,
			"not_voidable", res.NotVoidable, "ref", ref)
	}
	return res, nil
}

// frozenGate reads the product's gate counters and refuses unless the gate knows the product
// and has it frozen.
func (s *stock) frozenGate(ctx context.Context, id domain.ProductID) (domain.GateLevels, error) {
	lv, ok, err := s.gate.Levels(ctx, id)
	switch {
	case err != nil:
		return lv, fmt.Errorf("read the gate of product %d: %w", id, err)
	case !ok:
		return lv, fmt.Errorf("void codes of product %d: %w", id, domain.ErrGateNotReady)
	case !lv.Frozen:
		return lv, fmt.Errorf("void codes of product %d: the gate is not frozen: %w", id, domain.ErrProductNotFrozen)
	}
	return lv, nil
}

// applyUnsent applies, inside the void's transaction, the product's gate changes that the
// outbox (as tx reads it) holds unsent: those of earlier voids above all, whose -n the gate
// must count before its stock is read. The relay still sends them later, changing nothing
// then. One that cannot be applied (gate down, rebuilding) refuses the void.
func (s *stock) applyUnsent(ctx context.Context, tx domain.Store, id domain.ProductID) error {
	msgs, err := tx.Outbox().Pending(ctx, s.clock.Now().AddDate(100, 0, 0), voidBacklog, domain.TopicGateChange)
	if err != nil {
		return fmt.Errorf("read unsent gate changes: %w", err)
	}
	if len(msgs) == voidBacklog {
		return errVoidBacklog
	}
	for _, m := range msgs {
		c, err := DecodeGateChange(m.Payload)
		if err != nil {
			return err
		}
		if c.Product != id {
			continue
		}
		if _, err := s.gate.Apply(ctx, c); err != nil {
			if errors.Is(err, domain.ErrUnavailable) {
				return fmt.Errorf("apply an unsent gate change first: %w", err)
			}
			return fmt.Errorf("apply an unsent gate change first: %w: %w", domain.ErrUnavailable, err)
		}
	}
	return nil
}
