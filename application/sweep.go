package application

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"cardshop/domain"
)

// sweepParallel is how many expired orders the sweeper closes at once. Each close is a
// transaction of its own, and a commit takes a few milliseconds on an idle ledger and tens
// under a sale (it waits for a batch of the group commit): one at a time, the sweeper closed
// 11-16 orders a second while the broker was down, against hundreds of expiries a second in a
// flash sale. Side by side, the closes share commit batches (and each starts from the order
// as the page listed it, without reading it again).
const sweepParallel = 32

// Sweep closes every PENDING order past its expiry, whatever happened to its timeout message
// (lost, broker down, service restarted), and then returns orphan reservations (SweepOrphans),
// so that no reservation leaks, and then fills waiting orders where stock is there
// (FillWaiting). The orders of a page are closed up to sweepParallel at once.
// An order whose payment provider cannot be reached to close its open payment is skipped until
// the next sweep (see CloseExpired). It returns how many orders it closed or looked at plus how
// many orphans it released and how many waiting orders it filled.
func (s *Sales) Sweep(ctx context.Context) (int, error) {
	seen := 0
	for {
		due, err := s.ledger.Orders().Expired(ctx, s.clock.Now(), s.cfg.SweepBatch)
		if err != nil {
			return seen, fmt.Errorf("list expired orders: %w", err)
		}
		waiting, err := s.closeAll(ctx, due)
		if err != nil {
			return seen, err
		}
		seen += len(due)
		if len(due) < s.cfg.SweepBatch || waiting == len(due) {
			break
		}
	}
	released, err := s.SweepOrphans(ctx)
	if err != nil {
		return seen + released, err
	}
	// Last: the units the closes and the orphans gave back go to waiting orders first.
	filled, err := s.FillWaiting(ctx)
	return seen + released + filled, err
}

// closeAll closes the orders of due, up to sweepParallel at once, and returns how many wait for
// their payment provider. After the first other failure it starts no more closes, waits for
// those under way and returns that failure.
func (s *Sales) closeAll(ctx context.Context, due []domain.Order) (waiting int, _ error) {
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		slots    = make(chan struct{}, sweepParallel)
	)
	for _, o := range due {
		slots <- struct{}{}
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop {
			<-slots
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			err := s.closeExpired(ctx, o.No(), &o)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errPaymentOpen):
				waiting++ // its provider is unreachable: the next sweep tries it again
			case err != nil && firstErr == nil:
				firstErr = err
			}
		}()
	}
	wg.Wait()
	return waiting, firstErr
}
