package application

import (
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

func TestAnswerRingCountsPerIntervalAndForgetsOldOnes(t *testing.T) {
	var a answerRates
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				a.countSoldOut(7, t0)
			}
		}()
	}
	wg.Wait()
	a.countSoldOut(7, t0.Add(RateStep))
	r, _ := a.soldOut.Load(domain.ProductID(7))
	ring := r.(*answerRing)
	if got := ring.count(intervalOf(t0)); got != 8000 {
		t.Fatalf("count of the first interval = %d, want 8000 (every racing add counted)", got)
	}
	if got := ring.count(intervalOf(t0) + 1); got != 1 {
		t.Fatalf("count of the second interval = %d, want 1", got)
	}
	// ringSlots intervals later the first interval's slot is reused: it starts again at 1 and
	// the old interval reads 0.
	later := t0.Add(ringSlots * RateStep)
	a.countSoldOut(7, later)
	if got := ring.count(intervalOf(later)); got != 1 {
		t.Fatalf("count of the reused slot = %d, want 1", got)
	}
	if got := ring.count(intervalOf(t0)); got != 0 {
		t.Fatalf("count of the forgotten interval = %d, want 0", got)
	}
}

// BenchmarkCountSoldOut measures what counting adds to a sold-out answer: a map read and a
// compare-and-swap, with no allocation.
func BenchmarkCountSoldOut(b *testing.B) {
	var a answerRates
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a.countSoldOut(7, now)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.countSoldOut(7, now)
		}
	})
}
