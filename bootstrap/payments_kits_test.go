package bootstrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/alipay"
	"cardshop/adapters/epay"
	"cardshop/adapters/lab/paysim/alipaysim"
	"cardshop/adapters/lab/paysim/courier"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/adapters/lab/paysim/stripesim"
	"cardshop/adapters/lab/paysim/wechatsim"
	"cardshop/adapters/stripe"
	"cardshop/adapters/wechatpay"
	"cardshop/domain"
)

// delivered is a notification a simulator sent and the service's answer to it.
type delivered struct {
	status int
	body   string
	err    error
}

// deliveredOf is the last of a simulator's attempts at a notification.
func deliveredOf[N any](ds ...courier.Delivery[N]) delivered {
	if len(ds) == 0 {
		return delivered{err: errors.New("the simulator delivered nothing")}
	}
	d := ds[len(ds)-1]
	return delivered{status: d.Status, body: string(d.Reply), err: d.Err}
}

// lastOf is the last attempt at a notification of order no among a simulator's deliveries.
func lastOf[N any](t *testing.T, ds []courier.Delivery[N], no string, orderOf func(N) string) courier.Delivery[N] {
	t.Helper()
	for i := len(ds) - 1; i >= 0; i-- {
		if orderOf(ds[i].Note) == no {
			return ds[i]
		}
	}
	t.Fatalf("no notification of %s", no)
	return courier.Delivery[N]{}
}

// formSim is what epaysim and alipaysim share: a gateway that pays an order and notifies it
// with a signed form, through the courier.
type formSim[N, F any] interface {
	Pay(ctx context.Context, no string) error
	Renotify(ctx context.Context, no string) (courier.Delivery[N], error)
	Notify(ctx context.Context, no, status string) (courier.Delivery[N], error)
	Forge(ctx context.Context, no string, f F) (courier.Delivery[N], error)
	Deliveries() []courier.Delivery[N]
	Retry(on bool)
	Drop(n int)
	Outage(on bool)
}

// formKit is the part of epayKit and alipayKit that is one code for both.
type formKit[N, F any] struct {
	e       *payEnv
	fsim    formSim[N, F]
	orderOf func(N) string
	notAck  error // the simulator's "not acknowledged"
}

func (k formKit[N, F]) last(no string) courier.Delivery[N] {
	return lastOf(k.e.t, k.fsim.Deliveries(), no, k.orderOf)
}

func (k formKit[N, F]) pay(no string) delivered {
	if err := k.fsim.Pay(ctxOf(k.e.t), no); err != nil && !errors.Is(err, k.notAck) {
		k.e.t.Fatal(err)
	}
	return deliveredOf(k.last(no))
}

// sent is one notification's delivery, or the error that kept it from being sent.
func sent[N any](d courier.Delivery[N], err error) delivered {
	if err != nil {
		return delivered{err: err}
	}
	return deliveredOf(d)
}

// resendOf is the gateway's re-notify of the paid order.
func (k formKit[N, F]) resendOf(no string) func() delivered {
	return func() delivered { return sent(k.fsim.Renotify(ctxOf(k.e.t), no)) }
}

// stale pays the order, then returns deliveries of genuinely signed notices of it with the
// other trade statuses.
func (k formKit[N, F]) stale(no string, statuses ...string) (delivered, []func() delivered) {
	paid := k.pay(no)
	var out []func() delivered
	for _, status := range statuses {
		out = append(out, func() delivered { return sent(k.fsim.Notify(ctxOf(k.e.t), no, status)) })
	}
	return paid, out
}

// forged delivers the order's notification forged in each way of fs.
func (k formKit[N, F]) forged(no string, fs ...F) []delivered {
	var out []delivered
	for _, f := range fs {
		d, err := k.fsim.Forge(ctxOf(k.e.t), no, f)
		if err != nil {
			k.e.t.Fatal(err)
		}
		out = append(out, deliveredOf(d))
	}
	return out
}

func (k formKit[N, F]) outage(on bool) { k.fsim.Outage(on) }

