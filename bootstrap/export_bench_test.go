package bootstrap_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"cardshop/adapters/memory"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/application"
	"cardshop/domain"
)

// BenchmarkExportOrdersMySQL exports the orders of one product from MariaDB as CSV, 10,000 and
// 100,000 of them, and reports the peak growth of the Go heap and of the process's resident
// memory while the export runs, beside its rows: an export reads ExportPageSize orders at a time
// and writes each page before the next, so the two peaks should be about the same (flat), ten
// times the rows notwithstanding. The orders are seeded once per database (bulk INSERTs,
// half of them paid through a provider) and kept for the next run.
//
//	go test ./bootstrap -run '^$' -bench BenchmarkExportOrdersMySQL -benchtime 1x
func BenchmarkExportOrdersMySQL(b *testing.B) {
	ctx := context.Background()
	dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, "cardshop_bench_export")
	porttest.RequireService(b, "MariaDB", err)
	db, err := mysqlstore.Open(dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	if _, err := mysqlstore.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	keys, hash := mysqlstore.GenerateKeyring()
	ring, err := mysqlstore.NewKeyring(keys, hash)
	if err != nil {
		b.Fatal(err)
	}
	ledger := mysqlstore.New(db, ring)
	reports, err := application.NewReports(ledger, ledger, memory.SystemClock{}, domain.Currency{})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10_000, 100_000} {
		product := domain.ProductID(910_000_000 + n)
		seedExportOrders(b, db, product, n)
		b.Run(fmt.Sprintf("orders=%d", n), func(b *testing.B) {
			var heap, rss int64
			for range b.N {
				w := &countingWriter{}
				h, r, rows := measurePeak(func() int {
					bw := bufio.NewWriterSize(w, 64<<10)
					rows, err := reports.ExportOrders(ctx, domain.ExportFilter{Product: product}, time.UTC, bw)
					if err == nil {
						err = bw.Flush()
					}
					if err != nil {
						b.Fatal(err)
					}
					return rows
				})
				if rows != n {
					b.Fatalf("exported %d rows, want %d", rows, n)
				}
				heap, rss = max(heap, h), max(rss, r)
				b.SetBytes(w.n.Load())
			}
			b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MB")
			fmt.Printf("export of %d orders: peak heap growth %.1f MiB, peak RSS growth %.1f MiB\n",
				n, float64(heap)/(1<<20), float64(rss)/(1<<20))
		})
	}
}

// countingWriter counts the bytes of the CSV and keeps none of them.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

// measurePeak runs f while sampling the Go heap in use and the resident set every
// millisecond, and returns their highest growth over what they were before it began.
func measurePeak(f func() int) (heap, rss int64, rows int) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0, rss0 := int64(ms.HeapInuse), residentBytes()
	var (
		peakHeap, peakRSS = heap0, rss0
		done              = make(chan struct{})
		wg                sync.WaitGroup
	)
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peakHeap, peakRSS = max(peakHeap, int64(ms.HeapInuse)), max(peakRSS, residentBytes())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	rows = f()
	close(done)
	wg.Wait()
	return peakHeap - heap0, peakRSS - rss0, rows
}

// residentBytes is the process's resident set (Linux's /proc/self/statm), 0 elsewhere.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// seedExportOrders gives product n orders, unless it has them already: created a second apart,
// every other one PAID through "epay" with a payment record, the others CLOSED.
func seedExportOrders(b *testing.B, db *bun.DB, product domain.ProductID, n int) {
	b.Helper()
	ctx := context.Background()
	var have int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE product_id = ?", int64(product)).Scan(&have); err != nil {
		b.Fatal(err)
	}
	if have == n {
		return
	}
	if _, err := db.ExecContext(ctx, "DELETE p FROM payments p JOIN orders o ON o.order_no = p.order_no WHERE o.product_id = ?", int64(product)); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM orders WHERE product_id = ?", int64(product)); err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	const batch = 2000
	for start := 0; start < n; start += batch {
		var orders, payments strings.Builder
		orders.WriteString("INSERT INTO orders (order_no, buyer_id, product_id, qty, unit_price, amount, idem_key, status, reason, " +
			"payment_ref, created_at, expires_at, paid_at, ended_at, updated_at) VALUES ")
		payments.WriteString("INSERT INTO payments (order_no, provider, provider_ref, amount, currency, status, qr_code, created_at, updated_at) VALUES ")
		paid := 0
		for i := start; i < min(start+batch, n); i++ {
			no := fmt.Sprintf("B%d-%09d", product, i)
			at := t0.Add(time.Duration(i) * time.Second).Format("2006-01-02 15:04:05")
			if i > start {
				orders.WriteString(",")
			}
			if i%2 == 0 {
				fmt.Fprintf(&orders, "('%s','buyer-%d',%d,1,1999,1999,NULL,'PAID','','ref-%s','%s','%s','%s',NULL,'%s')",
					no, i%977, product, no, at, at, at, at)
				if paid > 0 {
					payments.WriteString(",")
				}
				fmt.Fprintf(&payments, "('%s','epay','ref-%s',1999,'CNY','PAID','','%s','%s')", no, no, at, at)
				paid++
			} else {
				fmt.Fprintf(&orders, "('%s','buyer-%d',%d,1,1999,1999,NULL,'CLOSED','payment timeout','','%s','%s',NULL,'%s','%s')",
					no, i%977, product, at, at, at, at)
			}
		}
		if _, err := db.ExecContext(ctx, orders.String()); err != nil {
			b.Fatal(err)
		}
		if paid > 0 {
			if _, err := db.ExecContext(ctx, payments.String()); err != nil {
				b.Fatal(err)
			}
		}
	}
}
