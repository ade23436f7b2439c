package redisgate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/porttest"
	"cardshop/adapters/porttest/redistest"
	"cardshop/adapters/redisgate"
	"cardshop/domain"
)

// Redis replicates asynchronously: a primary that dies takes with it the reservations it
// answered but had not yet sent to its replica, and the replica Sentinel promotes then has
// more stock than the ledger allows. With WithReplicaAcks no reservation is answered Reserved
// before the replica has it, so the promoted replica holds every reservation a buyer was told
// about. The primary is partitioned from its replica and the Sentinel (a proxy they reach it
// through is cut) before the last reservations, which a client on the primary's own address
// still makes, so that they never reach the replica; then the Sentinel promotes the replica
// and the primary is killed. Without replica acks the loss must show (else the test could not
// tell the two apart).
func TestFailoverKeepsEveryAcknowledgedReservation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		acks     int
		wantLoss bool
	}{
		{"without replica acks the promoted replica lacks some", 0, true},
		{"with replica acks it holds every one", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := redistest.StartFailover(t, true)
			ctx := t.Context()
			primary := redis.NewClient(&redis.Options{Addr: f.Primary})
			t.Cleanup(func() { _ = primary.Close() })
			g := redisgate.New(primary).WithReplicaAcks(tc.acks, 100*time.Millisecond)
			const p = domain.ProductID(7)
			if err := g.Rebuild(ctx, p, domain.GateLevels{Stock: 1000}); err != nil {
				t.Fatal(err)
			}
			replica := redis.NewClient(&redis.Options{Addr: f.Replica})
			t.Cleanup(func() { _ = replica.Close() })
			waitFor(t, "the product on the replica", func() bool {
				v, err := replica.Get(ctx, redisgate.StockKey(p)).Result()
				return err == nil && v == "1000"
			})
			res := func(i int) domain.Reservation {
				return domain.Reservation{Product: p, Buyer: "buyer", Key: domain.IdempotencyKey(fmt.Sprintf("k%d", i)), Qty: 1,
					OrderNo: domain.OrderNo(fmt.Sprintf("o%d", i)), Fingerprint: domain.RequestFingerprint(p, 1), KeyTTL: time.Hour}
			}
			var mu sync.Mutex
			acked, refused := map[int]bool{}, 0
			reserve := func(from, to int) {
				var wg sync.WaitGroup
				for i := from; i < to; i++ {
					wg.Go(func() {
						out, err := g.Reserve(ctx, res(i))
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil && out.Outcome == domain.Reserved:
							acked[i] = true
						case errors.Is(err, domain.ErrUnavailable) && errors.Is(err, redisgate.ErrNotReplicated):
							refused++
						default:
							t.Errorf("reservation %d: %+v, %v", i, out, err)
						}
					})
				}
				wg.Wait()
			}
			reserve(0, 30)
			if len(acked) != 30 {
				t.Fatalf("before the cut: %d of 30 reserved", len(acked))
			}
			f.Link.Cut()
			reserve(30, 60)
			f.KillPrimary()
			f.WaitPromoted(t)

			// On the promoted replica, a reservation that survived answers its replay.
			promoted := redisgate.New(replica)
			lost := 0
			for i := range acked {
				out, err := promoted.Reserve(ctx, res(i))
				if err != nil {
					t.Fatalf("replay of %d on the promoted replica: %v", i, err)
				}
				if out.Outcome != domain.Replayed {
					lost++
				}
			}
			t.Logf("acknowledged %d, refused as not replicated %d, lost at the failover %d", len(acked), refused, lost)
			if tc.wantLoss {
				if lost == 0 {
					t.Fatal("no acknowledged reservation was lost without replica acks: the test does not reproduce the hazard")
				}
				return
			}
			if lost != 0 {
				t.Fatalf("%d acknowledged reservations lost at the failover", lost)
			}
			if refused != 30 {
				t.Errorf("reservations after the cut refused: %d, want 30 (none may be answered Reserved)", refused)
			}
		})
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkReserveFailoverSet measures reservations of one hot product on a primary with a
// replica behind Sentinel, through the failover client, with and without the replica's
// acknowledgement of each (what CARDSHOP_REDIS_REPLICA_ACKS costs), auto-pipelined or not.
func BenchmarkReserveFailoverSet(b *testing.B) {
	f := redistest.StartFailover(b, false)
	c := f.Client(b)
	ap, err := redisgate.AutoPipeliner(c)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		g    *redisgate.Gate
	}{
		{"acks=0/autopipeline", redisgate.New(c).WithAutoPipeline(ap)},
		{"acks=0/plain", redisgate.New(c)},
		{"acks=1", redisgate.New(c).WithReplicaAcks(1, 100*time.Millisecond)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := porttest.NewProductID()
			if err := bc.g.Rebuild(b.Context(), p, domain.GateLevels{Stock: 1 << 40}); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := newReservation(p, 1)
					r.KeyTTL = 30 * time.Second
					if res, err := bc.g.Reserve(context.Background(), r); err != nil || res.Outcome != domain.Reserved {
						b.Errorf("Reserve = %+v, %v", res, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// With replica acks, a reservation that finds its own claim (go-redis re-sent the pipeline
// after a lost reply, so the first run reserved) cannot know that the first run reached a
// replica: WAIT on the re-sent pipeline's connection covers only that connection's writes,
// and it wrote nothing. It is refused as not replicated (the application gives it back);
// the replay of another order's claim (a buyer's retry) still answers Replayed.
func TestReplicaAcksRefuseAReplayOfTheirOwnClaim(t *testing.T) {
	c := standalone(t)
	ctx := t.Context()
	p := porttest.NewProductID()
	if err := redisgate.New(c).Rebuild(ctx, p, domain.GateLevels{Stock: 5}); err != nil {
		t.Fatal(err)
	}
	r := newReservation(p, 1)
	if res, err := redisgate.New(c).Reserve(ctx, r); err != nil || res.Outcome != domain.Reserved {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	acked := redisgate.New(c).WithReplicaAcks(1, 10*time.Millisecond)
	_, err := acked.Reserve(ctx, r)
	if !errors.Is(err, redisgate.ErrNotReplicated) || !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("re-sent run with replica acks: %v, want ErrNotReplicated wrapping ErrUnavailable", err)
	}
	retry := r
	retry.OrderNo = r.OrderNo + "-retry"
	res, err := acked.Reserve(ctx, retry)
	if err != nil || res.Outcome != domain.Replayed || res.ExistingOrder != r.OrderNo {
		t.Fatalf("a buyer's retry with replica acks: %+v, %v; want Replayed of %s", res, err, r.OrderNo)
	}
}
