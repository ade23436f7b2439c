package application

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"cardshop/domain"
)

// NewProduct is an operator's request to create a product. ID 0 lets the catalogue choose;
// MinPerOrder 0 is 1; Tiers are the quantity prices (none: the price applies to every qty); an
// empty StockDisplay is domain.StockExact; Group and Variant put the product in a variant
// group (domain.CheckVariant). CodeUses is how many times each code is sold (0 is 1), or
// SharedKey: any number of times (domain.UnlimitedUses); either is fixed from then on.
type NewProduct struct {
	ID                  domain.ProductID
	Name                string
	Description         string // plain text shown to buyers (domain.CheckDescription)
	Price               domain.Money
	MinPerOrder         int
	MaxPerOrder         int
	CodeUses            int
	SharedKey           bool
	Group               string
	Variant             string
	Tiers               []domain.PriceTier
	StockDisplay        domain.StockDisplay
	Sale                domain.SaleRules // the sale window and per-buyer limit; zero: always on sale, no limit
	RefundReleasesLimit bool
	LowStockThreshold   int
}

// CreateProduct stores a product and initialises its gate at zero stock.
//
// Errors: ErrInvalidInput, ErrProductExists, ErrUnavailable.
func (s *Catalogue) CreateProduct(ctx context.Context, cmd NewProduct) (domain.Product, error) {
	// To the microsecond, as the ledger keeps it: the answer shows what every later read shows.
	p, err := domain.NewProduct(cmd.ID, cmd.Name, cmd.Price, cmd.MaxPerOrder, s.clock.Now().Truncate(time.Microsecond))
	if err != nil {
		return domain.Product{}, err
	}
	uses := max(cmd.CodeUses, 1)
	switch {
	case cmd.CodeUses < 0:
		uses = cmd.CodeUses // refused below
	case cmd.SharedKey:
		uses = domain.UnlimitedUses
	}
	if p, err = p.WithCodeUses(uses); err != nil {
		return domain.Product{}, err
	}
	r := p.Revision()
	r.Tiers, r.StockDisplay = cmd.Tiers, cmd.StockDisplay
	r.MinPerOrder, r.Group, r.Variant, r.Description = cmd.MinPerOrder, cmd.Group, cmd.Variant, cmd.Description
	if r.MinPerOrder == 0 {
		r.MinPerOrder = 1
	}
	r.Sale, r.RefundReleasesLimit, r.LowStockThreshold = cmd.Sale, cmd.RefundReleasesLimit, cmd.LowStockThreshold
	if p, err = p.Revise(r); err != nil {
		return domain.Product{}, err
	}
	p, err = s.ledger.Products().Create(ctx, p)
	if err != nil {
		return domain.Product{}, fmt.Errorf("create product: %w", err)
	}
	s.invalidateCatalogue()
	if err := s.gate.Rebuild(ctx, p.ID(), domain.GateLevels{}); err != nil {
		return p, fmt.Errorf("initialise gate (run reconcile with repair): %w", err)
	}
	if err := s.gate.SetRules(ctx, p.ID(), p.Sale()); err != nil {
		return p, fmt.Errorf("initialise gate (run reconcile with repair): %w", err)
	}
	return p, nil
}

// Product returns a product as the catalogue has it.
//
// Errors: ErrProductNotFound, ErrUnavailable.
func (s *Catalogue) Product(ctx context.Context, id domain.ProductID) (domain.Product, error) {
	return s.ledger.Products().Product(ctx, id)
}

// ProductPatch is an operator's change of a product; a nil field is left as it is. Tiers set to
// a pointer to an empty slice removes the quantity prices.
//
// StartsAt and EndsAt set to a pointer to the zero time remove that bound.
type ProductPatch struct {
	Name        *string
	Description *string // "" removes the description
	Price       *domain.Money
	MinPerOrder *int
	MaxPerOrder *int
	// CodeUses may only repeat the product's code uses, which never change (a form sends every
	// field): the pool, the gate and the flow counted its codes at those uses.
	CodeUses            *int
	Group               *string // "" (with Variant "") takes the product out of its group
	Variant             *string
	Tiers               *[]domain.PriceTier
	StockDisplay        *domain.StockDisplay
	StartsAt            *time.Time
	EndsAt              *time.Time
	BuyerLimit          *int
	RefundReleasesLimit *bool
	LowStockThreshold   *int
}

