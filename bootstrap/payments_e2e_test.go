package bootstrap_test

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"

	"cardshop/adapters/adminclient"
	"cardshop/adapters/lab/paysim/alipaysim"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/adapters/lab/paysim/stripesim"
	"cardshop/adapters/lab/paysim/wechatsim"
	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/adapters/porttest"
	"cardshop/bootstrap"
	"cardshop/domain"
)

// The payment cases of docs/RELIABILITY.md ("Payment providers"), each run for Stripe, epay,
// Alipay and WeChat Pay (the refund cases for the dev provider too) through the service's HTTP
// API, against the providers' simulators, on the memory adapters (TestPaymentsEndToEnd) and on
// Redis, MariaDB and RabbitMQ (TestRealAdaptersPaymentsEndToEnd). Every case ends with the
// product's reconciliation.
//
// The cases of one group share one service and its simulators; each case has its own product,
// buyer and orders. Within a group the providers run side by side (a case switches only its
// own provider's simulator: the other provider of the foreign-payment case is dev, which
// nothing switches), the cases of one provider one after the other.

const payQty, payPrice = 2, 1000 // every case's order: 2 codes of 10.00 CNY, 20.00 CNY

// payGroup is the service a group of cases shares: its order timeout, its payment close
// grace (0: the default, 10 minutes) and its epay mode ("": api).
type payGroup struct {
	name     string
	timeout  time.Duration
	grace    time.Duration
	epayMode string
}

var (
	// ordersGroup: orders that never expire during a case.
	ordersGroup = payGroup{name: "orders", timeout: 10 * time.Minute}
	// expiringGroup: orders that fall due within the case; a close that fails waits.
	expiringGroup = payGroup{name: "expiring", timeout: 2 * time.Second}
	// closedGroup: a close that fails gives up soon, so the order closes with its payment
	// still open at the provider.
	closedGroup = payGroup{name: "closed late", timeout: 2 * time.Second, grace: 300 * time.Millisecond}
	// epayRedirectGroup: epay creates its payments as signed submit.php redirects.
	epayRedirectGroup = payGroup{name: "epay redirect", timeout: 10 * time.Minute, epayMode: "redirect"}
)

// Which providers run a case.
const (
	notified = iota // the providers that notify: Stripe, epay, Alipay, WeChat Pay
	refunds         // the providers that refund: those and dev
	callback        // none: the order is paid through the storefront's signed callback
	epayOnly        // epay: its own weaknesses (payments_epay_e2e_test.go)
)

var (
	notifiedProviders = []string{"stripe", "epay", "alipay", "wechatpay"}
	refundProviders   = []string{"stripe", "epay", "alipay", "wechatpay", "dev"}
)

// payCase is one case.
type payCase struct {
	name  string
	group payGroup
	runs  int // notified, refunds or callback
	run   func(e *payEnv, k payKit)
}

var payCases = []payCase{
	{"pay then ask again", ordersGroup, notified, casePayThenAskAgain},
	{"the same notification ten times at once", ordersGroup, notified, caseConcurrentDuplicates},
	{"a stale failure after the payment", ordersGroup, notified, caseStaleFailure},
	{"a success at the other provider", ordersGroup, notified, caseForeignPayment},
	{"an amount that differs, signed", ordersGroup, notified, caseAmountMismatch},
	{"another currency, app or merchant, signed", ordersGroup, notified, caseOtherMerchant},
	{"forged, unsigned and stale notifications", ordersGroup, notified, caseForgeries},
	{"the provider down during the create", ordersGroup, notified, caseCreateOutage},
	{"paid at the provider, notification lost, order expires", expiringGroup, notified, caseExpiresWhilePaid},
	{"the close fails, then succeeds", expiringGroup, notified, caseCloseFailsThenSucceeds},
	{"refund", ordersGroup, refunds, caseRefund},
	{"refund refused, then retried", ordersGroup, refunds, caseRefundRefused},
	{"refund timeout, then retried", ordersGroup, refunds, caseRefundTimeout},
	{"refund pending until the provider notifies", ordersGroup, refunds, caseRefundPending},
	{"refund pending keeps the operator's choice", ordersGroup, refunds, caseRefundPendingKeepsTheChoice},
	{"refunds of one order at once", ordersGroup, refunds, caseConcurrentRefunds},
	{"refund racing a late payment", closedGroup, refunds, caseRefundRacesLatePayment},
	{"fulfil during a pending refund", closedGroup, refunds, caseFulfilDuringPendingRefund},
	{"refund of an order paid through the signed callback", ordersGroup, callback, caseRefundCallbackPaid},
	{"a product name that forges a success for another order", epayRedirectGroup, epayOnly, caseEpayNameInjection},
	{"a signed success the gateway's query does not confirm", ordersGroup, epayOnly, caseEpayUnconfirmed},
	{"the gateway's query unreachable during a success", ordersGroup, epayOnly, caseEpayConfirmOutage},
	{"paid, then refunded or frozen at the gateway, notification lost, order expires", expiringGroup, epayOnly, caseEpayReversedAtGateway},
}

func TestPaymentsEndToEnd(t *testing.T) { runPayCases(t, bootstrap.AdaptersMemory) }

func TestRealAdaptersPaymentsEndToEnd(t *testing.T) {
	realConfigIn(t, time.Minute, paymentsDatabase) // Redis and MariaDB reachable, once for every case (or skip / fail under CI=true)
	runPayCases(t, bootstrap.AdaptersReal)
}

func runPayCases(t *testing.T, adapters string) {
	for _, g := range []payGroup{ordersGroup, expiringGroup, closedGroup, epayRedirectGroup} {
		t.Run(g.name, func(t *testing.T) {
			svc := newPayService(t, adapters, g)
			byProvider := map[string][]payCase{}
			var order []string
			for _, pc := range payCases {
				if pc.group != g {
					continue
				}
				providers := map[int][]string{notified: notifiedProviders, refunds: refundProviders, callback: {"callback"},
					epayOnly: {"epay"}}[pc.runs]
				for _, p := range providers {
					if byProvider[p] == nil {
						order = append(order, p)
					}
					byProvider[p] = append(byProvider[p], pc)
				}
			}
			// The providers side by side, each in its own goroutine (not t.Parallel, which -parallel
			// bounds to GOMAXPROCS: the cases mostly wait for expiries).
			var wg sync.WaitGroup
			for _, provider := range order {
				wg.Go(func() {
					t.Run(provider, func(t *testing.T) {
						for _, pc := range byProvider[provider] {
							t.Run(pc.name, func(t *testing.T) {
								e := svc.env(t)
								pc.run(e, e.kit(provider))
								e.checkInvariants()
							})
						}
					})
				})
			}
			wg.Wait()
		})
	}
}

// casePayThenAskAgain: create (a pay URL, or a QR code for Alipay's precreate and WeChat Pay's
// Native) → the buyer pays → the notification → PAID with its codes; the payment asked for
// again is the same one, 200.
func casePayThenAskAgain(e *payEnv, k payKit) {
	o := e.place()
	p := e.createPayment(o.OrderNo, k.name(), 201)
	if p.Status != "OPEN" || p.Amount != payQty*payPrice || p.Currency != "CNY" || p.PayURL+p.QRCode == "" || p.Provider != k.name() {
		e.t.Fatalf("created payment %+v", p)
	}
	e.wantAccepted(k, k.pay(o.OrderNo))
	paid := e.wantPaid(o.OrderNo)
	again := e.createPayment(o.OrderNo, k.name(), 200)
	// Alipay's trade_no and WeChat Pay's transaction_id come with the payment, not the create.
	if again.Status != "PAID" || again.ProviderRef == "" || p.ProviderRef != "" && again.ProviderRef != p.ProviderRef || !again.CreatedAt.Truncate(time.Microsecond).Equal(p.CreatedAt.Truncate(time.Microsecond)) {
		e.t.Fatalf("payment asked again: %+v, first %+v", again, p)
	}
	if want := k.name() + ":" + again.ProviderRef; paid.PaymentRef != want {
		e.t.Fatalf("order's payment_ref %q, want %q", paid.PaymentRef, want)
	}
	if got := e.results(o.OrderNo); len(got) != 1 || got[0] != "paid" {
		e.t.Fatalf("notification log %q, want one paid", got)
	}
}

