package httpapi

import (
	"strings"
	"testing"

	"cardshop/adapters/strictjson"
)

// parseSeeds are bodies parsePlaceOrder must read (true) or leave to strictjson (false).
var parseSeeds = []struct {
	body string
	want placeOrderRequest
	ok   bool
}{
	{`{"product_id":1001,"qty":2}`, placeOrderRequest{ProductID: 1001, Qty: 2}, true},
	{`{"qty":2,"product_id":1001}`, placeOrderRequest{ProductID: 1001, Qty: 2}, true},
	{" \r\n{ \"product_id\" :\t7 , \"qty\": 0 }\n", placeOrderRequest{ProductID: 7, Qty: 0}, true},
	{`{"product_id":999999999999999999,"qty":1}`, placeOrderRequest{ProductID: 999999999999999999, Qty: 1}, true},
	{`{"product_id":1000000000000000000,"qty":1}`, placeOrderRequest{}, false}, // 19 digits
	{`{"product_id":1,"qty":1,"qty":5}`, placeOrderRequest{}, false},
	{`{"product_id":1,"product_id":1}`, placeOrderRequest{}, false},
	{`{"product_id":1,"QTY":1}`, placeOrderRequest{}, false},
	{`{"product_id":1,"q\u0074y":1}`, placeOrderRequest{}, false},
	{`{"product_id":1}`, placeOrderRequest{}, false},
	{`{"product_id":01,"qty":1}`, placeOrderRequest{}, false},
	{`{"product_id":-1,"qty":1}`, placeOrderRequest{}, false},
	{`{"product_id":1.0,"qty":1}`, placeOrderRequest{}, false},
	{`{"product_id":1e3,"qty":1}`, placeOrderRequest{}, false},
	{`{"product_id":"1","qty":1}`, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":1}x`, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":1}{}`, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":1,}`, placeOrderRequest{}, false},
	{`{"product_id":1 "qty":1}`, placeOrderRequest{}, false},
	{"{\"product_id\":1,\"qty\":1}\x00", placeOrderRequest{}, false},
	{``, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":2,"coupon":"spring-10"}`, placeOrderRequest{ProductID: 1, Qty: 2, Coupon: "spring-10"}, true},
	{`{"coupon":"A_B","qty":2,"product_id":1}`, placeOrderRequest{ProductID: 1, Qty: 2, Coupon: "A_B"}, true},
	{`{"product_id":1,"coupon":"X1","qty":2}`, placeOrderRequest{ProductID: 1, Qty: 2, Coupon: "X1"}, true},
	{`{"product_id":1,"qty":2,"coupon":""}`, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":2,"coupon":"a b"}`, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":2,"coupon":"\u0041BC"}`, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":2,"coupon":"ABC","coupon":"ABC"}`, placeOrderRequest{}, false},
	{`{"product_id":1,"coupon":"ABC"}`, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":2,"coupon":ABC}`, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":2,"coupon":"ABC}`, placeOrderRequest{}, false},
	{`{"product_id":1,"qty":2,"coupon":"` + strings.Repeat("A", 65) + `"}`, placeOrderRequest{}, false},
}

func TestParsePlaceOrder(t *testing.T) {
	for _, c := range parseSeeds {
		got, ok := parsePlaceOrder([]byte(c.body))
		if ok != c.ok || got != c.want {
			t.Errorf("%q: %+v %v, want %+v %v", c.body, got, ok, c.want, c.ok)
		}
		if ok {
			var strict placeOrderRequest
			if err := strictjson.Decode([]byte(c.body), &strict); err != nil || strict != got {
				t.Errorf("%q: strictjson reads %+v %v, the fast path %+v", c.body, strict, err, got)
			}
		}
	}
}

// FuzzParsePlaceOrder: whatever body parsePlaceOrder accepts, strictjson accepts too and reads
// as the same request.
func FuzzParsePlaceOrder(f *testing.F) {
	for _, c := range parseSeeds {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parsePlaceOrder(b)
		if !ok {
			return
		}
		var strict placeOrderRequest
		if err := strictjson.Decode(b, &strict); err != nil || strict != got {
			t.Fatalf("%q: the fast path reads %+v, strictjson %+v %v", b, got, strict, err)
		}
	})
}
