package application

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"cardshop/domain"
)

// NewProduct is an operator's request to create a product. ID 0 lets the catalogue choose.
type NewProduct struct {
	ID          domain.ProductID
	Name        string
	Price       domain.Money
	MaxPerOrder int
}

// CreateProduct stores a product and initialises its gate at zero stock.
//
// Errors: ErrInvalidInput, ErrProductExists, ErrUnavailable.
func (s *Shop) CreateProduct(ctx context.Context, cmd NewProduct) (domain.Product, error) {
	p, err := domain.NewProduct(cmd.ID, cmd.Name, cmd.Price, cmd.MaxPerOrder, s.clock.Now())
	if err != nil {
		return domain.Product{}, err
	}
	p, err = s.ledger.Products().Create(ctx, p)
	if err != nil {
		return domain.Product{}, fmt.Errorf("create product: %w", err)
	}
	if err := s.gate.Rebuild(ctx, p.ID(), domain.GateLevels{}); err != nil {
		return p, fmt.Errorf("initialise gate (run reconcile with repair): %w", err)
	}
	return p, nil
}

// Product returns a product as the catalogue has it.
//
// Errors: ErrProductNotFound, ErrUnavailable.
func (s *Shop) Product(ctx context.Context, id domain.ProductID) (domain.Product, error) {
	return s.ledger.Products().Product(ctx, id)
}

// Products lists the catalogue.
func (s *Shop) Products(ctx context.Context) ([]domain.Product, error) {
	return s.ledger.Products().Products(ctx)
}

// FreezeProduct stops sales of a product (ledger and gate).
//
// Errors: ErrProductNotFound, ErrUnavailable.
func (s *Shop) FreezeProduct(ctx context.Context, id domain.ProductID, reason string) error {
	if reason == "" {
		reason = "frozen by operator"
	}
	return s.setFrozen(ctx, id, true, reason)
}

// UnfreezeProduct resumes sales of a product.
//
// Errors: ErrProductNotFound, ErrUnavailable.
func (s *Shop) UnfreezeProduct(ctx context.Context, id domain.ProductID) error {
	return s.setFrozen(ctx, id, false, "")
}

func (s *Shop) setFrozen(ctx context.Context, id domain.ProductID, frozen bool, reason string) error {
	if err := s.ledger.Products().SetFrozen(ctx, id, frozen, reason); err != nil {
		return fmt.Errorf("store sale state: %w", err)
	}
	if err := s.gate.SetFrozen(ctx, id, frozen); err != nil {
		return fmt.Errorf("set gate sale state: %w", err)
	}
	return nil
}

// ImportReport says what an import did.
type ImportReport struct {
	Added       int
	Duplicates  int
	Invalid     int
	InvalidRows []int // line numbers of the first invalid lines (at most 20)
}

// importBatch is how many codes one import transaction writes.
const importBatch = 1000

// maxReportedInvalid bounds ImportReport.InvalidRows.
const maxReportedInvalid = 20

// ImportCodes reads codes from r, one per line (blank lines and lines starting with # are
// skipped; for CSV input the first field is the code, and a first line whose first field is
// "code" is the header), and adds the new ones to the product's
// pool in batches: each batch writes its codes, a stock-in flow row and the gate change in one
// transaction, so the reader is never held in memory whole. Codes the product already has are
// counted as duplicates; malformed lines as invalid. Codes are never logged.
//
// Errors: ErrProductNotFound, ErrUnavailable (the batches before it stay imported).
func (s *Shop) ImportCodes(ctx context.Context, id domain.ProductID, r io.Reader) (ImportReport, error) {
	if _, err := s.ledger.Products().Product(ctx, id); err != nil {
		return ImportReport{}, fmt.Errorf("import codes: %w", err)
	}
	var rep ImportReport
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024)
	batch := make([]domain.CardCode, 0, importBatch)
	line, data := 0, false
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		first := !data
		data = true
		if i := strings.IndexByte(text, ','); i >= 0 {
			text = strings.Trim(strings.TrimSpace(text[:i]), `"`)
			if first && strings.EqualFold(text, "code") { // a CSV header such as "code,expires"
				continue
			}
		}
		code, err := domain.ParseCardCode(text)
		if err != nil {
			rep.Invalid++
			if len(rep.InvalidRows) < maxReportedInvalid {
				rep.InvalidRows = append(rep.InvalidRows, line)
			}
			continue
		}
		batch = append(batch, code)
		if len(batch) == importBatch {
			if err := s.importBatch(ctx, id, batch, &rep); err != nil {
				return rep, err
			}
			batch = batch[:0]
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return rep, domain.Invalid("codes", fmt.Sprintf("line %d is longer than 64 KiB", line+1))
		}
		return rep, fmt.Errorf("read codes: %w", err)
	}
	if len(batch) > 0 {
		if err := s.importBatch(ctx, id, batch, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (s *Shop) importBatch(ctx context.Context, id domain.ProductID, codes []domain.CardCode, rep *ImportReport) error {
	now := s.clock.Now()
	ref := fmt.Sprintf("import:%s:%08x", now.UTC().Format("20060102150405"), rand.Uint32())
	var res domain.ImportResult
	change := domain.GateChange{Product: id, Ref: ref}
	err := s.ledger.Atomically(ctx, func(tx domain.Store) error {
		var err error
		res, err = tx.Cards().Import(ctx, id, codes)
		if err != nil || res.Added == 0 {
			return err
		}
		if err := tx.Flows().Append(ctx, domain.FlowEntry{ProductID: id, Ref: ref, Type: domain.FlowStockIn,
			Qty: int64(res.Added), At: now}); err != nil {
			return err
		}
		change.Stock = int64(res.Added)
		m, err := gateChangeMessage(change, now)
		if err != nil {
			return err
		}
		return tx.Outbox().Add(ctx, m)
	})
	if err != nil {
		return fmt.Errorf("import codes: %w", err)
	}
	rep.Added += res.Added
	rep.Duplicates += res.Duplicates
	if res.Added > 0 {
		s.applyGate(ctx, change)
	}
	return nil
}