// caseConcurrentDuplicates: one notification delivered ten times at once pays the order once;
// every delivery gets the provider's success reply.
func caseConcurrentDuplicates(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	deliver := k.held(o.OrderNo)
	replies := make([]delivered, 10)
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() { replies[i] = deliver() })
	}
	wg.Wait()
	for _, d := range replies {
		if status, body := k.reply(true); d.status != status || d.body != body {
			e.dumpLog() // why one was not accepted
		}
		e.wantAccepted(k, d)
	}
	e.wantPaid(o.OrderNo)
	results := e.results(o.OrderNo)
	paid, dups := 0, 0
	for _, r := range results {
		switch {
		case r == "paid":
			paid++
		case strings.HasPrefix(r, "duplicate"):
			dups++
		}
	}
	if paid != 1 || dups != 9 {
		e.t.Fatalf("notification log %q: want one paid and nine duplicates", results)
	}
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != "PAID" {
		e.t.Fatalf("payments %+v", ps)
	}
	if e.db != nil {
		var sold int
		if err := e.db.QueryRow("SELECT COUNT(*) FROM card_stock WHERE order_no=? AND status='SOLD'", o.OrderNo).Scan(&sold); err != nil || sold != payQty {
			e.t.Fatalf("SOLD codes of the order: %d, %v; want %d", sold, err, payQty)
		}
	}
}

// caseStaleFailure: after the payment, validly signed notices saying otherwise (failed,
// expired, closed) are acknowledged and change nothing.
func caseStaleFailure(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	paid, stale := k.payThenStale(o.OrderNo)
	e.wantAccepted(k, paid)
	before := e.wantPaid(o.OrderNo)
	for _, send := range stale {
		e.wantAccepted(k, send())
	}
	after := e.wantPaid(o.OrderNo)
	if strings.Join(after.Codes, ",") != strings.Join(before.Codes, ",") || after.PaymentRef != before.PaymentRef {
		e.t.Fatalf("the order changed: %+v, was %+v", after, before)
	}
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != "PAID" {
		e.t.Fatalf("payments after the stale notices %+v", ps)
	}
	got := e.results(o.OrderNo)
	if len(got) < 1+len(stale) || got[len(got)-len(stale)-1] != "paid" {
		e.t.Fatalf("notification log %q: want paid, then %d stale notices", got, len(stale))
	}
	for _, r := range got[len(got)-len(stale):] {
		if r == "paid" || strings.HasPrefix(r, "refused") {
			e.t.Fatalf("a stale notice logged as %q", r)
		}
	}
}

// caseForeignPayment: a validly signed success for an order whose payment is at another
// provider (dev) is refused with a foreign_payment alert; the order does not change.
func caseForeignPayment(e *payEnv, k payKit) {
	other := e.kit("dev")
	o := e.place()
	e.createPayment(o.OrderNo, other.name(), 201)
	e.wantRefused(k, k.foreignPay(o.OrderNo))
	e.wantStatus(o.OrderNo, "PENDING")
	if !e.alerted("foreign_payment", o.OrderNo) {
		e.t.Fatalf("no foreign_payment alert for %s; log:\n%s", o.OrderNo, e.logs.String())
	}
	recs := e.notifications(o.OrderNo)
	if len(recs) != 1 || !recs[0].Verified || recs[0].Accepted || recs[0].Provider != k.name() || !strings.HasPrefix(recs[0].Result, "refused") {
		e.t.Fatalf("notification log %+v", recs)
	}
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Provider != other.name() || ps[0].Status != "OPEN" {
		e.t.Fatalf("payments %+v", ps)
	}
}

// caseAmountMismatch: a correctly signed success for another amount is refused with an
// amount_mismatch alert; the genuine one pays the order afterwards.
func caseAmountMismatch(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	refused, genuine := k.tamperedAmount(o.OrderNo)
	e.wantRefused(k, refused)
	e.wantStatus(o.OrderNo, "PENDING")
	if !e.alerted("amount_mismatch", o.OrderNo) {
		e.t.Fatalf("no amount_mismatch alert for %s", o.OrderNo)
	}
	recs := e.notifications(o.OrderNo)
	if len(recs) != 1 || !recs[0].Verified || recs[0].Accepted || !strings.Contains(recs[0].Result, "amount") || recs[0].Amount != payQty*payPrice+1 {
		e.t.Fatalf("notification log %+v", recs)
	}
	e.wantAccepted(k, genuine())
	e.wantPaid(o.OrderNo)
}

// caseOtherMerchant: correctly signed successes that name another currency, another app or
// another merchant than the shop's are refused and change nothing (each provider's kit says
// which of these its notifications carry); the genuine one then pays the order.
func caseOtherMerchant(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	since, unverified := e.lastNotificationID(), e.refusedNotifications(k)
	refused, genuine, why := k.otherMerchant(o.OrderNo)
	if why != "" {
		e.t.Logf("does not apply to %s: %s", k.name(), why)
		return
	}
	for _, d := range refused {
		e.wantRefused(k, d)
	}
	e.wantStatus(o.OrderNo, "PENDING")
	// Those refused after their signature checked out have records of their own; those
	// refused before (another app or merchant, at some providers) are counted.
	recs := e.notificationsSince(k, since)
	verified := 0
	for _, r := range recs {
		if r.Accepted || !strings.HasPrefix(r.Result, "refused") {
			e.t.Fatalf("a notification of another currency, app or merchant logged as %+v", r)
		}
		if r.Verified {
			verified++
		}
	}
	if n := e.refusedNotifications(k) - unverified; verified+int(n) != len(refused) {
		e.t.Fatalf("%d verified notifications logged and %d refused before verification for %d refused ones: %+v",
			verified, n, len(refused), recs)
	}
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != "OPEN" {
		e.t.Fatalf("payments after the refused notifications %+v", ps)
	}
	e.wantAccepted(k, genuine())
	e.wantPaid(o.OrderNo)
}

// caseForgeries: forged, unsigned and stale notifications are refused, counted (in /metrics,
// and in the log as unverified aggregates per sender address and minute, without an order),
// and change nothing; the genuine one then pays the order.
func caseForgeries(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	since, before, start := e.lastNotificationID(), e.refusedNotifications(k), time.Now().Add(-time.Second)
	forged, genuine := k.forgeries(o.OrderNo)
	for _, d := range forged {
		e.wantRefused(k, d)
	}
	e.wantStatus(o.OrderNo, "PENDING")
	if n := e.refusedNotifications(k) - before; n != int64(len(forged)) {
		e.t.Fatalf("%d notifications counted refused for %d forged ones", n, len(forged))
	}
	for _, r := range e.notificationsSince(k, since) {
		if r.Verified || r.Accepted || r.Provider != k.name() || !strings.HasPrefix(r.Result, "refused") || r.OrderNo != "" {
			e.t.Fatalf("a forged notification logged as %+v", r)
		}
	}
	var newest []notificationRecord
	e.c.want(200, "GET", "/admin/payments/notifications?verified=false&limit=1000", adminToken, "", &struct {
		Notifications *[]notificationRecord `json:"notifications"`
	}{&newest})
	found := false
	for _, r := range newest {
		found = found || r.Provider == k.name() && !r.ReceivedAt.Before(start) && r.Count >= 1 && r.OrderNo == "" &&
			strings.HasPrefix(r.Result, "refused")
	}
	if !found {
		e.t.Fatalf("no aggregate of %s's refused notifications since %v in the log: %+v", k.name(), start, newest)
	}
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != "OPEN" {
		e.t.Fatalf("payments after the forgeries %+v", ps)
	}
	e.wantAccepted(k, genuine())
	e.wantPaid(o.OrderNo)
}

