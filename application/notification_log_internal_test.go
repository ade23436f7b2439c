package application

import (
	"testing"
	"time"

	"cardshop/domain"
)

// A flood of refusals logs one line per refusedLogEvery, and the lines together stand for
// every refusal; the tracked addresses stay within their bound.
func TestRefusedNotificationsAreLoggedAtARateLimitedPace(t *testing.T) {
	var r refusedNotices
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	const sent, addresses = 6000, 10
	lines, logged := 0, int64(0)
	for i := range sent {
		rec := domain.NotificationRecord{Provider: "acme", At: at.Add(time.Duration(i) * 10 * time.Millisecond), // 60 s in all
			Remote: string(rune('a' + i%26))}
		step := r.add(rec, RefusedBadSignature, time.Minute, addresses)
		if step.log > 0 {
			lines++
			logged += step.log
		}
		if n := r.tracked(); n > addresses+1 {
			t.Fatalf("%d addresses tracked, want at most %d and the shared one", n, addresses)
		}
	}
	if lines != 6 {
		t.Fatalf("%d log lines for 60 s of refusals, want one per %s (6)", lines, refusedLogEvery)
	}
	if pending := r.quiet; logged+pending != sent {
		t.Fatalf("the log lines stand for %d refusals and %d wait for the next, want %d in all", logged, pending, sent)
	}
}