// touchesRules reports whether the patch changes what the gate enforces or counts.
func (p ProductPatch) touchesRules() bool {
	return p.StartsAt != nil || p.EndsAt != nil || p.BuyerLimit != nil || p.RefundReleasesLimit != nil
}

// UpdateProduct changes a product, on sale or not: the result is validated whole (the tiers
// against the new price and limit) and stored. An order keeps the unit price and amount it
// was placed with, so no existing order changes. This instance's product cache forgets the
// product at once; another instance's cache entry expires within Config.ProductCacheTTL, so
// every instance places orders at the new prices at most that long after the change, and the
// public catalogue shows them after its next ledger refresh (Catalogue).
//
// Errors: ErrInvalidInput, ErrProductNotFound, ErrUnavailable.
func (s *Catalogue) UpdateProduct(ctx context.Context, id domain.ProductID, patch ProductPatch) (domain.Product, error) {
	p, err := s.ledger.Products().Product(ctx, id)
	if err != nil {
		return domain.Product{}, err
	}
	if patch.CodeUses != nil && *patch.CodeUses != p.CodeUses() {
		return domain.Product{}, domain.Invalid("code_uses", "is fixed when the product is created (the codes in its pool were counted at it)")
	}
	r := p.Revision()
	if patch.Name != nil {
		r.Name = *patch.Name
	}
	if patch.Description != nil {
		r.Description = *patch.Description
	}
	if patch.Price != nil {
		r.Price = *patch.Price
	}
	if patch.MinPerOrder != nil {
		r.MinPerOrder = *patch.MinPerOrder
	}
	if patch.MaxPerOrder != nil {
		r.MaxPerOrder = *patch.MaxPerOrder
	}
	if patch.Group != nil {
		r.Group = *patch.Group
	}
	if patch.Variant != nil {
		r.Variant = *patch.Variant
	}
	if patch.Tiers != nil {
		r.Tiers = *patch.Tiers
	}
	if patch.StockDisplay != nil {
		r.StockDisplay = *patch.StockDisplay
	}
	if patch.StartsAt != nil {
		r.Sale.StartsAt = *patch.StartsAt
	}
	if patch.EndsAt != nil {
		r.Sale.EndsAt = *patch.EndsAt
	}
	if patch.BuyerLimit != nil {
		r.Sale.BuyerLimit = *patch.BuyerLimit
	}
	if patch.RefundReleasesLimit != nil {
		r.RefundReleasesLimit = *patch.RefundReleasesLimit
	}
	if patch.LowStockThreshold != nil {
		r.LowStockThreshold = *patch.LowStockThreshold
	}
	revised, err := p.Revise(r)
	if err != nil {
		return domain.Product{}, err
	}
	err = s.ledger.Products().Update(ctx, revised)
	// Forgotten even when the update failed: its outcome may be unknown (a lost commit answer).
	s.productGen.Add(1)
	s.products.Delete(id)
	s.invalidateCatalogue()
	if err != nil {
		return domain.Product{}, fmt.Errorf("update product: %w", err)
	}
	if patch.touchesRules() {
		if err := s.applyRules(ctx, revised, patch); err != nil {
			return domain.Product{}, fmt.Errorf("product stored, but the gate did not take its sale rules (send the change again): %w", err)
		}
	}
	return s.ledger.Products().Product(ctx, id)
}

