package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
	"cardshop/adapters/memory"
	"cardshop/application"
	"cardshop/domain"
)

func TestPlaceOrderCreatedAndReplayed(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 999, 5)
	h.importCodes(1, codes("A", 10)...)
	alice, bob := h.token("alice"), h.token("bob")

	first := h.order(alice, "key-00000001", `{"product_id":1,"qty":2}`)
	wantStatus(t, first, 201)
	if first.header.Get(httpapi.HeaderReplayed) != "" {
		t.Errorf("a new order is marked replayed")
	}
	var o orderJSON
	first.decode(t, &o)
	if o.OrderNo == "" || o.Status != "PENDING" || o.Qty != 2 || o.UnitPrice != 999 || o.Amount != 1998 ||
		o.ProductID != 1 || !o.ExpiresAt.Equal(start.Add(15*time.Minute)) || len(o.Codes) != 0 || o.BuyerID != "" || o.PaidAt != nil {
		t.Fatalf("created order = %+v", o)
	}
	if l := h.levels(1); l.Stock != 8 || l.Sold != 2 {
		t.Fatalf("gate after the order: %+v", l)
	}

	// The same submission again (a double click): the original order, not a new one.
	again := h.order(alice, "key-00000001", `{"product_id":1,"qty":2}`)
	wantStatus(t, again, 200)
	if again.header.Get(httpapi.HeaderReplayed) != "true" {
		t.Errorf("replay without %s: true", httpapi.HeaderReplayed)
	}
	var o2 orderJSON
	again.decode(t, &o2)
	if o2.OrderNo != o.OrderNo || o2.Status != "PENDING" {
		t.Fatalf("replay answered %+v, want order %s", o2, o.OrderNo)
	}
	// Same key, same product and qty, whitespace and field order differ: still the same request.
	wantStatus(t, h.order(alice, "key-00000001", ` { "qty" : 2 , "product_id" : 1 } `), 200)

	// Same key, different request.
	wantError(t, h.order(alice, "key-00000001", `{"product_id":1,"qty":3}`), 422, "idempotency_key_reused")
	if l := h.levels(1); l.Stock != 8 || l.Sold != 2 {
		t.Fatalf("gate after replays: %+v", l)
	}

	// Keys are scoped by buyer: bob's identical key is his own, new order.
	b := h.order(bob, "key-00000001", `{"product_id":1,"qty":2}`)
	wantStatus(t, b, 201)
	var bo orderJSON
	b.decode(t, &bo)
	if bo.OrderNo == o.OrderNo {
		t.Fatal("bob replayed alice's order")
	}
	if l := h.levels(1); l.Stock != 6 || l.Sold != 4 {
		t.Fatalf("gate after bob's order: %+v", l)
	}
}

