package epay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cardshop/adapters/epay"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/adapters/memory"
	"cardshop/adapters/porttest"
	"cardshop/domain"
)

func TestPaymentGatewayContract(t *testing.T) {
	porttest.RunPaymentGateway(t, func(t *testing.T) porttest.PaymentRig {
		clock := memory.NewFakeClock(time.Now())
		sim := newSim(t, epaysim.Config{Now: clock.Now})
		g := newGateway(t, sim, func(c *epay.Config) { c.Mode, c.Refunds = epay.ModeAPI, true })
		sh := newShop(t, g)
		sent := func(t *testing.T, d epaysim.Delivery, err error) porttest.Notification {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return porttest.Notification(d.Sent)
		}
		return porttest.PaymentRig{
			Gateway:   g,
			Currency:  cny,
			NotifyURL: sh.notifyURL(),
			Now:       clock.Now,
			Later:     func(d time.Duration) { clock.Advance(d) },
			Pay: func(t *testing.T, no domain.OrderNo) porttest.Notification {
				if err := sim.Pay(context.Background(), string(no)); err != nil && !errors.Is(err, epaysim.ErrNotAcknowledged) {
					t.Fatalf("pay %s: %v", no, err)
				}
				ds := sim.Deliveries()
				return porttest.Notification(ds[len(ds)-1].Sent)
			},
			Forged: func(t *testing.T, no domain.OrderNo) map[string]porttest.Notification {
				out := map[string]porttest.Notification{}
				for name, f := range map[string]epaysim.Forgery{"signed with another KEY": epaysim.WrongKey,
					"tampered money": epaysim.TamperedMoney, "another merchant's pid": epaysim.OtherPID, "unsigned": epaysim.Unsigned} {
					d, err := sim.Forge(context.Background(), string(no), f)
					out[name] = sent(t, d, err)
				}
				return out
			},
			Outage: sim.Outage,
			Created: func(no domain.OrderNo) int {
				n := 0
				for _, o := range sim.Orders() {
					if o.OutTradeNo == string(no) {
						n++
					}
				}
				return n
			},
			Payouts: func(no domain.OrderNo) int { return sim.Payouts(string(no)) },
		}
	})
}
