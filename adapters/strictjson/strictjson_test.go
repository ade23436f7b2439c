package strictjson_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/strictjson"
	"cardshop/domain"
)

type item struct {
	SKU  string `json:"sku"`
	Qty  int    `json:"qty"`
	Note string `json:"note,omitempty"`
}

type Base struct {
	Tenant string `json:"tenant"`
}

type order struct {
	Base
	ProductID int64           `json:"product_id"`
	Qty       int             `json:"qty"`
	Items     []item          `json:"items"`
	Ship      *item           `json:"ship"`
	Meta      map[string]item `json:"meta"`
	Extra     any             `json:"extra"`
	At        time.Time       `json:"at"`
	Raw       json.RawMessage `json:"raw"`
	Skipped   string          `json:"-"`
	Untagged  string
	hidden    string // not a JSON field: unexported
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name string
		body string
		want order
	}{
		{"flat", `{"product_id":1,"qty":2}`, order{ProductID: 1, Qty: 2}},
		{"whitespace around", " \n{\"qty\":2}\t\n", order{Qty: 2}},
		{"empty object", `{}`, order{}},
		{"null", `null`, order{}},
		{"escaped key", `{"q\u0074y":3}`, order{Qty: 3}},
		{"promoted field of an embedded struct", `{"tenant":"t"}`, order{Base: Base{Tenant: "t"}}},
		{"untagged field by its Go name", `{"Untagged":"u"}`, order{Untagged: "u"}},
		{"equal keys in different objects", `{"qty":1,"items":[{"qty":1,"sku":"a"},{"qty":2,"sku":"b"}],"ship":{"qty":3}}`,
			order{Qty: 1, Items: []item{{"a", 1, ""}, {"b", 2, ""}}, Ship: &item{Qty: 3}}},
		{"map keys are not fields", `{"meta":{"Gift":{"qty":1},"gift2":{"qty":2}}}`, order{Meta: map[string]item{"Gift": {Qty: 1}, "gift2": {Qty: 2}}}},
		{"any value: any keys", `{"extra":{"Whatever":[1,{"x":null}],"y":true}}`,
			order{Extra: map[string]any{"Whatever": []any{1.0, map[string]any{"x": nil}}, "y": true}}},
		{"a type that decodes itself", `{"at":"2025-03-01T12:00:00Z"}`, order{At: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}},
		{"raw message keeps its keys unchecked against fields", `{"raw":{"Anything":1}}`, order{Raw: json.RawMessage(`{"Anything":1}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got order
			err := strictjson.Decode([]byte(tt.body), &got)
			if err != nil {
				t.Fatalf("Decode(%s): %v", tt.body, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decode(%s) = %+v, want %+v", tt.body, got, tt.want)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, body, field, reason string
	}{
		{"duplicate at the top", `{"product_id":1,"qty":1,"qty":5}`, "qty", strictjson.ReasonDuplicate},
		{"duplicate, second escaped", `{"qty":1,"q\u0074y":5}`, "qty", strictjson.ReasonDuplicate},
		{"duplicate with equal values", `{"qty":1,"qty":1}`, "qty", strictjson.ReasonDuplicate},
		{"duplicate nested in an object", `{"ship":{"sku":"a","sku":"b"}}`, "ship.sku", strictjson.ReasonDuplicate},
		{"duplicate nested in an array", `{"items":[{"qty":1},{"qty":1,"qty":2}]}`, "items.qty", strictjson.ReasonDuplicate},
		{"duplicate map key", `{"meta":{"a":{},"a":{}}}`, "meta.a", strictjson.ReasonDuplicate},
		{"duplicate inside an any", `{"extra":[[{"k":1,"k":2}]]}`, "extra.k", strictjson.ReasonDuplicate},
		{"duplicate inside a raw message", `{"raw":{"k":1,"k":2}}`, "raw.k", strictjson.ReasonDuplicate},
		{"case variant of a field", `{"qty":1,"QTY":5}`, "QTY", strictjson.ReasonCaseDuplicate},
		{"case variant, field second", `{"Qty":5,"qty":1}`, "Qty", strictjson.ReasonUnknownField},
		{"case variant in a map", `{"meta":{"Gift":{},"gift":{}}}`, "meta.gift", strictjson.ReasonCaseDuplicate},
		{"case variant in an any", `{"extra":{"Amount":1,"amount":2}}`, "extra.amount", strictjson.ReasonCaseDuplicate},
		// Unicode simple case folding, as encoding/json matches fields: U+212A KELVIN SIGN
		// folds with k and K, U+017F LONG S with s and S.
		{"kelvin sign next to k", `{"extra":{"k":1,"` + "\u212a" + `":2}}`, "extra.\u212a", strictjson.ReasonCaseDuplicate},
		{"kelvin sign next to K", `{"extra":{"K":1,"` + "\u212a" + `":2}}`, "extra.\u212a", strictjson.ReasonCaseDuplicate},
		{"long s next to s", `{"ship":{"sku":"a","\u017fku":"b"}}`, "ship.\u017fku", strictjson.ReasonCaseDuplicate},
		{"non-ASCII case pair", `{"extra":{"é":1,"É":2}}`, "extra.É", strictjson.ReasonCaseDuplicate},
		{"field matched only ignoring case", `{"Product_ID":1}`, "Product_ID", strictjson.ReasonUnknownField},
		{"field matched only by folding", `{"ship":{"\u017fku":"a"}}`, "ship.\u017fku", strictjson.ReasonUnknownField},
		{"unknown field", `{"product_id":1,"price":1}`, "price", strictjson.ReasonUnknownField},
		{"unknown nested field", `{"items":[{"sku":"a","price":1}]}`, "items.price", strictjson.ReasonUnknownField},
		{"empty key", `{"":1}`, `""`, strictjson.ReasonUnknownField},
		{"empty key twice", `{"extra":{"":1,"":2}}`, "extra.", strictjson.ReasonDuplicate},
		{"field tagged -", `{"Skipped":"x"}`, "Skipped", strictjson.ReasonUnknownField},
		{"unexported field", `{"hidden":"x"}`, "hidden", strictjson.ReasonUnknownField},
		{"embedded struct by its name", `{"Base":{}}`, "Base", strictjson.ReasonUnknownField},
		{"wrong type", `{"qty":"2"}`, "qty", strictjson.ReasonWrongType},
		{"fraction", `{"qty":1.5}`, "qty", strictjson.ReasonWrongType},
		{"overflow", `{"product_id":99999999999999999999}`, "product_id", strictjson.ReasonWrongType},
		{"number out of float64's range", `{"extra":1e400}`, "extra", strictjson.ReasonWrongType},
		{"nested wrong type", `{"ship":{"qty":true}}`, "ship.qty", strictjson.ReasonWrongType},
		{"trailing object", `{"qty":1}{}`, "body", strictjson.ReasonTrailing},
		{"trailing brace", `{"qty":1}}`, "body", strictjson.ReasonTrailing},
		{"trailing bracket", `{"qty":1}]`, "body", strictjson.ReasonTrailing},
		{"trailing garbage", `{"qty":1} x`, "body", strictjson.ReasonTrailing},
		{"empty", ``, "body", strictjson.ReasonNotJSON},
		{"blank", " \n", "body", strictjson.ReasonNotJSON},
		{"truncated", `{"qty":1,`, "body", strictjson.ReasonNotJSON},
		{"not JSON", `qty=1`, "body", strictjson.ReasonNotJSON},
		{"array for a struct", `[1,1]`, "body", strictjson.ReasonNotJSON},
		{"too deep for encoding/json", `{"extra":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, "body", strictjson.ReasonNotJSON},
		// The first refusal in document order wins.
		{"duplicate before a wrong type", `{"qty":"x","qty":1}`, "qty", strictjson.ReasonDuplicate},
		{"unknown before trailing data", `{"price":1}}`, "price", strictjson.ReasonUnknownField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got order
			wantRefusal(t, strictjson.Decode([]byte(tt.body), &got), tt.field, tt.reason)
			if got.hidden != "" {
				t.Fatalf("an unexported field was set: %q", got.hidden)
			}
		})
	}
}