func TestPlaceOrderRefusals(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 999, 5)
	h.importCodes(1, codes("A", 3)...)
	h.createProduct(2, 100, 5) // no codes
	h.createProduct(3, 100, 5)
	h.importCodes(3, codes("C", 3)...)
	wantStatus(t, h.admin("POST", "/admin/products/3/freeze", `{"reason":"audit"}`), 200)
	alice := h.token("alice")
	expired, _, err := h.tokens.Issue("alice", start.Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ok := `{"product_id":1,"qty":1}`
	type row struct {
		name   string
		tok    string
		key    string
		body   string
		status int
		code   string
		field  string
	}
	rows := []row{
		{"no Idempotency-Key", alice, "", ok, 400, "invalid_idempotency_key", ""},
		{"short key", alice, "short", ok, 400, "invalid_idempotency_key", ""},
		{"key of 65 characters", alice, strings.Repeat("k", 65), ok, 400, "invalid_idempotency_key", ""},
		{"key of 3 KiB", alice, strings.Repeat("k", 3<<10), ok, 400, "invalid_idempotency_key", ""},
		{"key with a slash", alice, "abcd/efgh", ok, 400, "invalid_idempotency_key", ""},
		{"qty 0", alice, "key-q0000000", `{"product_id":1,"qty":0}`, 400, "qty_out_of_range", ""},
		{"qty -1", alice, "key-q0000001", `{"product_id":1,"qty":-1}`, 400, "qty_out_of_range", ""},
		{"qty over the limit", alice, "key-q0000002", `{"product_id":1,"qty":6}`, 400, "qty_out_of_range", ""},
		{"qty missing", alice, "key-q0000003", `{"product_id":1}`, 400, "qty_out_of_range", ""},
		{"qty as a string", alice, "key-q0000004", `{"product_id":1,"qty":"2"}`, 400, "invalid_request", "qty"},
		{"qty 1.5", alice, "key-q0000005", `{"product_id":1,"qty":1.5}`, 400, "invalid_request", "qty"},
		{"qty overflows", alice, "key-q0000006", `{"product_id":1,"qty":99999999999999999999}`, 400, "invalid_request", "qty"},
		{"product_id as a string", alice, "key-q0000007", `{"product_id":"1","qty":1}`, 400, "invalid_request", "product_id"},
		{"product_id 0", alice, "key-q0000008", `{"product_id":0,"qty":1}`, 400, "invalid_request", "product_id"},
		{"unknown product", alice, "key-p0000001", `{"product_id":999,"qty":1}`, 404, "product_not_found", ""},
		{"sold out", alice, "key-s0000001", `{"product_id":1,"qty":4}`, 409, "sold_out", ""},
		{"no codes at all", alice, "key-s0000002", `{"product_id":2,"qty":1}`, 409, "sold_out", ""},
		{"frozen", alice, "key-f0000001", `{"product_id":3,"qty":1}`, 423, "product_frozen", ""},
		{"unknown field", alice, "key-b0000001", `{"product_id":1,"qty":1,"price":1}`, 400, "invalid_request", "price"},
		{"trailing garbage", alice, "key-b0000002", ok + `x`, 400, "invalid_request", "body"},
		{"trailing object", alice, "key-b0000003", ok + `{}`, 400, "invalid_request", "body"},
		{"trailing brace", alice, "key-b0000004", ok + `}`, 400, "invalid_request", "body"},
		{"empty body", alice, "key-b0000005", ``, 400, "invalid_request", "body"},
		{"blank body", alice, "key-b0000006", " \n\t", 400, "invalid_request", "body"},
		{"not JSON", alice, "key-b0000007", `product_id=1&qty=1`, 400, "invalid_request", "body"},
		{"JSON array", alice, "key-b0000008", `[1,1]`, 400, "invalid_request", ""},
		{"JSON null", alice, "key-b0000009", `null`, 400, "invalid_request", "product_id"},
		{"truncated JSON", alice, "key-b0000010", `{"product_id":1,`, 400, "invalid_request", "body"},
		{"body over 64 KiB", alice, "key-b0000011", `{"product_id":1,"qty":1,"pad":"` + strings.Repeat("x", 64<<10) + `"}`, 413, "body_too_large", ""},
		{"no token", "", "key-a0000001", ok, 401, "unauthorized", ""},
		{"garbage token", "not-a-token", "key-a0000002", ok, 401, "unauthorized", ""},
		{"tampered token", strings.Replace(alice, "alice", "mallory", 1), "key-a0000003", ok, 401, "unauthorized", ""},
		{"expired token", expired, "key-a0000004", ok, 401, "unauthorized", ""},
		{"admin token as a buyer token", adminToken, "key-a0000005", ok, 401, "unauthorized", ""},
	}
	before := map[int64]domain.GateLevels{1: h.levels(1), 2: h.levels(2), 3: h.levels(3)}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			e := wantError(t, h.order(tt.tok, tt.key, tt.body), tt.status, tt.code)
			if tt.field != "" && e.Field != tt.field {
				t.Errorf("field %q, want %q", e.Field, tt.field)
			}
		})
	}
	// Nothing was reserved by any refused request.
	for id, l := range before {
		if got := h.levels(id); got != l {
			t.Errorf("product %d gate %+v, was %+v", id, got, l)
		}
	}
	if n, _ := h.ledger.Orders().Totals(context.Background(), 1); len(n) != 0 {
		t.Errorf("orders were written: %v", n)
	}

	// A key of 1 MiB is refused before any handler: by the transport (431) or with a 4xx.
	req := httptest.NewRequest("POST", "/api/order", strings.NewReader(ok))
	req.Header.Set("Authorization", bearer(alice))
	req.Header.Set(httpapi.HeaderIdempotencyKey, strings.Repeat("k", 1<<20))
	if res, err := h.app.Test(req, 30_000); err == nil {
		if res.StatusCode < 400 || res.StatusCode >= 500 {
			t.Errorf("a 1 MiB key answered %d", res.StatusCode)
		}
		res.Body.Close()
	}
	if got := h.levels(1); got != before[1] {
		t.Errorf("the 1 MiB key reserved stock: %+v", got)
	}

	// Unfrozen, the frozen product sells again.
	wantStatus(t, h.admin("POST", "/admin/products/3/unfreeze", ""), 200)
	h.placeOrder(alice, "key-f0000002", 3, 1)
}