func (k formKit[N, F]) payDropped(no string) {
	k.fsim.Retry(false)
	defer k.fsim.Retry(true)
	k.fsim.Drop(1)
	if err := k.fsim.Pay(ctxOf(k.e.t), no); !errors.Is(err, k.notAck) || !k.last(no).Dropped {
		k.e.t.Fatalf("pay with the notification dropped: %v", err)
	}
}

func (k formKit[N, F]) resend(no string) (delivered, bool) { return k.resendOf(no)(), true }

// payLate: the notification dropped, the gateway's re-notify is the late one.
func (k formKit[N, F]) payLate(no string) (func() delivered, string) {
	k.payDropped(no)
	return k.resendOf(no), ""
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
	// otherMerchant has the buyer pay and delivers correctly signed successes that name
	// another currency, app or merchant than the shop's; genuine delivers the real one. why
	// says why there are none (the provider's notifications carry none of these).
	otherMerchant(no string) (refused []delivered, genuine func() delivered, why string)

	// The refund cases.

	// payouts counts the order's refunds that moved money at the provider; false when the
	// provider moves no money a test can count.
	payouts(no string) (n int, ok bool)
	// refundsAt counts the order's refunds the provider holds, finished or not.
	refundsAt(no string) int
	// refuseRefunds makes the provider refuse refunds (on) or take them again; why says why it
	// cannot.
	refuseRefunds(on bool) (why string)
	// refundOutage makes the provider's refund API unreachable (on) or brings it back; why says
	// why it cannot.
	refundOutage(on bool) (why string)
	// loseRefundAnswer makes the next refund move the money and lose its answer; false when the
	// simulator cannot.
	loseRefundAnswer() bool
	// pendingRefunds makes refunds answer pending (on), finished later by finishRefund, or
	// succeed at once; why says why the provider has no pending refund.
	pendingRefunds(on bool) (why string)
	// finishRefund has the provider finish the order's pending refund refundNo successfully and
	// deliver its notification.
	finishRefund(no, refundNo string) delivered
	// refundNotices delivers the notifications the provider sends about the order's refunds
	// that were not delivered yet (none where it sends none).
	refundNotices(no string) []delivered
	// payLate has the buyer pay the order and holds its notification back: late delivers it
	// (callable again, as a resend). why says why the provider cannot.
	payLate(no string) (late func() delivered, why string)
	// refundsByNumber reports whether the provider keeps a refund by its number (epay has none).
	refundsByNumber() bool
	// refundGap makes the provider check an order and pay its refund out d apart, not
	// atomically (0: atomic again); false when the simulator cannot.
	refundGap(d time.Duration) bool
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

func (k stripeKit) pay(no string) delivered {
	d, err := k.sim.Pay(ctxOf(k.e.t), no)
	if err != nil {
		k.e.t.Fatal(err)
	}
	return deliveredOf(d)
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
			return held[i].Event
		}
	}
	k.e.t.Fatalf("no event held for %s", no)
	return stripesim.Event{}
}

func (k stripeKit) deliver(ev stripesim.Event, f stripesim.Forgery) func() delivered {
	return func() delivered { return deliveredOf(k.sim.Deliver(ctxOf(k.e.t), ev, f)) }
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
	k.e.wantAccepted(k, deliveredOf(d)) // completed, unpaid: nothing to do yet
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
	return deliveredOf(d), []func() delivered{k.deliver(failed, stripesim.Genuine), k.deliver(expired, stripesim.Genuine)}
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
		k.e.wantAccepted(k, deliveredOf(d))
	}
	return expiredByAPI
}

// otherMerchant: the session's currency changed (usd), signed with the endpoint secret. A
// Stripe event names no merchant or app the shop could check: the webhook secret is the
// endpoint's own.
func (k stripeKit) otherMerchant(no string) ([]delivered, func() delivered, string) {
	ev := k.heldEvent(no)
	usd := ev
	usd.Body = bytes.ReplaceAll(ev.Body, []byte(`"currency": "cny"`), []byte(`"currency": "usd"`))
	if bytes.Equal(usd.Body, ev.Body) {
		k.e.t.Fatalf("no currency cny in %s", ev.Body)
	}
	return []delivered{k.deliver(usd, stripesim.Genuine)()}, k.deliver(ev, stripesim.Genuine), ""
}

