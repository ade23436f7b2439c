package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/paysig"
)

// TestCodesNeverReachTheLog runs imports (with duplicates and bad lines), orders, payments,
// reads, refunds, a late payment with an alert and a fulfilment with the log at debug level,
// then looks for every code in the log.
func TestCodesNeverReachTheLog(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	all := codes("LOGSECRET", 6)
	h.importCodes(1, all...)
	h.importCodes(1, all[0], all[1], "x", "bad code "+all[2]) // duplicates and invalid lines
	alice := h.token("alice")

	a := h.placeOrder(alice, "key-00000001", 1, 2)
	h.pay(a)
	r := h.getOrder(alice, a.OrderNo)
	wantStatus(t, r, 200)
	if !strings.Contains(string(r.body), "LOGSECRET") {
		t.Fatal("the buyer did not receive the codes")
	}
	h.adminOrder(a.OrderNo)
	wantStatus(t, h.admin("POST", "/admin/orders/"+a.OrderNo+"/refund", `{"void":true}`), 200)

	b := h.placeOrder(alice, "key-00000002", 1, 1)
	h.clock.Advance(20 * time.Minute)
	if _, err := h.shop.Sales.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := h.placeOrder(h.token("bob"), "key-00000003", 1, 4)
	h.pay(c)
	wantStatus(t, h.callback(paysig.Notice{OrderNo: b.OrderNo, Status: "paid", Amount: b.Amount, PaymentRef: "late"}), 200)
	h.importCodes(1, "LOGSECRET-LATE-1") // fills the waiting order b
	wantStatus(t, h.getOrder(alice, b.OrderNo), 200)
	if _, err := h.shop.Relay.RelayOutbox(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.admin("POST", "/admin/products/1/reconcile?repair=true", ""), 200)
	wantError(t, h.order(alice, "key-00000004", `{"product_id":1,"qty":5}`), 409, "sold_out")

	logs := h.logs.String()
	if !strings.Contains(logs, "request failed") || !strings.Contains(logs, "alert") {
		t.Fatalf("the log did not capture the run:\n%s", logs)
	}
	for _, code := range append(all, "LOGSECRET-LATE-1") {
		if strings.Contains(logs, code) {
			t.Fatalf("code %s is in the log:\n%s", code, logs)
		}
	}
	if strings.Contains(logs, "LOGSECRET") {
		t.Fatalf("part of a code is in the log:\n%s", logs)
	}
}

// A line logged deep in the use case (a refused payment callback) carries the request id the
// caller got in its answer, though the use case never saw the HTTP request.
func TestUseCaseLogLinesCarryTheRequestID(t *testing.T) {
	h := newHarness(t)
	r := h.do("POST", "/api/payments/callback", strings.NewReader(`{"order_no":"1","status":"paid","amount":1}`),
		"Content-Type", "application/json", paysig.HeaderTimestamp, "1", paysig.HeaderSignature, "00")
	if r.status != 401 {
		t.Fatalf("forged callback: %s", r)
	}
	id := r.header.Get("X-Request-Id")
	if id == "" {
		t.Fatal("no X-Request-Id in the answer")
	}
	found := false
	for _, line := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(line, `"msg":"payment callback refused"`) {
			found = true
			if !strings.Contains(line, `"request_id":"`+id+`"`) {
				t.Fatalf("the use case's log line lacks request_id %s: %s", id, line)
			}
		}
	}
	if !found {
		t.Fatalf("no use-case log line for the refused callback in:\n%s", h.logs.String())
	}
}
