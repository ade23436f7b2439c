package bootstrap_test

import (
	"bytes"
	"context"
	"errors"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/epay"
	"cardshop/adapters/epay/epaysim"
	"cardshop/adapters/stripe"
	"cardshop/adapters/stripe/stripesim"
	"cardshop/domain"
)

// delivered is a notification a simulator sent and the service's answer to it.
type delivered struct {
	status int
	body   string
	err    error
}

// payKit is what a case does at a provider, through its simulator.
type payKit interface {
	name() string
	// reply is the provider's own answer for an accepted (or refused) notification.
	reply(accepted bool) (status int, body string)
	// pay has the buyer pay the order and delivers the notification once.
	pay(no string) delivered
	// held has the buyer pay, holds the notification and returns a delivery of it (callable
	// many times, concurrently).
	held(no string) func() delivered
	// payThenStale pays the order and returns deliveries of validly signed notices of the same
	// payment that say it did not succeed (as they arrive late or out of order).
	payThenStale(no string) (paid delivered, stale []func() delivered)
	// foreignPay creates a payment for the order at this provider behind the shop's back and
	// pays it: a validly signed success for an order without a payment here.
	foreignPay(no string) delivered
	// tamperedAmount has the buyer pay and delivers a notification for another amount,
	// correctly signed; genuine delivers the real one.
	tamperedAmount(no string) (refused delivered, genuine func() delivered)
	// forgeries has the buyer pay (or not) and delivers forged, unsigned or stale copies.
	forgeries(no string) (forged []delivered, genuine func() delivered)
	outage(on bool)
	// loseReply makes the provider carry out the next call and lose its reply, and returns a
	// check that the order's create was lost once and then answered from the provider's
	// idempotency record; nil when the simulator cannot lose a reply.
	loseReply() (replayed func(no string) bool)
	// created counts the payments created at the provider for the order.
	created(no string) int
	// payDropped has the buyer pay; the notification is lost.
	payDropped(no string)
	// resend sends the paid order's notification again; false when the simulator cannot.
	resend(no string) (delivered, bool)
	// statusAfterClose is the payment's status once the shop closed the order.
	statusAfterClose() string
	// settledThere reports whether the provider agrees with the close.
	settledThere(no string) bool
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// stripeKit drives stripesim.
type stripeKit struct {
	e   *payEnv
	sim *stripesim.Server
}

func (k stripeKit) name() string { return "stripe" }

func (k stripeKit) reply(accepted bool) (int, string) {
	if accepted {
		return 200, `{"received":true}`
	}
	return 400, `{"received":false}`
}

func stripeDelivered(d stripesim.Delivery) delivered {
	return delivered{status: d.Status, body: string(d.Reply), err: d.Err}
}

func (k stripeKit) pay(no string) delivered {
	d, err := k.sim.Pay(ctxOf(k.e.t), no)
	if err != nil {
		k.e.t.Fatal(err)
	}
	return stripeDelivered(d)
}

// heldEvent has the buyer pay and returns the checkout.session.completed event, not sent.
func (k stripeKit) heldEvent(no string) stripesim.Event {
	k.sim.Hold(true)
	defer k.sim.Hold(false)
	if _, err := k.sim.Pay(ctxOf(k.e.t), no); err != nil {
		k.e.t.Fatal(err)
	}
	held := k.sim.Held()
	for i := len(held) - 1; i >= 0; i-- {
		if held[i].OrderNo == no {
			return held[i]
		}
	}
	k.e.t.Fatalf("no event held for %s", no)
	return stripesim.Event{}
}

func (k stripeKit) deliver(ev stripesim.Event, f stripesim.Forgery) func() delivered {
	return func() delivered { return stripeDelivered(k.sim.Deliver(ctxOf(k.e.t), ev, f)) }
}

func (k stripeKit) held(no string) func() delivered {
	return k.deliver(k.heldEvent(no), stripesim.Genuine)
}

// payThenStale: a delayed payment method; the async_payment_failed event is made while the
// payment is pending and delivered after async_payment_succeeded, followed by an expired
// event of the session.
func (k stripeKit) payThenStale(no string) (delivered, []func() delivered) {
	ctx := ctxOf(k.e.t)
	d, err := k.sim.PayDelayed(ctx, no)
	if err != nil {
		k.e.t.Fatal(err)
	}
	k.e.wantAccepted(k, stripeDelivered(d)) // completed, unpaid: nothing to do yet
	failed, err := k.sim.AsyncFail(no)
	if err != nil {
		k.e.t.Fatal(err)
	}
	d, err = k.sim.Settle(ctx, no)
	if err != nil {
		k.e.t.Fatal(err)
	}
	expired := failed
	expired.ID, expired.Type = failed.ID+"X", stripesim.EventExpired
	expired.Body = bytes.Replace(failed.Body, []byte(failed.ID), []byte(expired.ID), 1)
	expired.Body = bytes.Replace(expired.Body, []byte(`"`+stripesim.EventAsyncFailed+`"`), []byte(`"`+stripesim.EventExpired+`"`), 1)
	expired.Body = bytes.Replace(expired.Body, []byte(`"status": "complete"`), []byte(`"status": "expired"`), 1)
	if bytes.Equal(expired.Body, failed.Body) || !bytes.Contains(expired.Body, []byte(`"status": "expired"`)) {
		k.e.t.Fatalf("could not make an expired event of %s", failed.Body)
	}
	return stripeDelivered(d), []func() delivered{k.deliver(failed, stripesim.Genuine), k.deliver(expired, stripesim.Genuine)}
}

func (k stripeKit) foreignPay(no string) delivered {
	gw, err := stripe.New(stripe.Config{BaseURL: k.sim.URL, SecretKey: k.e.skey, WebhookSecrets: []string{k.e.whsec}})
	if err != nil {
		k.e.t.Fatal(err)
	}
	if _, err := gw.Create(ctxOf(k.e.t), domain.PaymentRequest{OrderNo: domain.OrderNo(no), Amount: payQty * payPrice,
		Currency: domain.Currency{Code: "CNY", Exponent: 2}, Subject: "elsewhere", ExpiresAt: time.Now().Add(time.Hour),
		ReturnURL: k.e.public + "/"}); err != nil {
		k.e.t.Fatal(err)
	}
	return k.pay(no)
}

func (k stripeKit) tamperedAmount(no string) (delivered, func() delivered) {
	ev := k.heldEvent(no)
	tampered := ev
	tampered.Body = bytes.Replace(ev.Body, []byte(`"amount_total": 2000`), []byte(`"amount_total": 2001`), 1)
	if bytes.Equal(tampered.Body, ev.Body) {
		k.e.t.Fatalf("no amount_total 2000 in %s", ev.Body)
	}
	return k.deliver(tampered, stripesim.Genuine)(), k.deliver(ev, stripesim.Genuine)
}

func (k stripeKit) forgeries(no string) ([]delivered, func() delivered) {
	ev := k.heldEvent(no)
	var out []delivered
	for _, f := range []stripesim.Forgery{stripesim.WrongSecret, stripesim.StaleTimestamp, stripesim.FutureTimestamp,
		stripesim.TamperedBody, stripesim.Unsigned, stripesim.V0Only} {
		out = append(out, k.deliver(ev, f)())
	}
	return out, k.deliver(ev, stripesim.Genuine)
}

func (k stripeKit) outage(on bool) { k.sim.Outage(on) }

func (k stripeKit) loseReply() func(string) bool {
	k.sim.LoseReplies(1)
	return func(no string) bool {
		lost, replayed := 0, 0
		for _, r := range k.sim.Requests() {
			if r.Path == "/v1/checkout/sessions" && r.Form.Get("client_reference_id") == no {
				if r.Lost {
					lost++
				}
				if r.Replayed {
					replayed++
				}
			}
		}
		return lost == 1 && replayed >= 1
	}
}

func (k stripeKit) created(no string) int {
	n := 0
	for _, s := range k.sim.Sessions() {
		if s.ClientReferenceID == no {
			n++
		}
	}
	return n
}

func (k stripeKit) payDropped(no string) {
	k.sim.Drop(1)
	d := k.pay(no)
	if d.status != 0 {
		k.e.t.Fatalf("the dropped event reached the shop: %+v", d)
	}
}

// resend: the simulator keeps no dropped event to send again.
func (k stripeKit) resend(string) (delivered, bool) { return delivered{}, false }

func (k stripeKit) statusAfterClose() string { return "EXPIRED" }

// settledThere: the session was expired through the API, and the checkout.session.expired
// event that follows is acknowledged.
func (k stripeKit) settledThere(no string) bool {
	s, ok := k.sim.SessionOf(no)
	if !ok || s.Status != "expired" {
		return false
	}
	expiredByAPI := false
	for _, r := range k.sim.Requests() {
		expiredByAPI = expiredByAPI || r.Method == "POST" && r.Path == "/v1/checkout/sessions/"+s.ID+"/expire" && r.Status == 200
	}
	for _, d := range k.sim.Flush(ctxOf(k.e.t)) {
		k.e.wantAccepted(k, stripeDelivered(d))
	}
	return expiredByAPI
}

// epayKit drives epaysim.
type epayKit struct {
	e   *payEnv
	sim *epaysim.Sim
}

func (k epayKit) name() string { return "epay" }

func (k epayKit) reply(accepted bool) (int, string) {
	if accepted {
		return 200, "success"
	}
	return 200, "fail"
}

func epayDelivered(d epaysim.Delivery) delivered {
	return delivered{status: d.Status, body: d.Body, err: d.Err}
}

func (k epayKit) last(no string) epaysim.Delivery {
	ds := k.sim.Deliveries()
	for i := len(ds) - 1; i >= 0; i-- {
		if ds[i].OutTradeNo == no {
			return ds[i]
		}
	}
	k.e.t.Fatalf("no notification of %s", no)
	return epaysim.Delivery{}
}

func (k epayKit) pay(no string) delivered {
	if err := k.sim.Pay(ctxOf(k.e.t), no); err != nil && !errors.Is(err, epaysim.ErrNotAcknowledged) {
		k.e.t.Fatal(err)
	}
	return epayDelivered(k.last(no))
}

// payHeld has the buyer pay with the notification queued, and returns it.
func (k epayKit) payHeld(no string) epaysim.Delivery {
	k.sim.Hold(true)
	defer k.sim.Hold(false)
	if err := k.sim.Pay(ctxOf(k.e.t), no); !errors.Is(err, epaysim.ErrHeld) {
		k.e.t.Fatalf("pay with the notification held: %v", err)
	}
	return k.last(no)
}

// resendOf is the gateway's re-notify of the paid order.
func (k epayKit) resendOf(no string) func() delivered {
	return func() delivered {
		d, err := k.sim.Resend(ctxOf(k.e.t), no)
		if err != nil {
			return delivered{err: err}
		}
		return epayDelivered(d)
	}
}

func (k epayKit) held(no string) func() delivered {
	k.payHeld(no)
	return k.resendOf(no)
}

// payThenStale: after TRADE_SUCCESS, validly signed notices with other trade statuses (epay
// v1 sends none, a gateway's own variant might).
func (k epayKit) payThenStale(no string) (delivered, []func() delivered) {
	paid := k.pay(no)
	var stale []func() delivered
	for _, status := range []string{"TRADE_CLOSED", "WAIT_BUYER_PAY"} {
		stale = append(stale, func() delivered {
			d, err := k.sim.Notify(ctxOf(k.e.t), no, status)
			if err != nil {
				return delivered{err: err}
			}
			return epayDelivered(d)
		})
	}
	return paid, stale
}

func (k epayKit) foreignPay(no string) delivered {
	gw, err := epay.New(epay.Config{GatewayURL: k.sim.URL(), PID: k.sim.PID(), Key: epay.Key(k.sim.Key()), Mode: epay.ModeAPI})
	if err != nil {
		k.e.t.Fatal(err)
	}
	if _, err := gw.Create(ctxOf(k.e.t), domain.PaymentRequest{OrderNo: domain.OrderNo(no), Amount: payQty * payPrice,
		Currency: domain.Currency{Code: "CNY", Exponent: 2}, Subject: "elsewhere", ExpiresAt: time.Now().Add(time.Hour),
		NotifyURL: k.e.public + "/api/payments/epay/notify"}); err != nil {
		k.e.t.Fatal(err)
	}
	k.sim.Retry(false)
	defer k.sim.Retry(true)
	return k.pay(no)
}

func (k epayKit) tamperedAmount(no string) (delivered, func() delivered) {
	params := url.Values{}
	for key, vs := range k.payHeld(no).Params {
		params[key] = append([]string(nil), vs...)
	}
	params.Set("money", "20.01")
	params.Set("sign", k.sim.Sign(params))
	d, err := k.sim.Deliver(ctxOf(k.e.t), k.e.public+"/api/payments/epay/notify", params)
	if err != nil {
		k.e.t.Fatal(err)
	}
	return epayDelivered(d), k.resendOf(no)
}

// forgeries: epay's notifications carry no timestamp, so there is no stale one to forge.
func (k epayKit) forgeries(no string) ([]delivered, func() delivered) {
	var out []delivered
	for _, f := range []epaysim.Forgery{epaysim.WrongKey, epaysim.TamperedMoney, epaysim.OtherPID, epaysim.Unsigned} {
		d, err := k.sim.Forge(ctxOf(k.e.t), no, f)
		if err != nil {
			k.e.t.Fatal(err)
		}
		out = append(out, epayDelivered(d))
	}
	return out, func() delivered { return k.pay(no) }
}

func (k epayKit) outage(on bool) { k.sim.Outage(on) }

func (k epayKit) loseReply() func(string) bool { return nil }

func (k epayKit) created(no string) int {
	n := 0
	for _, r := range k.sim.Requests() {
		if r.Path == "/mapi.php" && r.Refused == "" && r.Form.Get("out_trade_no") == no {
			n++
		}
	}
	return n
}

func (k epayKit) payDropped(no string) {
	k.sim.Retry(false)
	defer k.sim.Retry(true)
	k.sim.DropNext(1)
	if err := k.sim.Pay(ctxOf(k.e.t), no); !errors.Is(err, epaysim.ErrNotAcknowledged) || !k.last(no).Dropped {
		k.e.t.Fatalf("pay with the notification dropped: %v", err)
	}
}

func (k epayKit) resend(no string) (delivered, bool) { return k.resendOf(no)(), true }

// statusAfterClose: epay v1 cannot close a payment, so it stays OPEN (payable there; a
// payment after the close takes the late-payment path).
func (k epayKit) statusAfterClose() string { return "OPEN" }

// settledThere: the gateway has the order unpaid.
func (k epayKit) settledThere(no string) bool {
	o, ok := k.sim.Order(no)
	return ok && !o.Paid
}

var (
	devFormAction = regexp.MustCompile(`<form method="post" action="([^"]+)">`)
	devFormField  = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// devForm reads the dev pay page's form: its action (relative to /dev/pay/) and its fields.
func devForm(t *testing.T, page string) (string, url.Values) {
	t.Helper()
	m := devFormAction.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form on the pay page:\n%s", page)
	}
	form := url.Values{}
	for _, f := range devFormField.FindAllStringSubmatch(page, -1) {
		form.Add(html.UnescapeString(f[1]), html.UnescapeString(f[2]))
	}
	return strings.TrimPrefix(html.UnescapeString(m[1]), "/"), form
}
