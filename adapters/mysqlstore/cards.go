package mysqlstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/uptrace/bun"

	"cardshop/domain"
)

type cardVault struct{ s *store }

// importChunk bounds the rows of one INSERT, keeping a statement far below max_allowed_packet
// (a row is at most about 400 bytes of SQL).
const importChunk = 1000

type cardRow struct {
	ID         int64  `bun:"id"`
	ProductID  int64  `bun:"product_id"`
	CodeCipher []byte `bun:"code_cipher"`
	KeyID      string `bun:"key_id"`
	CodeHash   []byte `bun:"code_hash"`
	AADVersion int    `bun:"aad_version"`
	Status     string `bun:"status"`
	OrderNo    string `bun:"order_no"`
}

const cardColumns = "id, product_id, code_cipher, key_id, code_hash, aad_version, status, order_no"

// card decrypts the row's code.
func (v cardVault) card(r cardRow) (domain.Card, error) {
	st, err := domain.ParseCardStatus(r.Status)
	if err != nil {
		return domain.Card{}, fmt.Errorf("card %d: %w", r.ID, err)
	}
	code, err := v.s.keys().open(domain.ProductID(r.ProductID), r.KeyID, r.AADVersion, r.CodeHash, r.CodeCipher)
	if err != nil {
		return domain.Card{}, fmt.Errorf("card %d: %w", r.ID, err)
	}
	return domain.Card{ID: r.ID, ProductID: domain.ProductID(r.ProductID), Code: code, Status: st,
		OrderNo: domain.OrderNo(r.OrderNo)}, nil
}

// errImportRace voids an import transaction that lost a race: a code it found free was
// committed by a concurrent import before its INSERT. Atomically runs it again, and the next
// run finds the code taken.
var errImportRace = errors.New("a concurrent import took a code of this batch")

