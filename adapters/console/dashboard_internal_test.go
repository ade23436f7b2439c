package console

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/application"
	"cardshop/domain"
)

// countingLedger counts the product list reads: one per reading of the dashboard.
type countingLedger struct {
	*memory.Ledger
	reads atomic.Int64
}

func (l *countingLedger) Products() domain.ProductCatalog {
	l.reads.Add(1)
	return l.Ledger.Products()
}

// TestOneSamplerServesEveryDashboard: fifty dashboards asking at once cost one reading, and a
// new reading is taken only once the last is older than the sampler's interval.
func TestOneSamplerServesEveryDashboard(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clock := memory.NewFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	queue := memory.NewDelayQueue(clock)
	t.Cleanup(queue.Close)
	signer, err := paysig.New("payment-secret-0123456789", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ledger := &countingLedger{Ledger: memory.NewLedger()}
	shop, err := application.New(application.DefaultConfig(), application.Deps{Ledger: ledger, Gate: memory.NewGate(clock),
		Queue: queue, Publisher: memory.NewPublisher(), Verifier: signer, Alerter: memory.NewAlerts(log), Clock: clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s := &sampler{catalogue: shop.Catalogue, every: 200 * time.Millisecond, log: log}
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v := s.get(context.Background()); v.Error != "" || v.At == "" {
				t.Errorf("snapshot %+v", v)
			}
		}()
	}
	wg.Wait()
	if n := ledger.reads.Load(); n != 1 {
		t.Fatalf("50 dashboards at once read the ledger %d times, want 1", n)
	}
	time.Sleep(250 * time.Millisecond)
	s.get(context.Background())
	s.get(context.Background())
	if n := ledger.reads.Load(); n != 2 {
		t.Fatalf("after the interval: %d readings, want 2", n)
	}
}
