package memory_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"cardshop/adapters/memory"
	"cardshop/domain"
)

// TestGateConservesUnits runs random reservations, cancels, stock-ins and clock moves against
// the gate and checks, after every step, that no unit is created or lost and that a key replays
// exactly while its claim lives.
func TestGateConservesUnits(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clock := memory.NewFakeClock(t0)
		g := memory.NewGate(clock)
		const p = domain.ProductID(7)
		initial := rapid.Int64Range(0, 20).Draw(rt, "stock")
		_ = g.Rebuild(ctx, p, domain.GateLevels{Stock: initial})

		type taken struct {
			r         domain.Reservation
			expiresAt time.Time
			cancelled bool
		}
		var reservations []*taken
		total := initial // stock + sold
		liveClaim := func(r domain.Reservation) *taken {
			for _, tk := range reservations {
				if !tk.cancelled && tk.r.Buyer == r.Buyer && tk.r.Key == r.Key && clock.Now().Before(tk.expiresAt) {
					return tk
				}
			}
			return nil
		}

		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0: // reserve
				qty := rapid.IntRange(1, 4).Draw(rt, "qty")
				r := domain.Reservation{Product: p, Qty: qty, KeyTTL: time.Minute,
					Buyer:   domain.BuyerID(fmt.Sprint("b", rapid.IntRange(0, 2).Draw(rt, "buyer"))),
					Key:     domain.IdempotencyKey(fmt.Sprint("key-", rapid.IntRange(0, 2).Draw(rt, "key"))),
					OrderNo: domain.OrderNo(fmt.Sprint("o", step))}
				before, _, _ := g.Levels(ctx, p)
				res, err := g.Reserve(ctx, r)
				if err != nil {
					rt.Fatal(err)
				}
				switch claim := liveClaim(r); {
				case claim != nil:
					if res.Outcome != domain.Replayed || res.ExistingOrder != claim.r.OrderNo {
						rt.Fatalf("Reserve with a live claim = %+v, want Replayed of %s", res, claim.r.OrderNo)
					}
				case before.Stock < int64(qty):
					if res.Outcome != domain.SoldOut {
						rt.Fatalf("Reserve %d of %d = %+v, want SoldOut", qty, before.Stock, res)
					}
				default:
					if res.Outcome != domain.Reserved {
						rt.Fatalf("Reserve %d of %d = %+v, want Reserved", qty, before.Stock, res)
					}
					reservations = append(reservations, &taken{r: r, expiresAt: clock.Now().Add(time.Minute)})
				}
			case 1: // cancel one of the reservations taken
				if len(reservations) == 0 {
					continue
				}
				tk := reservations[rapid.IntRange(0, len(reservations)-1).Draw(rt, "which")]
				want := !tk.cancelled && clock.Now().Before(tk.expiresAt)
				r := tk.r
				r.Qty = rapid.IntRange(1, 4).Draw(rt, "cancel qty") // the claim knows the qty taken
				if got, _ := g.Cancel(ctx, r); got != want {
					rt.Fatalf("Cancel = %v, want %v", got, want)
				}
				if want {
					tk.cancelled = true
				}
			case 2: // stock-in
				n := rapid.Int64Range(0, 5).Draw(rt, "in")
				applied, _ := g.Apply(ctx, domain.GateChange{Product: p, Ref: fmt.Sprint("batch-", step), Stock: n})
				if !applied {
					rt.Fatal("a fresh ref was not applied")
				}
				total += n
			case 3:
				clock.Advance(time.Duration(rapid.IntRange(0, 90).Draw(rt, "seconds")) * time.Second)
			}

			l, ok, _ := g.Levels(ctx, p)
			var held int64
			for _, tk := range reservations {
				if !tk.cancelled {
					held += int64(tk.r.Qty)
				}
			}
			if !ok || l.Stock < 0 || l.Stock+l.Sold != total || l.Sold != held {
				rt.Fatalf("levels %+v: want stock >= 0, stock+sold = %d, sold = %d", l, total, held)
			}
		}
	})
}

