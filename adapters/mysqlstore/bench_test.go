package mysqlstore_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/mysqlstore"
	"cardshop/domain"
)

// benchGoroutines is how many payments run at once on the one product.
const benchGoroutines = 16

func setParallelism(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((benchGoroutines + procs - 1) / procs)
}

// benchPool creates a product with n codes and n PENDING orders of one code each.
func benchPool(b *testing.B, l domain.Ledger, n int) (domain.ProductID, []domain.Order) {
	b.Helper()
	ctx := context.Background()
	p := createProduct(b, l)
	importN(b, l, p, n)
	prod, err := l.Products().Product(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	orders := make([]domain.Order, n)
	for start := 0; start < n; start += 500 {
		err := l.Atomically(ctx, func(tx domain.Store) error {
			for i := start; i < min(start+500, n); i++ {
				o, err := domain.NewOrder(orderNo(), "bench-buyer", prod, 1, domain.IdempotencyKey("bench-"+orderNo()),
					time.Now().UTC(), 15*time.Minute)
				if err != nil {
					return err
				}
				if err := tx.Orders().Insert(ctx, o); err != nil {
					return err
				}
				orders[i] = o
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return p, orders
}

// BenchmarkPayTx measures the payment transaction at 16 concurrent payments of one product:
// "core" is the conditional UPDATE of the order, the SELECT … FOR UPDATE SKIP LOCKED of a code
// and the UPDATE that sells it; "full" adds the flow row and the outbox message, as the pay
// callback writes them.
func BenchmarkPayTx(b *testing.B) {
	for _, bc := range []struct {
		name    string
		withLog bool
	}{{"core", false}, {"full", true}} {
		b.Run(bc.name, func(b *testing.B) {
			l := newLedger(b)
			b.Cleanup(func() { markTestMessagesSent(b) })
			_, orders := benchPool(b, l, b.N)
			var next atomic.Int64
			setParallelism(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					o := orders[next.Add(1)-1]
					if _, err := pay(context.Background(), l, o, bc.withLog); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st := l.Stats()
			b.ReportMetric(float64(st.Retries)/float64(b.N), "retries/op")
			b.ReportMetric(float64(st.Deadlocks)/float64(b.N), "deadlocks/op")
		})
	}
}

// BenchmarkAllocate measures Allocate of one code in its own transaction, 16 at once on one
// product.
func BenchmarkAllocate(b *testing.B) {
	l := newLedger(b)
	p := createProduct(b, l)
	importN(b, l, p, b.N)
	setParallelism(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Cards().Allocate(context.Background(), p, orderNo(), 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(l.Stats().Retries)/float64(b.N), "retries/op")
}

// BenchmarkPlaceTx measures the ledger write of placing an order (the order and its reserve
// flow row), 64 at once: "single" one transaction each, "batching" through a BatchingLedger of
// 4 lanes, whose batch-size/op reports the mean batch.
func BenchmarkPlaceTx(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch bool
	}{{"single", false}, {"batching", true}} {
		b.Run(bc.name, func(b *testing.B) {
			plain := newLedger(b)
			var l domain.Ledger = plain
			obs := &batchCounts{}
			if bc.batch {
				l = mysqlstore.NewBatching(plain, mysqlstore.BatchConfig{Lanes: 4, Observer: obs})
			}
			prod, err := l.Products().Product(context.Background(), createProduct(b, l))
			if err != nil {
				b.Fatal(err)
			}
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((64 + procs - 1) / procs)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					o, err := domain.NewOrder(orderNo(), "bench-buyer", prod, 1, domain.IdempotencyKey("bench-"+orderNo()),
						time.Now().UTC(), 15*time.Minute)
					if err == nil {
						err = place(context.Background(), l, o)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			if sizes, _, _ := obs.snapshot(); len(sizes) > 0 {
				total := 0
				for _, n := range sizes {
					total += n
				}
				b.ReportMetric(float64(total)/float64(len(sizes)), "batch-size/op")
			}
		})
	}
}