// caseCreateOutage: the provider down during the create answers 503; the retry afterwards
// creates exactly one payment at the provider (also when the provider did the first create
// and only its reply was lost, where the simulator can lose one).
func caseCreateOutage(e *payEnv, k payKit) {
	o := e.place()
	k.outage(true)
	e.createPaymentFails(o.OrderNo, k.name(), 503, "service_unavailable")
	k.outage(false)
	e.createPayment(o.OrderNo, k.name(), 201)
	if n := k.created(o.OrderNo); n != 1 {
		e.t.Fatalf("%d payments created at the provider, want 1", n)
	}
	if replayed := k.loseReply(); replayed != nil {
		// The provider carried out the create and its reply was lost: the create is sent
		// again with the same idempotency key (by the transport at once, or by the buyer's
		// retry after a 503) and answered from the provider's record.
		o2 := e.place()
		if status, body := e.c.do("POST", "/api/orders/"+o2.OrderNo+"/payment", e.buyer, fmt.Sprintf(`{"provider":%q}`, k.name())); status != 201 && status != 503 {
			e.t.Fatalf("create with a lost reply: %d %s", status, body)
		}
		e.createPayment(o2.OrderNo, k.name(), 0)
		if n := k.created(o2.OrderNo); n != 1 {
			e.t.Fatalf("%d payments at the provider after a lost reply and a retry, want 1", n)
		}
		if !replayed(o2.OrderNo) {
			e.t.Fatal("the provider saw no lost create answered again from its idempotency record")
		}
		e.wantAccepted(k, k.pay(o2.OrderNo))
		e.wantPaidThrough(k, o2.OrderNo)
	}
	e.wantAccepted(k, k.pay(o.OrderNo))
	e.wantPaidThrough(k, o.OrderNo)
}

// caseExpiresWhilePaid: the buyer paid but the notification was lost; when the order falls
// due the provider is asked, and the order is paid, never closed.
func caseExpiresWhilePaid(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	k.payDropped(o.OrderNo)
	got := e.waitUntilNot(o.OrderNo, "PENDING", 20*time.Second)
	if got.Status != "PAID" || len(got.Codes) != payQty {
		e.t.Fatalf("order after its expiry: %+v, want PAID with %d codes", got, payQty)
	}
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != "PAID" {
		e.t.Fatalf("payments %+v", ps)
	}
	if recs := e.notifications(o.OrderNo); len(recs) != 0 {
		e.t.Fatalf("notifications logged for a lost one: %+v", recs)
	}
	// The provider's late resend is a duplicate.
	if d, ok := k.resend(o.OrderNo); ok {
		e.wantAccepted(k, d)
		if got := e.results(o.OrderNo); len(got) != 1 || !strings.HasPrefix(got[0], "duplicate") {
			e.t.Fatalf("the late resend logged as %q", got)
		}
	}
}

// caseCloseFailsThenSucceeds: the provider cannot be reached when the order falls due, so
// the order waits PENDING past its expiry; once it answers, the order closes (and Stripe's
// session is expired there).
func caseCloseFailsThenSucceeds(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	k.outage(true)
	time.Sleep(time.Until(o.ExpiresAt.Add(1500 * time.Millisecond))) // several sweeps past the expiry
	e.wantStatus(o.OrderNo, "PENDING")
	if !e.logged("order close waits for its payment provider", o.OrderNo) {
		e.t.Fatalf("no log line of the waiting close of %s", o.OrderNo)
	}
	k.outage(false)
	if got := e.waitUntilNot(o.OrderNo, "PENDING", 20*time.Second); got.Status != "CLOSED" {
		e.t.Fatalf("order after the outage: %+v, want CLOSED", got)
	}
	ps := e.payments(o.OrderNo)
	if len(ps) != 1 || ps[0].Status != k.statusAfterClose() {
		e.t.Fatalf("payments after the close %+v, want one %s", ps, k.statusAfterClose())
	}
	if !k.settledThere(o.OrderNo) {
		e.t.Fatalf("%s does not agree with the close of %s", k.name(), o.OrderNo)
	}
	e.createPaymentFails(o.OrderNo, k.name(), 409, "order_not_payable")
}

// caseRefund: POST /admin/orders/{no}/refund of a PAID order returns the money through the
// provider first, once, then the codes (voided: the buyer read them); the provider's
// notifications about the refund are acknowledged and change nothing; a second refund answers
// the first's result and moves no money.
func caseRefund(e *payEnv, k payKit) {
	o := e.paidOrder(k)
	r := e.refund(o.OrderNo, 200)
	e.wantRefunded(k, o.OrderNo, r, o.OrderNo+"R1")
	if r.CodesVoided != payQty || r.CodesRecycled != 0 {
		e.t.Fatalf("codes voided %d, recycled %d; want the %d revealed codes voided", r.CodesVoided, r.CodesRecycled, payQty)
	}
	for _, d := range k.refundNotices(o.OrderNo) {
		e.wantAccepted(k, d)
	}
	again := e.refund(o.OrderNo, 200)
	e.wantRefunded(k, o.OrderNo, again, o.OrderNo+"R1")
}

// caseRefundRefused: the provider refuses the refund: 409 refund_refused, the order stays PAID
// with its codes, the payment REFUND_FAILED, a refund_failed alert, no money moved. Once the
// provider takes refunds again, the operator's retry is a new refund (the next refund number:
// the provider keeps its refusal under the old one) and pays out once.
func caseRefundRefused(e *payEnv, k payKit) {
	o := e.paidOrder(k)
	if why := k.refuseRefunds(true); why != "" {
		e.t.Logf("does not apply to %s: %s", k.name(), why)
		return
	}
	defer k.refuseRefunds(false)
	e.refundFails(o.OrderNo, 409, "refund_refused")
	if got := e.wantPaid(o.OrderNo); strings.Join(got.Codes, ",") != strings.Join(o.Codes, ",") {
		e.t.Fatalf("codes after a refused refund %q, were %q", got.Codes, o.Codes)
	}
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != "REFUND_FAILED" {
		e.t.Fatalf("payments after a refused refund %+v, want one REFUND_FAILED", ps)
	}
	if !e.alerted("refund_failed", o.OrderNo) {
		e.t.Fatalf("no refund_failed alert for %s", o.OrderNo)
	}
	e.wantPayouts(k, o.OrderNo, 0)
	k.refuseRefunds(false)
	e.wantRefunded(k, o.OrderNo, e.refund(o.OrderNo, 200), o.OrderNo+"R2")
}