func wantRefusal(t *testing.T, err error, field, reason string) {
	t.Helper()
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("err = %v, want a ValidationError", err)
	}
	if ve.Field != field || ve.Reason != reason {
		t.Fatalf("refused as %q %q, want %q %q", ve.Field, ve.Reason, field, reason)
	}
	wantDup := reason == strictjson.ReasonDuplicate || reason == strictjson.ReasonCaseDuplicate
	if strictjson.IsDuplicate(err) != wantDup {
		t.Fatalf("IsDuplicate(%v) = %v", err, !wantDup)
	}
}

func TestDecodeIntoAMapOrAny(t *testing.T) {
	var m map[string]int
	if err := strictjson.Decode([]byte(`{"a":1,"A":2}`), &m); !strictjson.IsDuplicate(err) {
		t.Fatalf("map target: %v", err)
	}
	var v any
	if err := strictjson.Decode([]byte(`[{"a":1},{"a":2}]`), &v); err != nil {
		t.Fatalf("any target: %v", err)
	}
	if err := strictjson.Decode([]byte(`[{"a":1,"a":2}]`), &v); !strictjson.IsDuplicate(err) {
		t.Fatalf("any target with a duplicate: %v", err)
	}
}

// Objects with many keys are checked through a map of folded keys: the same answers.
func TestDecodeManyKeys(t *testing.T) {
	obj := func(keys ...string) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q:%d", k, i)
		}
		b.WriteString("}")
		return []byte(b.String())
	}
	var keys []string
	for i := 0; i < 40; i++ {
		keys = append(keys, fmt.Sprintf("key%d", i))
	}
	var m map[string]int
	if err := strictjson.Decode(obj(keys...), &m); err != nil || len(m) != 40 {
		t.Fatalf("40 distinct keys: %v, %d decoded", err, len(m))
	}
	for _, at := range []int{1, 15, 16, 17, 39} {
		for _, tt := range []struct{ again, reason string }{
			{keys[at], strictjson.ReasonDuplicate},
			{strings.ToUpper(keys[at]), strictjson.ReasonCaseDuplicate},
			{strings.Replace(keys[at], "k", "\u212a", 1), strictjson.ReasonCaseDuplicate}, // KELVIN SIGN
		} {
			body := obj(append(append([]string{}, keys...), tt.again)...)
			var m map[string]int
			err := strictjson.Decode(body, &m)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Reason != tt.reason {
				t.Fatalf("key %d again as %q: %v", at, tt.again, err)
			}
		}
	}
}

func TestDecodeNeedsAPointer(t *testing.T) {
	var o order
	for _, v := range []any{o, (*order)(nil), nil} {
		if err := strictjson.Decode([]byte(`{}`), v); err == nil || errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("Decode into %T: %v, want a programming error", v, err)
		}
	}
}
