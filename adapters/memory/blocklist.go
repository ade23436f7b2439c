package memory

import (
	"context"
	"fmt"
	"sort"

	"cardshop/domain"
)

type blockKey struct {
	kind  domain.BlockKind
	value string
}

type blocklistRepo struct{ s *store }

// Add checks the entry (domain.CheckBlockEntry) and refuses a second entry of a kind and value,
// as the table's unique key does; ids count from 1 and are not reused after a rollback or a
// removal.
func (r blocklistRepo) Add(_ context.Context, e domain.BlockEntry) (domain.BlockEntry, error) {
	if err := domain.CheckBlockEntry(e); err != nil {
		return domain.BlockEntry{}, err
	}
	release, err := r.s.acquire()
	if err != nil {
		return domain.BlockEntry{}, err
	}
	defer release()
	d := r.s.data
	k := blockKey{e.Kind, e.Value}
	if _, taken := d.blockKeys[k]; taken {
		return domain.BlockEntry{}, fmt.Errorf("add %s %s to the blocklist: %w", e.Kind, e.Value, domain.ErrBlockExists)
	}
	d.lastBlock++
	e.ID = d.lastBlock
	e.AddedAt = e.AddedAt.UTC()
	put(r.s, d.blocks, e.ID, e)
	put(r.s, d.blockKeys, k, e.ID)
	return e, nil
}

func (r blocklistRepo) Remove(_ context.Context, id int64) (domain.BlockEntry, error) {
	release, err := r.s.acquire()
	if err != nil {
		return domain.BlockEntry{}, err
	}
	defer release()
	d := r.s.data
	e, ok := d.blocks[id]
	if !ok {
		return domain.BlockEntry{}, fmt.Errorf("remove blocklist entry %d: %w", id, domain.ErrBlockNotFound)
	}
	del(r.s, d.blocks, id)
	del(r.s, d.blockKeys, blockKey{e.Kind, e.Value})
	return e, nil
}

func (r blocklistRepo) Entries(_ context.Context) ([]domain.BlockEntry, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]domain.BlockEntry, 0, len(r.s.data.blocks))
	for _, e := range r.s.data.blocks {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
