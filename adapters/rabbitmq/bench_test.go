package rabbitmq_test

import (
	"context"
	"testing"
	"time"

	"cardshop/adapters/rabbitmq"
)

// BenchmarkScheduleClose measures confirmed publishes into a delay bucket from many
// goroutines sharing the default pool of 8 channels.
func BenchmarkScheduleClose(b *testing.B) {
	br := dial(b, rabbitmq.Config{})
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := br.ScheduleClose(ctx, newOrderNo(), time.Now().Add(time.Hour)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "publishes/s")
}
