package porttest

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"
	"time"

	"cardshop/domain"
)

// Notification is one notification request exactly as a provider's simulator sent it: the
// signed bytes a gateway verifies. Its fields are those of the simulators' courier.Post, so
// that one converts to the other.
type Notification struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// PaymentAdapter is a provider adapter: the port, and the answer the provider expects to its
// notifications, which the HTTP adapter's notify route writes as it is.
type PaymentAdapter interface {
	domain.PaymentGateway
	// Reply is the answer the provider expects: accepted (also for a duplicate) or refused
	// (it will resend).
	Reply(accepted bool) (status int, contentType string, body []byte)
}

// PaymentRig is a payment adapter wired to its provider's simulator, as RunPaymentGateway
// needs it. The simulator signs its notifications on its own: the suite checks the adapter
// against the provider's behaviour, not against itself.
type PaymentRig struct {
	Gateway  PaymentAdapter
	Currency domain.Currency // one the gateway supports
	// NotifyURL is where the simulator sends the notifications of the payments the suite
	// creates (the PaymentRequest's NotifyURL).
	NotifyURL string
	// Now is the provider's clock (the simulator's): a notification arrives at Now().
	Now func() time.Time
	// Later moves the provider's clock forward by d.
	Later func(d time.Duration)
	// Pay has the buyer pay the order at the provider and returns the notification the
	// provider sent about it.
	Pay func(t *testing.T, no domain.OrderNo) Notification
	// PayClosed has the buyer try to pay the order after its payment was closed, and returns
	// the provider's refusal (nil: it took the money).
	PayClosed func(t *testing.T, no domain.OrderNo) error
	// Forged returns, by name, notifications about the paid order that the provider did not
	// send or that are not for this merchant: unsigned, signed with another key, tampered,
	// for another merchant or application.
	Forged func(t *testing.T, no domain.OrderNo) map[string]Notification
	// Timestamped says the provider signs the time of its notifications, so that the gateway
	// refuses one that arrives long after it was signed.
	Timestamped bool
	// Outage takes the provider's API down (on) or brings it back; nil for a provider that
	// runs in the shop's process and cannot be down (devpay).
	Outage func(on bool)
	// Created counts the payments the provider holds for the order; nil when the simulator
	// cannot tell.
	Created func(no domain.OrderNo) int
	// Payouts counts the refunds of the order that moved money at the provider; nil when the
	// simulator cannot tell.
	Payouts func(no domain.OrderNo) int
}

