package memory

import "sync"

// recorder keeps copies of what a test double is given, in order, and can be told to fail
// the next calls: the shared part of Publisher and Notifier.
type recorder[T any] struct {
	mu       sync.Mutex
	items    []T
	failNext int
	calls    int
	copy     func(T) T
}

// record counts a call and keeps a copy of v; it returns false, keeping nothing, while
// failures injected by FailNext remain.
func (r *recorder[T]) record(v T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.failNext > 0 {
		r.failNext--
		return false
	}
	r.items = append(r.items, r.copy(v))
	return true
}

// all returns copies of what was kept, in order.
func (r *recorder[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]T, len(r.items))
	for i, v := range r.items {
		out[i] = r.copy(v)
	}
	return out
}

// FailNext makes the next n calls fail.
func (r *recorder[T]) FailNext(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failNext = n
}

// Attempts counts every call, failed ones included.
func (r *recorder[T]) Attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}
