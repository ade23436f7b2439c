package rabbitmq_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/lab/procstat"
	"cardshop/adapters/rabbitmq"
	"cardshop/domain"
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

// BenchmarkPublishInFlight publishes delivery events (confirmed, persistent, mandatory, into
// the events exchange and its quorum queue) with 8 and with 64 in flight on a pool of 64
// channels, as the outbox relay does, and reports what the broker spent on each: its CPU time
// (utime+stime of the local beam.smp, read from /proc; the metric is left out when no local
// broker process is readable) over the messages. A quorum queue's Raft log commits what
// arrives together, so its CPU per message falls steeply with the messages in flight
// (docs/BENCHMARKS.md: ~240 µs with 8, ~93 µs with 64, on 2 cores).
func BenchmarkPublishInFlight(b *testing.B) {
	for _, inFlight := range []int{8, 64} {
		b.Run(fmt.Sprintf("in-flight=%d", inFlight), func(b *testing.B) {
			br := dial(b, rabbitmq.Config{Channels: 64})
			ctx := context.Background()
			var next atomic.Int64
			cpu0, cpuOK := brokerCPU()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range inFlight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						m := domain.OutboxMessage{ID: next.Load(), Topic: domain.TopicDelivered, Key: "bench",
							Payload: []byte(`{"order_no":"2612040412341234123456789012","product_id":1,"qty":1}`)}
						if err := br.Publish(ctx, m); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start).Seconds()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed, "msgs/s")
			if cpu1, ok := brokerCPU(); cpuOK && ok {
				b.ReportMetric((cpu1-cpu0)/float64(b.N)*1e6, "broker-µs/msg")
			}
		})
	}
}

// brokerCPU is the CPU seconds the local RabbitMQ node (beam.smp) has used, if it can be read.
func brokerCPU() (float64, bool) {
	matches, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, path := range matches {
		comm, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(comm)) != "beam.smp" {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			return 0, false
		}
		cpu, err := procstat.CPU(pid)
		return cpu, err == nil
	}
	return 0, false
}