// snapshot is everything a reader can see of a small ledger.
type snapshot struct {
	Products []domain.ProductRecord
	Counts   map[domain.ProductID]domain.CardCounts
	Orders   map[domain.ProductID]map[domain.OrderStatus]domain.StatusTotal
	Flows    map[domain.ProductID]domain.FlowTotals
	Cards    map[domain.OrderNo][]domain.Card
	Records  map[domain.OrderNo]domain.OrderRecord // status, RevealedAt and the rest of each order
	Entries  map[string][]domain.FlowEntry
	Expired  []domain.OrderNo
	Pending  []domain.OutboxMessage
	Backlog  int64
	Sellable map[domain.ProductID]error // allocating every sellable code, in a rolled-back probe
}

const propProducts, propOrders = 3, 4

func takeSnapshot(t *rapid.T, l *memory.Ledger) snapshot {
	ctx := context.Background()
	s := snapshot{Counts: map[domain.ProductID]domain.CardCounts{},
		Orders: map[domain.ProductID]map[domain.OrderStatus]domain.StatusTotal{},
		Flows:  map[domain.ProductID]domain.FlowTotals{}, Cards: map[domain.OrderNo][]domain.Card{},
		Records: map[domain.OrderNo]domain.OrderRecord{}, Entries: map[string][]domain.FlowEntry{}}
	ps, _ := l.Products().Products(ctx)
	for _, p := range ps {
		s.Products = append(s.Products, p.Record())
	}
	for p := domain.ProductID(1); p <= propProducts; p++ {
		s.Counts[p], _ = l.Cards().Counts(ctx, p)
		s.Orders[p], _ = l.Orders().Totals(ctx, p)
		s.Flows[p], _ = l.Flows().Totals(ctx, p)
	}
	s.Sellable = map[domain.ProductID]error{}
	for p := domain.ProductID(1); p <= propProducts; p++ {
		n := int(s.Counts[p][domain.CardUnsold] + s.Counts[p][domain.CardRecycled])
		if n == 0 {
			continue
		}
		_ = l.Atomically(ctx, func(tx domain.Store) error {
			_, s.Sellable[p] = tx.Cards().Allocate(ctx, p, "probe", n)
			return errRollback
		})
	}
	for i := range propOrders {
		no := domain.OrderNo(fmt.Sprint("o", i))
		s.Cards[no], _ = l.Cards().Cards(ctx, no)
		if o, err := l.Orders().Order(ctx, no); err == nil {
			s.Records[no] = o.Record()
		}
		s.Entries[string(no)], _ = l.Flows().Entries(ctx, string(no))
	}
	expired, _ := l.Orders().Expired(ctx, t0.Add(24*time.Hour), 100)
	for _, o := range expired {
		s.Expired = append(s.Expired, o.No())
	}
	sort.Slice(s.Expired, func(i, j int) bool { return s.Expired[i] < s.Expired[j] })
	s.Pending, _ = l.Outbox().Pending(ctx, t0.AddDate(1, 0, 0), 1000)
	s.Backlog, _ = l.Outbox().Backlog(ctx)
	return s
}