// applyRules brings a product's changed sale rules to the gate, where they take effect in one
// atomic step. A per-buyer limit that is set, or a change of whether refunds release it while
// there is one, goes through a rebuild from the ledger, which writes the rules together with
// every buyer's holding count (the gate keeps no counts without a limit, refunded orders count
// or not by the setting, and a retried change must find them right too); other changes only
// replace the rules. A rebuild in progress refuses (ErrGateRebuilding): send the change again.
func (s *stock) applyRules(ctx context.Context, p domain.Product, patch ProductPatch) error {
	limited := p.Sale().BuyerLimit > 0
	if limited && (patch.BuyerLimit != nil || patch.RefundReleasesLimit != nil) {
		return s.rebuildGate(ctx, p)
	}
	return s.gate.SetRules(ctx, p.ID(), p.Sale())
}

// Products lists the catalogue.
func (s *Catalogue) Products(ctx context.Context) ([]domain.Product, error) {
	return s.ledger.Products().Products(ctx)
}

// FreezeProduct stops sales of a product (ledger and gate).
//
// Errors: ErrProductNotFound, ErrUnavailable.
func (s *Catalogue) FreezeProduct(ctx context.Context, id domain.ProductID, reason string) error {
	if reason == "" {
		reason = "frozen by operator"
	}
	return s.setFrozen(ctx, id, true, reason)
}

// UnfreezeProduct resumes sales of a product.
//
// Errors: ErrProductNotFound, ErrUnavailable.
func (s *Catalogue) UnfreezeProduct(ctx context.Context, id domain.ProductID) error {
	return s.setFrozen(ctx, id, false, "")
}

func (s *stock) setFrozen(ctx context.Context, id domain.ProductID, frozen bool, reason string) error {
	defer s.invalidateCatalogue()
	if err := s.ledger.Products().SetFrozen(ctx, id, frozen, reason); err != nil {
		return fmt.Errorf("store sale state: %w", err)
	}
	if !frozen {
		// A void of codes committed while the product was frozen may not have reached the gate
		// yet (its -n is applied after its commit): the gate must count it before it sells
		// again, or it would sell units whose codes are VOID. The ledger's update above waited
		// for any void holding the product's lock, so its gate change is committed and read
		// here. Until it is applied the gate stays frozen (the unfreeze answers unavailable and
		// can be sent again).
		if err := s.applyUnsent(ctx, s.ledger, id); err != nil {
			return fmt.Errorf("unfreeze: %w", err)
		}
	}
	if err := s.gate.SetFrozen(ctx, id, frozen); err != nil {
		return fmt.Errorf("set gate sale state: %w", err)
	}
	return nil
}

// The reasons a line of an import is not imported (SkippedLine.Reason). Blank lines are
// ignored without a report.
const (
	SkipDuplicate    = "duplicate"    // the product already has the code: an earlier line, or an earlier import
	SkipInPool       = "in_pool"      // another product has the code: a code is unique across the pool
	SkipInvalid      = "invalid"      // not a code (Detail says why)
	SkipComment      = "comment"      // the line starts with #
	SkipHeader       = "header"       // the first line that is not blank or a comment is "code" or "code,…"
	SkipUnterminated = "unterminated" // the body ended inside the line without a clean end: the line may be cut
)

// SkippedLine is one line an import did not import.
type SkippedLine struct {
	Line   int
	Reason string
	Detail string
}

// ImportReport says what an import did. Its counts are complete; Skipped lists the first
// MaxReportedLines lines not imported, in line order (Truncated: there were more).
type ImportReport struct {
	Added        int
	Uses         int // the units the added codes brought: Added × the product's uses per code (domain.Product.UsesPerImport)
	Duplicates   int
	InPool       int
	Invalid      int
	InvalidRows  []int // line numbers of the first invalid lines (at most 20)
	Comments     int
	Headers      int
	Unterminated int
	Skipped      []SkippedLine
	Truncated    bool
	// Through is the last line the report accounts for: every line up to it was read whole and
	// is imported or counted above, and no later line was imported. After a failed import,
	// send the rest from line Through+1.
	Through int
	// Filled counts the waiting (UNFULFILLED) orders of the product the new codes filled.
	Filled int
}

// NotImported counts the lines the import did not import (blank lines aside).
func (r ImportReport) NotImported() int {
	return r.Duplicates + r.InPool + r.Invalid + r.Comments + r.Headers + r.Unterminated
}