// caseRefundTimeout: the provider's refund API down: 503, the payment REFUNDING with its refund
// number (PAID again at epay, which keeps no refund by number), the order PAID, a
// refund_pending alert. Where the simulator can, the next attempt
// moves the money and loses the answer. The retry with the same refund number finishes the
// refund: the money returned once.
func caseRefundTimeout(e *payEnv, k payKit) {
	o := e.paidOrder(k)
	if why := k.refundOutage(true); why != "" {
		e.t.Logf("does not apply to %s: %s", k.name(), why)
		return
	}
	defer k.refundOutage(false)
	e.refundFails(o.OrderNo, 503, "service_unavailable")
	// A provider without refund numbers gets its payment back (PAID): the retry takes the
	// refund again, and only the attempt that holds it calls.
	held := map[bool]string{true: "REFUNDING", false: "PAID"}[k.refundsByNumber()]
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != held {
		e.t.Fatalf("payments after an unsent refund %+v, want one %s", ps, held)
	}
	e.wantPaid(o.OrderNo)
	if !e.alerted("refund_pending", o.OrderNo) {
		e.t.Fatalf("no refund_pending alert for %s", o.OrderNo)
	}
	e.wantPayouts(k, o.OrderNo, 0)
	k.refundOutage(false)
	if k.loseRefundAnswer() {
		// The answer is lost after the payout: 503 (or 200 where the gateway's transport asks
		// again at once with the same idempotency key).
		if status, body := e.c.do("POST", "/admin/orders/"+o.OrderNo+"/refund", adminToken, "{}"); status != 503 && status != 200 {
			e.t.Fatalf("refund with a lost answer: %d %s", status, body)
		}
		e.wantPayouts(k, o.OrderNo, 1)
	}
	e.wantRefunded(k, o.OrderNo, e.refund(o.OrderNo, 200), o.OrderNo+"R1")
}

// caseRefundPending: the provider takes the refund and finishes it later: 202 with the refund
// REFUNDING, the order PAID; a second operator refund is the same refund (202, same number,
// nothing new at the provider); the provider's notification that the refund succeeded
// (WeChat Pay REFUND.SUCCESS, Stripe refund.updated) makes the order REFUNDED.
func caseRefundPending(e *payEnv, k payKit) {
	if why := k.pendingRefunds(true); why != "" {
		e.t.Logf("does not apply to %s: %s", k.name(), why)
		return
	}
	defer k.pendingRefunds(false)
	o := e.paidOrder(k)
	for range 2 {
		r := e.refund(o.OrderNo, 202)
		if r.Status != "PAID" || r.Money == nil || r.Money.Status != "REFUNDING" || r.Money.RefundNo != o.OrderNo+"R1" {
			e.t.Fatalf("pending refund answered %+v (money %+v)", r, r.Money)
		}
	}
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != "REFUNDING" {
		e.t.Fatalf("payments while the refund is pending %+v", ps)
	}
	if n := k.refundsAt(o.OrderNo); n != 1 {
		e.t.Fatalf("%d refunds at the provider, want 1", n)
	}
	e.wantPaid(o.OrderNo)
	e.wantAccepted(k, k.finishRefund(o.OrderNo, o.OrderNo+"R1"))
	if got := e.results(o.OrderNo); !strings.HasPrefix(got[len(got)-1], "refund succeeded") {
		e.t.Fatalf("notification log %q: want the refund's success last", got)
	}
	e.wantStatus(o.OrderNo, "REFUNDED")
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != "REFUNDED" {
		e.t.Fatalf("payments after the refund's notification %+v", ps)
	}
	e.wantPayouts(k, o.OrderNo, 1)
	for _, d := range k.refundNotices(o.OrderNo) {
		e.wantAccepted(k, d)
	}
	e.wantRefunded(k, o.OrderNo, e.refund(o.OrderNo, 200), o.OrderNo+"R1")
}

// caseRefundPendingKeepsTheChoice: a refund answered pending (202) is completed by the
// provider's notification with the operator's choice, stored with the refund: `recycle` returns
// codes the buyer read to the pool, `void` keeps codes nobody saw out of it, and the order keeps
// the operator's reason.
func caseRefundPendingKeepsTheChoice(e *payEnv, k payKit) {
	if why := k.pendingRefunds(true); why != "" {
		e.t.Logf("does not apply to %s: %s", k.name(), why)
		return
	}
	defer k.pendingRefunds(false)
	read := e.paidOrder(k)
	unread := e.paidUnread(k)
	for _, c := range []struct {
		no, body, reason string
		voided, recycled int
	}{
		{read.OrderNo, `{"recycle":true,"reason":"never used"}`, "never used", 0, payQty},
		{unread.OrderNo, `{"void":true,"reason":"chargeback risk"}`, "chargeback risk", payQty, 0},
	} {
		r := e.refund202(c.no, c.body)
		if r.Status != "PAID" || r.Money == nil || r.Money.Status != "REFUNDING" {
			e.t.Fatalf("pending refund answered %+v (money %+v)", r, r.Money)
		}
		e.wantAccepted(k, k.finishRefund(c.no, c.no+"R1"))
		var got struct {
			Status string `json:"status"`
			Reason string `json:"reason"`
		}
		e.c.want(200, "GET", "/admin/orders/"+c.no+"?codes=false", adminToken, "", &got)
		if got.Status != "REFUNDED" || got.Reason != c.reason {
			e.t.Fatalf("order %s after the refund's notification: %+v, want REFUNDED (%s)", c.no, got, c.reason)
		}
		done := e.refund(c.no, 200)
		if done.CodesVoided != c.voided || done.CodesRecycled != c.recycled {
			e.t.Fatalf("order %s's codes: %d voided, %d recycled; want %d and %d as the operator chose",
				c.no, done.CodesVoided, done.CodesRecycled, c.voided, c.recycled)
		}
		e.wantPayouts(k, c.no, 1)
	}
}

// caseConcurrentRefunds: eight refunds of one order at once (two operators, a double-submitted
// form, a CLI retry). epay keeps no refund by number, and its simulator checks the order and
// pays out 50 ms apart (RefundGap), as a gateway that paid a refund twice: only the refund that
// took the payment calls it, the others answer 202 REFUNDING. At every provider the money goes
// back exactly once and the codes are voided once.
func caseConcurrentRefunds(e *payEnv, k payKit) {
	o := e.paidOrder(k)
	if k.refundGap(50 * time.Millisecond) {
		defer k.refundGap(0)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			status, body, err := e.post("/admin/orders/"+o.OrderNo+"/refund", adminToken, `{"void":true}`)
			switch {
			case err != nil:
				e.t.Error(err)
			case status != 200 && status != 202 && (status != 503 || !k.refundsByNumber()):
				e.t.Errorf("a refund among eight at once answered %d %s", status, body)
			}
		})
	}
	wg.Wait()
	e.wantPayouts(k, o.OrderNo, 1)
	r := e.refund(o.OrderNo, 200)
	e.wantRefunded(k, o.OrderNo, r, o.OrderNo+"R1")
	if r.CodesVoided != payQty || r.CodesRecycled != 0 {
		e.t.Fatalf("codes voided %d, recycled %d; want the %d codes voided once", r.CodesVoided, r.CodesRecycled, payQty)
	}
}

