package alipay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cardshop/adapters/alipay"
	"cardshop/adapters/lab/paysim/alipaysim"
	"cardshop/adapters/memory"
	"cardshop/adapters/porttest"
	"cardshop/domain"
)

func TestPaymentGatewayContract(t *testing.T) {
	porttest.RunPaymentGateway(t, func(t *testing.T) porttest.PaymentRig {
		clock := memory.NewFakeClock(time.Now())
		sim := newSim(t, func(c *alipaysim.Config) { c.Now = clock.Now })
		g := newGateway(t, sim, alipay.MethodPrecreate, nil)
		sh := newShop(t, g)
		return porttest.PaymentRig{
			Gateway:   g,
			Currency:  cny,
			NotifyURL: sh.notifyURL(),
			Now:       clock.Now,
			Later:     func(d time.Duration) { clock.Advance(d) },
			Pay: func(t *testing.T, no domain.OrderNo) porttest.Notification {
				if err := sim.Pay(context.Background(), string(no)); err != nil && !errors.Is(err, alipaysim.ErrNotAcknowledged) {
					t.Fatalf("pay %s: %v", no, err)
				}
				ds := sim.Deliveries()
				return porttest.Notification(ds[len(ds)-1].Sent)
			},
			PayClosed: func(t *testing.T, no domain.OrderNo) error { return sim.Pay(context.Background(), string(no)) },
			Forged: func(t *testing.T, no domain.OrderNo) map[string]porttest.Notification {
				out := map[string]porttest.Notification{}
				for name, f := range map[string]alipaysim.Forgery{"signed with another key": alipaysim.WrongKey,
					"tampered amount": alipaysim.TamperedAmount, "another app_id": alipaysim.OtherAppID,
					"another seller_id": alipaysim.OtherSeller, "unsigned": alipaysim.Unsigned} {
					d, err := sim.Forge(context.Background(), string(no), f)
					if err != nil {
						t.Fatal(err)
					}
					out[name] = porttest.Notification(d.Sent)
				}
				return out
			},
			Outage:  sim.Outage,
			Payouts: func(domain.OrderNo) int { return sim.Payouts() }, // one order per simulator
		}
	})
}
