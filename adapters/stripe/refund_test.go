package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/stripesim"
	"cardshop/adapters/stripe"
	"cardshop/domain"
)

// paid creates the order's session and has the buyer pay it.
func (r *rig) paid(no domain.OrderNo, amount domain.Money) domain.Payment {
	r.t.Helper()
	p := r.create(no, amount)
	mustEvent(r.t)(r.sim.Complete(string(no), true))
	p.Status = domain.PaymentPaid
	return p
}

func refundOf(p domain.Payment) domain.RefundRequest {
	return domain.RefundRequest{RefundNo: domain.RefundNoOf(p.OrderNo), Amount: p.Amount, Currency: p.Currency, Reason: "buyer asked"}
}

// refundPosts returns the POSTs to /v1/refunds the simulator received.
func (r *rig) refundPosts() []stripesim.Request {
	var out []stripesim.Request
	for _, rq := range r.sim.Requests() {
		if rq.Method == http.MethodPost && rq.Path == "/v1/refunds" {
			out = append(out, rq)
		}
	}
	return out
}

func (r *rig) payouts(no domain.OrderNo) (int, int64) { return r.sim.Payouts(string(no)) }

func TestRefundReturnsTheWholeAmountOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := r.paid(orderNo, 1998)
	req := refundOf(p)
	st, err := r.gw.Refund(ctx, p, req)
	if err != nil || st.Outcome != domain.RefundSucceeded || !strings.HasPrefix(st.ProviderRef, "re_") || st.Reason != "" {
		t.Fatalf("%+v %v", st, err)
	}
	rfs := r.sim.Refunds()
	s, _ := r.sim.SessionOf(string(orderNo))
	if len(rfs) != 1 || rfs[0].ID != st.ProviderRef || rfs[0].PaymentIntent != s.PaymentIntent || rfs[0].Amount != 1998 ||
		rfs[0].Currency != "usd" || rfs[0].Reason != "requested_by_customer" ||
		rfs[0].Metadata["order_no"] != string(orderNo) || rfs[0].Metadata["refund_no"] != req.RefundNo || len(rfs[0].Metadata) != 2 {
		t.Fatalf("refunds %+v (session %s)", rfs, s.PaymentIntent)
	}
	posts := r.refundPosts()
	if len(posts) != 1 || posts[0].IdempotencyKey != "cardshop-refund-"+req.RefundNo || posts[0].Form.Get("amount") != "1998" ||
		posts[0].Form.Get("payment_intent") != s.PaymentIntent || !posts[0].AuthOK {
		t.Fatalf("posts %+v", posts)
	}
	// Asked again with the same number: the same refund, no second payout.
	again, err := r.gw.Refund(ctx, p, req)
	if err != nil || again != st {
		t.Fatalf("again: %+v %v", again, err)
	}
	if posts := r.refundPosts(); len(posts) != 2 || !posts[1].Replayed {
		t.Fatalf("the retry was not a replay: %+v", posts)
	}
	if n, amount := r.payouts(orderNo); n != 1 || amount != 1998 {
		t.Fatalf("payouts %d, %d", n, amount)
	}
	// The payment still reads paid: a refund does not undo it at Stripe.
	if q, err := r.gw.Query(ctx, p); err != nil || q.Outcome != domain.OutcomePaid {
		t.Fatalf("query %+v %v", q, err)
	}
	// The refund's events, once Stripe sends them.
	for _, d := range r.sim.Flush(ctx) {
		if !d.Accepted() {
			t.Fatalf("%+v", d)
		}
	}
	notices, refused := r.received()
	if len(refused) != 0 || len(notices) != 2 {
		t.Fatalf("%d notices, refused %v", len(notices), refused)
	}
	created, charge := notices[0], notices[1]
	if created.RefundNo != req.RefundNo || created.RefundOutcome != domain.RefundSucceeded || created.OrderNo != orderNo ||
		created.ProviderRef != st.ProviderRef || created.Amount != 1998 || created.Currency != usd || created.Outcome != domain.OutcomePending {
		t.Fatalf("refund.created: %+v", created)
	}
	if charge.OrderNo != "" || charge.RefundNo != "" || charge.Outcome != domain.OutcomePending {
		t.Fatalf("charge.refunded must change nothing: %+v", charge)
	}
}

