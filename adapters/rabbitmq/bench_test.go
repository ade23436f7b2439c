package rabbitmq_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"cardshop/adapters/rabbitmq"
)

// BenchmarkScheduleClose measures confirmed ScheduleClose calls into a delay bucket from many
// goroutines sharing the default pool of 8 channels: publishes/s counts the calls (orders
// scheduled), msgs/s the messages the broker had to store, which is what costs it CPU. With
// few callers a call waits the batch's linger, alone; with many (the service under load) the
// calls share messages.
func BenchmarkScheduleClose(b *testing.B) {
	for _, callers := range []int{runtime.GOMAXPROCS(0), 200} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			br := dial(b, rabbitmq.Config{})
			ctx := context.Background()
			b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			msgs := br.TimeoutMessages()
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
			elapsed := time.Since(start).Seconds()
			msgs = br.TimeoutMessages() - msgs
			b.ReportMetric(float64(b.N)/elapsed, "publishes/s")
			b.ReportMetric(float64(msgs)/elapsed, "msgs/s")
			b.ReportMetric(float64(b.N)/float64(max(msgs, 1)), "orders/msg")
		})
	}
}