// TestLedgerRollbackLeavesNothing runs random transactions over a small ledger; each either
// commits or fails at a random point, and a failed one must leave the ledger exactly as it was.
func TestLedgerRollbackLeavesNothing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		l := memory.NewLedger()
		codes := func() []domain.CardCode {
			n := rapid.IntRange(0, 4).Draw(rt, "codes")
			out := make([]domain.CardCode, n)
			for i := range out {
				out[i] = domain.RehydrateCardCode(fmt.Sprint("CODE-", rapid.IntRange(0, 9).Draw(rt, "code")))
			}
			return out
		}
		ops := []func(tx domain.Store){
			func(tx domain.Store) {
				id := domain.ProductID(rapid.IntRange(0, propProducts).Draw(rt, "product"))
				p, _ := domain.NewProduct(id, "p", 100, 5, t0)
				_, _ = tx.Products().Create(ctx, p)
			},
			func(tx domain.Store) {
				_ = tx.Products().SetFrozen(ctx, drawProduct(rt), rapid.Bool().Draw(rt, "frozen"), "r")
			},
			func(tx domain.Store) { _, _ = tx.Cards().Import(ctx, drawProduct(rt), codes(), 1) },
			func(tx domain.Store) {
				_, _ = tx.Cards().Allocate(ctx, drawProduct(rt), drawOrder(rt), rapid.IntRange(1, 3).Draw(rt, "qty"))
			},
			func(tx domain.Store) {
				to := rapid.SampledFrom([]domain.CardStatus{domain.CardRecycled, domain.CardVoid}).Draw(rt, "to")
				_, _ = tx.Cards().Reclaim(ctx, drawOrder(rt), to)
			},
			func(tx domain.Store) {
				p, _ := domain.NewProduct(drawProduct(rt), "p", 100, 5, t0)
				o, _ := domain.NewOrder(drawOrder(rt), "buyer", p, rapid.IntRange(1, 5).Draw(rt, "qty"),
					domain.IdempotencyKey(fmt.Sprint("key-", rapid.IntRange(0, 3).Draw(rt, "key"))), t0, time.Minute)
				_ = tx.Orders().Insert(ctx, o)
			},
			func(tx domain.Store) {
				o, err := tx.Orders().Order(ctx, drawOrder(rt))
				if err != nil {
					return
				}
				from := o.Status()
				if o.Close(t0.Add(time.Hour)) == nil {
					_, _ = tx.Orders().Transition(ctx, o, from)
				}
			},
			func(tx domain.Store) { // pay, reveal or refund: the transitions a reveal takes part in
				o, err := tx.Orders().Order(ctx, drawOrder(rt))
				if err != nil {
					return
				}
				from := o.Status()
				switch {
				case from != domain.StatusPaid:
					if o.MarkPaid(t0.Add(time.Minute), o.Amount(), "pay") == nil {
						_, _ = tx.Orders().Transition(ctx, o, from)
					}
				case rapid.Bool().Draw(rt, "reveal"):
					_, _ = tx.Orders().MarkRevealed(ctx, o.No(), t0.Add(2*time.Minute))
				default:
					if o.Refund(t0.Add(3*time.Minute), "refund") == nil {
						_, _ = tx.Orders().Transition(ctx, o, from)
					}
				}
			},
			func(tx domain.Store) {
				_ = tx.Flows().Append(ctx, domain.FlowEntry{ProductID: drawProduct(rt), Ref: string(drawOrder(rt)),
					Type: domain.FlowType(rapid.IntRange(1, 10).Draw(rt, "type")), Qty: 1, At: t0})
			},
			func(tx domain.Store) {
				_ = tx.Outbox().Add(ctx, domain.OutboxMessage{Topic: "t", Key: "k", Payload: []byte("x"), At: t0})
			},
			func(tx domain.Store) {
				pending, _ := tx.Outbox().Pending(ctx, t0.AddDate(1, 0, 0), 1)
				if len(pending) == 1 {
					if rapid.Bool().Draw(rt, "sent") {
						_ = tx.Outbox().MarkSent(ctx, t0, pending[0].ID)
					} else {
						_ = tx.Outbox().MarkFailed(ctx, pending[0].ID, t0.Add(time.Minute))
					}
				}
			},
		}
		for range rapid.IntRange(1, 15).Draw(rt, "transactions") {
			fail := rapid.Bool().Draw(rt, "fail")
			before := takeSnapshot(rt, l)
			err := l.Atomically(ctx, func(tx domain.Store) error {
				for range rapid.IntRange(0, 8).Draw(rt, "ops") {
					ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "op")](tx)
				}
				if fail {
					return errRollback
				}
				return nil
			})
			if fail != (err != nil) {
				rt.Fatalf("Atomically = %v, fail %v", err, fail)
			}
			if after := takeSnapshot(rt, l); fail && !reflect.DeepEqual(before, after) {
				rt.Fatalf("a failed transaction changed the ledger:\nbefore %+v\nafter  %+v", before, after)
			}
		}
	})
}

var errRollback = fmt.Errorf("roll back")

func drawProduct(t *rapid.T) domain.ProductID {
	return domain.ProductID(rapid.IntRange(1, propProducts).Draw(t, "product"))
}

func drawOrder(t *rapid.T) domain.OrderNo {
	return domain.OrderNo(fmt.Sprint("o", rapid.IntRange(0, propOrders-1).Draw(t, "order")))
}
