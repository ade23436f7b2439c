package bootstrap_test

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// orderLine is one line of cardshopctl orders: number, creation time, buyer, product, qty,
// amount and currency, status.
var orderLine = regexp.MustCompile(`^(\S+) +(\d{4}-\d\d-\d\dT[0-9:.]+Z) +(\S+) +(\d+) +(\d+) +(\d+ [A-Z]{3}) +([A-Z]+)$`)

var orderHeader = regexp.MustCompile(`^ORDER_NO +CREATED_AT +BUYER +PRODUCT +QTY +AMOUNT +STATUS$`)

// orderLines checks the output of orders (the header, then one order a line, newest first)
// and returns "number buyer status" of each order.
func orderLines(t *testing.T, what string, code int, out, errOut string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) == 0 || !orderHeader.MatchString(lines[0]) {
		t.Fatalf("%s: exit %d, %q %q", what, code, out, errOut)
	}
	var got []string
	var last time.Time
	for _, l := range lines[1:] {
		m := orderLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("%s: line %q does not match %s", what, l, orderLine)
		}
		at, err := time.Parse(time.RFC3339Nano, m[2])
		if err != nil || !last.IsZero() && at.After(last) {
			t.Fatalf("%s: line %q: not newest first (%v)", what, l, err)
		}
		last = at
		got = append(got, m[1]+" "+m[3]+" "+m[7])
	}
	return got
}

func TestOrdersCommandSearchesAndPages(t *testing.T) {
	c := startService(t)
	url := c.base
	c.want(201, "POST", "/admin/products", adminToken, `{"id":81,"name":"Gift 81","price":1999,"max_per_order":5}`, nil)
	c.want(200, "POST", "/admin/products/81/codes", adminToken, "ORDERS-CLI-0001\nORDERS-CLI-0002\nORDERS-CLI-0003\n", nil)
	var placed []string
	for i, buyer := range []string{"erin", "finn", "erin"} {
		var tok struct {
			Token string `json:"token"`
		}
		c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"`+buyer+`"}`, &tok)
		var o struct {
			OrderNo string `json:"order_no"`
		}
		c.want(201, "POST", "/api/order", tok.Token, `{"product_id":81,"qty":1}`, &o, "Idempotency-Key", "orders-cli-000"+string(rune('1'+i)))
		placed = append(placed, o.OrderNo)
	}
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	line := func(i int, buyer string) string { return placed[i] + " " + buyer + " PENDING" }
	all := []string{line(2, "erin"), line(1, "finn"), line(0, "erin")}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, all},
		{[]string{"-buyer", "erin"}, []string{line(2, "erin"), line(0, "erin")}},
		{[]string{"-product", "81", "-status", "pending,PAID"}, all},
		{[]string{"-status", "PAID"}, nil},
		{[]string{"-buyer", "finn", "-product", "81", "-status", "PENDING", "-from", "1h"}, []string{line(1, "finn")}},
		{[]string{"-to", "2000-01-01T00:00:00Z"}, nil},
		{[]string{"-limit", "1", "-all"}, all},
		{[]string{"-limit", "3", "-all"}, all}, // a full last page, then an empty one
	} {
		code, out, errOut := runCtl(append([]string{"orders", "-url", url}, c.args...)...)
		if got := orderLines(t, strings.Join(c.args, " "), code, out, errOut); strings.Join(got, "\n") != strings.Join(c.want, "\n") || errOut != "" {
			t.Errorf("orders %q printed\n%s\nwant\n%s\n(stderr %q)", c.args, strings.Join(got, "\n"), strings.Join(c.want, "\n"), errOut)
		}
		if strings.Contains(out, "ORDERS-CLI-") {
			t.Fatal("orders printed a code")
		}
	}
	// Without -all, one page, and a note that more may remain.
	code, out, errOut := runCtl("orders", "-url", url, "-limit", "2")
	if got := orderLines(t, "-limit 2", code, out, errOut); strings.Join(got, "\n") != strings.Join(all[:2], "\n") ||
		errOut != "orders: older orders may remain: run with -all to print them\n" {
		t.Errorf("orders -limit 2 printed\n%s\nstderr %q", out, errOut)
	}

	// Bad command lines: exit 2 and a message naming the problem, before any call.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-status", "SHIPPED"}, `invalid value "SHIPPED" for flag -status`},
		{[]string{"-status", "PAID,PAID"}, `invalid value "PAID,PAID" for flag -status`},
		{[]string{"-limit", "0"}, "-limit 0: want 1 to 100"},
		{[]string{"-limit", "101"}, "-limit 101: want 1 to 100"},
		{[]string{"-product", "x"}, `invalid value "x" for flag -product`},
		{[]string{"-product", "0"}, `invalid value "0" for flag -product`},
		{[]string{"-buyer", "two words"}, `invalid value "two words" for flag -buyer`},
		{[]string{"-from", "yesterday"}, `invalid value "yesterday" for flag -from`},
		{[]string{"-to", "5m"}, `invalid value "5m" for flag -to`},
		{[]string{"-from", "2030-01-02T00:00:00Z", "-to", "2030-01-01T00:00:00Z"}, "-from must not be after -to"},
		{[]string{"erin"}, `unexpected argument "erin"`},
	} {
		code, out, errOut := runCtl(append([]string{"orders", "-url", url}, c.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("orders %q: exit %d, %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

func TestOrdersCommandUsage(t *testing.T) {
	code, out, errOut := runCtl("orders", "-h")
	if code != 0 || out != "" || !strings.Contains(errOut, "Usage: cardshopctl orders") {
		t.Fatalf("orders -h: %d %q %q", code, out, errOut)
	}
	for _, w := range []string{"-url", "-buyer", "-product", "-status", "-from", "-to", "-limit", "-all", "GET /admin/orders",
		"CARDSHOP_ADMIN_TOKEN", "Exit status", "UNFULFILLED", "never printed"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("orders -h does not mention %q:\n%s", w, errOut)
		}
	}
	if code, out, _ := runCtl("help"); code != 0 || !strings.Contains(out, "\n  orders ") {
		t.Errorf("help does not list orders: %q", out)
	}
}
