package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"cardshop/domain"
)

// cardQueue is a product's sellable cards in the order they became sellable: imported codes
// join at the back in id order, and so do recycled ones. Allocation takes from the front, so it
// costs O(qty), not O(pool). The struct is a value: a write replaces it whole, and the undo log
// restores the old value (see ledgerData on why the shared backing array is safe).
type cardQueue struct {
	ids  []int64
	head int
}

func (q cardQueue) len() int { return len(q.ids) - q.head }

func (q cardQueue) push(ids ...int64) cardQueue {
	q.ids = append(q.ids, ids...)
	return q
}

// take returns a copy of the first n ids and the queue without them.
func (q cardQueue) take(n int) ([]int64, cardQueue) {
	out := append([]int64(nil), q.ids[q.head:q.head+n]...)
	q.head += n
	// Compact into a fresh array once the consumed prefix dominates; the old array stays
	// intact for any undo that still refers to it.
	if q.head >= 1024 && q.head*2 >= len(q.ids) {
		q.ids = append([]int64(nil), q.ids[q.head:]...)
		q.head = 0
	}
	return out, q
}

type cardVault struct{ s *store }

// Import adds each new code as uses UNSOLD cards (domain.CardVault.Import), ids increasing in
// batch order use by use: every added code's first use, then every code's second, ... so the
// queue spreads an order's uses over as many codes as it can. The code index is pool-wide, so a
// code of another product is found as ImportInPool.
func (v cardVault) Import(_ context.Context, p domain.ProductID, codes []domain.CardCode, uses int) (domain.ImportResult, error) {
	if err := domain.CheckCodeUses(uses); err != nil {
		return domain.ImportResult{}, err
	}
	for _, c := range codes {
		if c.IsZero() {
			return domain.ImportResult{}, domain.Invalid("code", "empty")
		}
	}
	release, err := v.s.acquire()
	if err != nil {
		return domain.ImportResult{}, err
	}
	defer release()
	d := v.s.data
	per := uses
	if uses == domain.UnlimitedUses {
		per = domain.SharedKeyUses
	}
	res := domain.ImportResult{Outcomes: make([]domain.ImportOutcome, len(codes))}
	var fresh []domain.CardCode // the codes to add uses to, in batch order
	seen := make(map[string]bool, len(codes))
	for i, c := range codes {
		id, taken := d.codes[c.Reveal()]
		switch {
		case taken && d.cards[id].ProductID != p:
			res.Outcomes[i] = domain.ImportInPool
			res.InPool++
			continue
		case seen[c.Reveal()] || (taken && uses != domain.UnlimitedUses):
			res.Outcomes[i] = domain.ImportDuplicate
			res.Duplicates++
			continue
		}
		seen[c.Reveal()] = true
		res.Outcomes[i] = domain.ImportAdded
		res.Added++
		fresh = append(fresh, c)
	}
	var added []int64
	var usesOf map[string][]int64 // a code of several uses -> its new cards' ids
	if per > 1 {
		usesOf = make(map[string][]int64, len(fresh))
	}
	for u := 0; u < per; u++ {
		for _, c := range fresh {
			d.lastCard++
			id := d.lastCard
			put(v.s, d.cards, id, domain.Card{ID: id, ProductID: p, Code: c, Status: domain.CardUnsold})
			if _, ok := d.codes[c.Reveal()]; !ok {
				put(v.s, d.codes, c.Reveal(), id)
			}
			if usesOf != nil {
				usesOf[c.Reveal()] = append(usesOf[c.Reveal()], id)
			}
			added = append(added, id)
		}
	}
	for code, ids := range usesOf {
		// A fresh array: the old one stays intact for any undo that still refers to it.
		put(v.s, d.useIDs, code, append(slices.Clone(d.useIDs[code]), ids...))
	}
	if len(added) > 0 {
		put(v.s, d.sellable, p, d.sellable[p].push(added...))
		v.count(p, domain.CardUnsold, int64(len(added)))
	}
	res.Uses = len(added)
	return res, nil
}

// uses returns the card ids of every use of code (one for a single-use code).
func (v cardVault) uses(code string) []int64 {
	if ids := v.s.data.useIDs[code]; len(ids) > 0 {
		return ids
	}
	if id, ok := v.s.data.codes[code]; ok {
		return []int64{id}
	}
	return nil
}

func (v cardVault) count(p domain.ProductID, st domain.CardStatus, delta int64) {
	putIn(v.s, v.s.data.cardCounts, p, st, v.s.data.cardCounts[p][st]+delta)
}