// caseFulfilDuringPendingRefund: a late payment finds the stock gone (UNFULFILLED), the
// operator's refund is answered pending, then stock comes back: the fulfil is refused with 409
// refund_in_progress and allocates nothing (the buyer would read working codes and get the
// money back); the refund's notification then ends the order REFUNDED.
func caseFulfilDuringPendingRefund(e *payEnv, k payKit) {
	if why := k.pendingRefunds(true); why != "" {
		e.t.Logf("does not apply to %s: %s", k.name(), why)
		return
	}
	defer k.pendingRefunds(false)
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	late, why := k.payLate(o.OrderNo)
	if why != "" {
		e.t.Logf("does not apply to %s: %s", k.name(), why)
		return
	}
	k.outage(true)
	defer k.outage(false)
	if got := e.waitUntilNot(o.OrderNo, "PENDING", 20*time.Second); got.Status != "CLOSED" {
		e.t.Fatalf("order after its expiry with the provider down: %+v, want CLOSED", got)
	}
	k.outage(false)
	e.sellOut() // other buyers take the codes the close returned
	e.wantAccepted(k, late())
	admin := func() payOrder {
		var got payOrder
		e.c.want(200, "GET", "/admin/orders/"+o.OrderNo+"?codes=false", adminToken, "", &got)
		return got
	}
	if got := admin(); got.Status != "UNFULFILLED" {
		e.t.Fatalf("late payment without stock: %+v, want UNFULFILLED", got)
	}
	r := e.refund202(o.OrderNo, `{"void":true,"reason":"buyer cancelled"}`)
	if r.Status != "UNFULFILLED" || r.Money == nil || r.Money.Status != "REFUNDING" {
		e.t.Fatalf("pending refund answered %+v (money %+v)", r, r.Money)
	}
	e.c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", e.product), adminToken,
		fmt.Sprintf("BACK-%d-1\nBACK-%d-2", e.product, e.product), nil)
	var refusal struct {
		Code string `json:"code"`
	}
	e.c.want(409, "POST", "/admin/orders/"+o.OrderNo+"/fulfil", adminToken, "", &refusal)
	if refusal.Code != "refund_in_progress" {
		e.t.Fatalf("fulfil during a pending refund refused with %q, want refund_in_progress", refusal.Code)
	}
	if got := admin(); got.Status != "UNFULFILLED" {
		e.t.Fatalf("order after the refused fulfil: %+v, want UNFULFILLED", got)
	}
	e.wantAccepted(k, k.finishRefund(o.OrderNo, o.OrderNo+"R1"))
	if got := admin(); got.Status != "REFUNDED" {
		e.t.Fatalf("order after the refund's notification: %+v, want REFUNDED", got)
	}
	e.wantPayouts(k, o.OrderNo, 1)
}

// caseRefundRacesLatePayment: the buyer paid, the notification is held back, and the provider
// cannot be reached when the order falls due, past the close grace: the order is CLOSED with
// its payment open at the provider. Then the provider's late success (PAID; UNFULFILLED for
// Stripe and Alipay, whose cases let another buyer take the stock first) and an operator's
// refund arrive at once. Whatever the order: the notification is acknowledged, the operator's
// refunds end REFUNDED, and the money is returned exactly once.
func caseRefundRacesLatePayment(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	late, why := k.payLate(o.OrderNo)
	if why != "" {
		e.t.Logf("does not apply to %s: %s", k.name(), why)
		return
	}
	k.outage(true)
	defer k.outage(false)
	if got := e.waitUntilNot(o.OrderNo, "PENDING", 20*time.Second); got.Status != "CLOSED" {
		e.t.Fatalf("order after its expiry with the provider down: %+v, want CLOSED", got)
	}
	if !e.alerted("payment_close_failed", o.OrderNo) {
		e.t.Fatalf("no payment_close_failed alert for %s", o.OrderNo)
	}
	k.outage(false)
	want := "paid late (order was CLOSED)"
	if k.name() == "stripe" || k.name() == "alipay" {
		want = "accepted: order is UNFULFILLED"
		e.sellOut() // other buyers take the codes the close returned
	}

	var d delivered
	var status int
	var body []byte
	var refundErr error
	var wg sync.WaitGroup
	wg.Go(func() { d = late() })
	wg.Go(func() { status, body, refundErr = e.post("/admin/orders/"+o.OrderNo+"/refund", adminToken, "{}") })
	wg.Wait()
	if refundErr != nil {
		e.t.Fatal(refundErr)
	}
	switch status {
	case 200, 409, 503: // refunded; the order still CLOSED (invalid_order_state); lost races
	default:
		e.t.Fatalf("the racing refund answered %d %s", status, body)
	}
	accepted := func(d delivered) bool { s, b := k.reply(true); return d.err == nil && d.status == s && d.body == b }
	for i := 0; i < 3 && !accepted(d); i++ {
		d = late() // the provider resends a refused notification
	}
	e.wantAccepted(k, d)
	var applied []string
	for _, r := range e.notifications(o.OrderNo) {
		if r.Accepted {
			applied = append(applied, r.Result)
		}
	}
	if len(applied) != 1 || applied[0] != want {
		e.t.Fatalf("accepted notifications %q, want one %q", applied, want)
	}
	for i := 0; ; i++ {
		got := e.order(o.OrderNo)
		if got.Status == "REFUNDED" {
			break
		}
		if i == 5 {
			e.t.Fatalf("order %+v after %d refunds", got, i)
		}
		if got.Status != "PAID" && got.Status != "UNFULFILLED" {
			e.t.Fatalf("order %s after the late success, want PAID or UNFULFILLED", got.Status)
		}
		if status, body := e.c.do("POST", "/admin/orders/"+o.OrderNo+"/refund", adminToken, "{}"); status != 200 && status != 503 {
			e.t.Fatalf("refund of the late-paid order: %d %s", status, body)
		}
	}
	if ps := e.payments(o.OrderNo); len(ps) != 1 || ps[0].Status != "REFUNDED" {
		e.t.Fatalf("payments after the refund %+v, want one REFUNDED", ps)
	}
	e.wantPayouts(k, o.OrderNo, 1)
	if st := e.refund(o.OrderNo, 200); st.Money == nil || st.Money.Status != "REFUNDED" {
		e.t.Fatalf("refund of the REFUNDED order %+v (money %+v)", st, st.Money)
	}
}

// caseRefundCallbackPaid: an order paid through the storefront's signed callback has no
// payment at a provider: its refund returns the codes and moves no money (no money_refund).
func caseRefundCallbackPaid(e *payEnv, _ payKit) {
	o := e.place()
	signer, err := paysig.New(paymentSecret, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	status, answer, err := adminclient.New(e.c.base, adminToken).Pay(ctxOf(e.t), signer,
		paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: payQty * payPrice, PaymentRef: "storefront-" + o.OrderNo}, time.Now())
	if err != nil || status != 200 {
		e.t.Fatalf("signed callback: %d %s, %v", status, answer, err)
	}
	e.wantPaid(o.OrderNo)
	r := e.refund(o.OrderNo, 200)
	if r.Status != "REFUNDED" || r.Money != nil || r.CodesVoided != payQty {
		e.t.Fatalf("refund of a callback-paid order %+v (money %+v): want REFUNDED, %d codes voided, no money_refund", r, r.Money, payQty)
	}
	if ps := e.payments(o.OrderNo); len(ps) != 0 {
		e.t.Fatalf("payments of a callback-paid order %+v", ps)
	}
}

// TestDevPaymentsEndToEnd: the dev provider through HTTP only: its pay page shows the amount,
// "Pay" pays the order, "Fail" on another order fails it.
func TestDevPaymentsEndToEnd(t *testing.T) {
	e := newPayService(t, bootstrap.AdaptersMemory, ordersGroup).env(t)
	k := devKit{e: e}
	paid := e.place()
	k.confirm(e.createPayment(paid.OrderNo, "dev", 201), "pay")
	e.wantPaid(paid.OrderNo)
	failed := e.place()
	k.confirm(e.createPayment(failed.OrderNo, "dev", 201), "fail")
	e.wantStatus(failed.OrderNo, "FAILED")
	if ps := e.payments(failed.OrderNo); len(ps) != 1 || ps[0].Status != "FAILED" {
		t.Fatalf("payments of the failed order %+v", ps)
	}
	e.checkInvariants()
}

