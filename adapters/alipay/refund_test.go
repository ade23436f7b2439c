package alipay_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cardshop/adapters/alipay"
	"cardshop/domain"
)

func refundOf(p domain.Payment) domain.RefundRequest {
	return domain.RefundRequest{RefundNo: domain.RefundNoOf(p.OrderNo), Amount: p.Amount, Currency: p.Currency, Reason: "unfulfilled: sold out"}
}

func TestRefundSucceedsOnceAndIsIdempotent(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	ctx := context.Background()
	p := paid(t, sim, g, sh, orderNo(30), 2500)
	st, err := g.Refund(ctx, p, refundOf(p))
	if err != nil || st != (domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: p.ProviderRef}) {
		t.Fatalf("refund %+v %v", st, err)
	}
	last := sim.Requests()[len(sim.Requests())-1]
	checkCommon(t, last, "alipay.trade.refund")
	if b := last.Biz; b["refund_amount"] != "25.00" || b["out_request_no"] != domain.RefundNoOf(p.OrderNo) || b["out_trade_no"] != string(p.OrderNo) ||
		b["refund_reason"] != "unfulfilled: sold out" {
		t.Fatalf("refund biz %v", b)
	}
	// Asked again with the same number: Alipay answers fund_change N, the refund query says
	// REFUND_SUCCESS; no second payout.
	st, err = g.Refund(ctx, p, refundOf(p))
	if err != nil || st.Outcome != domain.RefundSucceeded || sim.Payouts() != 1 {
		t.Fatalf("again: %+v %v, %d payouts", st, err, sim.Payouts())
	}
	if r := sim.Requests(); r[len(r)-1].Method != "alipay.trade.fastpay.refund.query" {
		t.Fatalf("no refund query after fund_change N: %+v", r[len(r)-1])
	}
	// Another number on the refunded (closed) trade is refused.
	other := refundOf(p)
	other.RefundNo = string(p.OrderNo) + "R2"
	st, err = g.Refund(ctx, p, other)
	if err != nil || st.Outcome != domain.RefundRefused || !strings.Contains(st.Reason, "ACQ.TRADE_STATUS_ERROR") || sim.Payouts() != 1 {
		t.Fatalf("other number: %+v %v, %d payouts", st, err, sim.Payouts())
	}
	if tr, _ := sim.Trade(string(p.OrderNo)); tr.Status != "TRADE_CLOSED" || tr.Refunded != 2500 {
		t.Fatalf("trade %+v", tr)
	}
}

func TestRefundRefusedThenAllowed(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	ctx := context.Background()
	p := paid(t, sim, g, sh, orderNo(31), 990)
	sim.RefundRefuse("ACQ.SELLER_BALANCE_NOT_ENOUGH", "卖家余额不足")
	st, err := g.Refund(ctx, p, refundOf(p))
	if err != nil || st.Outcome != domain.RefundRefused || !strings.Contains(st.Reason, "卖家余额不足") || sim.Payouts() != 0 {
		t.Fatalf("refused: %+v %v, %d payouts", st, err, sim.Payouts())
	}
	sim.RefundRefuse("", "")
	if st, err := g.Refund(ctx, p, refundOf(p)); err != nil || st.Outcome != domain.RefundSucceeded || sim.Payouts() != 1 {
		t.Fatalf("allowed: %+v %v, %d payouts", st, err, sim.Payouts())
	}
	// Before it is paid there is nothing to refund.
	unpaid := domain.Payment{OrderNo: orderNo(32), Amount: 100, Currency: cny}
	if st, err := g.Refund(ctx, unpaid, refundOf(unpaid)); err != nil || st.Outcome != domain.RefundRefused {
		t.Fatalf("unpaid: %+v %v", st, err)
	}
}

func TestRefundTimeoutThenRetryPaysOutOnce(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	ctx := context.Background()
	p := paid(t, sim, g, sh, orderNo(33), 1500)

	sim.RefundOutage(true)
	if _, err := g.Refund(ctx, p, refundOf(p)); !errors.Is(err, domain.ErrUnavailable) || sim.Payouts() != 0 {
		t.Fatalf("ACQ.SYSTEM_ERROR: %v, %d payouts", err, sim.Payouts())
	}
	sim.RefundOutage(false)

	sim.LoseRefundAnswers(1)
	if _, err := g.Refund(ctx, p, refundOf(p)); !errors.Is(err, domain.ErrUnavailable) || sim.Payouts() != 1 {
		t.Fatalf("lost answer: %v, %d payouts", err, sim.Payouts())
	}
	st, err := g.Refund(ctx, p, refundOf(p))
	if err != nil || st.Outcome != domain.RefundSucceeded || sim.Payouts() != 1 {
		t.Fatalf("retry: %+v %v, %d payouts", st, err, sim.Payouts())
	}
}

func TestRefundRefusesBadRequests(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	p := domain.Payment{OrderNo: orderNo(34), Amount: 100, Currency: cny}
	for name, mutate := range map[string]func(*domain.RefundRequest){
		"no number":   func(r *domain.RefundRequest) { r.RefundNo = "" },
		"bad number":  func(r *domain.RefundRequest) { r.RefundNo = "R 1" },
		"zero":        func(r *domain.RefundRequest) { r.Amount = 0 },
		"more":        func(r *domain.RefundRequest) { r.Amount = 101 },
		"other money": func(r *domain.RefundRequest) { r.Currency = mustCurrency(t, "USD") },
	} {
		r := refundOf(p)
		mutate(&r)
		if _, err := g.Refund(context.Background(), p, r); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(sim.Requests()) != 0 {
		t.Fatal("refused refunds were sent")
	}
}