func TestPlaceOrderGateAndDependencyFailures(t *testing.T) {
	h := newHarness(t)
	alice := h.token("alice")

	// A product the gate does not know (Redis lost its keys): refused until the gate is rebuilt.
	p, err := domain.NewProduct(7, "orphan", 100, 5, start)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ledger.Products().Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	r := h.order(alice, "key-g0000001", `{"product_id":7,"qty":1}`)
	wantError(t, r, 503, "stock_gate_not_ready")
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	h.importCodes(7, codes("G", 2)...)
	rec := h.admin("GET", "/admin/products/7/reconcile", "")
	wantStatus(t, rec, 200)
	if !strings.Contains(string(rec.body), `"ok":false`) {
		t.Errorf("reconcile of a product the gate lost says ok: %s", rec.body)
	}
	wantStatus(t, h.admin("POST", "/admin/products/7/reconcile?repair=true", ""), 200)
	h.placeOrder(alice, "key-g0000002", 7, 1)

	// The gate unreachable: 503 with Retry-After, the internal text stays in the log.
	h.gate.failWith(fmt.Errorf("dial redis 10.9.8.7:6379: %w", domain.ErrUnavailable))
	r = h.order(alice, "key-g0000003", `{"product_id":7,"qty":1}`)
	wantError(t, r, 503, "service_unavailable")
	if strings.Contains(string(r.body), "10.9.8.7") || r.header.Get("Retry-After") == "" {
		t.Errorf("503 answer: %s %v", r.body, r.header)
	}
	// An error nobody mapped: 500, with no detail.
	h.gate.failWith(errors.New("lua script NOSCRIPT sha 5e1f at 10.9.8.7"))
	r = h.order(alice, "key-g0000004", `{"product_id":7,"qty":1}`)
	e := wantError(t, r, 500, "internal_error")
	if strings.Contains(string(r.body), "NOSCRIPT") || strings.Contains(string(r.body), "10.9.8.7") {
		t.Errorf("500 answer leaks: %s", r.body)
	}
	if !strings.Contains(h.logs.String(), "NOSCRIPT") || !strings.Contains(h.logs.String(), e.RequestID) {
		t.Errorf("the internal error is not logged with its request id")
	}
	h.gate.failWith(nil)
	h.placeOrder(alice, "key-g0000005", 7, 1)
}

