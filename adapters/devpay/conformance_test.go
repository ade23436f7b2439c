package devpay_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/devpay"
	"cardshop/adapters/memory"
	"cardshop/adapters/porttest"
	"cardshop/domain"
)

// The dev provider has no simulator: it runs in the shop's process and signs and checks its own
// notifications, so the suite holds it to the port's contract, not to an outside signer.
func TestPaymentGatewayContract(t *testing.T) {
	porttest.RunPaymentGateway(t, func(t *testing.T) porttest.PaymentRig {
		clock := memory.NewFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
		newGateway := func(secret string) *devpay.Gateway {
			g, err := devpay.New(devpay.Config{Secret: secret, BaseURL: "http://127.0.0.1:8080/", Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		g, other := newGateway(devpay.NewSecret()), newGateway(devpay.NewSecret())
		var mu sync.Mutex
		links := map[domain.OrderNo]string{} // the pay URLs of the orders, as the buyer gets them
		// confirm presses Pay on the order's page at gw; it returns the notification gw sent.
		confirm := func(gw *devpay.Gateway, payURL string) (porttest.Notification, error) {
			u, err := url.Parse(payURL)
			if err != nil {
				return porttest.Notification{}, err
			}
			form := u.Query()
			form.Set("choice", "pay")
			var sent *domain.InboundRequest
			rp := gw.Confirm(context.Background(), form, func(_ context.Context, in domain.InboundRequest) error {
				sent = &in
				return nil
			})
			if sent == nil {
				return porttest.Notification{}, errors.New("the pay page sent nothing: " + strings.TrimSpace(string(rp.Body)))
			}
			return porttest.Notification{Method: sent.Method, Header: http.Header(sent.Header), Body: sent.Body}, nil
		}
		created := &recordingGateway{PaymentAdapter: g, created: func(no domain.OrderNo, c domain.PaymentCreated) {
			mu.Lock()
			links[no] = c.PayURL
			mu.Unlock()
		}}
		link := func(t *testing.T, no domain.OrderNo) string {
			mu.Lock()
			defer mu.Unlock()
			if links[no] == "" {
				t.Fatalf("no payment created for %s", no)
			}
			return links[no]
		}
		return porttest.PaymentRig{
			Gateway:   created,
			Currency:  domain.Currency{Code: "CNY", Exponent: 2},
			NotifyURL: "http://127.0.0.1:8080/api/payments/dev/notify",
			Now:       clock.Now,
			Later:     func(d time.Duration) { clock.Advance(d) },
			Pay: func(t *testing.T, no domain.OrderNo) porttest.Notification {
				n, err := confirm(g, link(t, no))
				if err != nil {
					t.Fatalf("pay %s: %v", no, err)
				}
				return n
			},
			PayClosed: func(t *testing.T, no domain.OrderNo) error {
				_, err := confirm(g, link(t, no))
				return err
			},
			Forged: func(t *testing.T, no domain.OrderNo) map[string]porttest.Notification {
				genuine, err := confirm(g, link(t, no)) // the same press again resends the notification
				if err != nil {
					t.Fatal(err)
				}
				unsigned := genuine
				unsigned.Header = genuine.Header.Clone()
				unsigned.Header.Del(devpay.HeaderSignature)
				// Another shop's dev provider, with its own secret, paying the same order.
				req := domain.PaymentRequest{OrderNo: no, Amount: 1250, Currency: domain.Currency{Code: "CNY", Exponent: 2},
					Subject: "Gift card x1", ExpiresAt: clock.Now().Add(time.Hour)}
				c, err := other.Create(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				elsewhere, err := confirm(other, c.PayURL)
				if err != nil {
					t.Fatal(err)
				}
				return map[string]porttest.Notification{"unsigned": unsigned, "signed with another secret": elsewhere}
			},
			Timestamped: true,
		}
	})
}

// recordingGateway tells created about every payment created, so the rig knows its pay URL.
type recordingGateway struct {
	porttest.PaymentAdapter
	created func(domain.OrderNo, domain.PaymentCreated)
}

func (r *recordingGateway) Create(ctx context.Context, req domain.PaymentRequest) (domain.PaymentCreated, error) {
	c, err := r.PaymentAdapter.Create(ctx, req)
	if err == nil {
		r.created(req.OrderNo, c)
	}
	return c, err
}
