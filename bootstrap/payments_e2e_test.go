package bootstrap_test

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"

	"cardshop/adapters/epay/epaysim"
	"cardshop/adapters/memory"
	"cardshop/adapters/porttest"
	"cardshop/adapters/stripe/stripesim"
	"cardshop/bootstrap"
	"cardshop/domain"
)

// The payment cases of docs/RELIABILITY.md ("Payment providers"), each run for Stripe and
// epay through the service's HTTP API, against the providers' simulators, on the memory
// adapters (TestPaymentsEndToEnd) and on Redis, MariaDB and RabbitMQ
// (TestRealAdaptersPaymentsEndToEnd). Every case ends with the product's reconciliation.

const payQty, payPrice = 2, 1000 // every case's order: 2 codes of 10.00 CNY, 20.00 CNY

// payCase is one case; timeout is the service's order timeout (short for the cases that let
// an order expire).
type payCase struct {
	name    string
	timeout time.Duration
	run     func(e *payEnv, k payKit)
}

var payCases = []payCase{
	{"pay then ask again", time.Minute, casePayThenAskAgain},
	{"the same notification ten times at once", time.Minute, caseConcurrentDuplicates},
	{"a stale failure after the payment", time.Minute, caseStaleFailure},
	{"a success at the other provider", time.Minute, caseForeignPayment},
	{"an amount that differs, signed", time.Minute, caseAmountMismatch},
	{"forged, unsigned and stale notifications", time.Minute, caseForgeries},
	{"the provider down during the create", time.Minute, caseCreateOutage},
	{"paid at the provider, notification lost, order expires", 2 * time.Second, caseExpiresWhilePaid},
	{"the close fails, then succeeds", 2 * time.Second, caseCloseFailsThenSucceeds},
}

func TestPaymentsEndToEnd(t *testing.T) { runPayCases(t, bootstrap.AdaptersMemory) }

func TestRealAdaptersPaymentsEndToEnd(t *testing.T) {
	realConfig(t, time.Minute) // Redis and MariaDB reachable, once for every case (or skip / fail under CI=true)
	runPayCases(t, bootstrap.AdaptersReal)
}

func runPayCases(t *testing.T, adapters string) {
	for _, provider := range []string{"stripe", "epay"} {
		for _, pc := range payCases {
			t.Run(provider+"/"+pc.name, func(t *testing.T) {
				e := newPayEnv(t, adapters, pc.timeout)
				k := e.kit(provider)
				pc.run(e, k)
				e.checkInvariants()
			})
		}
	}
}