// payService is one running service with the simulators of Stripe, epay, Alipay and WeChat
// Pay wired to it (their API and gateway URLs are the simulators'), and the dev provider. The
// shop's public URL is an HTTPS front of its listener (WeChat Pay sends notifications to https
// URLs only), which the simulators' notifications reach through a client that trusts it.
type payService struct {
	c        client // the service's own listener
	logs     *lockedBuffer
	alerts   *memory.Alerts // on the memory adapters
	db       *sql.DB        // on the real adapters
	public   string
	stripe   *stripesim.Server
	skey     string // Stripe's secret key and webhook secret, as the service has them
	whsec    string
	epay     *epaysim.Sim
	alipay   *alipaysim.Sim
	wechat   *wechatsim.Server
	wechatGW wechatConfig
	// withheld are WeChat Pay notifications made and not sent, by order: the kit's "lost" ones.
	withheld sync.Map
}

// wechatConfig is what the shop knows of its WeChat Pay merchant account.
type wechatConfig struct {
	mchID, appID, serial, v3key, privatePEM string
}

// payKeys are the RSA 2048 keys of the test: Alipay's and the Alipay application's, the WeChat
// Pay merchant's, platform certificate's and public key's. Made once (it takes a while).
type payKeys struct {
	alipayApp, alipay, wechatMerchant, wechatPlatform, wechatPublic *rsa.PrivateKey
}

var testPayKeys = sync.OnceValue(func() payKeys {
	var k payKeys
	ptrs := []**rsa.PrivateKey{&k.alipayApp, &k.alipay, &k.wechatMerchant, &k.wechatPlatform, &k.wechatPublic}
	var wg sync.WaitGroup
	for _, p := range ptrs {
		wg.Go(func() {
			key, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			*p = key
		})
	}
	wg.Wait()
	return k
})

func privateKeyPEM(k *rsa.PrivateKey) string {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func newPayService(t *testing.T, adapters string, g payGroup) *payService {
	t.Helper()
	svc := &payService{logs: &lockedBuffer{}}
	var cfg bootstrap.Config
	if adapters == bootstrap.AdaptersReal {
		cfg, _, svc.db = realConfigIn(t, g.timeout, paymentsDatabase)
		cfg.AMQPPrefix = "cardshop-e2e-pay"
		cfg.DevPaymentsReal = true
	} else {
		var err error
		if cfg, err = bootstrap.LoadConfig(env()); err != nil {
			t.Fatal(err)
		}
		cfg.HTTPAddr, cfg.OrderTimeout = freeAddr(t), g.timeout
	}
	cfg.DevPayments = true
	if g.grace > 0 {
		cfg.PaymentCloseGrace = g.grace
	}
	cfg.SweepInterval, cfg.RelayInterval = 200*time.Millisecond, 100*time.Millisecond
	cfg.RatePerIP, cfg.RatePerBuyer, cfg.BuyerCap = 0, 0, 0

	// The HTTPS front. Its connections to the service and the simulators' connections to it
	// are closed before the service stops: the HTTP server's graceful stop waits (up to
	// CARDSHOP_SHUTDOWN_GRACE) for a connection that a client opened and never sent on.
	backend := &http.Transport{MaxIdleConnsPerHost: 16}
	front := httptest.NewUnstartedServer(&httputil.ReverseProxy{Transport: backend, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: "http", Host: cfg.HTTPAddr})
		r.Out.Host = r.In.Host
	}})
	front.StartTLS()
	t.Cleanup(front.Close)
	svc.public = front.URL
	cfg.PublicURL = svc.public
	roots := x509.NewCertPool()
	roots.AddCert(front.Certificate())
	transport := &http.Transport{MaxIdleConnsPerHost: 16, TLSClientConfig: &tls.Config{RootCAs: roots}}
	notifier := &http.Client{Timeout: 10 * time.Second, Transport: transport}

	key, whsec := stripesim.NewSecretKey(), stripesim.NewWebhookSecret()
	ss, err := stripesim.New(stripesim.Options{SecretKey: key, WebhookSecrets: []string{whsec},
		WebhookURL: svc.public + "/api/payments/stripe/notify", HTTPClient: notifier})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ss.Close)
	svc.stripe, svc.skey, svc.whsec = ss, key, whsec
	cfg.StripeKey, cfg.StripeWebhook, cfg.StripeAPIURL = domain.Secret(key), domain.Secret(whsec), ss.URL

	svc.epay = epaysim.New(epaysim.Config{Client: notifier})
	t.Cleanup(svc.epay.Close)
	cfg.EpayURL, cfg.EpayPID, cfg.EpayKey, cfg.EpayMode = svc.epay.URL(), svc.epay.PID(), domain.Secret(svc.epay.Key()), "api"
	if g.epayMode != "" {
		cfg.EpayMode = g.epayMode
	}
	cfg.EpayRefunds = true

	keys := testPayKeys()
	// One attempt per notification: a case delivers again itself where it wants a resend.
	if svc.alipay, err = alipaysim.New(alipaysim.Config{MerchantKey: &keys.alipayApp.PublicKey, AlipayKey: keys.alipay,
		MaxAttempts: 1, Client: notifier}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.alipay.Close)
	cfg.AlipayURL, cfg.AlipayAppID, cfg.AlipaySellerID = svc.alipay.URL(), svc.alipay.AppID(), svc.alipay.SellerID()
	cfg.AlipayPrivateKey, cfg.AlipayPublicKey, cfg.AlipayMethod = domain.Secret(privateKeyPEM(keys.alipayApp)), svc.alipay.PublicKeyPEM(), "precreate"

	svc.wechatGW = wechatConfig{mchID: wechatsim.NewMchID(), appID: wechatsim.NewAppID(), serial: wechatsim.NewSerial(),
		v3key: wechatsim.NewAPIv3Key(), privatePEM: privateKeyPEM(keys.wechatMerchant)}
	if svc.wechat, err = wechatsim.New(wechatsim.Options{MchID: svc.wechatGW.mchID, AppID: svc.wechatGW.appID,
		MerchantSerial: svc.wechatGW.serial, MerchantKey: &keys.wechatMerchant.PublicKey, APIv3Key: svc.wechatGW.v3key,
		PlatformKey: keys.wechatPlatform, PublicKeyKey: keys.wechatPublic, SignWith: wechatsim.SignPublicKey,
		RefundNotifyURL: svc.public + "/api/payments/wechatpay/notify", HTTPClient: notifier, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.wechat.Close)
	svc.wechat.RefundAtOnce(true)
	cfg.WechatURL, cfg.WechatMchID, cfg.WechatAppID, cfg.WechatSerial = svc.wechat.URL, svc.wechatGW.mchID, svc.wechatGW.appID, svc.wechatGW.serial
	cfg.WechatPrivateKey, cfg.WechatAPIv3Key = domain.Secret(svc.wechatGW.privatePEM), domain.Secret(svc.wechatGW.v3key)
	cfg.WechatPlatformPEM, cfg.WechatPubKeyID, cfg.WechatPubKeyPEM = svc.wechat.CertificatePEM(), svc.wechat.PublicKeyID(), svc.wechat.PublicKeyPEM()

	var alerter domain.Alerter
	svc.c = runService(t, cfg, svc.logs, fx.Populate(&alerter))
	svc.alerts, _ = alerter.(*memory.Alerts)
	t.Cleanup(func() { // runs before the service stops
		transport.CloseIdleConnections()
		front.Close()
		backend.CloseIdleConnections()
	})
	return svc
}