// RunPaymentGateway checks a domain.PaymentGateway against its port's contract, run against
// the provider's simulator. newRig returns a fresh adapter and simulator for each case. An
// operation the gateway answers ErrUnsupported for (the port allows it) ends the case that
// needs it, which passes: no case skips, so a CI run that fails on skipped tests runs them.
func RunPaymentGateway(t *testing.T, newRig func(t *testing.T) PaymentRig) {
	t.Run("Names itself and supports its currency", func(t *testing.T) {
		r := newRig(t)
		if r.Gateway.Provider() == "" || !r.Gateway.Supports(r.Currency) {
			t.Fatalf("provider %q, supports %s: %v", r.Gateway.Provider(), r.Currency.Code, r.Gateway.Supports(r.Currency))
		}
	})
	t.Run("Reply", func(t *testing.T) {
		r := newRig(t)
		yesStatus, yesType, yesBody := r.Gateway.Reply(true)
		noStatus, noType, noBody := r.Gateway.Reply(false)
		if yesStatus < 200 || yesStatus > 299 {
			t.Fatalf("accepted: status %d, want 2xx", yesStatus)
		}
		if noStatus == yesStatus && string(noBody) == string(yesBody) {
			t.Fatalf("refused answers as accepted: %d %q", noStatus, noBody)
		}
		for _, rp := range []struct {
			ct   string
			body []byte
		}{{yesType, yesBody}, {noType, noBody}} {
			if len(rp.body) > 0 && rp.ct == "" {
				t.Fatalf("a reply with a body and no content type: %q", rp.body)
			}
		}
	})
	t.Run("Create is idempotent for one order", func(t *testing.T) {
		r := newRig(t)
		req := r.request(t)
		first := r.create(t, req)
		again, err := r.Gateway.Create(context.Background(), req)
		if err != nil {
			t.Fatalf("create again: %v", err)
		}
		if again.ProviderRef != first.ProviderRef {
			t.Fatalf("created again as %q, first %q", again.ProviderRef, first.ProviderRef)
		}
		if first.PayURL == "" && first.QRCode == "" {
			t.Fatalf("created %+v: neither a pay URL nor a QR code", first)
		}
		if r.Created != nil {
			if n := r.Created(req.OrderNo); n != 1 {
				t.Fatalf("the provider holds %d payments of the order, want 1", n)
			}
		}
	})
	t.Run("Query answers pending, then paid", func(t *testing.T) {
		r := newRig(t)
		req := r.request(t)
		p := r.payment(req, r.create(t, req))
		if st, err := r.Gateway.Query(context.Background(), p); errors.Is(err, domain.ErrUnsupported) {
			t.Log("the gateway has no query: ErrUnsupported, as the port allows")
			return
		} else if err != nil || st.Outcome != domain.OutcomePending {
			t.Fatalf("query before paying: %+v %v", st, err)
		}
		r.Pay(t, req.OrderNo)
		st, err := r.Gateway.Query(context.Background(), p)
		if err != nil || st.Outcome != domain.OutcomePaid || st.Amount != req.Amount || st.Currency != req.Currency {
			t.Fatalf("query after paying: %+v %v, want paid %d %s", st, err, req.Amount, req.Currency.Code)
		}
	})
	t.Run("Verify accepts the provider's notification", func(t *testing.T) {
		r := newRig(t)
		req := r.request(t)
		r.create(t, req)
		n, err := r.Gateway.Verify(context.Background(), r.inbound(t, r.Pay(t, req.OrderNo), 0))
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if n.OrderNo != req.OrderNo || n.Outcome != domain.OutcomePaid || n.RefundNo != "" {
			t.Fatalf("notice %+v, want order %s paid", n, req.OrderNo)
		}
		if n.Amount != 0 && (n.Amount != req.Amount || n.Currency != req.Currency) {
			t.Fatalf("notice of %d %s, want %d %s", n.Amount, n.Currency.Code, req.Amount, req.Currency.Code)
		}
	})
	t.Run("Verify refuses what the provider did not sign", func(t *testing.T) {
		r := newRig(t)
		req := r.request(t)
		r.create(t, req)
		genuine := r.Pay(t, req.OrderNo)
		refused := map[string]domain.InboundRequest{}
		for name, n := range r.Forged(t, req.OrderNo) {
			refused[name] = r.inbound(t, n, 0)
		}
		if len(refused) == 0 {
			t.Fatal("the rig forges nothing")
		}
		if r.Timestamped {
			refused["received an hour after it was signed"] = r.inbound(t, genuine, time.Hour)
		}
		if genuine.Body != nil {
			if in := r.inbound(t, genuine, 0); len(in.Body) > 0 {
				in.Body = append(append([]byte(nil), in.Body...), ' ')
				in.Body[0] ^= 0x01
				refused["its body changed"] = in
			}
		}
		for name, in := range refused {
			n, err := r.Gateway.Verify(context.Background(), in)
			var ve *domain.ValidationError
			if err == nil || (!errors.Is(err, domain.ErrBadSignature) && !errors.As(err, &ve)) {
				t.Errorf("%s: verified as %+v, %v; want ErrBadSignature or a ValidationError", name, n, err)
			}
		}
		if _, err := r.Gateway.Verify(context.Background(), r.inbound(t, genuine, 0)); err != nil {
			t.Fatalf("the genuine one after the forgeries: %v", err)
		}
	})
	t.Run("Close makes an expired order's payment unpayable", func(t *testing.T) {
		r := newRig(t)
		req := r.request(t)
		p := r.payment(req, r.create(t, req))
		r.Later(req.ExpiresAt.Sub(r.Now()) + time.Second) // the shop closes an order once it expired
		err := r.Gateway.Close(context.Background(), p)
		if errors.Is(err, domain.ErrUnsupported) {
			t.Log("the gateway has no close: ErrUnsupported, as the port allows")
			return
		}
		if err != nil {
			t.Fatalf("close: %v", err)
		}
		if err := r.PayClosed(t, req.OrderNo); err == nil {
			t.Fatal("the buyer paid after the close")
		}
		// A provider that opens its trade only when the buyer scans has nothing to tell of a
		// closed one but that it is not paid.
		if st, err := r.Gateway.Query(context.Background(), p); err == nil && st.Outcome != domain.OutcomeExpired && st.Outcome != domain.OutcomePending {
			t.Fatalf("query after the close: %+v, want expired", st)
		} else if err != nil && !errors.Is(err, domain.ErrUnsupported) {
			t.Fatalf("query after the close: %v", err)
		}
	})
	t.Run("Close of a paid payment is ErrAlreadyPaid", func(t *testing.T) {
		r := newRig(t)
		req := r.request(t)
		p := r.payment(req, r.create(t, req))
		r.Pay(t, req.OrderNo)
		if err := r.Gateway.Close(context.Background(), p); errors.Is(err, domain.ErrUnsupported) {
			t.Log("the gateway has no close: ErrUnsupported, as the port allows")
			return
		} else if !errors.Is(err, domain.ErrAlreadyPaid) {
			t.Fatalf("close of a paid payment: %v, want ErrAlreadyPaid", err)
		}
	})
	t.Run("Refund returns the money once", func(t *testing.T) {
		r := newRig(t)
		req := r.request(t)
		p := r.payment(req, r.create(t, req))
		r.Pay(t, req.OrderNo)
		p.Status = domain.PaymentPaid
		p.RefundNo = domain.RefundNoOf(req.OrderNo)
		rr := domain.RefundRequest{RefundNo: p.RefundNo, Amount: p.Amount, Currency: p.Currency, Reason: "conformance"}
		st, err := r.Gateway.Refund(context.Background(), p, rr)
		if errors.Is(err, domain.ErrUnsupported) {
			t.Log("the gateway has no refund: ErrUnsupported, as the port allows")
			return
		}
		if err != nil || (st.Outcome != domain.RefundSucceeded && st.Outcome != domain.RefundPending) {
			t.Fatalf("refund: %+v %v", st, err)
		}
		if r.Gateway.RefundIdempotent() {
			again, err := r.Gateway.Refund(context.Background(), p, rr)
			if err != nil || (again.Outcome != domain.RefundSucceeded && again.Outcome != domain.RefundPending) {
				t.Fatalf("the same refund again: %+v %v", again, err)
			}
			if st.ProviderRef != "" && again.ProviderRef != st.ProviderRef {
				t.Fatalf("the same refund number made refund %q, then %q", st.ProviderRef, again.ProviderRef)
			}
			// Even at once.
			errs := make([]error, 4)
			parallel(len(errs), func(i int) { _, errs[i] = r.Gateway.Refund(context.Background(), p, rr) })
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("the same refund, four at once: %v", err)
			}
		}
		if r.Payouts != nil {
			if n := r.Payouts(req.OrderNo); n != 1 {
				t.Fatalf("%d payouts, want 1", n)
			}
		}
	})
	t.Run("ErrUnavailable while the provider is down", func(t *testing.T) {
		r := newRig(t)
		req := r.request(t)
		p := r.payment(req, r.create(t, req))
		if r.Outage == nil {
			t.Log("the provider runs in the shop's process: it cannot be down")
			return
		}
		r.Outage(true)
		defer r.Outage(false)
		other := r.request(t)
		if _, err := r.Gateway.Create(context.Background(), other); !errors.Is(err, domain.ErrUnavailable) {
			t.Errorf("create during the outage: %v, want ErrUnavailable", err)
		}
		if _, err := r.Gateway.Query(context.Background(), p); err != nil && !errors.Is(err, domain.ErrUnsupported) && !errors.Is(err, domain.ErrUnavailable) {
			t.Errorf("query during the outage: %v, want ErrUnavailable", err)
		} else if err == nil {
			t.Error("query during the outage answered")
		}
		if err := r.Gateway.Close(context.Background(), p); err != nil && !errors.Is(err, domain.ErrUnsupported) && !errors.Is(err, domain.ErrUnavailable) {
			t.Errorf("close during the outage: %v, want ErrUnavailable", err)
		} else if err == nil {
			t.Error("close during the outage answered")
		}
		r.Outage(false)
		if _, err := r.Gateway.Create(context.Background(), other); err != nil {
			t.Fatalf("create once the provider is back: %v", err)
		}
	})
}

