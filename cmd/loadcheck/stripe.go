package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"cardshop/adapters/lab/paysim/stripesim"
)

// stripeEnv is the Stripe simulator every instance this load check starts is configured with
// (CARDSHOP_STRIPE_*): it answers the instances' Checkout Session calls and sends them signed
// webhook events, as Stripe would. Its key and signing secret are this run's, never printed.
type stripeEnv struct {
	sim   *stripesim.Server
	key   string
	whsec string
}

// startStripe starts the simulator on a loopback port.
func (e *env) startStripe() error {
	key, whsec := stripesim.NewSecretKey(), stripesim.NewWebhookSecret()
	// Up to 32 workers deliver, two at once for a duplicate: enough idle connections that
	// each delivery reuses one.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	sim, err := stripesim.New(stripesim.Options{SecretKey: key, WebhookSecrets: []string{whsec}, HTTPClient: client})
	if err != nil {
		return fmt.Errorf("stripe simulator: %w", err)
	}
	e.stripe = &stripeEnv{sim: sim, key: key, whsec: whsec}
	return nil
}

// environ is what an instance needs to pay through the simulator (its CARDSHOP_PUBLIC_URL, the
// return address of the sessions it opens, is its own address).
func (s *stripeEnv) environ() []string {
	return []string{"CARDSHOP_STRIPE_API_URL=" + s.sim.URL, "CARDSHOP_STRIPE_SECRET_KEY=" + s.key,
		"CARDSHOP_STRIPE_WEBHOOK_SECRETS=" + s.whsec}
}

// stripeRun is what the Stripe payment phase of a scenario did.
type stripeRun struct {
	orders      []due    // the product's PENDING orders, shuffled: the first toPay are paid
	refs        []string // each order's Checkout Session id as its payment answered; "" if creation failed
	toPay, dupN int
	createRate  float64
	createErrs  int
	doubles     int // payments asked for twice at once, both answered
	doublesOne  int // … answered as one payment: one 201, one 200, the same session
	gone        int // sessions no longer open when the buyer came to pay (the order closed first)
	firstErr    string
}

