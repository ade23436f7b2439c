package alipay_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cardshop/adapters/alipay"
	"cardshop/domain"
)

func TestQueryLifeCycle(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	ctx := context.Background()
	no := orderNo(20)
	p := domain.Payment{OrderNo: no, Amount: 4200, Currency: cny}
	if _, err := g.Create(ctx, request(no, 4200, sh.notifyURL())); err != nil {
		t.Fatal(err)
	}
	// Not scanned yet: Alipay has no trade (ACQ.TRADE_NOT_EXIST), which is pending.
	if st, err := g.Query(ctx, p); err != nil || st != (domain.PaymentState{Outcome: domain.OutcomePending}) {
		t.Fatalf("before the scan: %+v %v", st, err)
	}
	if err := sim.Scan(string(no)); err != nil {
		t.Fatal(err)
	}
	tr, _ := sim.Trade(string(no))
	want := domain.PaymentState{Outcome: domain.OutcomePending, ProviderRef: tr.TradeNo, Amount: 4200, Currency: cny}
	if st, err := g.Query(ctx, p); err != nil || st != want {
		t.Fatalf("scanned: %+v %v", st, err)
	}
	if err := sim.Pay(ctx, string(no)); err != nil {
		t.Fatal(err)
	}
	want.Outcome = domain.OutcomePaid
	if st, err := g.Query(ctx, p); err != nil || st != want {
		t.Fatalf("paid: %+v %v", st, err)
	}
	last := sim.Requests()[len(sim.Requests())-1]
	checkCommon(t, last, "alipay.trade.query")
	if last.Biz["out_trade_no"] != string(no) {
		t.Fatalf("query biz %v", last.Biz)
	}
	if _, err := g.Query(ctx, domain.Payment{OrderNo: "bad-no"}); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("bad order: %v", err)
	}
}

func TestCloseOutcomes(t *testing.T) {
	sim := newSim(t, nil)
	g := newGateway(t, sim, alipay.MethodPrecreate, nil)
	sh := newShop(t, g)
	ctx := context.Background()
	create := func(n uint64) domain.Payment {
		no := orderNo(n)
		if _, err := g.Create(ctx, request(no, 300, sh.notifyURL())); err != nil {
			t.Fatal(err)
		}
		return domain.Payment{OrderNo: no, Amount: 300, Currency: cny}
	}

	// Never scanned: nothing to close.
	unopened := create(21)
	if err := g.Close(ctx, unopened); err != nil {
		t.Fatalf("unopened: %v", err)
	}
	if r := sim.Requests(); r[len(r)-1].Refused != "ACQ.TRADE_NOT_EXIST" {
		t.Fatalf("the simulator answered %+v", r[len(r)-1])
	}

	// Waiting: closed; closing again is read back as closed; the buyer can no longer pay.
	waiting := create(22)
	if err := sim.Scan(string(waiting.OrderNo)); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(ctx, waiting); err != nil {
		t.Fatalf("waiting: %v", err)
	}
	if tr, _ := sim.Trade(string(waiting.OrderNo)); tr.Status != "TRADE_CLOSED" {
		t.Fatalf("trade %+v", tr)
	}
	if err := g.Close(ctx, waiting); err != nil {
		t.Fatalf("closed again: %v", err)
	}
	if st, err := g.Query(ctx, waiting); err != nil || st.Outcome != domain.OutcomeExpired {
		t.Fatalf("closed: %+v %v", st, err)
	}
	if err := sim.Pay(ctx, string(waiting.OrderNo)); err == nil {
		t.Fatal("paid a closed trade")
	}

	// Paid: ErrAlreadyPaid.
	p := create(23)
	if err := sim.Pay(ctx, string(p.OrderNo)); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(ctx, p); !errors.Is(err, domain.ErrAlreadyPaid) {
		t.Fatalf("paid: %v", err)
	}
	var refusals []string
	for _, r := range sim.Requests() {
		if r.Method == "alipay.trade.close" && r.Refused != "" {
			refusals = append(refusals, r.Refused)
		}
	}
	if strings.Join(refusals, ",") != "ACQ.TRADE_NOT_EXIST,ACQ.TRADE_STATUS_ERROR,ACQ.TRADE_STATUS_ERROR" {
		t.Fatalf("close refusals %v", refusals)
	}
}