func TestPlaceOrderWhileTheOriginalIsInProgress(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.importCodes(1, codes("A", 5)...)
	// The original request claimed the key and reserved, and has not written its order yet.
	_, err := h.gate.Reserve(context.Background(), domain.Reservation{Product: 1, Buyer: "alice", Key: "key-i0000001",
		Qty: 1, OrderNo: "2503011200000000000000000001", Fingerprint: domain.RequestFingerprint(1, 1),
		KeyTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, h.order(h.token("alice"), "key-i0000001", `{"product_id":1,"qty":1}`), 409, "request_in_progress")
}

func TestGetOrder(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 500, 5)
	imported := codes("CODE", 4)
	h.importCodes(1, imported...)
	alice, bob := h.token("alice"), h.token("bob")
	o := h.placeOrder(alice, "key-00000001", 1, 2)

	r := h.getOrder(alice, o.OrderNo)
	wantStatus(t, r, 200)
	var got orderJSON
	r.decode(t, &got)
	if got.Status != "PENDING" || got.Codes != nil || strings.Contains(string(r.body), "codes") || got.BuyerID != "" {
		t.Fatalf("pending order = %s", r.body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", r.header.Get("Cache-Control"))
	}

	h.clock.Advance(time.Minute)
	h.pay(o)
	r = h.getOrder(alice, o.OrderNo)
	wantStatus(t, r, 200)
	got = orderJSON{}
	r.decode(t, &got)
	if got.Status != "PAID" || len(got.Codes) != 2 || got.Codes[0] == got.Codes[1] || got.PaidAt == nil ||
		!got.PaidAt.Equal(start.Add(time.Minute)) {
		t.Fatalf("paid order = %s", r.body)
	}
	for _, c := range got.Codes {
		if !strings.HasPrefix(c, "CODE-") {
			t.Errorf("code %q is not one of the imported codes", c)
		}
	}

	// Another buyer's order answers exactly like a missing one.
	other := wantError(t, h.getOrder(bob, o.OrderNo), 404, "order_not_found")
	missing := wantError(t, h.getOrder(bob, "2503011200009999999999999999"), 404, "order_not_found")
	if other.Message != missing.Message || other.Field != missing.Field {
		t.Errorf("another buyer's order (%+v) differs from a missing one (%+v)", other, missing)
	}
	for _, bad := range []string{"bad_no", strings.Repeat("9", 33), "..", "%2e%2e", "a.b"} {
		wantError(t, h.getOrder(alice, bad), 404, "order_not_found")
	}
	wantError(t, h.do("GET", "/api/orders/"+o.OrderNo, nil), 401, "unauthorized")
}

// failingRevealLedger is a memory ledger whose orders cannot record a reveal (the database
// refuses the UPDATE).
type failingRevealLedger struct{ *memory.Ledger }

func (l failingRevealLedger) Orders() domain.OrderRepo { return failingRevealOrders{l.Ledger.Orders()} }

type failingRevealOrders struct{ domain.OrderRepo }

func (failingRevealOrders) MarkRevealed(context.Context, domain.OrderNo, time.Time) (bool, error) {
	return false, fmt.Errorf("update orders: %w", domain.ErrUnavailable)
}

// The codes are only shown once their reveal is recorded: if it cannot be, the buyer gets a
// 503 without codes and may retry; the order stays unrevealed.
func TestGetOrderWithoutARecordedRevealShowsNoCodes(t *testing.T) {
	h := newHarnessWith(t, func(d *application.Deps) { d.Ledger = failingRevealLedger{d.Ledger.(*memory.Ledger)} })
	h.createProduct(1, 500, 5)
	h.importCodes(1, codes("HIDDEN", 2)...)
	alice := h.token("alice")
	o := h.placeOrder(alice, "key-00000001", 1, 2)
	h.pay(o)
	r := h.getOrder(alice, o.OrderNo)
	wantError(t, r, 503, "service_unavailable")
	if strings.Contains(string(r.body), "HIDDEN") {
		t.Fatalf("codes shown although the reveal was not recorded: %s", r.body)
	}
	if v := h.admin("GET", "/admin/orders/"+o.OrderNo, ""); v.status != 503 || strings.Contains(string(v.body), "HIDDEN") {
		t.Fatalf("admin read without a recorded reveal: %s", v)
	}
	stored, err := h.ledger.Orders().Order(context.Background(), domain.OrderNo(o.OrderNo))
	if err != nil || stored.Revealed() {
		t.Fatalf("order revealed %v (%v) after failed reveals", stored.Revealed(), err)
	}
}

// TestStoredValuesOutliveTheRequest checks that what a request leaves behind (the buyer id
// from the token header and the idempotency key, stored in orders and gate claims) does not
// alias the server's request buffers, which the following requests overwrite.
func TestStoredValuesOutliveTheRequest(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.importCodes(1, codes("K", 30)...)
	alice := h.token("alice")
	o := h.placeOrder(alice, "key-alias-0001", 1, 1)
	// Other traffic with other headers and bodies.
	for i := 0; i < 20; i++ {
		h.do("POST", "/admin/products/1/codes", strings.NewReader(strings.Repeat("Z", 4000)),
			"Authorization", bearer(adminToken), "X-Filler", strings.Repeat(fmt.Sprint(i), 300))
		h.placeOrder(h.token(domain.BuyerID(fmt.Sprintf("zed%02d", i))), fmt.Sprintf("zzzzzzzz-%04d", i), 1, 1)
	}
	if v := h.adminOrder(o.OrderNo); v.BuyerID != "alice" {
		t.Fatalf("stored buyer id is now %q", v.BuyerID)
	}
	wantStatus(t, h.getOrder(alice, o.OrderNo), 200)
	r := h.order(alice, "key-alias-0001", `{"product_id":1,"qty":1}`)
	wantStatus(t, r, 200)
	var again orderJSON
	r.decode(t, &again)
	if again.OrderNo != o.OrderNo {
		t.Fatalf("the stored idempotency key no longer matches: %s", r)
	}
}

// stallingLedger is a ledger whose transactions stall until their context ends, as a MariaDB
// that stopped answering.
type stallingLedger struct {
	domain.Ledger
	stalled atomic.Bool
}

func (l *stallingLedger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	if l.stalled.Load() {
		<-ctx.Done()
		return fmt.Errorf("record: %w", ctx.Err())
	}
	return l.Ledger.Atomically(ctx, fn)
}

// A stalled dependency costs a request its deadline (Config.RequestTimeout), not more: the
// order answers 503 service_unavailable with Retry-After when the deadline passes, its
// reservation is given back, and the same key orders normally once the ledger answers again.
func TestPlaceOrderAnswersAtItsDeadlineWhenTheLedgerStalls(t *testing.T) {
	var ledger *stallingLedger
	h := newHarnessWith(t, func(d *application.Deps) {
		ledger = &stallingLedger{Ledger: d.Ledger}
		d.Ledger = ledger
	}, func(c *httpapi.Config) { c.RequestTimeout = 300 * time.Millisecond })
	h.createProduct(1, 100, 5)
	h.importCodes(1, codes("D", 3)...)
	alice := h.token("alice")
	ledger.stalled.Store(true)
	began := time.Now()
	r := h.order(alice, "key-d0000001", `{"product_id":1,"qty":2}`)
	took := time.Since(began)
	wantError(t, r, 503, "service_unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("answered after %s, want at its 300ms deadline", took)
	}
	ledger.stalled.Store(false)
	if o := h.placeOrder(alice, "key-d0000001", 1, 2); o.Qty != 2 {
		t.Fatalf("the retry placed %+v", o)
	}
	h.placeOrder(h.token("bob"), "key-d0000002", 1, 1) // the first attempt's 2 units came back
}
