package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
)

// sameRefusal checks that got is the refusal want was, but for the request id.
func sameRefusal(t *testing.T, got, want resp) {
	t.Helper()
	strip := func(r resp) string {
		var m map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatalf("refusal %s: %v", r, err)
		}
		delete(m, "request_id")
		b, _ := json.Marshal(m)
		return fmt.Sprintf("%d %s Retry-After=%q", r.status, b, r.header.Get("Retry-After"))
	}
	if g, w := strip(got), strip(want); g != w {
		t.Fatalf("refusal answered from memory\n%s\nwant the use case's\n%s", g, w)
	}
}

// A sold-out answer under the gate's lease and a sale clearly not started are answered before
// the per-buyer limit is charged, with the very answer the use case gives; every order that
// can reserve (a new one the service cannot judge from memory, a re-sent key) is charged.
func TestRefusalsFromMemoryChargeNoBuyerBudget(t *testing.T) {
	opt, _, lim := limited(httpapi.RateLimits{PerBuyer: 2, Window: time.Minute})
	h := newHarness(t, opt)
	h.createProduct(1, 999, 5)
	h.importCodes(1, codes("A", 1)...)
	alice, bob := h.token("alice"), h.token("bob")
	const body = `{"product_id":1,"qty":1}`
	charges := func(want int) {
		t.Helper()
		if got := len(lim.calls()); got != want {
			t.Fatalf("%d limiter charges %q, want %d", got, lim.calls(), want)
		}
	}

	placed := h.placeOrder(alice, "alice-key-0000", 1, 1) // can reserve: charged
	charges(1)
	// Without a lease the service cannot tell: charged, and the gate answers.
	byGate := h.order(bob, "bob-key-0000", body)
	wantError(t, byGate, 409, "sold_out")
	charges(2)

	h.gate.leased.Store(true)
	for i := range 10 { // five times bob's budget
		r := h.order(bob, fmt.Sprintf("bob-key-%04d", i+1), body)
		wantError(t, r, 409, "sold_out")
		sameRefusal(t, r, byGate)
	}
	charges(2)
	if n := h.gate.byLease.Load(); n != 10 {
		t.Fatalf("%d answers by the lease, want 10", n)
	}
	if l := h.levels(1); l.Stock != 0 || l.Sold != 1 {
		t.Fatalf("gate after the sold-out answers: %+v", l)
	}

	// A re-sent key has a claim: the lease steps aside, it is charged and replays its order.
	r := h.order(alice, "alice-key-0000", body)
	wantStatus(t, r, 200)
	var replayed orderJSON
	r.decode(t, &replayed)
	if replayed.OrderNo != placed.OrderNo || r.header.Get(httpapi.HeaderReplayed) != "true" {
		t.Fatalf("re-sent key answered %s, want the replay of %s", r, placed.OrderNo)
	}
	charges(3)

	// What the service cannot judge from memory is still limited: bob's budget (2 a minute)
	// has one left.
	h.gate.leased.Store(false)
	wantError(t, h.order(bob, "bob-key-0100", body), 409, "sold_out")
	wantError(t, h.order(bob, "bob-key-0101", body), 429, "rate_limited")
	charges(5)

	// A sale that starts in an hour: the first order reads the product (not cached yet) and is
	// charged; from then on the instance answers from its cached copy, the same answer.
	starts := start.Add(time.Hour)
	wantStatus(t, h.admin("POST", "/admin/products", fmt.Sprintf(`{"id":2,"name":"Later","price":100,"max_per_order":5,"starts_at":%q}`,
		starts.Format(time.RFC3339Nano))), 201)
	h.importCodes(2, codes("B", 5)...)
	carol := h.token("carol")
	first := h.order(carol, "carol-key-0000", `{"product_id":2,"qty":1}`)
	wantError(t, first, 409, "sale_not_started")
	charges(6)
	for i := range 10 {
		r := h.order(carol, fmt.Sprintf("carol-key-%04d", i+1), `{"product_id":2,"qty":1}`)
		sameRefusal(t, r, first)
	}
	charges(6)
	if l := h.levels(2); l.Sold != 0 {
		t.Fatalf("orders before the start reserved: %+v", l)
	}
}

// An invalid request is never answered from memory with a refusal other than its own: a
// qty over the product's limit on a sold-out product under a lease is the use case's
// qty_out_of_range, charged as before.
func TestRefusalsFromMemoryKeepTheUseCasesOrder(t *testing.T) {
	opt, _, lim := limited(httpapi.RateLimits{PerBuyer: 100, Window: time.Minute})
	h := newHarness(t, opt)
	h.createProduct(1, 999, 2)
	h.importCodes(1, codes("A", 1)...)
	alice := h.token("alice")
	h.placeOrder(alice, "alice-key-0000", 1, 1)
	h.gate.leased.Store(true)
	before := len(lim.calls())
	for _, c := range []struct{ key, body, code string }{
		{"alice-key-0001", `{"product_id":1,"qty":3}`, "qty_out_of_range"},
		{"short", `{"product_id":1,"qty":1}`, "invalid_idempotency_key"},
		{"alice-key-0002", `{"product_id":1,"qty":1,"coupon":"NOPE-1"}`, "coupon_not_found"},
	} {
		r := h.order(alice, c.key, c.body)
		if !bytes.Contains(r.body, []byte(`"code":"`+c.code+`"`)) {
			t.Fatalf("%s %s answered %s, want %s", c.key, c.body, r, c.code)
		}
	}
	if n := len(lim.calls()) - before; n != 3 {
		t.Fatalf("%d charges for 3 requests the use case refuses, want 3", n)
	}
	if n := h.gate.byLease.Load(); n != 0 {
		t.Fatalf("%d answers by the lease for invalid requests", n)
	}
}