func (k stripeKit) payouts(no string) (int, bool) {
	n, _ := k.sim.Payouts(no)
	return n, true
}

func (k stripeKit) refundsAt(no string) int {
	n := 0
	for _, r := range k.sim.Refunds() {
		if r.OrderNo == no {
			n++
		}
	}
	return n
}

func (k stripeKit) refuseRefunds(on bool) string {
	if on {
		k.sim.RefundRefuse("charge_disputed", "The charge has been disputed and cannot be refunded.")
	} else {
		k.sim.RefundRefuse("", "")
	}
	return ""
}

func (k stripeKit) refundOutage(on bool) string { k.sim.RefundOutage(on); return "" }

func (k stripeKit) loseRefundAnswer() bool { k.sim.LoseRepliesTo("/v1/refunds", 1); return true }

func (k stripeKit) pendingRefunds(on bool) string { k.sim.RefundPending(on); return "" }

func (k stripeKit) refundsByNumber() bool { return true }

func (k stripeKit) refundGap(time.Duration) bool { return false }

// finishRefund: the bank's answer; refund.updated with status succeeded.
func (k stripeKit) finishRefund(no, _ string) delivered {
	d, err := k.sim.SettleRefund(ctxOf(k.e.t), no, true, "")
	if err != nil {
		k.e.t.Fatal(err)
	}
	return deliveredOf(d)
}

// refundNotices: the refund.created and charge.refunded events the refunds made.
func (k stripeKit) refundNotices(string) []delivered {
	var out []delivered
	for _, d := range k.sim.Flush(ctxOf(k.e.t)) {
		out = append(out, deliveredOf(d))
	}
	return out
}

func (k stripeKit) payLate(no string) (func() delivered, string) {
	return k.deliver(k.heldEvent(no), stripesim.Genuine), ""
}

// epayKit drives epaysim.
type epayKit struct {
	formKit[epaysim.Note, epaysim.Forgery]
	sim *epaysim.Sim
}

func newEpayKit(e *payEnv) epayKit {
	return epayKit{formKit[epaysim.Note, epaysim.Forgery]{e: e, fsim: e.epay,
		orderOf: func(n epaysim.Note) string { return n.OutTradeNo }, notAck: epaysim.ErrNotAcknowledged}, e.epay}
}

func (k epayKit) name() string { return "epay" }

