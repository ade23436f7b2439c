package application_test

import (
	"errors"
	"fmt"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

// benchOrders builds n order requests of one code each from 10,000 buyers. Spreading the
// buyers matters: an order number is the second, a 4-digit digest of the buyer and 12 random
// digits, and the fake clock stands still, so one buyer's numbers would collide by the birthday
// bound after about a million orders.
func benchOrders(pid domain.ProductID, n int) []application.PlaceOrder {
	out := make([]application.PlaceOrder, n)
	for i := range out {
		out[i] = application.PlaceOrder{Buyer: domain.BuyerID(fmt.Sprintf("buyer-%04d", i%10000)), Product: pid,
			Qty: 1, IdempotencyKey: fmt.Sprintf("bench-key-%010d", i)}
	}
	return out
}

// BenchmarkPlaceOrder measures placing one order over the memory adapters: validation, the
// gate's claim and reservation, the ledger transaction and the timeout scheduling.
func BenchmarkPlaceOrder(b *testing.B) {
	f := newFixture(b)
	p := f.createProduct(b, 1, b.N)
	cmds := benchOrders(p.ID(), b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.shop.Sales.PlaceOrder(f.ctx, cmds[i]); err != nil {
			b.Fatalf("place order %d: %v", i, err)
		}
	}
}

// BenchmarkPayOrder measures the payment of a placed order: the conditional update, the
// allocation of its code, the flow row and the delivery outbox row in one transaction.
func BenchmarkPayOrder(b *testing.B) {
	f := newFixture(b)
	p := f.createProduct(b, 1, b.N)
	notices := make([]domain.PaymentNotice, b.N)
	for i, cmd := range benchOrders(p.ID(), b.N) {
		res, err := f.shop.Sales.PlaceOrder(f.ctx, cmd)
		if err != nil {
			b.Fatalf("place order %d: %v", i, err)
		}
		notices[i] = paidNotice(res.Order)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if o, err := f.shop.Payments.ApplyPayment(f.ctx, notices[i]); err != nil || o.Status() != domain.StatusPaid {
			b.Fatalf("pay order %d: %v", i, err)
		}
	}
}

// BenchmarkPlaceOrderSoldOut measures the answer to an order for a sold-out product, the path
// a flash sale's storm takes: validation, the cached product and one gate call; no ledger.
func BenchmarkPlaceOrderSoldOut(b *testing.B) {
	f := newFixture(b)
	p := f.createProduct(b, 1, 1)
	if _, err := f.shop.Sales.PlaceOrder(f.ctx, benchOrders(p.ID(), 1)[0]); err != nil {
		b.Fatalf("take the only code: %v", err)
	}
	cmds := benchOrders(p.ID(), 10000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := cmds[i%len(cmds)]
		cmd.IdempotencyKey = cmds[(i+1)%len(cmds)].IdempotencyKey
		if _, err := f.shop.Sales.PlaceOrder(f.ctx, cmd); !errors.Is(err, domain.ErrSoldOut) {
			b.Fatalf("order %d: %v, want sold out", i, err)
		}
	}
}