func TestRefundValidatesBeforeAnyCall(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := r.paid(orderNo, 1998)
	before := len(r.sim.Requests())
	cases := map[string]func(*domain.RefundRequest){
		"no refund number":       func(q *domain.RefundRequest) { q.RefundNo = "" },
		"odd refund number":      func(q *domain.RefundRequest) { q.RefundNo = "R1&amount=1" },
		"part of the amount":     func(q *domain.RefundRequest) { q.Amount = 1000 },
		"more than the amount":   func(q *domain.RefundRequest) { q.Amount = 1999 },
		"another currency":       func(q *domain.RefundRequest) { q.Currency = domain.Currency{Code: "EUR", Exponent: 2} },
		"long refund number 65+": func(q *domain.RefundRequest) { q.RefundNo = strings.Repeat("1", 65) },
	}
	for name, edit := range cases {
		q := refundOf(p)
		edit(&q)
		if _, err := r.gw.Refund(ctx, p, q); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := p
	bad.ProviderRef = "cs_test_../../v1/refunds"
	if _, err := r.gw.Refund(ctx, bad, refundOf(p)); err == nil {
		t.Error("a malformed session id was accepted")
	}
	if n := len(r.sim.Requests()) - before; n != 0 {
		t.Fatalf("%d requests reached Stripe", n)
	}
}

func TestRefundOfAnUnpaidSessionIsRefusedWithoutACall(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	open := r.create("2503011200001234000000000001", 100)
	delayed := r.create("2503011200001234000000000002", 100)
	mustEvent(t)(r.sim.Complete(string(delayed.OrderNo), false))
	for _, p := range []domain.Payment{open, delayed} {
		st, err := r.gw.Refund(ctx, p, refundOf(p))
		if err != nil || st.Outcome != domain.RefundRefused || !strings.Contains(st.Reason, "no payment") {
			t.Errorf("%s: %+v %v", p.OrderNo, st, err)
		}
	}
	if posts := r.refundPosts(); len(posts) != 0 {
		t.Fatalf("%d refund requests", len(posts))
	}
}

// A timeout after Stripe carried the refund out, a lost reply, an outage: each is
// ErrUnavailable, and the retry with the same refund number gets the one refund.
func TestRefundTimeoutThenRetryPaysOutOnce(t *testing.T) {
	r := newRig(t)
	p := r.paid(orderNo, 1998)
	req := refundOf(p)

	r.sim.RefundOutage(true)
	if _, err := r.gw.Refund(context.Background(), p, req); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("outage: %v", err)
	}
	r.sim.RefundOutage(false)
	r.sim.Throttle(true)
	if _, err := r.gw.Refund(context.Background(), p, req); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("throttle: %v", err)
	}
	r.sim.Throttle(false)
	if n, _ := r.payouts(orderNo); n != 0 {
		t.Fatalf("%d payouts while down", n)
	}

	// The session read answers, then the refund call hangs until the shop gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r.sim.HangReplies("/v1/refunds", 1)
	if _, err := r.gw.Refund(ctx, p, req); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("timeout: %v", err)
	}
	if n, _ := r.payouts(orderNo); n != 1 {
		t.Fatalf("the timed-out refund was not carried out: %d payouts", n)
	}
	st, err := r.gw.Refund(context.Background(), p, req)
	if err != nil || st.Outcome != domain.RefundSucceeded {
		t.Fatalf("retry: %+v %v", st, err)
	}
	// And once more with the reply lost.
	// (net/http itself resends a POST that carries an Idempotency-Key when a reused connection
	// breaks: then Stripe's replay answers at once.)
	r.sim.LoseRepliesTo("/v1/refunds", 1)
	if lost, err := r.gw.Refund(context.Background(), p, req); !errors.Is(err, domain.ErrUnavailable) && (err != nil || lost != st) {
		t.Fatalf("lost reply: %+v %v", lost, err)
	}
	again, err := r.gw.Refund(context.Background(), p, req)
	if err != nil || again != st {
		t.Fatalf("retry after the lost reply: %+v %v (first %+v)", again, err, st)
	}
	if n, amount := r.payouts(orderNo); n != 1 || amount != 1998 || len(r.sim.Refunds()) != 1 {
		t.Fatalf("payouts %d (%d), refunds %d", n, amount, len(r.sim.Refunds()))
	}
}