func (k epayKit) reply(accepted bool) (int, string) {
	if accepted {
		return 200, "success"
	}
	return 200, "fail"
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

func (k epayKit) held(no string) func() delivered {
	k.payHeld(no)
	return k.resendOf(no)
}

// payThenStale: after TRADE_SUCCESS, validly signed notices with other trade statuses (epay
// v1 sends none, a gateway's own variant might).
func (k epayKit) payThenStale(no string) (delivered, []func() delivered) {
	return k.stale(no, "TRADE_CLOSED", "WAIT_BUYER_PAY")
}

func (k epayKit) foreignPay(no string) delivered {
	gw, err := epay.New(epay.Config{GatewayURL: k.sim.URL(), PID: k.sim.PID(), Key: domain.Secret(k.sim.Key()), Mode: epay.ModeAPI})
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
	for key, vs := range k.payHeld(no).Note.Params {
		params[key] = append([]string(nil), vs...)
	}
	params.Set("money", "20.01")
	params.Set("sign", k.sim.Sign(params))
	d, err := k.sim.Deliver(ctxOf(k.e.t), k.e.public+"/api/payments/epay/notify", params)
	if err != nil {
		k.e.t.Fatal(err)
	}
	return deliveredOf(d), k.resendOf(no)
}

// forgeries: epay's notifications carry no timestamp, so there is no stale one to forge.
func (k epayKit) forgeries(no string) ([]delivered, func() delivered) {
	return k.forged(no, epaysim.WrongKey, epaysim.TamperedMoney, epaysim.OtherPID, epaysim.Unsigned),
		func() delivered { return k.pay(no) }
}

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

// statusAfterClose: epay v1 cannot close a payment, so it stays OPEN (payable there; a
// payment after the close takes the late-payment path).
func (k epayKit) statusAfterClose() string { return "OPEN" }

// settledThere: the gateway has the order unpaid.
func (k epayKit) settledThere(no string) bool {
	o, ok := k.sim.Order(no)
	return ok && !o.Paid
}

// otherMerchant: epay's notifications carry no currency and no app; another merchant's pid,
// signed with this merchant's KEY, is among the forgeries.
func (k epayKit) otherMerchant(string) ([]delivered, func() delivered, string) {
	return nil, nil, "an epay notification carries no currency and no app; another pid is among the forgeries"
}

func (k epayKit) payouts(no string) (int, bool) { return k.sim.Payouts(no), true }

func (k epayKit) refundsAt(no string) int { return k.sim.Payouts(no) }

func (k epayKit) refuseRefunds(on bool) string {
	if on {
		k.sim.RefundRefuse("商户余额不足")
	} else {
		k.sim.RefundRefuse("")
	}
	return ""
}

// refundOutage: the whole gateway down (epay's refund first reads the order at api.php).
func (k epayKit) refundOutage(on bool) string { k.sim.Outage(on); return "" }

func (k epayKit) loseRefundAnswer() bool { k.sim.LoseRefundReplies(1); return true }

// pendingRefunds: epay's refund API answers done or refused at once.
func (k epayKit) pendingRefunds(bool) string {
	return "epay's refund API answers at once: there is no pending refund"
}

func (k epayKit) finishRefund(string, string) delivered { return delivered{} }

func (k epayKit) refundsByNumber() bool { return false }

func (k epayKit) refundGap(d time.Duration) bool { k.sim.RefundGap(d); return true }

// refundNotices: epay sends no notification about a refund.
func (k epayKit) refundNotices(string) []delivered { return nil }

// alipayKit drives alipaysim (one attempt per notification: the kit resends where a case
// wants it).
type alipayKit struct {
	formKit[alipaysim.Note, alipaysim.Forgery]
	sim *alipaysim.Sim
}

func newAlipayKit(e *payEnv) alipayKit {
	return alipayKit{formKit[alipaysim.Note, alipaysim.Forgery]{e: e, fsim: e.alipay,
		orderOf: func(n alipaysim.Note) string { return n.OutTradeNo }, notAck: alipaysim.ErrNotAcknowledged}, e.alipay}
}

func (k alipayKit) name() string { return "alipay" }

func (k alipayKit) reply(accepted bool) (int, string) {
	if accepted {
		return 200, "success"
	}
	return 200, "failure"
}

// held: the buyer pays, the notification is lost on the way; the deliveries are resends.
func (k alipayKit) held(no string) func() delivered {
	k.payDropped(no)
	return k.resendOf(no)
}

// payThenStale: TRADE_CLOSED and WAIT_BUYER_PAY notices of the trade, genuinely signed, after
// its TRADE_SUCCESS (Alipay notifies a close, and notifications arrive out of order).
func (k alipayKit) payThenStale(no string) (delivered, []func() delivered) {
	return k.stale(no, alipay.TradeClosed, alipay.WaitBuyerPay)
}

// gateway is an Alipay gateway of the shop's application, outside the shop.
func (k alipayKit) gateway() *alipay.Gateway {
	gw, err := alipay.New(alipay.Config{GatewayURL: k.sim.URL(), AppID: k.sim.AppID(), SellerID: k.sim.SellerID(),
		PrivateKey: domain.Secret(privateKeyPEM(testPayKeys().alipayApp)), AlipayPublicKey: k.sim.PublicKeyPEM(),
		Method: alipay.MethodPrecreate})
	if err != nil {
		k.e.t.Fatal(err)
	}
	return gw
}

func (k alipayKit) foreignPay(no string) delivered {
	if _, err := k.gateway().Create(ctxOf(k.e.t), domain.PaymentRequest{OrderNo: domain.OrderNo(no), Amount: payQty * payPrice,
		Currency: domain.Currency{Code: "CNY", Exponent: 2}, Subject: "elsewhere", ExpiresAt: time.Now().Add(time.Hour),
		NotifyURL: k.e.public + "/api/payments/alipay/notify"}); err != nil {
		k.e.t.Fatal(err)
	}
	return k.pay(no)
}

// tamperedAmount: the lost notification with total_amount 20.01, signed again with Alipay's key.
func (k alipayKit) tamperedAmount(no string) (delivered, func() delivered) {
	k.payDropped(no)
	params := url.Values{}
	for key, vs := range k.last(no).Note.Params {
		params[key] = append([]string(nil), vs...)
	}
	params.Set("total_amount", "20.01")
	k.sim.SignNotification(params)
	d, err := k.sim.Deliver(ctxOf(k.e.t), k.e.public+"/api/payments/alipay/notify", params)
	if err != nil {
		k.e.t.Fatal(err)
	}
	return deliveredOf(d), k.resendOf(no)
}

// otherMerchant: another app_id and another seller_id, genuinely signed by Alipay. Alipay's
// domestic notifications carry no currency (CNY).
func (k alipayKit) otherMerchant(no string) ([]delivered, func() delivered, string) {
	return k.forged(no, alipaysim.OtherAppID, alipaysim.OtherSeller), func() delivered { return k.pay(no) }, ""
}

// forgeries: another key, total_amount edited after signing, no sign. Alipay resends one
// notification for about 25 hours with its first notify_time, so there is no stale one to
// forge.
func (k alipayKit) forgeries(no string) ([]delivered, func() delivered) {
	return k.forged(no, alipaysim.WrongKey, alipaysim.TamperedAmount, alipaysim.Unsigned), func() delivered { return k.pay(no) }
}

// loseReply: alipaysim loses refund answers only; a precreate sent again is the same trade
// (keyed by out_trade_no).
func (k alipayKit) loseReply() func(string) bool { return nil }

func (k alipayKit) created(no string) int {
	n := 0
	for _, r := range k.sim.Requests() {
		if r.Method == "alipay.trade.precreate" && r.Refused == "" && r.Biz["out_trade_no"] == no {
			n++
		}
	}
	return n
}

func (k alipayKit) statusAfterClose() string { return "EXPIRED" }

// settledThere: alipay.trade.close was answered after the outage (the trade closed, or none
// was ever opened: the buyer never scanned), and the buyer can no longer pay.
func (k alipayKit) settledThere(no string) bool {
	closed := false
	for _, r := range k.sim.Requests() {
		if r.Method == "alipay.trade.close" && r.Biz["out_trade_no"] == no && (r.Refused == "" || r.Refused == "ACQ.TRADE_NOT_EXIST") {
			closed = true
		}
	}
	err := k.sim.Pay(ctxOf(k.e.t), no)
	return closed && (errors.Is(err, alipaysim.ErrExpired) || errors.Is(err, alipaysim.ErrClosed))
}

func (k alipayKit) payouts(no string) (int, bool) {
	t, _ := k.sim.Trade(no)
	return len(t.Refunds), true
}

func (k alipayKit) refundsAt(no string) int { n, _ := k.payouts(no); return n }

func (k alipayKit) refuseRefunds(on bool) string {
	if on {
		k.sim.RefundRefuse("ACQ.SELLER_BALANCE_NOT_ENOUGH", "卖家余额不足")
	} else {
		k.sim.RefundRefuse("", "")
	}
	return ""
}

// refundOutage: alipay.trade.refund answers ACQ.SYSTEM_ERROR.
func (k alipayKit) refundOutage(on bool) string { k.sim.RefundOutage(on); return "" }

func (k alipayKit) loseRefundAnswer() bool { k.sim.LoseRefundAnswers(1); return true }

// pendingRefunds: alipay.trade.refund answers the refund done (fund_change Y) or refused.
func (k alipayKit) pendingRefunds(bool) string {
	return "alipay.trade.refund answers at once: there is no pending refund"
}

func (k alipayKit) finishRefund(string, string) delivered { return delivered{} }

func (k alipayKit) refundsByNumber() bool { return true }

func (k alipayKit) refundGap(time.Duration) bool { return false }

// refundNotices: the notification of the trade's last refund (TRADE_CLOSED, out_biz_no,
// refund_fee), as Alipay sends it to the trade's notify_url.
func (k alipayKit) refundNotices(no string) []delivered {
	if err := k.sim.NotifyRefund(ctxOf(k.e.t), no); err != nil && !errors.Is(err, alipaysim.ErrNotAcknowledged) {
		k.e.t.Fatal(err)
	}
	return []delivered{deliveredOf(k.last(no))}
}

// wechatKit drives wechatsim (one POST per delivery: the kit delivers again where a case wants
// a resend; refunds SUCCESS at once unless pendingRefunds).
type wechatKit struct {
	e   *payEnv
	sim *wechatsim.Server
}

func (k wechatKit) name() string { return "wechatpay" }

func (k wechatKit) reply(accepted bool) (int, string) {
	if accepted {
		return 204, ""
	}
	return 400, `{"code":"FAIL","message":"refused"}`
}

// deliver sends n, forged as f says.
func (k wechatKit) deliver(n wechatsim.Notification, f wechatsim.Forgery) func() delivered {
	return func() delivered { return deliveredOf(k.sim.Deliver(ctxOf(k.e.t), n, f)...) }
}

// paid has the buyer pay; TRANSACTION.SUCCESS is made, not sent.
func (k wechatKit) paid(no string) wechatsim.Notification {
	n, err := k.sim.PayNotification(no)
	if err != nil {
		k.e.t.Fatal(err)
	}
	return n
}

// resealed is n's transaction edited, encrypted again and sent under a new id: genuinely
// signed by WeChat Pay when delivered.
func (k wechatKit) resealed(n wechatsim.Notification, edit func(tx map[string]any)) wechatsim.Notification {
	var tx map[string]any
	if err := json.Unmarshal(n.Plain, &tx); err != nil {
		k.e.t.Fatal(err)
	}
	edit(tx)
	plain, err := json.Marshal(tx)
	if err != nil {
		k.e.t.Fatal(err)
	}
	out := n
	out.ID, out.Plain = fmt.Sprintf("%s-%d", n.ID[:24], time.Now().UnixNano()%1e12), plain
	if out.Body, err = wechatsim.Seal(k.e.wechatGW.v3key, out.ID, n.EventType, "支付成功", "transaction", time.Now(), plain); err != nil {
		k.e.t.Fatal(err)
	}
	return out
}

func (k wechatKit) pay(no string) delivered {
	ds, err := k.sim.Pay(ctxOf(k.e.t), no)
	if err != nil {
		k.e.t.Fatal(err)
	}
	return deliveredOf(ds...)
}

func (k wechatKit) held(no string) func() delivered { return k.deliver(k.paid(no), wechatsim.Genuine) }

// payThenStale: WeChat Pay notifies successes only; transactions of the same payment with
// trade_state CLOSED and PAYERROR, genuinely signed, stand for notices that say otherwise
// (a replay of an older state, a variant of the API).
func (k wechatKit) payThenStale(no string) (delivered, []func() delivered) {
	n := k.paid(no)
	paid := k.deliver(n, wechatsim.Genuine)()
	var stale []func() delivered
	for _, state := range []string{"CLOSED", "PAYERROR"} {
		stale = append(stale, k.deliver(k.resealed(n, func(tx map[string]any) { tx["trade_state"] = state }), wechatsim.Genuine))
	}
	return paid, stale
}

// gateway is a WeChat Pay gateway of the shop's merchant account, outside the shop.
func (k wechatKit) gateway() *wechatpay.Gateway {
	c := k.e.wechatGW
	gw, err := wechatpay.New(wechatpay.Config{BaseURL: k.sim.URL, MchID: c.mchID, AppID: c.appID, MerchantSerial: c.serial,
		MerchantPrivateKeyPEM: c.privatePEM, APIv3Key: c.v3key, PublicKeyID: k.sim.PublicKeyID(), PublicKeyPEM: k.sim.PublicKeyPEM()})
	if err != nil {
		k.e.t.Fatal(err)
	}
	return gw
}

func (k wechatKit) foreignPay(no string) delivered {
	if _, err := k.gateway().Create(ctxOf(k.e.t), domain.PaymentRequest{OrderNo: domain.OrderNo(no), Amount: payQty * payPrice,
		Currency: domain.Currency{Code: "CNY", Exponent: 2}, Subject: "elsewhere", ExpiresAt: time.Now().Add(time.Hour),
		NotifyURL: k.e.public + "/api/payments/wechatpay/notify"}); err != nil {
		k.e.t.Fatal(err)
	}
	return k.pay(no)
}

// tamperedAmount: amount.total 2001 (and payer_total), encrypted and signed by WeChat Pay.
func (k wechatKit) tamperedAmount(no string) (delivered, func() delivered) {
	n := k.paid(no)
	more := k.resealed(n, func(tx map[string]any) {
		a := tx["amount"].(map[string]any)
		a["total"], a["payer_total"] = payQty*payPrice+1, payQty*payPrice+1
	})
	return k.deliver(more, wechatsim.Genuine)(), k.deliver(n, wechatsim.Genuine)
}

// otherMerchant: another mchid, another appid (resource encrypted again, signed correctly),
// and amount.currency USD, genuinely signed.
func (k wechatKit) otherMerchant(no string) ([]delivered, func() delivered, string) {
	n := k.paid(no)
	usd := k.resealed(n, func(tx map[string]any) {
		a := tx["amount"].(map[string]any)
		a["currency"], a["payer_currency"] = "USD", "USD"
	})
	return []delivered{k.deliver(n, wechatsim.OtherMerchant)(), k.deliver(n, wechatsim.OtherApp)(), k.deliver(usd, wechatsim.Genuine)()},
		k.deliver(n, wechatsim.Genuine), ""
}

// forgeries: another key, a serial the shop does not have, a timestamp 5 minutes old, no
// signature, the amount re-encrypted under the original signature, a flipped ciphertext. Not
// wechatsim.FutureTimestamp: "5 minutes ahead" in whole seconds arrives inside the window on a
// running clock (the gateway's tests check that edge on a frozen one).
func (k wechatKit) forgeries(no string) ([]delivered, func() delivered) {
	n := k.paid(no)
	var out []delivered
	for _, f := range []wechatsim.Forgery{wechatsim.WrongKey, wechatsim.UnknownSerial, wechatsim.StaleTimestamp,
		wechatsim.Unsigned, wechatsim.TamperedAmount, wechatsim.BadCiphertext} {
		out = append(out, k.deliver(n, f)())
	}
	return out, k.deliver(n, wechatsim.Genuine)
}

func (k wechatKit) outage(on bool) { k.sim.Outage(on) }

func (k wechatKit) loseReply() func(string) bool {
	k.sim.LoseReplies(1)
	return func(no string) bool {
		lost, answered := 0, 0
		for _, r := range k.sim.Requests() {
			if r.URI == "/v3/pay/transactions/native" && strings.Contains(string(r.Body), `"out_trade_no":"`+no+`"`) {
				if r.Lost {
					lost++
				} else if r.Status == 200 {
					answered++
				}
			}
		}
		return lost == 1 && answered >= 1
	}
}

// created: WeChat Pay keeps one order per out_trade_no; a repeated create answers it again.
func (k wechatKit) created(no string) int {
	if _, ok := k.sim.OrderOf(no); ok {
		return 1
	}
	return 0
}

// payDropped: the buyer pays and the notification is lost; resend sends it.
func (k wechatKit) payDropped(no string) { k.e.withheld.Store(no, k.paid(no)) }

func (k wechatKit) resend(no string) (delivered, bool) {
	n, ok := k.e.withheld.Load(no)
	if !ok {
		return delivered{}, false
	}
	return k.deliver(n.(wechatsim.Notification), wechatsim.Genuine)(), true
}

func (k wechatKit) statusAfterClose() string { return "EXPIRED" }

// settledThere: the order is CLOSED at WeChat Pay, and WeChat Pay said so after the outage:
// its close API answered 204, or a query answered the order CLOSED. The second happens when the
// outage ends between one attempt's close (refused by the outage) and its query: by then the
// order has lapsed at its time_expire, and WeChat Pay's answer is as final as a close.
func (k wechatKit) settledThere(no string) bool {
	o, ok := k.sim.OrderOf(no)
	said := false
	for _, r := range k.sim.Requests() {
		closed := r.URI == "/v3/pay/transactions/out-trade-no/"+no+"/close" && r.Status == 204
		queried := strings.HasPrefix(r.URI, "/v3/pay/transactions/out-trade-no/"+no+"?") && r.Status == 200
		said = said || closed || queried
	}
	return ok && o.TradeState == "CLOSED" && said
}

func (k wechatKit) refunds(no string) []wechatsim.Refund {
	var out []wechatsim.Refund
	for _, r := range k.sim.Refunds() {
		if r.OutTradeNo == no {
			out = append(out, r)
		}
	}
	return out
}

func (k wechatKit) payouts(no string) (int, bool) {
	n := 0
	for _, r := range k.refunds(no) {
		if r.Status == "SUCCESS" {
			n++
		}
	}
	return n, true
}

func (k wechatKit) refundsAt(no string) int { return len(k.refunds(no)) }

func (k wechatKit) refuseRefunds(on bool) string {
	if on {
		k.sim.RefundRefuse("NOT_ENOUGH", "基本账户余额不足，请充值后重新发起")
	} else {
		k.sim.RefundRefuse("", "")
	}
	return ""
}

func (k wechatKit) refundOutage(on bool) string { k.sim.RefundOutage(on); return "" }

func (k wechatKit) loseRefundAnswer() bool { k.sim.LoseReplies(1); return true }

// pendingRefunds: PROCESSING until finishRefund.
func (k wechatKit) pendingRefunds(on bool) string { k.sim.RefundAtOnce(!on); return "" }

func (k wechatKit) refundsByNumber() bool { return true }

func (k wechatKit) refundGap(time.Duration) bool { return false }

// finishRefund: REFUND.SUCCESS to the refund notify URL of the merchant platform.
func (k wechatKit) finishRefund(_, refundNo string) delivered {
	ds, err := k.sim.CompleteRefund(ctxOf(k.e.t), refundNo, "SUCCESS")
	if err != nil {
		k.e.t.Fatal(err)
	}
	return deliveredOf(ds...)
}

// refundNotices: REFUND.SUCCESS of the refunds answered SUCCESS at once.
func (k wechatKit) refundNotices(string) []delivered {
	var out []delivered
	for _, d := range k.sim.Flush(ctxOf(k.e.t)) {
		out = append(out, deliveredOf(d))
	}
	return out
}

func (k wechatKit) payLate(no string) (func() delivered, string) {
	return k.deliver(k.paid(no), wechatsim.Genuine), ""
}

// devKit drives the dev provider through its pay page. It runs the refund cases only: its
// payments are confirmed by a form post inside the service, not notified, so the
// notification cases do not apply (the embedded payKit is nil: none of them calls it).
type devKit struct {
	payKit
	e *payEnv
}

func (k devKit) name() string { return "dev" }

// confirm opens the payment's pay page (it shows the amount and the order) and presses
// choice ("pay" or "fail").
func (k devKit) confirm(p paymentBody, choice string) {
	e := k.e
	e.t.Helper()
	status, page := e.c.do("GET", strings.TrimPrefix(p.PayURL, e.public), "", "")
	if status != 200 || !strings.Contains(string(page), "20.00") || !strings.Contains(string(page), "CNY") || !strings.Contains(string(page), p.OrderNo) {
		e.t.Fatalf("pay page %s: %d %s", p.PayURL, status, page)
	}
	action, form := devForm(e.t, string(page))
	form.Set("choice", choice)
	status, done := e.c.do("POST", "/dev/pay/"+action, "", form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	if status != 200 {
		e.t.Fatalf("confirm %s: %d %s", choice, status, done)
	}
}

// payouts: the dev provider moves pretend money only: there is nothing to count.
func (k devKit) payouts(string) (int, bool) { return 0, false }

func (k devKit) refuseRefunds(bool) string {
	return "the dev provider returns its pretend money at once: it never refuses"
}

func (k devKit) refundOutage(bool) string {
	return "the dev provider runs inside the service: it cannot be unreachable"
}

func (k devKit) pendingRefunds(bool) string { return "the dev provider's refunds succeed at once" }

func (k devKit) refundsByNumber() bool { return true }

func (k devKit) refundGap(time.Duration) bool { return false }

func (k devKit) refundNotices(string) []delivered { return nil }

func (k devKit) payLate(string) (func() delivered, string) {
	return nil, "the dev provider's payment is expired by the close itself (inside the service): a press after it pays nothing"
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
