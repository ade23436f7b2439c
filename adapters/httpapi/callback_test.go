package httpapi_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/paysig"
	"cardshop/domain"
)

type callbackJSON struct {
	Result  string `json:"result"`
	OrderNo string `json:"order_no"`
	Status  string `json:"status"`
}

func TestPaymentCallbackPaidAndRepeated(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 250, 5)
	h.importCodes(1, codes("P", 5)...)
	alice := h.token("alice")
	o := h.placeOrder(alice, "key-00000001", 1, 3)

	n := paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: 750, PaymentRef: "psp-1"}
	r := h.callback(n)
	wantStatus(t, r, 200)
	var cb callbackJSON
	r.decode(t, &cb)
	if cb != (callbackJSON{Result: "success", OrderNo: o.OrderNo, Status: "PAID"}) {
		t.Fatalf("callback answer %+v", cb)
	}
	first := h.adminOrder(o.OrderNo)
	if first.Status != "PAID" || len(first.Codes) != 3 || first.PaymentRef != "psp-1" {
		t.Fatalf("after payment: %+v", first)
	}

	// Providers retry: the same callback (and a re-signed copy later) answers success again
	// and allocates nothing more.
	for i := 0; i < 3; i++ {
		h.clock.Advance(time.Second)
		r = h.callback(n)
		wantStatus(t, r, 200)
		r.decode(t, &cb)
		if cb.Result != "success" || cb.Status != "PAID" {
			t.Fatalf("repeat %d: %+v", i, cb)
		}
	}
	again := h.adminOrder(o.OrderNo)
	if strings.Join(again.Codes, ",") != strings.Join(first.Codes, ",") {
		t.Errorf("codes changed: %v -> %v", first.Codes, again.Codes)
	}
	if c := h.cardCounts(1); c[domain.CardSold] != 3 || c[domain.CardUnsold] != 2 {
		t.Errorf("card counts after repeats: %v", c)
	}
	if l := h.levels(1); l.Stock != 2 || l.Sold != 3 {
		t.Errorf("gate after repeats: %+v", l)
	}
	// A payment-failed notice for a PAID order is stale: success, nothing changes.
	r = h.callback(paysig.Notice{OrderNo: o.OrderNo, Status: "failed", Reason: "late decline"})
	wantStatus(t, r, 200)
	r.decode(t, &cb)
	if cb.Status != "PAID" {
		t.Errorf("late failure notice moved the order: %+v", cb)
	}
}

func TestPaymentCallbackRefused(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 250, 5)
	h.importCodes(1, codes("P", 5)...)
	o := h.placeOrder(h.token("alice"), "key-00000001", 1, 1)

	body, ts, sig, err := h.signer.SignedBody(paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: o.Amount, PaymentRef: "x"}, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	send := func(body []byte, hdr ...string) resp {
		return h.do("POST", "/api/payments/callback", bytes.NewReader(body), append([]string{"Content-Type", "application/json"}, hdr...)...)
	}
	staleTS := strconv.FormatInt(h.clock.Now().Add(-6*time.Minute).Unix(), 10)
	futureTS := strconv.FormatInt(h.clock.Now().Add(6*time.Minute).Unix(), 10)
	other, _ := paysig.New("some-other-secret-0123", 0)
	cases := map[string]resp{
		"unsigned":             send(body),
		"no timestamp":         send(body, paysig.HeaderSignature, sig),
		"no signature":         send(body, paysig.HeaderTimestamp, ts),
		"forged":               send(body, paysig.HeaderTimestamp, ts, paysig.HeaderSignature, strings.Repeat("0", 64)),
		"not hex":              send(body, paysig.HeaderTimestamp, ts, paysig.HeaderSignature, "not-hex"),
		"other secret":         send(body, paysig.HeaderTimestamp, ts, paysig.HeaderSignature, other.Sign(ts, body)),
		"stale":                send(body, paysig.HeaderTimestamp, staleTS, paysig.HeaderSignature, h.signer.Sign(staleTS, body)),
		"future":               send(body, paysig.HeaderTimestamp, futureTS, paysig.HeaderSignature, h.signer.Sign(futureTS, body)),
		"body edited":          send(bytes.Replace(body, []byte(`"amount":250`), []byte(`"amount":1`), 1), paysig.HeaderTimestamp, ts, paysig.HeaderSignature, sig),
		"timestamp of another": send(body, paysig.HeaderTimestamp, strconv.FormatInt(h.clock.Now().Unix()-1, 10), paysig.HeaderSignature, sig),
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) { wantError(t, r, 401, "invalid_signature") })
	}
	if got := h.adminOrder(o.OrderNo); got.Status != "PENDING" {
		t.Fatalf("a refused callback changed the order: %+v", got)
	}

	// The window follows the shop's clock: 4 minutes later the original signature still holds.
	h.clock.Advance(4 * time.Minute)
	wantStatus(t, send(body, paysig.HeaderTimestamp, ts, paysig.HeaderSignature, sig), 200)
}

