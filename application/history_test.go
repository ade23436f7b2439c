package application_test

import (
	"testing"
	"time"

	"cardshop/adapters/lab/historytest"
	"cardshop/adapters/memory"
	"cardshop/application"
)

// TestConcurrentHistory runs the concurrent history test (package historytest) on the memory
// adapters: workers placing, paying (once, twice, k times at once, late, underpaid; through the
// callback or two in-process providers' notifications), failing, expiring, sweeping, refunding
// (at the providers too, pending and finished by notification), fulfilling, revealing,
// freezing, repairing, importing and relaying at the same time, with every invariant checked at
// each checkpoint. HISTORY_SEED replays a run's
// operation streams; `make soak` runs it for longer.
func TestConcurrentHistory(t *testing.T) {
	historytest.Run(t, historytest.Backend{Name: "memory", Package: "./application/", Duration: 15 * time.Second,
		Open: func(t *testing.T, cfg application.Config) historytest.Ports {
			clock := &memory.SystemClock{}
			queue := memory.NewDelayQueue(clock)
			t.Cleanup(queue.Close)
			return historytest.Ports{Ledger: memory.NewLedger(), Gate: memory.NewGate(clock), Queue: queue,
				Publisher: memory.NewPublisher(), Clock: clock, Consume: queue.Consume}
		}})
}