// Import classifies the batch's codes by their HMAC: a repeat within the batch is a duplicate;
// a code whose hash is in uk_pool_code (unique across every product, migration 0004; the row
// of a code's first use, migration 0025) belongs to this product (duplicate, or a shared key to
// top up) or to another (in the pool); the rest is inserted, one row per use (use_no 0, 1, ...),
// every code's first use before any code's second. The INSERT keeps ON DUPLICATE KEY UPDATE
// id = id, so that a code committed by a concurrent import after the lookup changes no row
// instead of failing: the rows it changed must then be all the rows it was given, otherwise
// the transaction is run again (errImportRace) and the next lookup sees the other import's
// code. All chunks of a batch commit together.
func (v cardVault) Import(ctx context.Context, p domain.ProductID, codes []domain.CardCode, uses int) (domain.ImportResult, error) {
	if err := domain.CheckCodeUses(uses); err != nil {
		return domain.ImportResult{}, err
	}
	for _, c := range codes {
		if c.IsZero() {
			return domain.ImportResult{}, domain.Invalid("code", "empty")
		}
	}
	per := uses
	if uses == domain.UnlimitedUses {
		per = domain.SharedKeyUses
	}
	keys := v.s.keys()
	type row struct {
		index int // in codes
		hash  []byte
	}
	first := make(map[string]int, len(codes)) // code -> index of its first occurrence
	repeats := make(map[int]int)              // index of a repeat -> index of the first
	rows := make([]row, 0, len(codes))
	for i, c := range codes {
		if f, dup := first[c.Reveal()]; dup {
			repeats[i] = f
			continue
		}
		first[c.Reveal()] = i
		rows = append(rows, row{index: i, hash: keys.hash(c.Reveal())})
	}
	op := fmt.Sprintf("import %d codes of product %d", len(codes), p)
	res := domain.ImportResult{}
	err := v.s.atomic(ctx, func(s *store) error {
		res = domain.ImportResult{Outcomes: make([]domain.ImportOutcome, len(codes))}
		type use struct {
			row
			no int // use_no
		}
		var added []row
		from := map[string]int{} // a shared key's hash -> the use_no its new uses start at
		args := make([]any, 0, 5*min(len(rows), importChunk))
		for start := 0; start < len(rows); start += importChunk {
			chunk := rows[start:min(start+importChunk, len(rows))]
			hashes := make([][]byte, len(chunk))
			for i, r := range chunk {
				hashes[i] = r.hash
			}
			var taken []struct {
				ProductID int64  `bun:"product_id"`
				CodeHash  []byte `bun:"code_hash"`
			}
			if err := s.get(ctx, op, &taken, "SELECT product_id, code_hash FROM card_stock WHERE pool_hash IN (?)",
				bun.List(hashes)); err != nil {
				return err
			}
			owner := make(map[string]int64, len(taken))
			var topUp [][]byte
			for _, t := range taken {
				owner[string(t.CodeHash)] = t.ProductID
				if t.ProductID == int64(p) && uses == domain.UnlimitedUses {
					topUp = append(topUp, t.CodeHash)
				}
			}
			if len(topUp) > 0 {
				var last []struct {
					CodeHash []byte `bun:"code_hash"`
					Last     int    `bun:"last"`
				}
				if err := s.get(ctx, op, &last, "SELECT code_hash, MAX(use_no) AS last FROM card_stock "+
					"WHERE product_id = ? AND code_hash IN (?) GROUP BY code_hash", int64(p), bun.List(topUp)); err != nil {
					return err
				}
				for _, l := range last {
					from[string(l.CodeHash)] = l.Last + 1
				}
			}
			for _, r := range chunk {
				pid, ok := owner[string(r.hash)]
				switch {
				case ok && pid != int64(p):
					res.Outcomes[r.index] = domain.ImportInPool
				case ok && uses != domain.UnlimitedUses:
					res.Outcomes[r.index] = domain.ImportDuplicate
				default:
					res.Outcomes[r.index] = domain.ImportAdded
					added = append(added, r)
				}
			}
		}
		all := make([]use, 0, len(added)*per)
		for u := 0; u < per; u++ {
			for _, r := range added {
				all = append(all, use{row: r, no: from[string(r.hash)] + u})
			}
		}
		sealed := make(map[int][]byte, len(added))
		kids := make(map[int]string, len(added))
		for _, r := range added {
			sealed[r.index], kids[r.index] = keys.seal(p, codes[r.index].Reveal(), r.hash)
		}
		var q strings.Builder
		for start := 0; start < len(all); start += importChunk {
			chunk := all[start:min(start+importChunk, len(all))]
			q.Reset()
			q.WriteString("INSERT INTO card_stock (product_id, code_cipher, key_id, code_hash, use_no, aad_version, status, created_at, updated_at) VALUES ")
			args = args[:0]
			for i, u := range chunk {
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(?, ?, ?, ?, ?, ?, 'UNSOLD', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
				args = append(args, int64(p), sealed[u.index], kids[u.index], u.hash, u.no, aadProductHash)
			}
			q.WriteString(" ON DUPLICATE KEY UPDATE id = id")
			n, err := s.execN(ctx, op, q.String(), args...)
			if err != nil {
				return err
			}
			if n != int64(len(chunk)) {
				s.tx.restart(errImportRace)
				return fmt.Errorf("%s: %w", op, errImportRace)
			}
		}
		res.Uses = len(all)
		return nil
	})
	if err != nil {
		return domain.ImportResult{}, err
	}
	// A repeat finds the pool as its first occurrence left it: the code is then this
	// product's (duplicate) or still another product's (in the pool).
	for i, f := range repeats {
		if o := res.Outcomes[f]; o == domain.ImportInPool {
			res.Outcomes[i] = o
		} else {
			res.Outcomes[i] = domain.ImportDuplicate
		}
	}
	for _, o := range res.Outcomes {
		switch o {
		case domain.ImportAdded:
			res.Added++
		case domain.ImportDuplicate:
			res.Duplicates++
		case domain.ImportInPool:
			res.InPool++
		}
	}
	return res, nil
}

// Allocate takes the qty sellable uses first in (status, use_no, id) order — UNSOLD before
// RECYCLED, each code's first use before any code's second, each oldest first — which is the
// allocation index's order, so the server reads and locks only the rows it returns; of a code
// whose use it already took it takes no other (a multi-use code's uses may come side by side,
// so it reads again without those codes until it has qty or the pool has no more). It skips
// rows other transactions hold (SKIP LOCKED); when those left are too few, a plain read tells
// a real shortage (ErrInsufficientCards, or ErrTooFewDistinctCodes) from codes merely locked,
// and in that case voids the transaction (errCodesLocked) for Atomically to run again with
// blocking reads. Why it must not wait here: docs/DESIGN.md, "The production adapters".
func (v cardVault) Allocate(ctx context.Context, p domain.ProductID, no domain.OrderNo, qty int) ([]domain.Card, error) {
	if qty < 1 {
		return nil, domain.Invalid("qty", "must be at least 1")
	}
	if no == "" {
		return nil, domain.Invalid("order_no", "required")
	}
	op := fmt.Sprintf("allocate %d codes of product %d to order %s", qty, p, no)
	var out []domain.Card
	err := v.s.atomic(ctx, func(s *store) error {
		wait := s.tx.run.waitForLocks.Load()
		rows, err := v.pick(ctx, s, op, p, qty, wait)
		if err != nil {
			return err
		}
		if len(rows) < qty {
			if err := v.short(ctx, s, op, p, qty); err != nil || wait {
				if err == nil {
					err = fmt.Errorf("%s (%d sellable): %w", op, len(rows), domain.ErrInsufficientCards)
				}
				return err
			}
			s.tx.run.waitForLocks.Store(true)
			s.tx.restart(errCodesLocked)
			return fmt.Errorf("%s: %w", op, errCodesLocked)
		}
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		n, err := s.execN(ctx, op, "UPDATE card_stock SET status = 'SOLD', order_no = ?, updated_at = UTC_TIMESTAMP(6) "+
			"WHERE id IN (?) AND status IN ('UNSOLD', 'RECYCLED')", string(no), bun.List(ids))
		if err != nil {
			return err
		}
		if n != int64(qty) {
			return fmt.Errorf("%s: marked %d of %d locked codes sold", op, n, qty)
		}
		out = make([]domain.Card, len(rows))
		for i, r := range rows {
			r.Status, r.OrderNo = domain.CardSold.String(), string(no)
			c, err := v.card(r)
			if err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			out[i] = c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pick locks up to qty sellable uses of p of distinct codes (with SKIP LOCKED unless wait).
// Each read after the first leaves out the codes already taken; a read that returns fewer
// rows than it asked for has seen every row it could, so the loop ends.
func (v cardVault) pick(ctx context.Context, s *store, op string, p domain.ProductID, qty int, wait bool) ([]cardRow, error) {
	lock := " FOR UPDATE SKIP LOCKED"
	if wait {
		lock = " FOR UPDATE"
	}
	var picked []cardRow
	taken := make(map[string]bool, qty)
	var hashes [][]byte
	for len(picked) < qty {
		need := qty - len(picked)
		q, args := "SELECT "+cardColumns+" FROM card_stock WHERE product_id = ? AND status IN ('UNSOLD', 'RECYCLED')", []any{int64(p)}
		if len(hashes) > 0 {
			q += " AND code_hash NOT IN (?)"
			args = append(args, bun.List(hashes))
		}
		var rows []cardRow
		if err := s.get(ctx, op, &rows, q+" ORDER BY status, use_no, id LIMIT ?"+lock, append(args, need)...); err != nil {
			return nil, err
		}
		for _, r := range rows {
			if taken[string(r.CodeHash)] {
				continue
			}
			taken[string(r.CodeHash)] = true
			hashes = append(hashes, r.CodeHash)
			picked = append(picked, r)
		}
		if len(rows) < need {
			break
		}
	}
	return picked, nil
}

// short tells why the pool cannot give qty uses of distinct codes, by one plain read (one view
// of the pool, whatever the isolation level) that counts no further than qty:
// ErrInsufficientCards when fewer than qty uses are sellable, ErrTooFewDistinctCodes when they
// are on fewer than qty codes, nil when both are there (some are merely locked).
func (v cardVault) short(ctx context.Context, s *store, op string, p domain.ProductID, qty int) error {
	const sellable = "FROM card_stock WHERE product_id = ? AND status IN ('UNSOLD', 'RECYCLED') "
	var n struct {
		Uses  int `bun:"uses"`
		Codes int `bun:"codes"`
	}
	if err := s.get(ctx, op, &n, "SELECT (SELECT COUNT(*) FROM (SELECT 1 "+sellable+"LIMIT ?) AS u) AS uses, "+
		"(SELECT COUNT(*) FROM (SELECT DISTINCT code_hash "+sellable+"LIMIT ?) AS c) AS codes",
		int64(p), qty, int64(p), qty); err != nil {
		return err
	}
	if n.Uses < qty {
		return fmt.Errorf("%s (%d sellable): %w", op, n.Uses, domain.ErrInsufficientCards)
	}
	if n.Codes < qty {
		return fmt.Errorf("%s (%d sellable codes): %w", op, n.Codes, domain.ErrTooFewDistinctCodes)
	}
	return nil
}

// Cards decrypts the order's SOLD codes, ordered by id.
func (v cardVault) Cards(ctx context.Context, no domain.OrderNo) ([]domain.Card, error) {
	op := fmt.Sprintf("cards of order %s", no)
	var rows []cardRow
	if err := v.s.get(ctx, op, &rows, "SELECT "+cardColumns+" FROM card_stock WHERE order_no = ? AND status = 'SOLD' ORDER BY id",
		string(no)); err != nil {
		return nil, err
	}
	out := make([]domain.Card, len(rows))
	for i, r := range rows {
		c, err := v.card(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out[i] = c
	}
	return out, nil
}

// Reclaim keeps the order number on the moved codes, for audit.
func (v cardVault) Reclaim(ctx context.Context, no domain.OrderNo, to domain.CardStatus) (int, error) {
	if to != domain.CardRecycled && to != domain.CardVoid {
		return 0, domain.Invalid("status", "must be RECYCLED or VOID")
	}
	n, err := v.s.execN(ctx, fmt.Sprintf("reclaim codes of order %s", no),
		"UPDATE card_stock SET status = ?, updated_at = UTC_TIMESTAMP(6) WHERE order_no = ? AND status = 'SOLD'",
		to.String(), string(no))
	return int(n), err
}

func (v cardVault) Counts(ctx context.Context, p domain.ProductID) (domain.CardCounts, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int64  `bun:"n"`
	}
	op := fmt.Sprintf("card counts of product %d", p)
	if err := v.s.get(ctx, op, &rows, "SELECT status, COUNT(*) AS n FROM card_stock WHERE product_id = ? GROUP BY status",
		int64(p)); err != nil {
		return nil, err
	}
	out := make(domain.CardCounts, len(rows))
	for _, r := range rows {
		st, err := domain.ParseCardStatus(r.Status)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out[st] = r.N
	}
	return out, nil
}

// Void hashes each distinct code as Import does and, chunk by chunk in hash order (so that
// concurrent voids lock rows in one order and cannot deadlock each other), locks the
// product's rows of those hashes (uk_product_code: every use of each) with FOR UPDATE and marks the sellable
// ones VOID by id, still conditional on their status. A hash the product does not have is
// looked up pool-wide (uk_pool_code, no lock): another product's code is not voidable, the
// rest is not found. Every chunk commits together.
func (v cardVault) Void(ctx context.Context, p domain.ProductID, codes []domain.CardCode) (domain.VoidResult, error) {
	for _, c := range codes {
		if c.IsZero() {
			return domain.VoidResult{}, domain.Invalid("code", "empty")
		}
	}
	keys := v.s.keys()
	hashOf := make(map[string]string, len(codes)) // code -> its hash
	hashes := make([][]byte, 0, len(codes))
	for _, c := range codes {
		if _, dup := hashOf[c.Reveal()]; dup {
			continue
		}
		h := keys.hash(c.Reveal())
		hashOf[c.Reveal()] = string(h)
		hashes = append(hashes, h)
	}
	slices.SortFunc(hashes, bytes.Compare)
	const (
		voided = iota + 1
		notFound
		notVoidable
	)
	op := fmt.Sprintf("void %d codes of product %d", len(codes), p)
	var outcome map[string]int // hash -> what became of its first occurrence
	var uses int
	err := v.s.atomic(ctx, func(s *store) error {
		outcome, uses = make(map[string]int, len(hashes)), 0
		for start := 0; start < len(hashes); start += importChunk {
			chunk := hashes[start:min(start+importChunk, len(hashes))]
			var rows []struct {
				ID       int64  `bun:"id"`
				CodeHash []byte `bun:"code_hash"`
				Status   string `bun:"status"`
			}
			if err := s.get(ctx, op, &rows, "SELECT id, code_hash, status FROM card_stock WHERE product_id = ? AND code_hash IN (?) "+
				"ORDER BY code_hash FOR UPDATE", int64(p), bun.List(chunk)); err != nil {
				return err
			}
			var ids []int64
			for _, r := range rows { // a multi-use code has a row per use: voided when one was sellable
				if r.Status == domain.CardUnsold.String() || r.Status == domain.CardRecycled.String() {
					ids = append(ids, r.ID)
					outcome[string(r.CodeHash)] = voided
				} else if outcome[string(r.CodeHash)] != voided {
					outcome[string(r.CodeHash)] = notVoidable
				}
			}
			uses += len(ids)
			if len(ids) > 0 {
				n, err := s.execN(ctx, op, "UPDATE card_stock SET status = 'VOID', updated_at = UTC_TIMESTAMP(6) "+
					"WHERE id IN (?) AND status IN ('UNSOLD', 'RECYCLED')", bun.List(ids))
				if err != nil {
					return err
				}
				if n != int64(len(ids)) {
					return fmt.Errorf("%s: voided %d of %d locked codes", op, n, len(ids))
				}
			}
			var elsewhere [][]byte
			for _, h := range chunk {
				if outcome[string(h)] == 0 {
					elsewhere = append(elsewhere, h)
					outcome[string(h)] = notFound
				}
			}
			if len(elsewhere) == 0 {
				continue
			}
			var inPool [][]byte
			if err := s.get(ctx, op, &inPool, "SELECT pool_hash FROM card_stock WHERE pool_hash IN (?)",
				bun.List(elsewhere)); err != nil {
				return err
			}
			for _, h := range inPool {
				outcome[string(h)] = notVoidable
			}
		}
		return nil
	})
	if err != nil {
		return domain.VoidResult{}, err
	}
	res := domain.VoidResult{Uses: uses}
	first := make(map[string]bool, len(hashes))
	for _, c := range codes {
		h := hashOf[c.Reveal()]
		o := outcome[h]
		if first[h] && o == voided {
			o = notVoidable // a repeat finds the code its first occurrence voided
		}
		first[h] = true
		switch o {
		case voided:
			res.Voided++
		case notFound:
			res.NotFound++
		default:
			res.NotVoidable++
		}
	}
	return res, nil
}
