package stripe_test

import (
	"context"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/stripesim"
	"cardshop/adapters/porttest"
	"cardshop/domain"
)

func TestPaymentGatewayContract(t *testing.T) {
	porttest.RunPaymentGateway(t, func(t *testing.T) porttest.PaymentRig {
		r := newRig(t)
		// last is the last genuine event the simulator delivered about the order.
		last := func(t *testing.T, no domain.OrderNo) stripesim.Delivery {
			t.Helper()
			ds := r.sim.Deliveries()
			for i := len(ds) - 1; i >= 0; i-- {
				if ds[i].Note.OrderNo == string(no) && ds[i].Note.Forgery == stripesim.Genuine && !ds[i].Dropped && !ds[i].Held {
					return ds[i]
				}
			}
			t.Fatalf("no event of %s delivered", no)
			return stripesim.Delivery{}
		}
		return porttest.PaymentRig{
			Gateway:   r.gw,
			Currency:  usd,
			NotifyURL: "https://shop.example/payments/stripe/notify",
			Now:       r.clock.Now,
			Later:     func(d time.Duration) { r.clock.Advance(d) },
			Pay: func(t *testing.T, no domain.OrderNo) porttest.Notification {
				d, err := r.sim.Pay(context.Background(), string(no))
				if err != nil || !d.Accepted() {
					t.Fatalf("pay %s: %+v %v", no, d, err)
				}
				return porttest.Notification(d.Sent)
			},
			PayClosed: func(t *testing.T, no domain.OrderNo) error {
				_, err := r.sim.Pay(context.Background(), string(no))
				return err
			},
			Forged: func(t *testing.T, no domain.OrderNo) map[string]porttest.Notification {
				ev := last(t, no).Note.Event
				out := map[string]porttest.Notification{}
				for name, f := range map[string]stripesim.Forgery{"signed with another secret": stripesim.WrongSecret,
					"signed ten minutes ago": stripesim.StaleTimestamp, "signed ten minutes ahead": stripesim.FutureTimestamp,
					"tampered amount": stripesim.TamperedBody, "unsigned": stripesim.Unsigned, "v0 signature only": stripesim.V0Only} {
					out[name] = porttest.Notification(r.sim.Deliver(context.Background(), ev, f).Sent)
				}
				return out
			},
			Timestamped: true,
			Outage:      r.sim.Outage,
			Created: func(no domain.OrderNo) int {
				n := 0
				for _, s := range r.sim.Sessions() {
					if s.ClientReferenceID == string(no) {
						n++
					}
				}
				return n
			},
			Payouts: func(no domain.OrderNo) int { n, _ := r.sim.Payouts(string(no)); return n },
		}
	})
}