// ErrUnconfirmedEnd is what an import's reader returns in place of io.EOF when the body has
// ended but its end cannot be told apart from a cut (a chunked HTTP body reads the same when
// the connection breaks between two chunks). A last line without a newline is then reported
// as unterminated instead of imported; otherwise the import ends normally.
var ErrUnconfirmedEnd = errors.New("the end of the body cannot be told from a cut")

// importBatch is how many codes one import transaction writes.
const importBatch = 1000

// maxReportedInvalid bounds ImportReport.InvalidRows.
const maxReportedInvalid = 20

// MaxReportedLines bounds ImportReport.Skipped, so that a million-line file cannot make a
// huge answer.
const MaxReportedLines = 1000

// maxImportLine is the longest line an import reads, newline included; a longer one is
// reported as invalid.
const maxImportLine = 64 << 10

// ImportCodes reads codes from r, one per line, and adds the new ones to the product's pool in
// batches: each batch writes its codes, a stock-in flow row and the gate change in one
// transaction, so the reader is never held in memory whole. Codes are never logged.
//
// Each line is normalised as domain.NormalizeCardCode says (surrounding white space and
// invisible characters trimmed, full-width letters folded). A blank line is ignored; a line
// starting with # is a comment; for CSV input the code is the first field (text before the
// first comma, double quotes around it removed); the first line that is neither blank nor a
// comment is a header when it is "code" or its first field is "code" (any case), so a code
// that is the word "code" cannot come first. Every line not imported is counted by reason and
// listed (the first MaxReportedLines) with its number: a duplicate of this product, a code of
// another product (a code is unique across the pool), an invalid line (with the reason, a line
// over 64 KiB included), a comment, the header.
//
// A body that does not end cleanly (r fails: size limit, broken connection) never imports its
// last, unterminated line: the complete lines before it are imported, the report's Through
// names the last of them, and the read error is returned with the report.
//
// After the last batch, the new codes fill the product's waiting orders first, oldest first
// (see Sales' fillWaiting); Filled says how many. A fill that fails is logged and left to the
// sweep: it does not fail the import.
//
// Errors: ErrProductNotFound, ErrUnavailable, r's error (the report says what was imported).
func (s *Catalogue) ImportCodes(ctx context.Context, id domain.ProductID, r io.Reader) (ImportReport, error) {
	rep, err := s.importCodes(ctx, id, r)
	s.fillAfterImport(ctx, id, &rep)
	return rep, err
}

func (s *Catalogue) importCodes(ctx context.Context, id domain.ProductID, r io.Reader) (ImportReport, error) {
	p, err := s.ledger.Products().Product(ctx, id)
	if err != nil {
		return ImportReport{}, fmt.Errorf("import codes: %w", err)
	}
	var rep ImportReport
	b := importBatchState{uses: p.CodeUses()}
	lr := bufio.NewReaderSize(r, maxImportLine)
	line, data := 0, false
	var readErr error
	for {
		text, tooLong, err := nextLine(lr)
		if errors.Is(err, ErrUnconfirmedEnd) || (err != nil && !errors.Is(err, io.EOF)) {
			if len(text) > 0 || tooLong {
				b.skip(&rep, line+1, SkipUnterminated, "the body ended inside this line")
			}
			if !errors.Is(err, ErrUnconfirmedEnd) {
				readErr = err
			}
			break
		}
		if errors.Is(err, io.EOF) && len(text) == 0 && !tooLong {
			break // the end, after a newline or of an empty body
		}
		line++
		b.last = line
		if tooLong {
			b.invalid(&rep, line, fmt.Sprintf("longer than %d KiB", maxImportLine>>10))
		} else {
			b.classify(&rep, line, string(text), &data)
		}
		if err != nil {
			break // io.EOF after a last line without a newline: a clean end
		}
		if len(b.codes) == importBatch {
			if err := s.importBatch(ctx, id, &b, &rep); err != nil {
				return rep, err
			}
		}
	}
	if err := s.importBatch(ctx, id, &b, &rep); err != nil {
		return rep, err
	}
	if readErr != nil {
		return rep, fmt.Errorf("read codes after line %d: %w", rep.Through, readErr)
	}
	return rep, nil
}