// casePayThenAskAgain: create → the buyer pays → the notification → PAID with its codes; the
// payment asked for again is the same one, 200.
func casePayThenAskAgain(e *payEnv, k payKit) {
	o := e.place()
	p := e.createPayment(o.OrderNo, k.name(), 201)
	if p.Status != "OPEN" || p.Amount != payQty*payPrice || p.Currency != "CNY" || p.PayURL == "" || p.Provider != k.name() {
		e.t.Fatalf("created payment %+v", p)
	}
	e.wantAccepted(k, k.pay(o.OrderNo))
	paid := e.wantPaid(o.OrderNo)
	again := e.createPayment(o.OrderNo, k.name(), 200)
	if again.Status != "PAID" || again.ProviderRef != p.ProviderRef || !again.CreatedAt.Truncate(time.Microsecond).Equal(p.CreatedAt.Truncate(time.Microsecond)) {
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

// caseForeignPayment: a validly signed success for an order whose payment is at the other
// provider is refused with a foreign_payment alert; the order does not change.
func caseForeignPayment(e *payEnv, k payKit) {
	other := e.kit(map[string]string{"stripe": "epay", "epay": "stripe"}[k.name()])
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

// caseForgeries: forged, unsigned and stale notifications are refused, logged as not
// verified, and change nothing; the genuine one then pays the order.
func caseForgeries(e *payEnv, k payKit) {
	o := e.place()
	e.createPayment(o.OrderNo, k.name(), 201)
	since := e.lastNotificationID()
	forged, genuine := k.forgeries(o.OrderNo)
	for _, d := range forged {
		e.wantRefused(k, d)
	}
	e.wantStatus(o.OrderNo, "PENDING")
	var recs []notificationRecord
	for _, r := range e.notifications("") {
		if r.ID > since {
			recs = append(recs, r)
		}
	}
	if len(recs) != len(forged) {
		e.t.Fatalf("%d notifications logged for %d forged ones: %+v", len(recs), len(forged), recs)
	}
	for _, r := range recs {
		if r.Verified || r.Accepted || r.Provider != k.name() || !strings.HasPrefix(r.Result, "refused") || r.OrderNo != "" {
			e.t.Fatalf("a forged notification logged as %+v", r)
		}
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
	p := e.createPayment(o.OrderNo, k.name(), 201)
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
		p2 := e.createPayment(o2.OrderNo, k.name(), 0)
		if n := k.created(o2.OrderNo); n != 1 {
			e.t.Fatalf("%d payments at the provider after a lost reply and a retry, want 1", n)
		}
		if !replayed(o2.OrderNo) {
			e.t.Fatal("the provider saw no lost create answered again from its idempotency record")
		}
		e.wantAccepted(k, k.pay(o2.OrderNo))
		if paid := e.wantPaid(o2.OrderNo); paid.PaymentRef != k.name()+":"+p2.ProviderRef {
			e.t.Fatalf("payment_ref %q, want %s:%s", paid.PaymentRef, k.name(), p2.ProviderRef)
		}
	}
	e.wantAccepted(k, k.pay(o.OrderNo))
	if paid := e.wantPaid(o.OrderNo); paid.PaymentRef != k.name()+":"+p.ProviderRef {
		e.t.Fatalf("payment_ref %q, want %s:%s", paid.PaymentRef, k.name(), p.ProviderRef)
	}
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

// TestDevPaymentsEndToEnd: the dev provider through HTTP only: its pay page shows the amount,
// "Pay" pays the order, "Fail" on another order fails it.
func TestDevPaymentsEndToEnd(t *testing.T) {
	e := newPayEnv(t, bootstrap.AdaptersMemory, time.Minute)
	pay := func(choice string) payOrder {
		o := e.place()
		p := e.createPayment(o.OrderNo, "dev", 201)
		status, page := e.c.do("GET", strings.TrimPrefix(p.PayURL, e.c.base), "", "")
		if status != 200 || !strings.Contains(string(page), "20.00") || !strings.Contains(string(page), "CNY") || !strings.Contains(string(page), o.OrderNo) {
			t.Fatalf("pay page %s: %d %s", p.PayURL, status, page)
		}
		action, form := devForm(t, string(page))
		form.Set("choice", choice)
		status, done := e.c.do("POST", "/dev/pay/"+action, "", form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
		if status != 200 {
			t.Fatalf("confirm %s: %d %s", choice, status, done)
		}
		return o
	}
	paid := pay("pay")
	e.wantPaid(paid.OrderNo)
	failed := pay("fail")
	e.wantStatus(failed.OrderNo, "FAILED")
	if ps := e.payments(failed.OrderNo); len(ps) != 1 || ps[0].Status != "FAILED" {
		t.Fatalf("payments of the failed order %+v", ps)
	}
	e.checkInvariants()
}

// payEnv is one running service with the Stripe and epay simulators wired to it: Stripe's
// API and epay's gateway are the simulators, the shop's public URL is its own listener, so the
// simulators' notifications reach it.
type payEnv struct {
	t       *testing.T
	c       client
	logs    *lockedBuffer
	alerts  *memory.Alerts // on the memory adapters
	db      *sql.DB        // on the real adapters
	public  string
	stripe  *stripesim.Server
	skey    string // Stripe's secret key and webhook secret, as the service has them
	whsec   string
	epay    *epaysim.Sim
	buyer   string
	product int64
	seq     atomic.Int64
}

func newPayEnv(t *testing.T, adapters string, orderTimeout time.Duration) *payEnv {
	t.Helper()
	e := &payEnv{t: t, logs: &lockedBuffer{}}
	var cfg bootstrap.Config
	if adapters == bootstrap.AdaptersReal {
		cfg, _, e.db = realConfig(t, orderTimeout)
		cfg.AMQPPrefix = "cardshop-e2e-pay"
	} else {
		var err error
		if cfg, err = bootstrap.LoadConfig(env()); err != nil {
			t.Fatal(err)
		}
		cfg.HTTPAddr, cfg.OrderTimeout, cfg.DevPayments = freeAddr(t), orderTimeout, true
	}
	cfg.SweepInterval, cfg.RelayInterval = 200*time.Millisecond, 100*time.Millisecond
	cfg.RatePerIP, cfg.RatePerBuyer, cfg.BuyerCap = 0, 0, 0
	e.public = "http://" + cfg.HTTPAddr
	cfg.PublicURL = e.public

	// The simulators' notifications go through one transport whose idle connections are
	// closed before the service stops: the HTTP server's graceful stop waits (up to
	// CARDSHOP_SHUTDOWN_GRACE) for a connection that a client opened and never sent on.
	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	notifier := &http.Client{Timeout: 10 * time.Second, Transport: transport}
	key, whsec := stripesim.NewSecretKey(), stripesim.NewWebhookSecret()
	ss, err := stripesim.New(stripesim.Options{SecretKey: key, WebhookSecrets: []string{whsec},
		WebhookURL: e.public + "/api/payments/stripe/notify", HTTPClient: notifier})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ss.Close)
	e.stripe, e.skey, e.whsec = ss, key, whsec
	cfg.StripeKey, cfg.StripeWebhook, cfg.StripeAPIURL = bootstrap.Secret(key), bootstrap.Secret(whsec), ss.URL
	e.epay = epaysim.New(epaysim.Config{Client: notifier})
	t.Cleanup(e.epay.Close)
	cfg.EpayURL, cfg.EpayPID, cfg.EpayKey, cfg.EpayMode = e.epay.URL(), e.epay.PID(), bootstrap.Secret(e.epay.Key()), "api"

	var alerter domain.Alerter
	e.c = runService(t, cfg, e.logs, fx.Populate(&alerter))
	e.alerts, _ = alerter.(*memory.Alerts)
	t.Cleanup(transport.CloseIdleConnections) // runs before the service stops

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
	ProviderRef string    `json:"provider_ref"`
	CreatedAt   time.Time `json:"created_at"`
}

type notificationRecord struct {
	ID       int64  `json:"id"`
	Provider string `json:"provider"`
	Verified bool   `json:"verified"`
	Accepted bool   `json:"accepted"`
	Result   string `json:"result"`
	OrderNo  string `json:"order_no"`
	Amount   int64  `json:"amount"`
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
		return epayKit{e: e, sim: e.epay}
	}
	e.t.Fatalf("no kit for %s", provider)
	return nil
}