// payEnv is one case in a payService: its own product of 20 codes and its own buyer.
type payEnv struct {
	*payService
	t       *testing.T
	c       client
	buyer   string
	product int64
	seq     atomic.Int64
}

func (svc *payService) env(t *testing.T) *payEnv {
	t.Helper()
	e := &payEnv{payService: svc, t: t, c: svc.c}
	e.c.t = t
	e.product = int64(porttest.NewProductID())
	e.c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Pay %d","price":%d,"max_per_order":5}`, e.product, e.product, payPrice), nil)
	codes := make([]string, 20)
	for i := range codes {
		codes[i] = fmt.Sprintf("PAY-%d-%04d", e.product, i)
	}
	e.c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", e.product), adminToken, strings.Join(codes, "\n"), nil)
	var tok struct {
		Token string `json:"token"`
	}
	e.c.want(201, "POST", "/admin/tokens", adminToken, fmt.Sprintf(`{"buyer_id":"payer-%d"}`, e.product), &tok)
	e.buyer = tok.Token
	return e
}

// payOrder is an order as the buyer reads it.
type payOrder struct {
	OrderNo    string    `json:"order_no"`
	Status     string    `json:"status"`
	Amount     int64     `json:"amount"`
	Currency   string    `json:"currency"`
	ExpiresAt  time.Time `json:"expires_at"`
	PaymentRef string    `json:"payment_ref"`
	Codes      []string  `json:"codes"`
}