func TestPaymentCallbackAmountUnknownAndFailed(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 250, 5)
	h.importCodes(1, codes("P", 5)...)
	alice := h.token("alice")
	o := h.placeOrder(alice, "key-00000001", 1, 2)

	for _, amount := range []int64{0, 499, 501, 250} {
		wantError(t, h.callback(paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: amount, PaymentRef: "x"}), 422, "amount_mismatch")
	}
	if got := h.adminOrder(o.OrderNo); got.Status != "PENDING" || got.PaymentRef != "" || len(got.Codes) != 0 {
		t.Fatalf("a mismatched payment changed the order: %+v", got)
	}
	if c := h.cardCounts(1); c[domain.CardSold] != 0 {
		t.Fatalf("codes sold on a mismatched payment: %v", c)
	}
	if len(h.alerts.Alerts()) == 0 {
		t.Error("a mismatched payment raised no alert")
	}

	wantError(t, h.callback(paysig.Notice{OrderNo: "2503011200009999999999999999", Status: "paid", Amount: 1, PaymentRef: "x"}), 404, "order_not_found")
	// Well signed but not a valid notice.
	e := wantError(t, h.callback(paysig.Notice{OrderNo: o.OrderNo, Status: "refunded", Amount: 500}), 400, "invalid_request")
	if e.Field != "status" {
		t.Errorf("field %q", e.Field)
	}
	e = wantError(t, h.callback(paysig.Notice{OrderNo: "../x", Status: "paid", Amount: 500}), 400, "invalid_request")
	if e.Field != "order_no" {
		t.Errorf("field %q", e.Field)
	}
	// A callback body over the limit.
	big := append([]byte(`{"order_no":"`+o.OrderNo+`","pad":"`), bytes.Repeat([]byte("x"), 70<<10)...)
	wantError(t, h.do("POST", "/api/payments/callback", bytes.NewReader(big)), 413, "body_too_large")

	// Payment failed: FAILED, stock back.
	before := h.levels(1)
	r := h.callback(paysig.Notice{OrderNo: o.OrderNo, Status: "failed", Reason: "card declined"})
	wantStatus(t, r, 200)
	var cb callbackJSON
	r.decode(t, &cb)
	if cb.Status != "FAILED" || cb.Result != "success" {
		t.Fatalf("failed notice: %+v", cb)
	}
	if l := h.levels(1); l.Stock != before.Stock+2 || l.Sold != before.Sold-2 {
		t.Fatalf("gate %+v, was %+v: stock not returned", l, before)
	}
	got := h.adminOrder(o.OrderNo)
	if got.Status != "FAILED" || got.Reason != "card declined" || got.EndedAt == nil {
		t.Fatalf("failed order: %+v", got)
	}
	// Repeated failure notice: success, stock returned once.
	wantStatus(t, h.callback(paysig.Notice{OrderNo: o.OrderNo, Status: "failed"}), 200)
	if l := h.levels(1); l.Stock != before.Stock+2 {
		t.Fatalf("stock returned twice: %+v", l)
	}
	rec := h.admin("GET", "/admin/products/1/reconcile", "")
	wantStatus(t, rec, 200)
	if !strings.Contains(string(rec.body), `"ok":true`) {
		t.Errorf("reconcile after a failed payment: %s", rec.body)
	}
}
