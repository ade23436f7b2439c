package application

import (
	"sync"
	"sync/atomic"
	"time"

	"cardshop/domain"
)

// RateStep is the width of one interval of the dashboard's rate series, and RateIntervals how
// many intervals a series holds: five minutes.
const (
	RateStep      = 5 * time.Second
	RateIntervals = 60
)

// ringSlots is how many intervals an answerRing remembers: more than RateIntervals, so that the
// slot a counter is writing (the current interval) is never one a reader asks for.
const ringSlots = 64

// answerRing counts one kind of answer per RateStep interval, for the last ringSlots intervals.
// Each slot is one atomic word holding the interval's number (Unix time / RateStep) in the high
// 32 bits and its count in the low 32: counting is a load and a compare-and-swap, with no lock
// and no allocation, and a slot left from an older interval restarts at 1 in the same swap.
type answerRing [ringSlots]atomic.Uint64

func (r *answerRing) add(interval uint32) {
	slot := &r[interval%ringSlots]
	for {
		old := slot.Load()
		next := uint64(interval)<<32 | 1
		if uint32(old>>32) == interval {
			next = old + 1
		}
		if slot.CompareAndSwap(old, next) {
			return
		}
	}
}

func (r *answerRing) count(interval uint32) int64 {
	v := r[interval%ringSlots].Load()
	if uint32(v>>32) != interval {
		return 0
	}
	return int64(uint32(v)) //nolint:gosec // G115: the low half holds the count
}

// intervalOf numbers the RateStep interval holding t.
func intervalOf(t time.Time) uint32 { return uint32(t.Unix() / int64(RateStep/time.Second)) } //nolint:gosec // G115: interval numbers wrap by design

// answerRates holds this instance's rings of sold-out answers, one per product asked for.
type answerRates struct {
	soldOut sync.Map // domain.ProductID -> *answerRing
}

// countSoldOut counts a sold-out answer for p at now. After the product's first one it is a
// map read and an atomic add.
func (a *answerRates) countSoldOut(p domain.ProductID, now time.Time) {
	r, ok := a.soldOut.Load(p)
	if !ok {
		r, _ = a.soldOut.LoadOrStore(p, new(answerRing))
	}
	r.(*answerRing).add(intervalOf(now))
}

// RateSeries is one count per RateStep interval, oldest first: From is the start of the first
// interval, and the last interval is the last one complete at the time asked (the running one
// is left out, so a series never ends in a half-counted interval).
type RateSeries struct {
	From   time.Time
	Counts []int64
}

// PerSecond returns the series' counts as rates per second.
func (s RateSeries) PerSecond() []float64 {
	out := make([]float64, len(s.Counts))
	for i, n := range s.Counts {
		out[i] = float64(n) / RateStep.Seconds()
	}
	return out
}

// rateWindow returns the start of the RateIntervals complete intervals before the one holding
// now, and the number of the first.
func rateWindow(now time.Time) (time.Time, uint32) {
	first := intervalOf(now) - RateIntervals
	return time.Unix(int64(first)*int64(RateStep/time.Second), 0).UTC(), first
}

// SoldOutAnswers returns how many sold-out answers THIS instance gave for p in each of the last
// RateIntervals complete RateStep intervals. The answers of other instances are not in it: a
// sold-out answer touches only the gate, never the ledger, so no shared record of it exists.
func (s *Sales) SoldOutAnswers(p domain.ProductID) RateSeries {
	return s.soldOutAnswers(p, s.clock.Now())
}

func (s *stock) soldOutAnswers(p domain.ProductID, now time.Time) RateSeries {
	from, first := rateWindow(now)
	out := RateSeries{From: from, Counts: make([]int64, RateIntervals)}
	if r, ok := s.rates.soldOut.Load(p); ok {
		for i := range out.Counts {
			out.Counts[i] = r.(*answerRing).count(first + uint32(i))
		}
	}
	return out
}
