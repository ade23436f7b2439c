package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"cardshop/adapters/strictjson"
	"cardshop/domain"
)

// FuzzDecode checks Decode against encoding/json and a plain pairwise key comparison: into an
// any it accepts exactly the valid JSON without two keys of one object equal under
// strings.EqualFold, with encoding/json's value; into a struct it accepts only what
// encoding/json accepts with DisallowUnknownFields, with the same value, and only exact field
// names. It never panics and refuses only with a ValidationError.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"product_id":1,"qty":1}`, `{"product_id":1,"qty":1,"qty":5}`, `{"qty":1,"QTY":5}`, `{"Qty":1}`,
		`{"extra":{"k":1,"` + "\u212a" + `":2}}`, `{"ship":{"sku":"a","\u017fku":"b"}}`, `{"q\u0074y":1,"qty":2}`,
		`{"items":[{"sku":"a","qty":1},{"sku":"a","qty":1}],"meta":{"x":{"qty":2}}}`, `{"tenant":"t","Untagged":"u"}`,
		`{"at":"2025-03-01T12:00:00Z","raw":{"a":[1,2]}}`, `{"qty":1}}`, `{"qty":1}{}`, `null`, `[]`, ``, "\xff\xfe",
		`{"extra":1e400}`, `{"qty":"1"}`, `{"` + "\xff" + `":1,"` + "\xfe" + `":2}`, `[[[{"a":{"b":{"B":1}}}]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		errAny := strictjson.Decode(data, &v)
		refusal(t, data, errAny)
		var want any
		stdErr := json.Unmarshal(data, &want)
		dup := hasFoldedDuplicate(data)
		if accepted := errAny == nil; accepted != (stdErr == nil && !dup) {
			t.Fatalf("%q into any: err %v; encoding/json: %v; duplicate keys: %v", data, errAny, stdErr, dup)
		}
		if errAny == nil && !reflect.DeepEqual(v, want) {
			t.Fatalf("%q into any: %#v, encoding/json %#v", data, v, want)
		}
		if strictjson.IsDuplicate(errAny) && !dup {
			t.Fatalf("%q refused as a duplicate without one: %v", data, errAny)
		}

		var o order
		errStruct := strictjson.Decode(data, &o)
		refusal(t, data, errStruct)
		if errStruct != nil {
			return
		}
		if errAny != nil {
			t.Fatalf("%q accepted into a struct, refused into any: %v", data, errAny)
		}
		var std order
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&std); err != nil || !reflect.DeepEqual(o, std) {
			t.Fatalf("%q: %+v, encoding/json %+v (%v)", data, o, std, err)
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(data, &top) == nil {
			for k := range top {
				if !fieldNames[k] {
					t.Fatalf("%q: key %q accepted, not a field name", data, k)
				}
			}
		}
	})
}

var fieldNames = map[string]bool{"tenant": true, "product_id": true, "qty": true, "items": true, "ship": true,
	"meta": true, "extra": true, "at": true, "raw": true, "Untagged": true}

var reasons = map[string]bool{strictjson.ReasonNotJSON: true, strictjson.ReasonTrailing: true, strictjson.ReasonDuplicate: true,
	strictjson.ReasonCaseDuplicate: true, strictjson.ReasonUnknownField: true, strictjson.ReasonWrongType: true}

// refusal checks that err is nil or a ValidationError with a field and a known reason.
func refusal(t *testing.T, data []byte, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Field == "" || !reasons[ve.Reason] {
		t.Fatalf("%q: refused with %v", data, err)
	}
}

// hasFoldedDuplicate reports whether some object of data has two keys equal under
// strings.EqualFold, comparing every pair (slow, obviously right).
func hasFoldedDuplicate(data []byte) bool {
	type obj struct {
		keys    []string
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*obj // nil entries are arrays
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n := len(stack); n > 0 && stack[n-1] != nil && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				top := stack[n-1]
				for _, prev := range top.keys {
					if strings.EqualFold(prev, k) {
						return true
					}
				}
				top.keys = append(top.keys, k)
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &obj{wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, nil)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			return false
		}
		if top := stack[len(stack)-1]; top != nil {
			top.wantKey = true
		}
	}
}