type paymentBody struct {
	OrderNo     string    `json:"order_no"`
	Provider    string    `json:"provider"`
	Status      string    `json:"status"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	PayURL      string    `json:"pay_url"`
	QRCode      string    `json:"qr_code"`
	ProviderRef string    `json:"provider_ref"`
	CreatedAt   time.Time `json:"created_at"`
}

type notificationRecord struct {
	ID         int64     `json:"id"`
	Provider   string    `json:"provider"`
	ReceivedAt time.Time `json:"received_at"`
	Verified   bool      `json:"verified"`
	Accepted   bool      `json:"accepted"`
	Result     string    `json:"result"`
	OrderNo    string    `json:"order_no"`
	Amount     int64     `json:"amount"`
	Count      int64     `json:"count"`
}

// refusedNotifications is how many of k's notifications the service refused before
// verification, by its /metrics.
func (e *payEnv) refusedNotifications(k payKit) int64 {
	e.t.Helper()
	status, body := e.c.do("GET", "/metrics", "", "")
	if status != 200 {
		e.t.Fatalf("/metrics: %d", status)
	}
	prefix := fmt.Sprintf(`cardshop_payment_notifications_refused_total{provider=%q,`, k.name())
	var n int64
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			_, v, _ := strings.Cut(rest, "} ")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatalf("/metrics line %q: %v", line, err)
			}
			n += int64(f)
		}
	}
	return n
}

func (e *payEnv) place() payOrder {
	e.t.Helper()
	var o payOrder
	e.c.want(201, "POST", "/api/order", e.buyer, fmt.Sprintf(`{"product_id":%d,"qty":%d}`, e.product, payQty), &o,
		"Idempotency-Key", fmt.Sprintf("pay-%d-%d", e.product, e.seq.Add(1)))
	if o.Status != "PENDING" || o.Amount != payQty*payPrice || o.Currency != "CNY" {
		e.t.Fatalf("placed %+v", o)
	}
	return o
}

func (e *payEnv) order(no string) payOrder {
	e.t.Helper()
	var o payOrder
	e.c.want(200, "GET", "/api/orders/"+no, e.buyer, "", &o)
	return o
}

// createPayment asks for the order's payment at provider and wants status (201 created, 200
// the existing one, 0 either).
func (e *payEnv) createPayment(no, provider string, status int) paymentBody {
	e.t.Helper()
	got, body := e.c.do("POST", "/api/orders/"+no+"/payment", e.buyer, fmt.Sprintf(`{"provider":%q}`, provider))
	if got != status && (status != 0 || got != 200 && got != 201) {
		e.t.Fatalf("payment of %s at %s: %d %s, want %d", no, provider, got, body, status)
	}
	var p paymentBody
	if err := json.Unmarshal(body, &p); err != nil || p.OrderNo != no || p.Provider != provider {
		e.t.Fatalf("payment %s: %v", body, err)
	}
	return p
}

func (e *payEnv) createPaymentFails(no, provider string, status int, code string) {
	e.t.Helper()
	var body struct {
		Code string `json:"code"`
	}
	e.c.want(status, "POST", "/api/orders/"+no+"/payment", e.buyer, fmt.Sprintf(`{"provider":%q}`, provider), &body)
	if body.Code != code {
		e.t.Fatalf("payment refused with %q, want %q", body.Code, code)
	}
}

func (e *payEnv) payments(no string) []paymentBody {
	e.t.Helper()
	var out struct {
		Payments []paymentBody `json:"payments"`
	}
	e.c.want(200, "GET", "/admin/orders/"+no+"/payments", adminToken, "", &out)
	return out.Payments
}

// notifications is the notification log of the order (every order's when no is ""), oldest
// first.
func (e *payEnv) notifications(no string) []notificationRecord {
	e.t.Helper()
	var out struct {
		Notifications []notificationRecord `json:"notifications"`
	}
	e.c.want(200, "GET", "/admin/payments/notifications?limit=1000&order_no="+no, adminToken, "", &out)
	recs := out.Notifications
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	return recs
}

func (e *payEnv) results(no string) []string {
	var out []string
	for _, r := range e.notifications(no) {
		out = append(out, r.Result)
	}
	return out
}

// notificationsSince are k's notifications logged after the one with id since, oldest first.
func (e *payEnv) notificationsSince(k payKit, since int64) []notificationRecord {
	var out []notificationRecord
	for _, r := range e.notifications("") {
		if r.ID > since && r.Provider == k.name() {
			out = append(out, r)
		}
	}
	return out
}

func (e *payEnv) lastNotificationID() int64 {
	recs := e.notifications("")
	if len(recs) == 0 {
		return 0
	}
	return recs[len(recs)-1].ID
}

func (e *payEnv) wantStatus(no, status string) payOrder {
	e.t.Helper()
	o := e.order(no)
	if o.Status != status {
		e.t.Fatalf("order %s is %s, want %s", no, o.Status, status)
	}
	return o
}

func (e *payEnv) wantPaid(no string) payOrder {
	e.t.Helper()
	o := e.wantStatus(no, "PAID")
	var admin payOrder
	e.c.want(200, "GET", "/admin/orders/"+no, adminToken, "", &admin)
	if o.PaymentRef = admin.PaymentRef; len(o.Codes) != payQty || o.PaymentRef == "" {
		e.t.Fatalf("paid order %+v: want %d codes and a payment_ref", o, payQty)
	}
	return o
}

// paidOrder places an order, creates its payment at k and has the buyer pay it: PAID, its codes
// read by the buyer (a reveal: a refund then voids them by default).
func (e *payEnv) paidOrder(k payKit) payOrder {
	e.t.Helper()
	o := e.place()
	p := e.createPayment(o.OrderNo, k.name(), 201)
	if dk, ok := k.(devKit); ok {
		dk.confirm(p, "pay")
	} else {
		e.wantAccepted(k, k.pay(o.OrderNo))
	}
	return e.wantPaid(o.OrderNo)
}

// paidUnread places an order, creates its payment at k and has the buyer pay it: PAID, its codes
// never shown (it is read without them).
func (e *payEnv) paidUnread(k payKit) payOrder {
	e.t.Helper()
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	e.wantAccepted(k, k.pay(o.OrderNo))
	e.c.want(200, "GET", "/admin/orders/"+o.OrderNo+"?codes=false", adminToken, "", &o)
	if o.Status != "PAID" || len(o.Codes) != 0 {
		e.t.Fatalf("paid order %+v: want PAID, read without its codes", o)
	}
	return o
}

// sellOut has other buyers take every code of the product left in stock.
func (e *payEnv) sellOut() {
	e.t.Helper()
	for {
		status, body := e.c.do("POST", "/api/order", e.buyer, fmt.Sprintf(`{"product_id":%d,"qty":1}`, e.product),
			"Idempotency-Key", fmt.Sprintf("pay-%d-%d", e.product, e.seq.Add(1)))
		switch {
		case status == 409 && strings.Contains(string(body), "sold_out"):
			return
		case status != 201:
			e.t.Fatalf("sell out: %d %s", status, body)
		}
	}
}

// refundBody is the answer of POST /admin/orders/{no}/refund.
type refundBody struct {
	OrderNo       string `json:"order_no"`
	Status        string `json:"status"`
	CodesRecycled int    `json:"codes_recycled"`
	CodesVoided   int    `json:"codes_voided"`
	Money         *struct {
		Provider  string `json:"provider"`
		Status    string `json:"status"`
		RefundNo  string `json:"refund_no"`
		RefundRef string `json:"refund_ref"`
		Reason    string `json:"reason"`
		ByHand    bool   `json:"by_hand"`
	} `json:"money_refund"`
}

// post is a POST to the service that reports its errors instead of failing the test: for
// another goroutine than the test's.
func (e *payEnv) post(path, auth, body string) (int, []byte, error) {
	req, err := http.NewRequest("POST", e.c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+auth)
	res, err := e.c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// refund is an operator's refund of the order, answered status.
func (e *payEnv) refund(no string, status int) refundBody {
	e.t.Helper()
	var r refundBody
	e.c.want(status, "POST", "/admin/orders/"+no+"/refund", adminToken, "{}", &r)
	return r
}

// refund202 is an operator's refund with body, answered 202 (pending at the provider).
func (e *payEnv) refund202(no, body string) refundBody {
	e.t.Helper()
	var r refundBody
	e.c.want(202, "POST", "/admin/orders/"+no+"/refund", adminToken, body, &r)
	return r
}

func (e *payEnv) refundFails(no string, status int, code string) {
	e.t.Helper()
	var body struct {
		Code string `json:"code"`
	}
	e.c.want(status, "POST", "/admin/orders/"+no+"/refund", adminToken, "{}", &body)
	if body.Code != code {
		e.t.Fatalf("refund refused with %q, want %q", body.Code, code)
	}
}

// wantRefunded checks a refund's answer and its effects: the order REFUNDED, the money
// returned at k under refundNo (once), the payment REFUNDED.
func (e *payEnv) wantRefunded(k payKit, no string, r refundBody, refundNo string) {
	e.t.Helper()
	if r.Status != "REFUNDED" || r.Money == nil || r.Money.Provider != k.name() || r.Money.Status != "REFUNDED" ||
		r.Money.RefundNo != refundNo || r.Money.RefundRef == "" || r.Money.ByHand {
		e.t.Fatalf("refund answered %+v, money %+v; want REFUNDED at %s under %s", r, r.Money, k.name(), refundNo)
	}
	e.wantStatus(no, "REFUNDED")
	if ps := e.payments(no); len(ps) != 1 || ps[0].Status != "REFUNDED" {
		e.t.Fatalf("payments after the refund %+v, want one REFUNDED", ps)
	}
	e.wantPayouts(k, no, 1)
}

// wantPayouts wants n refunds of the order that moved money at k (where k can count them).
func (e *payEnv) wantPayouts(k payKit, no string, n int) {
	e.t.Helper()
	if got, ok := k.payouts(no); ok && got != n {
		e.t.Fatalf("%s paid out %d refunds of %s, want %d", k.name(), got, no, n)
	}
}

// wantPaidThrough wants the order PAID through its one payment, at k.
func (e *payEnv) wantPaidThrough(k payKit, no string) {
	e.t.Helper()
	paid := e.wantPaid(no)
	ps := e.payments(no)
	if len(ps) != 1 || ps[0].Status != "PAID" || ps[0].ProviderRef == "" || paid.PaymentRef != k.name()+":"+ps[0].ProviderRef {
		e.t.Fatalf("order's payment_ref %q, payments %+v: want one PAID at %s, its ref the order's", paid.PaymentRef, ps, k.name())
	}
}

// waitUntilNot polls the order until its status is no longer status.
func (e *payEnv) waitUntilNot(no, status string, within time.Duration) payOrder {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		o := e.order(no)
		if o.Status != status {
			return o
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("order %s still %s after %s", no, status, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *payEnv) wantAccepted(k payKit, d delivered) {
	e.t.Helper()
	status, body := k.reply(true)
	if d.err != nil || d.status != status || d.body != body {
		e.t.Fatalf("%s notification answered %d %q (%v), want the provider's success %d %q", k.name(), d.status, d.body, d.err, status, body)
	}
}

func (e *payEnv) wantRefused(k payKit, d delivered) {
	e.t.Helper()
	status, body := k.reply(false)
	if d.err != nil || d.status != status || d.body != body {
		e.t.Fatalf("%s notification answered %d %q (%v), want the provider's refusal %d %q", k.name(), d.status, d.body, d.err, status, body)
	}
}

// logLines are the service's log records.
func (e *payEnv) logLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(e.logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// dumpLog writes the service's log lines above DEBUG into the test's output.
func (e *payEnv) dumpLog() {
	for _, m := range e.logLines() {
		if m["level"] != "DEBUG" {
			e.t.Log(m)
		}
	}
}

func (e *payEnv) logged(msg, no string) bool {
	for _, m := range e.logLines() {
		if m["msg"] == msg && m["order_no"] == no {
			return true
		}
	}
	return false
}

// alerted reports whether an alert of kind was raised for the order: in the memory alerter
// and in the log on the memory adapters, in the log (the real adapters' alerter) on the real.
func (e *payEnv) alerted(kind, no string) bool {
	if e.alerts != nil {
		found := false
		for _, a := range e.alerts.Alerts() {
			found = found || a.Kind == kind && string(a.OrderNo) == no
		}
		if !found {
			return false
		}
	}
	for _, m := range e.logLines() {
		if m["msg"] == "alert" && (m["alert"] == kind || m["kind"] == kind) && m["order_no"] == no {
			return true
		}
	}
	return false
}

// checkInvariants: the product's reconciliation finds no difference (once the outbox relay
// has carried the gate changes), without repairing anything.
func (e *payEnv) checkInvariants() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var rec struct {
			OK          bool `json:"ok"`
			Differences int  `json:"differences"`
		}
		e.c.want(200, "POST", fmt.Sprintf("/admin/products/%d/reconcile?repair=false", e.product), adminToken, "", &rec)
		if rec.OK && rec.Differences == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("reconciliation of product %d: %d differences", e.product, rec.Differences)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *payEnv) kit(provider string) payKit {
	switch provider {
	case "stripe":
		return stripeKit{e: e, sim: e.stripe}
	case "epay":
		return newEpayKit(e)
	case "alipay":
		return newAlipayKit(e)
	case "wechatpay":
		return wechatKit{e: e, sim: e.wechat}
	case "dev":
		return devKit{e: e}
	case "callback":
		return nil
	}
	e.t.Fatalf("no kit for %s", provider)
	return nil
}

// paymentsDatabase is the payment cases' own MariaDB database.
const paymentsDatabase = "cardshop_test_payments"
