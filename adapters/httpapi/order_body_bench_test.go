package httpapi

import (
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"cardshop/adapters/strictjson"
)

// BenchmarkOrderBody decodes the body of POST /api/order three ways: the hand parser the
// handler tries first, strictjson (what every other body takes), and encoding/json/v2
// (github.com/go-json-experiment/json) with unknown members refused, the candidate that would
// replace strictjson. docs/DESIGN.md ("Strict JSON") has the numbers and why strictjson stays;
// rerun with `go test -run '^$' -bench OrderBody -benchmem ./adapters/httpapi/`.
func BenchmarkOrderBody(b *testing.B) {
	bodies := []struct{ name, body string }{
		{"valid", `{"product_id":1001,"qty":2}`},
		{"spaced", "{ \"qty\" : 2 ,\n \"product_id\" : 1001 }\n"},
		{"duplicate", `{"product_id":1001,"qty":1,"qty":5}`},
	}
	decoders := []struct {
		name   string
		decode func([]byte, *placeOrderRequest) error
	}{
		{"fastpath", func(data []byte, r *placeOrderRequest) error {
			if req, ok := parsePlaceOrder(data); ok {
				*r = req
				return nil
			}
			return strictjson.Decode(data, r)
		}},
		{"strictjson", func(data []byte, r *placeOrderRequest) error { return strictjson.Decode(data, r) }},
		{"jsonv2", func(data []byte, r *placeOrderRequest) error {
			return jsonv2.Unmarshal(data, r, jsonv2.RejectUnknownMembers(true))
		}},
	}
	for _, body := range bodies {
		data := []byte(body.body)
		for _, d := range decoders {
			b.Run(body.name+"/"+d.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var r placeOrderRequest
					err := d.decode(data, &r)
					if (err != nil) != (body.name == "duplicate") {
						b.Fatalf("%s: %+v %v", body.body, r, err)
					}
				}
			})
		}
	}
}