func TestRefundRefusalIsAStateNotAnError(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := r.paid(orderNo, 1998)
	r.sim.RefundRefuse("charge_disputed", "Charge ch_x has been charged back; refund the dispute instead.")
	st, err := r.gw.Refund(ctx, p, refundOf(p))
	if err != nil || st.Outcome != domain.RefundRefused || !strings.Contains(st.Reason, "charged back") || !strings.Contains(st.Reason, "charge_disputed") {
		t.Fatalf("%+v %v", st, err)
	}
	if strings.Contains(st.Reason, r.key) {
		t.Fatal("the key in a reason")
	}
	r.sim.RefundRefuse("", "")
	// Stripe replays the refusal under the same key for 24 hours.
	if st, err := r.gw.Refund(ctx, p, refundOf(p)); err != nil || st.Outcome != domain.RefundRefused {
		t.Fatalf("same number within the key's life: %+v %v", st, err)
	}
	if n, _ := r.payouts(orderNo); n != 0 {
		t.Fatalf("%d payouts after refusals", n)
	}
	// A new refund number is a new request.
	q := refundOf(p)
	q.RefundNo = string(p.OrderNo) + "R2"
	if st, err := r.gw.Refund(ctx, p, q); err != nil || st.Outcome != domain.RefundSucceeded {
		t.Fatalf("new number: %+v %v", st, err)
	}
}

func TestRefundAmountTooLargeIsRefused(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := r.paid(orderNo, 1998)
	s, _ := r.sim.SessionOf(string(orderNo))
	// Part of the payment was refunded by hand in the dashboard.
	byHand(t, r, url.Values{"payment_intent": {s.PaymentIntent}, "amount": {"500"}})
	st, err := r.gw.Refund(ctx, p, refundOf(p))
	if err != nil || st.Outcome != domain.RefundRefused || !strings.Contains(st.Reason, "amount_too_large") {
		t.Fatalf("%+v %v", st, err)
	}
	if n, amount := r.payouts(orderNo); n != 1 || amount != 500 {
		t.Fatalf("payouts %d %d", n, amount)
	}
}

// byHand creates a refund as the dashboard does: another key, no cardshop metadata.
func byHand(t *testing.T, r *rig, form url.Values) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.sim.URL+"/v1/refunds", strings.NewReader(form.Encode()))
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := r.sim.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("refund by hand: %v %v", resp, err)
	}
	_ = resp.Body.Close()
}

func TestRefundOfAnAlreadyRefundedCharge(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := r.paid(orderNo, 1998)
	first, err := r.gw.Refund(ctx, p, refundOf(p))
	if err != nil || first.Outcome != domain.RefundSucceeded {
		t.Fatal(first, err)
	}
	// A day later the key is forgotten: the retry is a new request, which Stripe refuses as
	// charge_already_refunded; the refund of this number answers.
	r.sim.ExpireIdempotencyKeys()
	again, err := r.gw.Refund(ctx, p, refundOf(p))
	if err != nil || again != first {
		t.Fatalf("after the key expired: %+v %v (first %+v)", again, err, first)
	}
	if posts := r.refundPosts(); len(posts) != 2 || posts[1].Status != 400 || posts[1].Replayed {
		t.Fatalf("posts %+v", posts)
	}

	// Refunded in the dashboard before cardshop asked: succeeded, by that refund.
	other := r.paid("2503011200001234000000000009", 700)
	s, _ := r.sim.SessionOf(string(other.OrderNo))
	byHand(t, r, url.Values{"payment_intent": {s.PaymentIntent}})
	st, err := r.gw.Refund(ctx, other, refundOf(other))
	rfs := r.sim.Refunds()
	if err != nil || st.Outcome != domain.RefundSucceeded || st.ProviderRef != rfs[len(rfs)-1].ID {
		t.Fatalf("refunded by hand: %+v %v", st, err)
	}
	for _, no := range []domain.OrderNo{orderNo, other.OrderNo} {
		if n, _ := r.payouts(no); n != 1 {
			t.Fatalf("%s: %d payouts", no, n)
		}
	}
}

