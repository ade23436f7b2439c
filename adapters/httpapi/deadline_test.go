package httpapi

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The request's context reports its deadline without a timer, ends at it for anything that
// waits on it, and ends when the request does.
func TestLazyDeadlineEndsAtTheDeadlineAndWithTheRequest(t *testing.T) {
	ctx := withLazyDeadline(context.Background(), 50*time.Millisecond)
	if at, ok := ctx.Deadline(); !ok || time.Until(at) > 50*time.Millisecond {
		t.Fatalf("Deadline() = %v, %v", at, ok)
	}
	if err := ctx.Err(); err != nil || ctx.timed.Load() != nil {
		t.Fatalf("Err() = %v before the deadline, timer made: %v", err, ctx.timed.Load() != nil)
	}
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	select {
	case <-derived.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("a context derived from the request's did not end at its deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(derived.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, derived %v; want DeadlineExceeded", ctx.Err(), derived.Err())
	}

	// Nothing waited: Err tells the deadline from the clock.
	quiet := withLazyDeadline(context.Background(), time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	if !errors.Is(quiet.Err(), context.DeadlineExceeded) || quiet.timed.Load() != nil {
		t.Fatalf("Err() = %v after the deadline with nothing waiting", quiet.Err())
	}

	// The request ended before its deadline: waiters are told, before or after release.
	req := withLazyDeadline(context.Background(), time.Hour)
	before := req.Done()
	req.release()
	select {
	case <-before:
	case <-time.After(time.Second):
		t.Fatal("release did not end a wait that began before it")
	}
	late := withLazyDeadline(context.Background(), time.Hour)
	late.release()
	if !errors.Is(late.Err(), context.Canceled) {
		t.Fatalf("Err() after release = %v, want Canceled", late.Err())
	}
	select {
	case <-late.Done():
	case <-time.After(time.Second):
		t.Fatal("a wait that began after release did not end")
	}
}

// A parent's earlier deadline and its cancellation carry through.
func TestLazyDeadlineKeepsTheParentsEarlierDeadlineAndCancellation(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ctx := withLazyDeadline(parent, time.Hour)
	if at, _ := ctx.Deadline(); time.Until(at) > 20*time.Millisecond {
		t.Fatalf("Deadline() = %v, want the parent's (20 ms)", time.Until(at))
	}
	p2, cancel2 := context.WithCancel(context.Background())
	ctx2 := withLazyDeadline(p2, time.Hour)
	cancel2()
	if !errors.Is(ctx2.Err(), context.Canceled) {
		t.Fatalf("Err() = %v after the parent was cancelled", ctx2.Err())
	}
	<-ctx2.Done()
	if ctx2.Value(struct{}{}) != nil {
		t.Fatal("Value of an unknown key")
	}
}

// What a request pays for its deadline when nothing waits on it (a sold-out answer under a
// lease): context.WithTimeout makes a timer every time; the lazy context makes none.
func BenchmarkRequestDeadline(b *testing.B) {
	b.Run("WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = ctx.Err()
			cancel()
		}
	})
	b.Run("lazy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx := withLazyDeadline(context.Background(), 5*time.Second)
			_ = ctx.Err()
			ctx.release()
		}
	})
}