// nextLine reads one line without its newline. err is nil for a line ended by a newline,
// io.EOF at the end of the body (with the last line, when it has no newline), or the reader's
// error (with what was read of the line). A line over maxImportLine is skipped to its end and
// reported as tooLong, without its text.
func nextLine(r *bufio.Reader) (text []byte, tooLong bool, err error) {
	for {
		text, err = r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			tooLong = true
			continue
		}
		switch {
		case tooLong:
			text = nil
		case err == nil:
			text = text[:len(text)-1]
		}
		return text, tooLong, err
	}
}

// importBatchState is the part of an import not yet committed: its codes with their line
// numbers, and the report of its lines (merged into the import's report when it commits).
type importBatchState struct {
	codes []domain.CardCode
	lines []int
	rep   ImportReport
	last  int // the last line read
	uses  int // the product's code uses (never changes: domain.Product.WithCodeUses)
}

// classify sorts one line into the batch or its report. data says whether a line that is
// neither blank nor a comment came before (the header can only be the first such line).
func (b *importBatchState) classify(rep *ImportReport, line int, text string, data *bool) {
	text = domain.NormalizeCardCode(text)
	if text == "" {
		return
	}
	if strings.HasPrefix(text, "#") {
		b.skip(rep, line, SkipComment, "")
		return
	}
	first := !*data
	*data = true
	if i := strings.IndexByte(text, ','); i >= 0 {
		text = strings.Trim(strings.TrimSpace(text[:i]), `"`)
	}
	if first && strings.EqualFold(text, "code") {
		b.skip(rep, line, SkipHeader, "")
		return
	}
	code, err := domain.ParseCardCode(text)
	if err != nil {
		why := "not a code"
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			why = ve.Reason
		}
		b.invalid(rep, line, why)
		return
	}
	b.codes = append(b.codes, code)
	b.lines = append(b.lines, line)
}

func (b *importBatchState) invalid(rep *ImportReport, line int, why string) {
	if len(rep.InvalidRows)+len(b.rep.InvalidRows) < maxReportedInvalid {
		b.rep.InvalidRows = append(b.rep.InvalidRows, line)
	}
	b.skip(rep, line, SkipInvalid, why)
}

// skip counts a line not imported and lists it while the report has room. Lines are read in
// order, so what is left out is never ahead of what is kept; the codes' outcomes, which come
// at commit and may be ahead, go through outcome instead.
func (b *importBatchState) skip(rep *ImportReport, line int, reason, detail string) {
	b.count(reason)
	if len(rep.Skipped)+len(b.rep.Skipped) < MaxReportedLines {
		b.rep.Skipped = append(b.rep.Skipped, SkippedLine{Line: line, Reason: reason, Detail: detail})
	}
}

// outcome counts and lists a code the commit did not add (at most a batch of them); merge
// sorts the batch's list and cuts it to the report's room.
func (b *importBatchState) outcome(line int, reason, detail string) {
	b.count(reason)
	b.rep.Skipped = append(b.rep.Skipped, SkippedLine{Line: line, Reason: reason, Detail: detail})
}

func (b *importBatchState) count(reason string) {
	switch reason {
	case SkipDuplicate:
		b.rep.Duplicates++
	case SkipInPool:
		b.rep.InPool++
	case SkipInvalid:
		b.rep.Invalid++
	case SkipComment:
		b.rep.Comments++
	case SkipHeader:
		b.rep.Headers++
	case SkipUnterminated:
		b.rep.Unterminated++
	}
}