// payStripe pays a share of the product's PENDING orders the way a buyer pays through Stripe:
// the buyer asks the service for the order's payment (POST /api/orders/{no}/payment
// {"provider":"stripe"} with the buyer's token; the service opens a Checkout Session at the
// simulator), then pays on Stripe's page, and Stripe (the simulator) sends the signed
// checkout.session.completed event to the service's notify URL. For a share of the paid
// orders both steps happen twice at once: the buyer's double click, and Stripe delivering the
// same event twice concurrently. The other orders' buyers open checkout and leave: their
// orders expire, and the service expires their sessions at Stripe as it closes them.
//
// It returns the orders whose every delivered event was answered 2xx (Stripe's "delivered").
func (e *env) payStripe(ctx context.Context, pid int64, res *scenarioResult) (map[string]bool, error) {
	all, err := e.pendingOrders(ctx, pid)
	if err != nil {
		return nil, err
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	r := &stripeRun{orders: all, refs: make([]string, len(all)), toPay: int(float64(len(all)) * e.o.payShare)}
	r.dupN = int(float64(r.toPay) * e.o.dupCallbacks)
	res.stripe = r
	inst := e.instances[0]
	sim := e.stripe.sim
	sim.SetWebhookURL(inst.base + "/api/payments/stripe/notify")
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	var mu sync.Mutex
	note := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if r.firstErr == "" {
			r.firstErr = fmt.Sprintf(format, args...)
		}
	}

	// 1. Every buyer opens checkout.
	start := time.Now()
	parallel(len(all), 32, func(i int) {
		d := all[i]
		if i >= r.dupN {
			st, ref, err := e.createPayment(ctx, client, inst, d)
			if err != nil {
				note("create the payment of %s: %d %v", d.no, st, err)
				mu.Lock()
				r.createErrs++
				mu.Unlock()
				return
			}
			r.refs[i] = ref
			return
		}
		var st [2]int
		var ref [2]string
		var errs [2]error
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); st[k], ref[k], errs[k] = e.createPayment(ctx, client, inst, d) }()
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for k := range 2 {
			if errs[k] != nil {
				r.createErrs++
				if r.firstErr == "" {
					r.firstErr = fmt.Sprintf("create the payment of %s: %d %v", d.no, st[k], errs[k])
				}
			} else {
				r.refs[i] = ref[k]
			}
		}
		if errs[0] == nil && errs[1] == nil {
			r.doubles++
			if ref[0] == ref[1] && st[0]+st[1] == http.StatusCreated+http.StatusOK {
				r.doublesOne++
			}
		}
	})
	if el := time.Since(start); el > 0 {
		r.createRate = float64(len(all)+r.dupN) / el.Seconds()
	}

	// 2. The buyers of the first toPay orders pay; Stripe sends the event.
	accepted := make(map[string]bool, r.toPay)
	refused, dupSent := 0, 0
	start = time.Now()
	parallel(r.toPay, 32, func(i int) {
		d := all[i]
		if r.refs[i] == "" {
			return // no payment to pay: counted among the creation failures
		}
		ev, err := sim.Complete(d.no, true)
		if err != nil { // the shop expired the session as the order closed before the buyer paid
			mu.Lock()
			r.gone++
			mu.Unlock()
			return
		}
		n := 1
		if i < r.dupN {
			n = 2
		}
		ds := make([]stripesim.Delivery, n)
		var wg sync.WaitGroup
		for k := range n {
			wg.Add(1)
			go func() { defer wg.Done(); ds[k] = sim.Deliver(ctx, ev, stripesim.Genuine) }()
		}
		wg.Wait()
		ok := true
		for _, dl := range ds {
			if !dl.Accepted() {
				ok = false
				note("the event of %s: %d %s %v", d.no, dl.Status, bytes.TrimSpace(dl.Reply), dl.Err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if n == 2 {
			dupSent++
		}
		if ok {
			accepted[d.no] = true
		} else {
			refused++
		}
	})
	elapsed := time.Since(start)
	res.paid, res.dupSent, res.payErrors = len(accepted), dupSent, refused
	if elapsed > 0 {
		res.payRate = float64(r.toPay) / elapsed.Seconds()
	}
	return accepted, nil
}

// createPayment asks inst for order d's Stripe payment as its buyer; it returns the answer's
// status (201 created, 200 the existing one) and the session id, or why the answer is wrong.
func (e *env) createPayment(ctx context.Context, client *http.Client, inst *instance, d due) (int, string, error) {
	status, b, err := e.asBuyer(ctx, client, d.buyer, http.MethodPost, inst.base+"/api/orders/"+d.no+"/payment", `{"provider":"stripe"}`)
	if err != nil {
		return status, "", err
	}
	if status != http.StatusCreated && status != http.StatusOK {
		return status, "", fmt.Errorf("%s", bytes.TrimSpace(b))
	}
	var p struct {
		OrderNo     string `json:"order_no"`
		Provider    string `json:"provider"`
		Status      string `json:"status"`
		Amount      int64  `json:"amount"`
		ProviderRef string `json:"provider_ref"`
		PayURL      string `json:"pay_url"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return status, "", fmt.Errorf("payment answer: %w", err)
	}
	if p.OrderNo != d.no || p.Provider != "stripe" || p.Status != "OPEN" || p.Amount != d.amount ||
		!strings.HasPrefix(p.ProviderRef, "cs_") || !strings.HasPrefix(p.PayURL, e.stripe.sim.URL) {
		return status, "", fmt.Errorf("payment answer is not the order's open Stripe payment of %d: %s", d.amount, bytes.TrimSpace(b))
	}
	return status, p.ProviderRef, nil
}

// afterSettle runs once the scenario's orders have settled: the simulator sends the
// checkout.session.expired events of the sessions the service expired (Stripe sends them after
// the expire call's answer), and the session count per order is checked against the
// simulator's own records. It prints what happened to the abandoned checkouts.
func (r *stripeRun) afterSettle(ctx context.Context, sim *stripesim.Server) Check {
	mine := make(map[string]bool, len(r.orders))
	for _, d := range r.orders {
		mine[d.no] = true
	}
	var expiredEvents, expiredOK int
	for _, dl := range sim.Flush(ctx) {
		if mine[dl.Note.OrderNo] && dl.Note.Type == stripesim.EventExpired {
			expiredEvents++
			if dl.Accepted() {
				expiredOK++
			}
		}
	}
	sessions := map[string]int{}
	for _, ss := range sim.Sessions() {
		if mine[ss.ClientReferenceID] {
			sessions[ss.ClientReferenceID]++
		}
	}
	withPayment, more := 0, 0
	for i, d := range r.orders {
		if r.refs[i] != "" {
			withPayment++
		}
		if sessions[d.no] > 1 {
			more++
		}
	}
	abandoned, expired, open := 0, 0, 0
	for i, d := range r.orders[r.toPay:] {
		if r.refs[r.toPay+i] == "" {
			continue
		}
		abandoned++
		ss, _ := sim.SessionOf(d.no)
		switch ss.Status {
		case "expired":
			expired++
		case "open":
			open++
		}
	}
	fmt.Printf("   abandoned %d checkouts: %d expired at Stripe as their orders closed, %d still open · checkout.session.expired events accepted: %d of %d\n",
		abandoned, expired, open, expiredOK, expiredEvents)
	return Check{Name: "stripe: one Checkout Session per order, also when the buyer asks for the payment twice at once",
		OK: more == 0 && len(sessions) == withPayment && r.doublesOne == r.doubles,
		Detail: fmt.Sprintf("orders with a payment %d, with a session at Stripe %d, with more than one %d; asked for twice at once and both answered %d, as one payment (201 + 200, the same session) %d",
			withPayment, len(sessions), more, r.doubles, r.doublesOne)}
}

// parallel calls f(0) … f(n-1) from the given number of goroutines.
func parallel(n, workers int, f func(i int)) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				f(i)
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}
