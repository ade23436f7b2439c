package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"cardshop/adapters/webhook"
	"cardshop/application"
)

// The outbound webhook's body, as the webhook client really sends it for a paid order and for
// the stock events, matches the WebhookEvent schema of openapi.json; a body with a field the
// schema does not name (codes, say) does not.
func TestWebhookBodyMatchesTheDescription(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
	}))
	defer srv.Close()
	hook, err := webhook.New(webhook.Config{URL: srv.URL, Secret: "webhook-secret-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, func(d *application.Deps) { d.Notifier = hook })
	h.createProduct(1, 250, 5)
	h.importCodes(1, codes("HOOKED", 3)...)
	o := h.placeOrder(h.token("alice"), "webhook-key-1", 1, 2)
	h.pay(o)
	if n, err := h.shop.Relay.RelayWebhooks(t.Context()); err != nil || n != 1 {
		t.Fatalf("RelayWebhooks = %d, %v; want 1", n, err)
	}
	mu.Lock() // the relay has returned: no request is in flight
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("the storefront got %d requests, want 1", len(bodies))
	}
	schema := mustSpec(t).doc.Components.Schemas["WebhookEvent"]
	if schema == nil {
		t.Fatal("openapi.json describes no WebhookEvent")
	}
	var v map[string]any
	if err := json.Unmarshal(bodies[0], &v); err != nil {
		t.Fatal(err)
	}
	if err := schema.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		t.Fatalf("webhook body %s does not match WebhookEvent: %v", bodies[0], err)
	}
	if data := v["data"].(map[string]any); data["order_no"] != o.OrderNo || data["qty"] != float64(2) || data["amount"] != float64(500) {
		t.Fatalf("webhook data %v, want order %s, 2 units, 500", data, o.OrderNo)
	}
	v["data"].(map[string]any)["codes"] = []any{"HOOKED-0001"}
	if err := schema.Value.VisitJSON(v, openapi3.MultiErrors()); err == nil {
		t.Fatal("the WebhookEvent schema accepts a field it does not name")
	}

	// A product with a low-stock threshold that sells out: product.low_stock, product.sold_out.
	wantStatus(t, h.admin("POST", "/admin/products", `{"id":2,"name":"Stocked","price":100,"max_per_order":5,"low_stock_threshold":2}`), 201)
	h.importCodes(2, codes("STOCKED", 3)...)
	if _, err := h.shop.Catalogue.WatchStock(t.Context()); err != nil { // the first sample is silent
		t.Fatal(err)
	}
	h.placeOrder(h.token("bob"), "webhook-key-2", 2, 3)
	if n, err := h.shop.Catalogue.WatchStock(t.Context()); err != nil || n != 2 {
		t.Fatalf("WatchStock = %d, %v; want 2 events", n, err)
	}
	mu.Unlock() // the storefront records the next requests
	n, err := h.shop.Relay.RelayWebhooks(t.Context())
	mu.Lock()
	if err != nil || n != 2 {
		t.Fatalf("RelayWebhooks = %d, %v; want 2", n, err)
	}
	if len(bodies) != 3 {
		t.Fatalf("the storefront got %d requests, want 3", len(bodies))
	}
	types := map[any]bool{}
	for _, body := range bodies[1:] { // sent side by side: in either order
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if err := schema.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
			t.Fatalf("webhook body %s does not match WebhookEvent: %v", body, err)
		}
		data := v["data"].(map[string]any)
		types[v["type"]] = true
		if (v["type"] != "product.low_stock" && v["type"] != "product.sold_out") || data["type"] != v["type"] ||
			data["product_id"] != float64(2) || data["stock_left"] != float64(0) ||
			data["low_stock_threshold"] != float64(2) || data["event_id"] != v["id"] {
			t.Fatalf("webhook body %s, want a low_stock or sold_out of product 2, 0 left of threshold 2", body)
		}
		data["order_no"] = o.OrderNo
		if err := schema.Value.VisitJSON(v, openapi3.MultiErrors()); err == nil {
			t.Fatal("the WebhookEvent schema accepts a stock event with a field it does not name")
		}
	}
	if len(types) != 2 {
		t.Fatalf("stock webhook types %v, want product.low_stock and product.sold_out", types)
	}
}
