package httpapi_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"cardshop/adapters/paysig"
	"cardshop/domain"
)

// An order body with a key twice, or with keys equal ignoring case, has two readings
// (encoding/json alone takes the last: {"qty":1,"qty":5} would order 5): refused with 400,
// nothing reserved, no order, and the Idempotency-Key stays free.
func TestPlaceOrderRefusesDuplicateKeys(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.importCodes(1, codes("D", 10)...)
	alice := h.token("alice")
	before := h.levels(1)
	rows := []struct{ name, body, field string }{
		{"qty twice", `{"product_id":1,"qty":1,"qty":5}`, "qty"},
		{"qty twice, one escaped", `{"product_id":1,"qty":1,"q\u0074y":5}`, "qty"},
		{"qty in two cases", `{"product_id":1,"qty":1,"QTY":5}`, "QTY"},
		{"product_id twice", `{"product_id":1,"product_id":1,"qty":1}`, "product_id"},
		{"qty only in another case", `{"product_id":1,"Qty":5}`, "Qty"},
		{"product_id in two cases, after qty", `{"product_id":1,"qty":1,"Product_Id":2}`, "Product_Id"},
	}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			e := wantError(t, h.order(alice, "key-dup00001", tt.body), 400, "invalid_request")
			if e.Field != tt.field {
				t.Errorf("field %q, want %q (%s)", e.Field, tt.field, e.Message)
			}
		})
	}
	if got := h.levels(1); got != before {
		t.Fatalf("gate %+v, was %+v: a refused body reserved stock", got, before)
	}
	if n, _ := h.ledger.Orders().Totals(context.Background(), 1); len(n) != 0 {
		t.Fatalf("orders were written: %v", n)
	}
	// The key was never used: the same key with a valid body places the order.
	if o := h.placeOrder(alice, "key-dup00001", 1, 1); o.Qty != 1 {
		t.Fatalf("order %+v", o)
	}
}

// A correctly signed callback whose amount key appears twice (in one or two cases) is refused
// with 400 and changes nothing: encoding/json alone reads "amount":1,"Amount":200 as 200 and
// would pay a 200 order.
func TestPaymentCallbackRefusesDuplicateKeys(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 200, 5)
	h.importCodes(1, codes("P", 5)...)
	o := h.placeOrder(h.token("alice"), "key-00000001", 1, 1)
	if o.Amount != 200 {
		t.Fatalf("order amount %d", o.Amount)
	}
	no := `"order_no":"` + o.OrderNo + `"`
	rows := []struct{ name, body, field string }{
		{"amount in two cases", `{` + no + `,"status":"paid","amount":1,"Amount":200,"payment_ref":"x"}`, "Amount"},
		{"amount twice", `{` + no + `,"status":"paid","amount":1,"amount":200,"payment_ref":"x"}`, "amount"},
		{"equal amounts twice", `{` + no + `,"status":"paid","amount":200,"amount":200,"payment_ref":"x"}`, "amount"},
		{"status in two cases", `{` + no + `,"status":"failed","STATUS":"paid","amount":200,"payment_ref":"x"}`, "STATUS"},
		{"status folded with a long s", `{` + no + `,"status":"failed","\u017ftatus":"paid","amount":200,"payment_ref":"x"}`, "\u017ftatus"},
		{"order_no twice", `{` + no + `,` + no + `,"status":"paid","amount":200,"payment_ref":"x"}`, "order_no"},
		// No exact key, one only in another case: an unknown field, as the other unknown
		// fields of a callback.
		{"amount only in another case", `{` + no + `,"status":"paid","Amount":200,"payment_ref":"x"}`, "body"},
	}
	ts := strconv.FormatInt(h.clock.Now().Unix(), 10)
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			r := h.do("POST", "/api/payments/callback", bytes.NewReader(body), "Content-Type", "application/json",
				paysig.HeaderTimestamp, ts, paysig.HeaderSignature, h.signer.Sign(ts, body))
			e := wantError(t, r, 400, "invalid_request")
			if e.Field != tt.field {
				t.Errorf("field %q, want %q (%s)", e.Field, tt.field, e.Message)
			}
		})
	}
	if got := h.adminOrder(o.OrderNo); got.Status != "PENDING" || got.PaymentRef != "" || len(got.Codes) != 0 {
		t.Fatalf("a refused callback changed the order: %+v", got)
	}
	if c := h.cardCounts(1); c[domain.CardSold] != 0 {
		t.Fatalf("codes sold on a refused callback: %v", c)
	}
	// The same order paid with a body of one reading: PAID.
	h.pay(o)
	if got := h.adminOrder(o.OrderNo); got.Status != "PAID" {
		t.Fatalf("after a valid callback: %+v", got)
	}
}

// Every admin JSON body goes through the same decoding: duplicates are refused and change
// nothing.
func TestAdminBodiesRefuseDuplicateKeys(t *testing.T) {
	h := newHarness(t)
	rows := []struct{ path, body, field string }{
		{"/admin/products", `{"id":5,"name":"x","price":1,"Price":100,"max_per_order":1}`, "Price"},
		{"/admin/products", `{"id":5,"name":"x","price":1,"max_per_order":1,"max_per_order":9}`, "max_per_order"},
		{"/admin/tokens", `{"buyer_id":"alice","buyer_id":"bob"}`, "buyer_id"},
	}
	for _, tt := range rows {
		e := wantError(t, h.admin("POST", tt.path, tt.body), 400, "invalid_request")
		if e.Field != tt.field {
			t.Errorf("%s %s: field %q, want %q", tt.path, tt.body, e.Field, tt.field)
		}
	}
	wantError(t, h.admin("GET", "/admin/products/5", ""), 404, "product_not_found")
	h.createProduct(5, 100, 1)
	h.importCodes(5, codes("A", 1)...)
	o := h.placeOrder(h.token("alice"), "key-00000001", 5, 1)
	for _, path := range []string{"/admin/products/5/freeze", "/admin/orders/" + o.OrderNo + "/refund"} {
		e := wantError(t, h.admin("POST", path, `{"reason":"a","Reason":"b"}`), 400, "invalid_request")
		if e.Field != "Reason" {
			t.Errorf("%s: field %q", path, e.Field)
		}
	}
	var p productJSON
	r := h.admin("GET", "/admin/products/5", "")
	wantStatus(t, r, 200)
	r.decode(t, &p)
	if p.Frozen {
		t.Fatal("a refused freeze froze the product")
	}
	if got := h.adminOrder(o.OrderNo); got.Status != "PENDING" {
		t.Fatalf("a refused refund changed the order: %+v", got)
	}
}
