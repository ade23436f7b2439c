package bootstrap_test

import (
	"encoding/json"
	"strings"
	"testing"

	"cardshop/bootstrap"
)

// TestStorefrontOff: with CARDSHOP_STOREFRONT=false the service has no shop: GET / answers
// the API's JSON 404 route_not_found as it did before the shop existed, and so does every
// route of the shop (its pages, forms, order pages and static files), while the API and the
// console answer as always. With the default (on), the same GET / is the shop's page.
func TestStorefrontOff(t *testing.T) {
	c := startService(t, func(cfg *bootstrap.Config) { cfg.Storefront = false })
	c.want(201, "POST", "/admin/products", adminToken, `{"id":1,"name":"Steam 50","price":5000,"max_per_order":5}`, nil)
	for _, r := range []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/p/1"}, {"GET", "/lang?to=en&back=/"}, {"GET", "/lookup"}, {"POST", "/lookup"},
		{"POST", "/checkout/review"}, {"POST", "/checkout"}, {"GET", "/orders/N1"}, {"POST", "/orders/N1/pay"},
		{"GET", "/orders/N1/pay/alipay"}, {"GET", "/orders/N1/qr.png"}, {"GET", "/orders/N1/status.json"},
		{"GET", "/orders/N1/codes.txt"}, {"GET", "/static/shop/shop.css"}, {"GET", "/static/shop/countdown.js"},
		{"GET", "/favicon.ico"},
	} {
		status, body := c.do(r.method, r.path, "", "", "Accept-Language", "zh-CN", "Content-Type", "application/x-www-form-urlencoded")
		var e struct {
			Code string `json:"code"`
		}
		if status != 404 || json.Unmarshal(body, &e) != nil || e.Code != "route_not_found" {
			t.Errorf("%s %s with the shop off: %d %.200s, want the JSON 404 route_not_found", r.method, r.path, status, body)
		}
	}
	c.want(200, "GET", "/api/products", "", "", nil)
	if status, body := c.do("GET", "/console/login", "", ""); status != 200 || !strings.Contains(string(body), "<form") {
		t.Errorf("the console with the shop off: %d %.200s", status, body)
	}

	on := startService(t)
	if status, body := on.do("GET", "/", "", ""); status != 200 || !strings.HasPrefix(string(body), "<!doctype html>") {
		t.Errorf("GET / with the shop on: %d %.200s, want its page", status, body)
	}
}
