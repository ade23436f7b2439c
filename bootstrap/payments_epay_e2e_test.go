package bootstrap_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"cardshop/adapters/epay"
	"cardshop/adapters/porttest"
)

// The epay cases of the payment table (docs/RELIABILITY.md): epay's MD5 signature over raw
// "k=v&…" values is weak by design, so no value with a separator is signed or accepted and
// every success is confirmed by the gateway's order query.

// epayOf is the case's epay simulator.
func epayOf(k payKit) epayKit { return k.(epayKit) }

// placeOf places an order of qty of product for the case's buyer.
func (e *payEnv) placeOf(product int64, qty int) payOrder {
	e.t.Helper()
	var o payOrder
	e.c.want(201, "POST", "/api/order", e.buyer, fmt.Sprintf(`{"product_id":%d,"qty":%d}`, product, qty), &o,
		"Idempotency-Key", fmt.Sprintf("pay-%d-%d", e.product, e.seq.Add(1)))
	return o
}

// caseEpayNameInjection: an operator names a product
// "P&out_trade_no=<victim>&pid=…&trade_no=X1&trade_status=TRADE_SUCCESS&type=alipay&z=" and
// orders it for the victim's amount; the signature of its redirect pay URL, replayed with the
// parameters the name injects as a notification for the victim's PENDING order, is refused
// (the name was signed with '＆' '＝', and a value with a separator is refused anyway): the
// victim stays PENDING; then paid at the gateway, it is PAID, confirmed by the query.
func caseEpayNameInjection(e *payEnv, k payKit) {
	sim := epayOf(k).sim
	victim := e.place()
	vp := e.createPayment(victim.OrderNo, "epay", 201)
	if _, err := sim.Open(ctxOf(e.t), vp.PayURL); err != nil {
		e.t.Fatal(err)
	}

	evil := int64(porttest.NewProductID())
	name := "P&out_trade_no=" + victim.OrderNo + "&pid=" + sim.PID() + "&trade_no=X1&trade_status=TRADE_SUCCESS&type=alipay&z="
	body, _ := json.Marshal(map[string]any{"id": evil, "name": name, "price": payPrice, "max_per_order": 5})
	e.c.want(201, "POST", "/admin/products", adminToken, string(body), nil)
	e.c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", evil), adminToken, fmt.Sprintf("EVIL-%d-1\nEVIL-%d-2", evil, evil), nil)
	bait := e.placeOf(evil, payQty)
	if bait.Amount != victim.Amount {
		e.t.Fatalf("the bait costs %d, the victim %d", bait.Amount, victim.Amount)
	}
	bp := e.createPayment(bait.OrderNo, "epay", 201)
	u, err := url.Parse(bp.PayURL)
	if err != nil || !strings.HasSuffix(u.Path, "/submit.php") || u.Query().Get("sign") == "" {
		e.t.Fatalf("not a signed redirect: %q", bp.PayURL)
	}
	q := u.Query()

	// The attacker's notification: what the injection names, z absorbing the rest of the
	// signed string, and the pay URL's signature.
	p := epay.Params{}
	for key := range q {
		p[key] = q.Get(key)
	}
	joined := epay.SigningString(p, "", epay.SignAppend)
	i := strings.Index(joined, "&notify_url=")
	forged := url.Values{"money": {q.Get("money")}, "name": {"P"}, "out_trade_no": {victim.OrderNo}, "pid": {sim.PID()},
		"trade_no": {"X1"}, "trade_status": {"TRADE_SUCCESS"}, "type": {q.Get("type")}, "z": {fmt.Sprintf(" × %d", payQty) + joined[i:]},
		"sign": {q.Get("sign")}, "sign_type": {"MD5"}}
	since, before := e.lastNotificationID(), e.refusedNotifications(k)
	d, err := sim.Deliver(ctxOf(e.t), e.public+"/api/payments/epay/notify", forged)
	if err != nil {
		e.t.Fatal(err)
	}
	e.wantRefused(k, deliveredOf(d))
	if got := e.wantStatus(victim.OrderNo, "PENDING"); len(got.Codes) != 0 {
		e.t.Fatalf("the victim got codes: %+v", got)
	}
	if ps := e.payments(victim.OrderNo); len(ps) != 1 || ps[0].Status != "OPEN" {
		e.t.Fatalf("the victim's payments %+v", ps)
	}
	// Refused before verification: counted once, and logged (if this address's aggregate of the
	// minute is new) unverified, without an order.
	if n := e.refusedNotifications(k) - before; n != 1 {
		e.t.Fatalf("%d notifications counted refused for the forged one", n)
	}
	for _, r := range e.notificationsSince(k, since) {
		if r.Verified || r.Accepted || r.OrderNo != "" {
			e.t.Fatalf("the forged notification logged as %+v, want it unverified, without an order", r)
		}
	}
	if signed := q.Get("name"); strings.ContainsAny(signed, "&=") || !strings.HasPrefix(signed, "P＆out_trade_no＝"+victim.OrderNo) {
		e.t.Fatalf("the pay URL signs the name %q", signed)
	}

	// The victim pays: the genuine success, confirmed by the query, pays.
	e.wantAccepted(k, k.pay(victim.OrderNo))
	e.wantPaidThrough(k, victim.OrderNo)
	if got := e.results(victim.OrderNo); len(got) != 1 || got[0] != "paid" {
		e.t.Fatalf("the victim's notifications %q", got)
	}
}

