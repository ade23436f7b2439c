package porttest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"cardshop/domain"
)

// NewProductID returns a random product id in [1e6, 9e15), unlikely to collide with any
// product another test or run has used.
func NewProductID() domain.ProductID {
	const lo, hi = 1_000_000, 9_000_000_000_000_000
	return domain.ProductID(lo + rand.Int64N(hi-lo))
}

func newBuyer() domain.BuyerID { return domain.BuyerID(fmt.Sprintf("pt-%016x", rand.Uint64())) }

func newKey() domain.IdempotencyKey {
	return domain.IdempotencyKey(fmt.Sprintf("ptk-%016x", rand.Uint64()))
}

// newOrderNo returns a random order number in the service's own format (24 digits).
func newOrderNo() domain.OrderNo { return domain.NewOrderNo(time.Now(), "porttest", rand.Uint64()) }

// now is the test's wall time at a precision every database keeps.
func now() time.Time { return time.Now().UTC().Truncate(time.Second) }

// parallel runs n calls of f at once (released together, to make them race) and waits.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}
