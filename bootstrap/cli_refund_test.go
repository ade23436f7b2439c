package bootstrap_test

import (
	"net/url"
	"strings"
	"testing"

	"cardshop/bootstrap"
)

// The refund command refunds an order paid through a provider: the money first (the dev
// provider returns its pretend money at once), then the codes; run again, it changes nothing.
func TestRefundCommand(t *testing.T) {
	c := startService(t, func(cfg *bootstrap.Config) { cfg.DevPayments = true; cfg.PublicURL = "http://" + cfg.HTTPAddr })
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":7,"name":"Refundable","price":300,"max_per_order":2}`, nil)
	c.want(200, "POST", "/admin/products/7/codes", adminToken, "RF-0001\nRF-0002\nRF-0003\n", nil)
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"alice"}`, &tok)
	var order struct {
		OrderNo string `json:"order_no"`
	}
	c.want(201, "POST", "/api/order", tok.Token, `{"product_id":7,"qty":1}`, &order, "Idempotency-Key", "refund-cmd-0001")
	var pay struct {
		PayURL string `json:"pay_url"`
	}
	c.want(201, "POST", "/api/orders/"+order.OrderNo+"/payment", tok.Token, `{"provider":"dev"}`, &pay)
	u, err := url.Parse(pay.PayURL)
	if err != nil {
		t.Fatal(err)
	}
	form := u.Query()
	form.Set("choice", "pay")
	c.want(200, "POST", "/dev/pay/"+order.OrderNo+"/confirm", "", form.Encode(), nil, "Content-Type", "application/x-www-form-urlencoded")

	for i := range 2 {
		code, out, errOut := runCtl("refund", "-url", c.base, "-order", order.OrderNo)
		if code != 0 || !strings.Contains(out, "money   REFUNDED at dev") || !strings.Contains(out, order.OrderNo+" REFUNDED") {
			t.Fatalf("refund #%d: exit %d\n%s%s", i+1, code, out, errOut)
		}
	}
	if code, _, errOut := runCtl("refund", "-url", c.base, "-order", order.OrderNo, "-void", "-recycle"); code == 0 || !strings.Contains(errOut, "exclude") {
		t.Fatalf("-void -recycle: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCtl("refund", "-url", c.base, "-order", "2503011200000000000000000009"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("an unknown order: exit %d, %s", code, errOut)
	}
}