// caseEpayUnconfirmed: a TRADE_SUCCESS signed with the merchant KEY for an order the gateway
// has unpaid, and one paid there but naming another trade_no: each refused, the order stays
// PENDING; the genuine one pays.
func caseEpayUnconfirmed(e *payEnv, k payKit) {
	sim := epayOf(k).sim
	o := e.place()
	p := e.createPayment(o.OrderNo, "epay", 201)
	d, err := sim.Notify(ctxOf(e.t), o.OrderNo, "TRADE_SUCCESS")
	if err != nil {
		e.t.Fatal(err)
	}
	e.wantRefused(k, deliveredOf(d))
	e.wantStatus(o.OrderNo, "PENDING")

	held := epayOf(k).payHeld(o.OrderNo) // paid at the gateway, the notification held
	other := url.Values{}
	for key, vs := range held.Note.Params {
		other[key] = append([]string(nil), vs...)
	}
	other.Set("trade_no", p.ProviderRef+"9")
	other.Set("sign", sim.Sign(other))
	if d, err = sim.Deliver(ctxOf(e.t), e.public+"/api/payments/epay/notify", other); err != nil {
		e.t.Fatal(err)
	}
	e.wantRefused(k, deliveredOf(d))
	e.wantStatus(o.OrderNo, "PENDING")
	got := e.results(o.OrderNo)
	if len(got) != 2 || !strings.HasPrefix(got[0], "refused") || !strings.HasPrefix(got[1], "refused") {
		e.t.Fatalf("logged %q, want two refusals", got)
	}

	e.wantAccepted(k, epayOf(k).resendOf(o.OrderNo)())
	e.wantPaidThrough(k, o.OrderNo)
}

// caseEpayConfirmOutage: the buyer pays while the gateway's API is down: every notification is
// refused (not applied yet: the query cannot be made), nothing is paid; once the gateway
// answers, its resend pays.
func caseEpayConfirmOutage(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, "epay", 201)
	k.outage(true)
	if d := k.pay(o.OrderNo); d.err != nil || d.status != 503 || d.body != "fail" {
		e.t.Fatalf("a success while the query cannot be made answered %d %q (%v), want 503 \"fail\"", d.status, d.body, d.err)
	}
	k.outage(false)
	e.wantStatus(o.OrderNo, "PENDING")
	got := e.results(o.OrderNo)
	if len(got) == 0 {
		e.t.Fatal("no notification logged")
	}
	for _, r := range got {
		if !strings.HasPrefix(r, "not applied yet") {
			e.t.Fatalf("logged %q, want each not applied yet", got)
		}
	}
	d, _ := k.resend(o.OrderNo)
	e.wantAccepted(k, d)
	e.wantPaidThrough(k, o.OrderNo)
}

// caseEpayReversedAtGateway: two buyers pay and their notifications are lost; the merchant
// refunds one in the gateway's console, the gateway freezes the other. At the orders' expiry
// the query says refunded / frozen: both CLOSED, never PAID, with payment_refunded_at_provider
// (the payment REFUNDED) and payment_frozen_at_provider; the refunded one's resend is refused.
// The frozen one released and resent takes the confirmed late path.
func caseEpayReversedAtGateway(e *payEnv, k payKit) {
	sim := epayOf(k).sim
	refunded, frozen := e.place(), e.place()
	for _, o := range []payOrder{refunded, frozen} {
		e.createPayment(o.OrderNo, "epay", 201)
		k.payDropped(o.OrderNo)
	}
	if err := sim.RefundInConsole(refunded.OrderNo); err != nil {
		e.t.Fatal(err)
	}
	if err := sim.Freeze(frozen.OrderNo, true); err != nil {
		e.t.Fatal(err)
	}
	for _, c := range []struct {
		o      payOrder
		alert  string
		status string
	}{{refunded, "payment_refunded_at_provider", "REFUNDED"}, {frozen, "payment_frozen_at_provider", "OPEN"}} {
		if got := e.waitUntilNot(c.o.OrderNo, "PENDING", 20*time.Second); got.Status != "CLOSED" || len(got.Codes) != 0 {
			e.t.Fatalf("order after its expiry: %+v, want CLOSED without codes", got)
		}
		if !e.alerted(c.alert, c.o.OrderNo) {
			e.dumpLog()
			e.t.Fatalf("no %s alert for %s", c.alert, c.o.OrderNo)
		}
		if ps := e.payments(c.o.OrderNo); len(ps) != 1 || ps[0].Status != c.status {
			e.t.Fatalf("payments %+v, want one %s", ps, c.status)
		}
	}
	e.wantPayouts(k, refunded.OrderNo, 1)

	d, _ := k.resend(refunded.OrderNo)
	e.wantRefused(k, d)
	e.wantStatus(refunded.OrderNo, "CLOSED")

	if err := sim.Freeze(frozen.OrderNo, false); err != nil {
		e.t.Fatal(err)
	}
	d, _ = k.resend(frozen.OrderNo)
	e.wantAccepted(k, d)
	e.wantPaidThrough(k, frozen.OrderNo)
	if got := e.results(frozen.OrderNo); len(got) != 1 || got[0] != "paid late (order was CLOSED)" {
		e.t.Fatalf("the released payment logged as %q", got)
	}
}