// merge adds the committed batch's report to rep and starts the next batch.
func (b *importBatchState) merge(rep *ImportReport, added int) {
	d := &b.rep
	rep.Added += added
	rep.Duplicates += d.Duplicates
	rep.InPool += d.InPool
	rep.Invalid += d.Invalid
	rep.Comments += d.Comments
	rep.Headers += d.Headers
	rep.Unterminated += d.Unterminated
	rep.InvalidRows = append(rep.InvalidRows, d.InvalidRows...)
	slices.SortStableFunc(d.Skipped, func(x, y SkippedLine) int { return x.Line - y.Line })
	rep.Skipped = append(rep.Skipped, d.Skipped[:min(len(d.Skipped), MaxReportedLines-len(rep.Skipped))]...)
	rep.Truncated = rep.NotImported() > len(rep.Skipped)
	rep.Through = b.last
	*b = importBatchState{codes: b.codes[:0], lines: b.lines[:0], rep: ImportReport{Skipped: d.Skipped[:0]}, last: b.last, uses: b.uses}
}

// importBatch commits the batch's codes (a stock-in flow row and the gate change with them)
// and merges its report into rep. A batch that fails leaves rep as it was.
func (s *stock) importBatch(ctx context.Context, id domain.ProductID, b *importBatchState, rep *ImportReport) error {
	if len(b.codes) == 0 {
		b.merge(rep, 0)
		return nil
	}
	now := s.clock.Now()
	ref := fmt.Sprintf("import:%s:%08x", now.UTC().Format("20060102150405"), rand.Uint32())
	var res domain.ImportResult
	change := domain.GateChange{Product: id, Ref: ref}
	err := s.ledger.Atomically(ctx, func(tx domain.Store) error {
		var err error
		res, err = tx.Cards().Import(ctx, id, b.codes, b.uses)
		if err != nil || res.Uses == 0 {
			return err
		}
		if len(res.Outcomes) != len(b.codes) {
			return fmt.Errorf("the card pool reported %d outcomes for %d codes", len(res.Outcomes), len(b.codes))
		}
		// The stock-in, like every count of the pool and the gate, counts uses.
		if err := tx.Flows().Append(ctx, domain.FlowEntry{ProductID: id, Ref: ref, Type: domain.FlowStockIn,
			Qty: int64(res.Uses), At: now}); err != nil {
			return err
		}
		change.Stock = int64(res.Uses)
		m, err := gateChangeMessage(change, now)
		if err != nil {
			return err
		}
		return tx.Outbox().Add(ctx, m)
	})
	if err == nil && len(res.Outcomes) != len(b.codes) {
		err = fmt.Errorf("the card pool reported %d outcomes for %d codes", len(res.Outcomes), len(b.codes))
	}
	if err != nil {
		return fmt.Errorf("import codes after line %d: %w", rep.Through, err)
	}
	for i, o := range res.Outcomes {
		switch o {
		case domain.ImportDuplicate:
			b.outcome(b.lines[i], SkipDuplicate, "already in this product (an earlier line or an earlier import)")
		case domain.ImportInPool:
			b.outcome(b.lines[i], SkipInPool, "already in another product's pool")
		default: // added: counted in res.Added
		}
	}
	b.merge(rep, res.Added)
	rep.Uses += res.Uses
	if res.Uses > 0 {
		s.applyGate(ctx, change)
	}
	return nil
}

// CardCounts counts a product's codes by status (statuses without codes are absent): the
// console's codes screen. It reads the product first, so an unknown one is an error, not
// an empty pool.
//
// Errors: ErrProductNotFound, ErrUnavailable.
func (s *Catalogue) CardCounts(ctx context.Context, id domain.ProductID) (domain.CardCounts, error) {
	if _, err := s.ledger.Products().Product(ctx, id); err != nil {
		return nil, err
	}
	counts, err := s.ledger.Cards().Counts(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("count codes: %w", err)
	}
	return counts, nil
}

// StockLevels reads the gate of these products in one round trip (LevelsMany): reservable
// units, units held by PENDING and PAID orders, frozen. For screens that show many products
// (the console's overview); a product the gate has no record of yet is absent. Reconcile reads
// the same numbers with every other side's.
//
// Errors: ErrUnavailable.
func (s *Catalogue) StockLevels(ctx context.Context, ids ...domain.ProductID) (map[domain.ProductID]domain.GateLevels, error) {
	levels, err := s.gate.LevelsMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("stock levels: %w", err)
	}
	return levels, nil
}