// Allocate takes the first qty cards of the product's sellable queue (see cardQueue) that are
// of different codes; a card passed over (a second use of a code already taken) keeps its
// place at the front.
func (v cardVault) Allocate(_ context.Context, p domain.ProductID, no domain.OrderNo, qty int) ([]domain.Card, error) {
	if qty < 1 {
		return nil, domain.Invalid("qty", "must be at least 1")
	}
	if no == "" {
		return nil, domain.Invalid("order_no", "required")
	}
	release, err := v.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	d := v.s.data
	q := d.sellable[p]
	if q.len() < qty {
		return nil, fmt.Errorf("allocate %d codes of product %d (%d sellable): %w",
			qty, p, q.len(), domain.ErrInsufficientCards)
	}
	ids, q, ok := v.takeDistinct(q, qty)
	if !ok {
		return nil, fmt.Errorf("allocate %d codes of product %d: %w", qty, p, domain.ErrTooFewDistinctCodes)
	}
	put(v.s, d.sellable, p, q)
	out := make([]domain.Card, len(ids))
	for i, id := range ids {
		c := d.cards[id]
		v.count(p, c.Status, -1)
		c.Status, c.OrderNo = domain.CardSold, no
		put(v.s, d.cards, id, c)
		out[i] = c
	}
	v.count(p, domain.CardSold, int64(len(ids)))
	put(v.s, d.orderCards, no, append(d.orderCards[no], ids...))
	return out, nil
}

// takeDistinct returns the first qty ids of q whose codes differ and q without them; ok is
// false when q holds fewer distinct codes. Without a repeat among the first qty (every
// single-use product) it is q.take.
func (v cardVault) takeDistinct(q cardQueue, qty int) ([]int64, cardQueue, bool) {
	d := v.s.data
	codes := make(map[string]bool, qty)
	var ids, passed []int64
	i := q.head
	for ; i < len(q.ids) && len(ids) < qty; i++ {
		code := d.cards[q.ids[i]].Code.Reveal()
		if codes[code] {
			passed = append(passed, q.ids[i])
			continue
		}
		codes[code] = true
		ids = append(ids, q.ids[i])
	}
	if len(ids) < qty {
		return nil, q, false
	}
	if len(passed) == 0 {
		ids, q = q.take(qty)
		return ids, q, true
	}
	// A fresh array: the old one stays intact for any undo that still refers to it.
	return ids, cardQueue{ids: append(passed, q.ids[i:]...)}, true
}

// sold returns the order's SOLD cards by id.
func (v cardVault) sold(no domain.OrderNo) []domain.Card {
	d := v.s.data
	seen := make(map[int64]bool)
	var out []domain.Card
	for _, id := range d.orderCards[no] {
		c := d.cards[id]
		if seen[id] || c.Status != domain.CardSold || c.OrderNo != no {
			continue
		}
		seen[id] = true
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Cards returns the order's SOLD cards ordered by id.
func (v cardVault) Cards(_ context.Context, no domain.OrderNo) ([]domain.Card, error) {
	release, err := v.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	return v.sold(no), nil
}

// Reclaim keeps the order number on the moved cards, for audit; recycled cards join the back
// of the sellable queue.
func (v cardVault) Reclaim(_ context.Context, no domain.OrderNo, to domain.CardStatus) (int, error) {
	if to != domain.CardRecycled && to != domain.CardVoid {
		return 0, domain.Invalid("status", "must be RECYCLED or VOID")
	}
	release, err := v.s.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	d := v.s.data
	cards := v.sold(no)
	for _, c := range cards {
		v.count(c.ProductID, c.Status, -1)
		v.count(c.ProductID, to, 1)
		c.Status = to
		put(v.s, d.cards, c.ID, c)
		if to == domain.CardRecycled {
			put(v.s, d.sellable, c.ProductID, d.sellable[c.ProductID].push(c.ID))
		}
	}
	return len(cards), nil
}

func (v cardVault) Counts(_ context.Context, p domain.ProductID) (domain.CardCounts, error) {
	release, err := v.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make(domain.CardCounts)
	for st, n := range v.s.data.cardCounts[p] {
		if n != 0 {
			out[st] = n
		}
	}
	return out, nil
}

// Void finds the codes (every use of each) in the pool-wide code index and takes the voided ones out of the
// product's sellable queue (rebuilt without them: O(pool), once per call).
func (v cardVault) Void(_ context.Context, p domain.ProductID, codes []domain.CardCode) (domain.VoidResult, error) {
	for _, c := range codes {
		if c.IsZero() {
			return domain.VoidResult{}, domain.Invalid("code", "empty")
		}
	}
	release, err := v.s.acquire()
	if err != nil {
		return domain.VoidResult{}, err
	}
	defer release()
	d := v.s.data
	var res domain.VoidResult
	voided := make(map[int64]bool)
	for _, c := range codes {
		ids := v.uses(c.Reveal())
		if len(ids) == 0 {
			res.NotFound++
			continue
		}
		n := 0
		for _, id := range ids {
			card := d.cards[id]
			if card.ProductID != p || (card.Status != domain.CardUnsold && card.Status != domain.CardRecycled) {
				continue
			}
			v.count(p, card.Status, -1)
			v.count(p, domain.CardVoid, 1)
			card.Status = domain.CardVoid
			put(v.s, d.cards, id, card)
			voided[id] = true
			n++
		}
		if n == 0 {
			res.NotVoidable++
			continue
		}
		res.Voided++
		res.Uses += n
	}
	if len(voided) > 0 {
		q := d.sellable[p]
		kept := make([]int64, 0, max(q.len()-len(voided), 0))
		for _, id := range q.ids[q.head:] {
			if !voided[id] {
				kept = append(kept, id)
			}
		}
		put(v.s, d.sellable, p, cardQueue{ids: kept})
	}
	return res, nil
}