func TestPendingRefundThenSettled(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	ok := r.paid("2503011200001234000000000001", 1000)
	ko := r.paid("2503011200001234000000000002", 2000)
	r.sim.RefundPending(true)
	for _, p := range []domain.Payment{ok, ko} {
		st, err := r.gw.Refund(ctx, p, refundOf(p))
		if err != nil || st.Outcome != domain.RefundPending || st.ProviderRef == "" {
			t.Fatalf("%s: %+v %v", p.OrderNo, st, err)
		}
	}
	r.sim.Flush(ctx)
	mustDelivery(t)(r.sim.SettleRefund(ctx, string(ok.OrderNo), true, ""))
	mustDelivery(t)(r.sim.SettleRefund(ctx, string(ko.OrderNo), false, "expired_or_canceled_card"))
	notices, refused := r.received()
	if len(refused) != 0 || len(notices) != 6 {
		t.Fatalf("%d notices %v", len(notices), refused)
	}
	var pending int
	for _, n := range notices[:4] {
		if n.RefundNo != "" {
			pending++
			if n.RefundOutcome != domain.RefundPending {
				t.Fatalf("refund.created: %+v", n)
			}
		}
	}
	updated, failed := notices[4], notices[5]
	if pending != 2 || updated.RefundNo != domain.RefundNoOf(ok.OrderNo) || updated.RefundOutcome != domain.RefundSucceeded || updated.OrderNo != ok.OrderNo {
		t.Fatalf("refund.updated: %+v", updated)
	}
	if failed.RefundNo != domain.RefundNoOf(ko.OrderNo) || failed.RefundOutcome != domain.RefundRefused ||
		!strings.Contains(failed.Reason, "expired_or_canceled_card") || failed.Amount != 2000 {
		t.Fatalf("refund.failed: %+v", failed)
	}
	// Asked again: Stripe replays "pending", the gateway reads how the refund stands now.
	for p, want := range map[domain.OrderNo]domain.RefundOutcome{ok.OrderNo: domain.RefundSucceeded, ko.OrderNo: domain.RefundRefused} {
		pay := ok
		if p == ko.OrderNo {
			pay = ko
		}
		if st, err := r.gw.Refund(ctx, pay, refundOf(pay)); err != nil || st.Outcome != want {
			t.Errorf("%s: %+v %v", p, st, err)
		}
	}
	if n, _ := r.payouts(ok.OrderNo); n != 1 {
		t.Fatalf("%d payouts", n)
	}
	if n, _ := r.payouts(ko.OrderNo); n != 0 {
		t.Fatalf("a failed refund paid out: %d", n)
	}
}

func TestLegacyChargeRefundedCarriesTheRefund(t *testing.T) {
	r := newRig(t, func(o *stripesim.Options, _ *stripe.Config) { o.LegacyChargeRefunds = true })
	ctx := context.Background()
	p := r.paid(orderNo, 1998)
	st, err := r.gw.Refund(ctx, p, refundOf(p))
	if err != nil {
		t.Fatal(err)
	}
	ob := r.sim.Outbox()
	if len(ob) != 2 || ob[1].Type != stripesim.EventChargeRefunded {
		t.Fatalf("outbox %+v", ob)
	}
	d := r.sim.Deliver(ctx, ob[1].Event, stripesim.Genuine)
	notices, _ := r.received()
	if !d.Accepted() || len(notices) != 1 || notices[0].RefundNo != domain.RefundNoOf(orderNo) || notices[0].ProviderRef != st.ProviderRef ||
		notices[0].RefundOutcome != domain.RefundSucceeded || notices[0].OrderNo != orderNo {
		t.Fatalf("%+v %+v", d, notices)
	}
}

func TestForgedRefundEventsAreRefused(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := r.paid(orderNo, 1998)
	st, err := r.gw.Refund(ctx, p, refundOf(p))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := r.sim.RefundEvent(stripesim.EventRefundUpdated, st.ProviderRef)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []stripesim.Forgery{stripesim.WrongSecret, stripesim.StaleTimestamp, stripesim.TamperedBody, stripesim.Unsigned} {
		if d := r.sim.Deliver(ctx, ev, f); d.Accepted() {
			t.Errorf("forgery %d accepted", f)
		}
	}
	notices, refused := r.received()
	if len(notices) != 0 || len(refused) != 4 {
		t.Fatalf("%d notices, %d refused", len(notices), len(refused))
	}
	for _, err := range refused {
		if !errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%v", err)
		}
	}
}

// refundJSON renders a refund object for a hand-built event.
func refundJSON(fields string) string {
	return `{"id":"re_3Abc","object":"refund","amount":1998,"currency":"usd","payment_intent":"pi_3Abc","charge":"ch_3Abc",` +
		`"metadata":{"order_no":"2503011200001234123456789012","refund_no":"2503011200001234123456789012R1"}` + fields + `}`
}

