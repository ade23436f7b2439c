package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"cardshop/domain"
)

type blocklistRepo struct{ s *store }

type blockRow struct {
	ID      int64     `bun:"id"`
	Kind    string    `bun:"kind"`
	Value   string    `bun:"value"`
	Note    string    `bun:"note"`
	AddedBy string    `bun:"added_by"`
	AddedAt time.Time `bun:"added_at"`
}

const blockColumns = "id, kind, value, note, added_by, added_at"

func (r blockRow) entry() domain.BlockEntry {
	return domain.BlockEntry{ID: r.ID, Kind: domain.BlockKind(r.Kind), Value: r.Value, Note: r.Note,
		AddedBy: domain.OperatorName(r.AddedBy), AddedAt: r.AddedAt}
}

// Add is one INSERT: uk_kind_value refuses a second entry of a kind and value, whoever races
// to write it. The entry is checked again (domain.CheckBlockEntry), so no caller stores a value
// the snapshot cannot read or a second spelling of one.
func (r blocklistRepo) Add(ctx context.Context, e domain.BlockEntry) (domain.BlockEntry, error) {
	if err := domain.CheckBlockEntry(e); err != nil {
		return domain.BlockEntry{}, err
	}
	op := fmt.Sprintf("add %s %s to the blocklist", e.Kind, e.Value)
	e.AddedAt = e.AddedAt.UTC()
	res, err := r.s.exec(ctx, op, "INSERT INTO blocklist (kind, value, note, added_by, added_at) VALUES (?, ?, ?, ?, ?)",
		string(e.Kind), e.Value, e.Note, string(e.AddedBy), e.AddedAt)
	if _, dup := duplicateKey(err); dup {
		return domain.BlockEntry{}, fmt.Errorf("%s: %w", op, domain.ErrBlockExists)
	}
	if err != nil {
		return domain.BlockEntry{}, err
	}
	id, err := res.LastInsertId()
	if err = r.s.failed(op, err); err != nil {
		return domain.BlockEntry{}, err
	}
	e.ID = id
	return e, nil
}

// Remove reads the entry, then deletes it by id: of two removals racing, the one whose DELETE
// changed no row answers ErrBlockNotFound.
func (r blocklistRepo) Remove(ctx context.Context, id int64) (domain.BlockEntry, error) {
	op := fmt.Sprintf("remove blocklist entry %d", id)
	var row blockRow
	err := r.s.get(ctx, op, &row, "SELECT "+blockColumns+" FROM blocklist WHERE id = ?", id)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.BlockEntry{}, fmt.Errorf("%s: %w", op, domain.ErrBlockNotFound)
	}
	if err != nil {
		return domain.BlockEntry{}, err
	}
	n, err := r.s.execN(ctx, op, "DELETE FROM blocklist WHERE id = ?", id)
	if err != nil {
		return domain.BlockEntry{}, err
	}
	if n == 0 {
		return domain.BlockEntry{}, fmt.Errorf("%s: %w", op, domain.ErrBlockNotFound)
	}
	return row.entry(), nil
}

// Entries reads the whole table by its primary key.
func (r blocklistRepo) Entries(ctx context.Context) ([]domain.BlockEntry, error) {
	var rows []blockRow
	if err := r.s.get(ctx, "blocklist", &rows, "SELECT "+blockColumns+" FROM blocklist ORDER BY id"); err != nil {
		return nil, err
	}
	out := make([]domain.BlockEntry, len(rows))
	for i, row := range rows {
		out[i] = row.entry()
	}
	return out, nil
}
