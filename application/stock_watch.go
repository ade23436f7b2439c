package application

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"cardshop/domain"
)

// AlertLowStock is the alert kind of a product whose stock fell to its low-stock threshold.
const AlertLowStock = "low_stock"

// stockWatch is WatchStock's state: its own copy of the product list (the catalogue's is read
// lazily by requests and may never be read on an idle instance), re-read from the ledger every
// Config.CatalogueProductsEvery, after a product changed on this instance, and after another
// instance recorded a crossing first (this copy's stock state is then behind).
type stockWatch struct {
	mu       sync.Mutex // one pass at a time per App
	products []domain.Product
	readAt   time.Time
	stale    atomic.Bool
}

// WatchStock samples every product's reservable stock (one LevelsMany round trip to the gate)
// and records each crossing of the low-stock threshold, of zero and back above the threshold's
// band (domain.NextStockState) as stock events in the outbox: product.low_stock,
// product.sold_out, product.restocked, for the broker (TopicProductStock) and, with a webhook,
// for the storefront (TopicWebhookStock). It returns how many events it recorded.
//
// Instances watching side by side record each crossing once: the product's stored stock state
// moves by a conditional update (SwapStockState) in the same transaction as the events, so only
// the instance whose update changed the row writes them. A product the gate does not know
// (lost, being rebuilt) is skipped until it does. The first evaluation of a product only sets
// its state, without an event, and waits until the product has stock. A failure on one product does not stop the others; the first
// error is returned.
func (s *Catalogue) WatchStock(ctx context.Context) (int, error) {
	w := &s.stockWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	ps, err := s.watchedProducts(ctx)
	if err != nil {
		return 0, err
	}
	if len(ps) == 0 {
		return 0, nil
	}
	ids := make([]domain.ProductID, len(ps))
	for i, p := range ps {
		ids[i] = p.ID()
	}
	levels, err := s.gate.LevelsMany(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("stock watch: read the gate: %w", err)
	}
	now := s.clock.Now()
	var (
		events   int
		firstErr error
	)
	for i, p := range ps {
		l, known := levels[p.ID()]
		if !known || p.StockState() == domain.StockStateNone && l.Stock <= 0 {
			// Unknown to the gate: skipped until it is back. Never evaluated and empty (a
			// product just created, its codes not imported yet): evaluated once it has stock,
			// so that its first import is not announced as product.restocked.
			continue
		}
		to, names := domain.NextStockState(p.StockState(), l.Stock, p.LowStockThreshold())
		if to == p.StockState() {
			continue
		}
		won, err := s.recordCrossing(ctx, p, to, names, l.Stock, now)
		switch {
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
			w.stale.Store(true) // the state may have moved (a commit of unknown outcome)
		case won:
			r := p.Record()
			r.StockState = to
			ps[i] = domain.RehydrateProduct(r)
			events += len(names)
		default:
			w.stale.Store(true) // another instance recorded it: read the state it left
		}
	}
	return events, firstErr
}

// watchedProducts returns the watch's product list, read again from the ledger when due.
func (s *stock) watchedProducts(ctx context.Context) ([]domain.Product, error) {
	w := &s.stockWatch
	now := s.clock.Now()
	if w.stale.Swap(false) || w.products == nil || now.Sub(w.readAt) >= s.cfg.CatalogueProductsEvery {
		ps, err := s.ledger.Products().Products(ctx)
		if err != nil {
			w.stale.Store(true)
			return nil, fmt.Errorf("stock watch: read the products: %w", err)
		}
		if ps == nil {
			ps = []domain.Product{}
		}
		w.products, w.readAt = ps, now
	}
	return w.products, nil
}

// recordCrossing moves p's stock state to to and, only when this call moved it, writes an
// outbox row per event for the broker and one for the webhook (when one is configured), in
// one transaction. It reports whether this call recorded the crossing.
func (s *stock) recordCrossing(ctx context.Context, p domain.Product, to domain.StockState, names []string,
	left int64, now time.Time) (bool, error) {
	msgs, err := s.stockMessages(p, names, left, now)
	if err != nil {
		return false, err
	}
	var won bool
	err = s.ledger.Atomically(ctx, func(tx domain.Store) error {
		var err error
		if won, err = tx.Products().SwapStockState(ctx, p.ID(), p.StockState(), to); err != nil || !won {
			return err
		}
		for _, m := range msgs {
			if err := tx.Outbox().Add(ctx, m); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, domain.ErrProductNotFound) {
		return false, nil // deleted since the list was read: nothing to record
	}
	if err != nil {
		return false, fmt.Errorf("stock watch: record %s of product %d: %w", to, p.ID(), err)
	}
	if won && len(names) > 0 {
		s.log.InfoContext(ctx, "stock crossing recorded", "product", p.ID(), "from", p.StockState(), "to", to,
			"stock_left", left, "events", names)
		if slices.Contains(names, domain.EventLowStock) {
			// Raised by the instance that recorded the crossing, once per crossing; the alert log
			// folds the raises of one product into its open alert until an operator acknowledges it.
			s.alerts.Alert(ctx, domain.Alert{Kind: AlertLowStock, Product: p.ID(),
				Message: fmt.Sprintf("%s: %d left, at or below the low-stock threshold of %d", p.Name(), max(left, 0), p.LowStockThreshold())})
		}
	}
	return won, nil
}

// stockMessages builds the outbox rows of a crossing's events: for each, one for the broker
// and, with a webhook, one for the storefront, with the same payload.
func (s *stock) stockMessages(p domain.Product, names []string, left int64, now time.Time) ([]domain.OutboxMessage, error) {
	key := strconv.FormatInt(int64(p.ID()), 10)
	var msgs []domain.OutboxMessage
	for _, name := range names {
		payload, err := encodeStockEvent(domain.StockEvent{EventID: stockEventID(name, p.ID(), now), Type: name,
			Product: p.ID(), StockLeft: max(left, 0), Threshold: p.LowStockThreshold(), At: now})
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, domain.OutboxMessage{Topic: domain.TopicProductStock, Key: key, Payload: payload, At: now})
		if s.notifier != nil {
			msgs = append(msgs, domain.OutboxMessage{Topic: domain.TopicWebhookStock, Key: key, Payload: payload, At: now})
		}
	}
	return msgs, nil
}

// stockEventID names one crossing: its type, the product and the millisecond it was recorded
// at, e.g. "product.low_stock:1001:1764403200123". It is made once per crossing (the swap has
// one winner) and stored with the event, so every copy a receiver gets carries the same id.
// One product crossing the same way twice within a millisecond would need two samples of the
// watch loop (one a second) within it.
func stockEventID(name string, id domain.ProductID, at time.Time) string {
	return fmt.Sprintf("%s:%d:%d", name, id, at.UnixMilli())
}