// request is a payment request for a fresh order, payable for an hour.
func (r PaymentRig) request(t *testing.T) domain.PaymentRequest {
	t.Helper()
	now := r.Now()
	no := domain.NewOrderNo(now, "porttest", rand.Uint64())
	return domain.PaymentRequest{OrderNo: no, Amount: 1250, Currency: r.Currency, Subject: "Gift card x1",
		ExpiresAt: now.Add(time.Hour), ReturnURL: "https://shop.example/orders/" + string(no), NotifyURL: r.NotifyURL,
		ClientIP: "203.0.113.7"}
}

func (r PaymentRig) create(t *testing.T, req domain.PaymentRequest) domain.PaymentCreated {
	t.Helper()
	c, err := r.Gateway.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("create %s: %v", req.OrderNo, err)
	}
	return c
}

// payment is the payment the shop stores for a created one.
func (r PaymentRig) payment(req domain.PaymentRequest, c domain.PaymentCreated) domain.Payment {
	now := r.Now()
	return domain.Payment{OrderNo: req.OrderNo, Provider: r.Gateway.Provider(), ProviderRef: c.ProviderRef,
		Amount: req.Amount, Currency: req.Currency, Status: domain.PaymentOpen, PayURL: c.PayURL, QRCode: c.QRCode,
		CreatedAt: now, UpdatedAt: now}
}

// inbound is n as the shop's HTTP server hands it to Verify, arriving late after the
// provider's now.
func (r PaymentRig) inbound(t *testing.T, n Notification, late time.Duration) domain.InboundRequest {
	t.Helper()
	u, err := url.Parse(n.URL)
	if err != nil {
		t.Fatalf("notification URL %q: %v", n.URL, err)
	}
	return domain.InboundRequest{Method: n.Method, Header: domain.Header(n.Header.Clone()), Query: u.Query(),
		Body: append([]byte(nil), n.Body...), At: r.Now().Add(late)}
}