func TestRefundEventMapping(t *testing.T) {
	secret := stripesim.NewWebhookSecret()
	at := time.Unix(1740830400, 0)
	legacy := `{"id":"ch_3Abc","object":"charge","refunded":true,"refunds":{"object":"list","data":[` +
		`{"id":"re_other","object":"refund","amount":1,"currency":"usd","status":"succeeded","metadata":{}},` +
		refundJSON(`,"status":"pending"`) + `]}}`
	cases := []struct {
		typ, object string
		outcome     domain.RefundOutcome // 0: a notice that changes nothing
		reason      string
	}{
		{"refund.created", refundJSON(`,"status":"succeeded"`), domain.RefundSucceeded, ""},
		{"refund.created", refundJSON(`,"status":"pending"`), domain.RefundPending, ""},
		{"refund.updated", refundJSON(`,"status":"succeeded"`), domain.RefundSucceeded, ""},
		{"refund.updated", refundJSON(`,"status":"requires_action"`), domain.RefundPending, ""},
		{"refund.failed", refundJSON(`,"status":"failed","failure_reason":"lost_or_stolen_card"`), domain.RefundRefused, "lost_or_stolen_card"},
		{"refund.updated", refundJSON(`,"status":"canceled"`), domain.RefundRefused, "canceled"},
		{"charge.refund.updated", refundJSON(`,"status":"succeeded","payment_intent":{"id":"pi_3Abc","object":"payment_intent"}`), domain.RefundSucceeded, ""},
		{"charge.refunded", legacy, domain.RefundPending, ""},
		{"charge.refunded", `{"id":"ch_3Abc","object":"charge","refunded":true,"amount_refunded":1998}`, 0, ""},
		{"refund.created", `{"id":"re_1","object":"refund","amount":1998,"currency":"usd","status":"succeeded","metadata":{}}`, 0, ""},
	}
	for _, c := range cases {
		body := []byte(`{"id":"evt_7","object":"event","type":"` + c.typ + `","data":{"object":` + c.object + `}}`)
		n, err := verifyAt(t, []string{secret}, stripesim.SignatureHeader(at, body, secret), body, at)
		if err != nil {
			t.Errorf("%s %s: %v", c.typ, c.object, err)
			continue
		}
		if n.EventID != "evt_7" || n.Outcome != domain.OutcomePending || n.RefundOutcome != c.outcome {
			t.Errorf("%s %s: %+v", c.typ, c.object, n)
			continue
		}
		if c.outcome == 0 {
			if n.OrderNo != "" || n.RefundNo != "" || n.ProviderRef != "" {
				t.Errorf("%s: a notice that changes nothing carries %+v", c.typ, n)
			}
			continue
		}
		if n.OrderNo != orderNo || n.RefundNo != domain.RefundNoOf(orderNo) || n.ProviderRef != "re_3Abc" || n.Amount != 1998 || n.Currency != usd {
			t.Errorf("%s: %+v", c.typ, n)
		}
		if !strings.Contains(n.Reason, c.reason) || (c.outcome == domain.RefundRefused) != (n.Reason != "") {
			t.Errorf("%s: reason %q", c.typ, n.Reason)
		}
	}
}

func TestMalformedRefundEventsAreValidationErrors(t *testing.T) {
	secret := stripesim.NewWebhookSecret()
	at := time.Unix(1740830400, 0)
	ok := `,"status":"succeeded"`
	objects := map[string]string{
		"refund.updated":  `{"id":"ch_1","object":"charge"}`,
		"refund.created":  `{"id":"ch_1","object":"refund","amount":1,"currency":"usd","status":"succeeded","metadata":{"refund_no":"R1","order_no":"2503011200001234123456789012"}}`,
		"refund.failed":   `{"id":"re_1","object":"refund","metadata":{"refund_no":"R1"},"status":"failed","amount":1,"currency":"usd"}`,
		"charge.refunded": `{"id":"re_1","object":"refund"}`,
	}
	bodies := []string{}
	for typ, o := range objects {
		bodies = append(bodies, `{"id":"evt_1","object":"event","type":"`+typ+`","data":{"object":`+o+`}}`)
	}
	for _, fields := range []string{
		`,"status":"weird"`,
		`,"status":"succeeded","amount":-1`,
		`,"status":"succeeded","amount":19.98`,
		`,"status":"succeeded","currency":"USD"`,
		`,"status":"succeeded","amount":null,"currency":null`,
		`,"status":"succeeded","currency":"xts"`,
		`,"status":"succeeded","metadata":{"refund_no":"R 1","order_no":"2503011200001234123456789012"}`,
		`,"status":"succeeded","metadata":{"refund_no":"R1","order_no":"../1"}`,
		`,"status":"succeeded","metadata":{"refund_no":"","order_no":"2503011200001234123456789012"}`,
		`,"status":"succeeded","metadata":{"refund_no":7}`,
		ok + `,"payment_intent":7`,
	} {
		bodies = append(bodies, `{"id":"evt_1","object":"event","type":"refund.updated","data":{"object":`+refundJSON(fields)+`}}`)
	}
	for _, b := range bodies {
		body := []byte(b)
		_, err := verifyAt(t, []string{secret}, stripesim.SignatureHeader(at, body, secret), body, at)
		if !errors.Is(err, domain.ErrInvalidInput) || errors.Is(err, domain.ErrBadSignature) {
			t.Errorf("%s: %v", b, err)
		}
	}
}
