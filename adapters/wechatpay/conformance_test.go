package wechatpay_test

import (
	"context"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/wechatsim"
	"cardshop/adapters/porttest"
	"cardshop/domain"
)

func TestPaymentGatewayContract(t *testing.T) {
	porttest.RunPaymentGateway(t, func(t *testing.T) porttest.PaymentRig {
		r := newRig(t)
		paid := map[domain.OrderNo]wechatsim.Notification{}
		return porttest.PaymentRig{
			Gateway:   r.gw,
			Currency:  cny,
			NotifyURL: r.notify,
			Now:       r.clock.Now,
			Later:     func(d time.Duration) { r.clock.Advance(d) },
			Pay: func(t *testing.T, no domain.OrderNo) porttest.Notification {
				ds, err := r.sim.Pay(context.Background(), string(no))
				if err != nil || len(ds) == 0 || !ds[len(ds)-1].Accepted() {
					t.Fatalf("pay %s: %+v %v", no, ds, err)
				}
				d := ds[len(ds)-1]
				paid[no] = d.Note.Notification
				return porttest.Notification(d.Sent)
			},
			PayClosed: func(t *testing.T, no domain.OrderNo) error {
				_, err := r.sim.Pay(context.Background(), string(no))
				return err
			},
			Forged: func(t *testing.T, no domain.OrderNo) map[string]porttest.Notification {
				n, ok := paid[no]
				if !ok {
					t.Fatalf("%s was not paid", no)
				}
				out := map[string]porttest.Notification{}
				for name, f := range map[string]wechatsim.Forgery{"signed by a key not WeChat Pay's": wechatsim.WrongKey,
					"an unknown serial": wechatsim.UnknownSerial, "signed five minutes ago": wechatsim.StaleTimestamp,
					"signed five minutes ahead": wechatsim.FutureTimestamp, "unsigned": wechatsim.Unsigned,
					"another merchant": wechatsim.OtherMerchant, "another app": wechatsim.OtherApp,
					"tampered amount": wechatsim.TamperedAmount, "a flipped ciphertext byte": wechatsim.BadCiphertext} {
					out[name] = porttest.Notification(r.sim.Deliver(context.Background(), n, f)[0].Sent)
				}
				return out
			},
			Timestamped: true,
			Outage:      r.sim.Outage,
			Payouts: func(no domain.OrderNo) int {
				n := 0
				for _, rf := range r.sim.Refunds() {
					if rf.OutTradeNo == string(no) {
						n++
					}
				}
				return n
			},
		}
	})
}
