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
// a code whose hash is in uk_pool_code (unique across every product, migration 0004) belongs to
// this product (duplicate) or to another (in the pool); the rest is inserted. The INSERT keeps
// ON DUPLICATE KEY UPDATE id = id, so that a code committed by a concurrent import after the
// lookup changes no row instead of failing: the rows it changed must then be all the codes it
// was given, otherwise the transaction is run again (errImportRace) and the next lookup sees
// the other import's code. All chunks of a batch commit together.
func (v cardVault) Import(ctx context.Context, p domain.ProductID, codes []domain.CardCode) (domain.ImportResult, error) {
	for _, c := range codes {
		if c.IsZero() {
			return domain.ImportResult{}, domain.Invalid("code", "empty")
		}
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
		args := make([]any, 0, 5*min(len(rows), importChunk))
		for start := 0; start < len(rows); start += importChunk {
			chunk := rows[start:min(start+importChunk, len(rows))]
			var q strings.Builder
			q.WriteString("SELECT product_id, code_hash FROM card_stock WHERE pool_hash IN (")
			args = args[:0]
			for i, r := range chunk {
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("?")
				args = append(args, r.hash)
			}
			q.WriteString(")")
			var taken []struct {
				ProductID int64  `bun:"product_id"`
				CodeHash  []byte `bun:"code_hash"`
			}
			if err := s.get(ctx, op, &taken, q.String(), args...); err != nil {
				return err
			}
			owner := make(map[string]int64, len(taken))
			for _, t := range taken {
				owner[string(t.CodeHash)] = t.ProductID
			}
			q.Reset()
			q.WriteString("INSERT INTO card_stock (product_id, code_cipher, key_id, code_hash, aad_version, status, created_at, updated_at) VALUES ")
			args = args[:0]
			inserted := 0
			for _, r := range chunk {
				if pid, ok := owner[string(r.hash)]; ok {
					if pid == int64(p) {
						res.Outcomes[r.index] = domain.ImportDuplicate
					} else {
						res.Outcomes[r.index] = domain.ImportInPool
					}
					continue
				}
				if inserted > 0 {
					q.WriteString(", ")
				}
				inserted++
				sealed, kid := keys.seal(p, codes[r.index].Reveal(), r.hash)
				q.WriteString("(?, ?, ?, ?, ?, 'UNSOLD', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
				args = append(args, int64(p), sealed, kid, r.hash, aadProductHash)
				res.Outcomes[r.index] = domain.ImportAdded
			}
			if inserted == 0 {
				continue
			}
			q.WriteString(" ON DUPLICATE KEY UPDATE id = id")
			n, err := s.execN(ctx, op, q.String(), args...)
			if err != nil {
				return err
			}
			if n != int64(inserted) {
				s.tx.restart(errImportRace)
				return fmt.Errorf("%s: %w", op, errImportRace)
			}
		}
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

// Allocate takes the qty sellable codes first in (status, id) order — UNSOLD before RECYCLED,
// each oldest first — which is the allocation index's order, so the server reads and locks
// only the rows it returns. It skips rows other transactions hold (SKIP LOCKED); when those
// left are too few, a plain read tells a real shortage (ErrInsufficientCards) from codes
// merely locked, and in that case voids the transaction (errCodesLocked) for Atomically to run
// again with blocking reads. Why it must not wait here: docs/DESIGN.md, "The production
// adapters".
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
		const pick = "SELECT " + cardColumns + " FROM card_stock WHERE product_id = ? AND status IN ('UNSOLD', 'RECYCLED') " +
			"ORDER BY status, id LIMIT ? FOR UPDATE"
		short := func(n int) error {
			return fmt.Errorf("%s (%d sellable): %w", op, n, domain.ErrInsufficientCards)
		}
		var rows []cardRow
		if s.tx.run.waitForLocks.Load() {
			if err := s.get(ctx, op, &rows, pick, int64(p), qty); err != nil {
				return err
			}
			if len(rows) < qty {
				return short(len(rows))
			}
		} else {
			if err := s.get(ctx, op, &rows, pick+" SKIP LOCKED", int64(p), qty); err != nil {
				return err
			}
			if len(rows) < qty {
				var sellable int
				if err := s.get(ctx, op, &sellable, "SELECT COUNT(*) FROM (SELECT 1 FROM card_stock "+
					"WHERE product_id = ? AND status IN ('UNSOLD', 'RECYCLED') LIMIT ?) AS sellable", int64(p), qty); err != nil {
					return err
				}
				if sellable < qty {
					return short(sellable)
				}
				s.tx.run.waitForLocks.Store(true)
				s.tx.restart(errCodesLocked)
				return fmt.Errorf("%s: %w", op, errCodesLocked)
			}
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
// product's rows of those hashes (uk_product_code) with FOR UPDATE and marks the sellable
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
	err := v.s.atomic(ctx, func(s *store) error {
		outcome = make(map[string]int, len(hashes))
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
			for _, r := range rows {
				if r.Status == domain.CardUnsold.String() || r.Status == domain.CardRecycled.String() {
					ids = append(ids, r.ID)
					outcome[string(r.CodeHash)] = voided
				} else {
					outcome[string(r.CodeHash)] = notVoidable
				}
			}
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
	var res domain.VoidResult
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
