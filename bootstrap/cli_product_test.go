package bootstrap_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// productOut is what the product commands print for a product, without its last lines
// (stock_state, frozen, created_at), which productTail checks; the product has no
// description, is in no variant group and has the default minimum of 1 per order.
func productOut(id, name, price, maxPerOrder, tiers, display, startsAt, endsAt, buyerLimit, releases, lowStock string) string {
	return fmt.Sprintf("id: %s\nname: %s\ndescription: none\nprice: %s\nmin_per_order: 1\nmax_per_order: %s\ncode_uses: 1\ngroup: none\nvariant: none\ntiers: %s\nstock_display: %s\nstarts_at: %s\nends_at: %s\n"+
		"buyer_limit: %s\nrefund_releases_limit: %s\nlow_stock_threshold: %s\n",
		id, name, price, maxPerOrder, tiers, display, startsAt, endsAt, buyerLimit, releases, lowStock)
}

// productTail matches the lines after low_stock_threshold: the stock state, not frozen, and
// the creation time in RFC 3339 UTC.
var productTail = regexp.MustCompile(`\Astock_state: (none|normal|low|sold_out)\nfrozen: false\ncreated_at: (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)\n\z`)

// wantProduct checks a product command's output: head exactly, then productTail; it returns
// the creation time printed.
func wantProduct(t *testing.T, what string, code int, out, errOut, head string) time.Time {
	t.Helper()
	if code != 0 || errOut != "" || !strings.HasPrefix(out, head) {
		t.Fatalf("%s: exit %d, stderr %q, printed\n%s\nwant it to start with\n%s", what, code, errOut, out, head)
	}
	m := productTail.FindStringSubmatch(out[len(head):])
	if m == nil {
		t.Fatalf("%s: printed\n%s\nthe lines after low_stock_threshold do not match %s", what, out, productTail)
	}
	created, err := time.Parse(time.RFC3339Nano, m[2])
	if err != nil {
		t.Fatalf("%s: created_at %q: %v", what, m[2], err)
	}
	return created
}

// TestProductCommands: product-create with every flag prints the product as stored (times in
// UTC), product-show prints the same; product-update sends only the flags given, so the other
// fields stay; -starts-at "" removes the bound (the gate then sells), -tiers "" the tiers, and
// 0 the limits. The service's refusals exit 1 with its code and message and change nothing;
// bad command lines exit 2 before calling it.
func TestProductCommands(t *testing.T) {
	c := startService(t)
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	url := c.base

	// Create with every flag; the start is given with an offset and printed in UTC.
	code, out, errOut := runCtl("product-create", "-url", url, "-id", "41", "-name", "Gift 41", "-price", "1000", "-max-per-order", "20",
		"-tiers", "10:900, 20:800", "-stock-display", "level", "-starts-at", "2030-01-02T03:04:05.678+08:00",
		"-ends-at", "2031-01-01T00:00:00Z", "-buyer-limit", "3", "-refund-releases-limit", "-low-stock-threshold", "5")
	full := productOut("41", "Gift 41", "1000", "20", "10:900,20:800", "level", "2030-01-01T19:04:05.678Z", "2031-01-01T00:00:00Z", "3", "true", "5")
	created := wantProduct(t, "product-create", code, out, errOut, full)
	var api struct {
		CreatedAt time.Time `json:"created_at"`
	}
	c.want(200, "GET", "/admin/products/41", adminToken, "", &api)
	if !created.Equal(api.CreatedAt) {
		t.Errorf("created_at printed %s, the API says %s", created, api.CreatedAt)
	}

	show := func(what, head string) {
		t.Helper()
		code, out, errOut := runCtl("product-show", "-url", url, "-product", "41")
		if got := wantProduct(t, what, code, out, errOut, head); !got.Equal(created) {
			t.Errorf("%s: created_at %s, want %s", what, got, created)
		}
	}
	show("product-show after the create", full)

	// The window reached the gate: an order before the start is refused.
	c.want(200, "POST", "/admin/products/41/codes", adminToken, "CLI-PROD-0001\nCLI-PROD-0002\nCLI-PROD-0003\n", nil)
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"product-cli"}`, &tok)
	var refused struct {
		Code string `json:"code"`
	}
	c.want(409, "POST", "/api/order", tok.Token, `{"product_id":41,"qty":1}`, &refused, "Idempotency-Key", "product-cli-0001")
	if refused.Code != "sale_not_started" {
		t.Fatalf("an order before the start: %q, want sale_not_started", refused.Code)
	}

	// One field: the others stay as they were.
	code, out, errOut = runCtl("product-update", "-url", url, "-product", "41", "-price", "1100")
	changed := productOut("41", "Gift 41", "1100", "20", "10:900,20:800", "level", "2030-01-01T19:04:05.678Z", "2031-01-01T00:00:00Z", "3", "true", "5")
	wantProduct(t, "product-update -price", code, out, errOut, changed)
	show("product-show after -price", changed)

	// -starts-at "" removes the start and nothing else; the gate sells at once.
	code, out, errOut = runCtl("product-update", "-url", url, "-product", "41", "-starts-at", "")
	changed = productOut("41", "Gift 41", "1100", "20", "10:900,20:800", "level", "none", "2031-01-01T00:00:00Z", "3", "true", "5")
	wantProduct(t, `product-update -starts-at ""`, code, out, errOut, changed)
	show(`product-show after -starts-at ""`, changed)
	c.want(201, "POST", "/api/order", tok.Token, `{"product_id":41,"qty":1}`, nil, "Idempotency-Key", "product-cli-0002")

	// -tiers "" removes the tiers, 0 the limit and the threshold, =false the release; a new
	// name and display; -ends-at "" the end.
	code, out, errOut = runCtl("product-update", "-url", url, "-product", "41", "-tiers", "", "-buyer-limit", "0",
		"-refund-releases-limit=false", "-low-stock-threshold", "0", "-name", "Gift 41 (2)", "-stock-display", "exact",
		"-max-per-order", "5", "-ends-at", "")
	cleared := productOut("41", "Gift 41 (2)", "1100", "5", "none", "exact", "none", "none", "none", "false", "none")
	wantProduct(t, "product-update clearing everything", code, out, errOut, cleared)
	show("product-show after clearing", cleared)
	// And set again: a bound, tiers and a limit through update.
	code, out, errOut = runCtl("product-update", "-url", url, "-product", "41", "-ends-at", "2032-02-03T04:05:06Z", "-tiers", "3:1000", "-buyer-limit", "2")
	final := productOut("41", "Gift 41 (2)", "1100", "5", "3:1000", "exact", "none", "2032-02-03T04:05:06Z", "2", "false", "none")
	wantProduct(t, "product-update setting again", code, out, errOut, final)

	// The service's refusals: exit 1, its status, code and message, nothing printed or changed.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"product-update", "-product", "41", "-starts-at", "2033-01-01T00:00:00Z"}, "cardshopctl: 400 invalid_request: ends_at: must be after starts_at\n"},
		{[]string{"product-update", "-product", "41", "-tiers", "2:1200"}, "cardshopctl: 400 invalid_request: tiers: unit_price must not exceed the price before it (the base price, then the previous tier)\n"},
		{[]string{"product-update", "-product", "41", "-price", "0"}, "cardshopctl: 400 invalid_request: price: must be a positive number of minor units\n"},
		{[]string{"product-update", "-product", "999", "-price", "5"}, "cardshopctl: 404 product_not_found: no such product\n"},
		{[]string{"product-show", "-product", "999"}, "cardshopctl: 404 product_not_found: no such product\n"},
		{[]string{"product-create", "-id", "41", "-name", "Again", "-price", "5", "-max-per-order", "1"}, "cardshopctl: 409 product_exists: a product with this id already exists\n"},
		{[]string{"product-create", "-id", "42", "-name", "Backwards", "-price", "5", "-max-per-order", "1",
			"-starts-at", "2030-01-02T00:00:00Z", "-ends-at", "2030-01-01T00:00:00Z"}, "cardshopctl: 400 invalid_request: ends_at: must be after starts_at\n"},
		{[]string{"product-create", "-name", "Too many", "-price", "5", "-max-per-order", "1001"}, "cardshopctl: 400 invalid_request: max_per_order: must be between 1 and 1000\n"},
		{[]string{"product-create", "-name", "Too many uses", "-price", "5", "-max-per-order", "1", "-code-uses", "1001"},
			"cardshopctl: 400 invalid_request: code_uses: must be 0 (a shared key, unlimited) or 1 to 1000\n"},
	} {
		code, out, errOut := runCtl(append(c.args, "-url", url)...)
		if code != 1 || out != "" || errOut != c.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errOut, c.want)
		}
	}
	show("product-show after the refusals", final)

	// Bad command lines: exit 2 and a message naming the problem, before any call.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"product-create", "-name", "X", "-price", "5"}, "-name, -price and -max-per-order are required"},
		{[]string{"product-create", "-price", "5", "-max-per-order", "1"}, "-name, -price and -max-per-order are required"},
		{[]string{"product-create", "-name", "X", "-price", "five", "-max-per-order", "1"}, `invalid value "five" for flag -price`},
		{[]string{"product-create", "-name", "X", "-price", "5", "-max-per-order", "1", "-tiers", "10-900"}, `invalid value "10-900" for flag -tiers: "10-900" is not MIN_QTY:UNIT_PRICE`},
		{[]string{"product-create", "-name", "X", "-price", "5", "-max-per-order", "1", "-tiers", "10:900,"}, `"" is not MIN_QTY:UNIT_PRICE`},
		{[]string{"product-create", "-name", "X", "-price", "5", "-max-per-order", "1", "-starts-at", "tomorrow"}, `invalid value "tomorrow" for flag -starts-at: want an RFC 3339 time`},
		{[]string{"product-create", "-name", "X", "-price", "5", "-max-per-order", "1", "-stock-display", "some"}, `invalid value "some" for flag -stock-display: want "exact" or "level"`},
		{[]string{"product-create", "-name", "X", "-price", "5", "-max-per-order", "1", "extra"}, `unexpected argument "extra"`},
		{[]string{"product-create", "-name", "X", "-price", "5", "-max-per-order", "1", "-product", "41"}, "flag provided but not defined: -product"},
		{[]string{"product-update", "-price", "5"}, "-product is required"},
		{[]string{"product-update", "-product", "41"}, "give at least one field to change"},
		{[]string{"product-update", "-product", "41", "-ends-at", "2030-13-01T00:00:00Z"}, `invalid value "2030-13-01T00:00:00Z" for flag -ends-at`},
		{[]string{"product-update", "-product", "41", "-ends-at", "2030-01-01"}, `invalid value "2030-01-01" for flag -ends-at`},
		{[]string{"product-update", "-product", "41", "-buyer-limit", "many"}, `invalid value "many" for flag -buyer-limit`},
		{[]string{"product-update", "-product", "41", "-id", "7"}, "flag provided but not defined: -id"},
		{[]string{"product-show"}, "-product is required"},
		{[]string{"product-show", "-product", "41", "-price", "5"}, "flag provided but not defined: -price"},
		{[]string{"product-show", "-product", "41", "now"}, `unexpected argument "now"`},
	} {
		code, out, errOut := runCtl(append([]string{c.args[0], "-url", url}, c.args[1:]...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "Usage: cardshopctl "+c.args[0]) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, the usage and %q", c.args, code, out, errOut, c.want)
		}
	}
	show("product-show after the bad command lines", final)
	var list struct {
		Products []struct {
			ID int64 `json:"id"`
		} `json:"products"`
	}
	c.want(200, "GET", "/admin/products", adminToken, "", &list)
	if len(list.Products) != 1 {
		t.Fatalf("products after the refusals: %+v, want only 41", list.Products)
	}

	// Without -id the service chooses, and product-show finds it there.
	code, out, errOut = runCtl("product-create", "-url", url, "-name", "Chosen", "-price", "250", "-max-per-order", "2")
	id := regexp.MustCompile(`\Aid: (\d+)\n`).FindStringSubmatch(out)
	if code != 0 || id == nil || id[1] == "41" {
		t.Fatalf("product-create without -id: exit %d, %q %q", code, out, errOut)
	}
	head := productOut(id[1], "Chosen", "250", "2", "none", "exact", "none", "none", "none", "false", "none")
	wantProduct(t, "product-create without -id", code, out, errOut, head)
	code, out, errOut = runCtl("product-show", "-url", url, "-product", id[1])
	wantProduct(t, "product-show of the chosen id", code, out, errOut, head)

	// -code-uses sells each code several times, 0 without a limit.
	code, out, errOut = runCtl("product-create", "-url", url, "-id", "43", "-name", "Shared", "-price", "500", "-max-per-order", "2",
		"-code-uses", "3")
	if code != 0 || errOut != "" || !strings.Contains(out, "\nmax_per_order: 2\ncode_uses: 3\n") {
		t.Fatalf("product-create -code-uses 3: exit %d, stderr %q, printed\n%s", code, errOut, out)
	}
	code, out, errOut = runCtl("product-create", "-url", url, "-id", "44", "-name", "Key", "-price", "500", "-max-per-order", "1",
		"-code-uses", "0")
	if code != 0 || errOut != "" || !strings.Contains(out, "\ncode_uses: unlimited\n") {
		t.Fatalf("product-create -code-uses 0: exit %d, stderr %q, printed\n%s", code, errOut, out)
	}

	// -description: plain text kept as written, a multi-line one printed quoted on one line;
	// "" removes it; a control character is the service's refusal.
	code, out, errOut = runCtl("product-create", "-url", url, "-id", "45", "-name", "Described", "-price", "500", "-max-per-order", "1",
		"-description", " 充值卡\n<b>line two</b> ")
	if code != 0 || errOut != "" || !strings.Contains(out, "\nname: Described\ndescription: \"充值卡\\n<b>line two</b>\"\nprice: 500\n") {
		t.Fatalf("product-create -description: exit %d, stderr %q, printed\n%s", code, errOut, out)
	}
	code, out, errOut = runCtl("product-update", "-url", url, "-product", "45", "-description", "one line")
	if code != 0 || errOut != "" || !strings.Contains(out, "\ndescription: one line\n") {
		t.Fatalf("product-update -description: exit %d, stderr %q, printed\n%s", code, errOut, out)
	}
	code, out, errOut = runCtl("product-update", "-url", url, "-product", "45", "-description", "bell\a")
	if want := "cardshopctl: 400 invalid_request: description: must not contain control characters other than newline and tab\n"; code != 1 || out != "" || errOut != want {
		t.Fatalf("product-update -description with a control character: exit %d, %q %q; want exit 1 and %q", code, out, errOut, want)
	}
	code, out, errOut = runCtl("product-update", "-url", url, "-product", "45", "-description", "")
	if code != 0 || errOut != "" || !strings.Contains(out, "\ndescription: none\n") {
		t.Fatalf(`product-update -description "": exit %d, stderr %q, printed\n%s`, code, errOut, out)
	}

	// No token: exit 1, as every admin command. A wrong one: the service's 401.
	t.Setenv("CARDSHOP_ADMIN_TOKEN", "")
	if code, out, errOut := runCtl("product-show", "-url", url, "-product", "41"); code != 1 || out != "" || errOut != "cardshopctl: set CARDSHOP_ADMIN_TOKEN\n" {
		t.Errorf("product-show without a token: exit %d, %q %q", code, out, errOut)
	}
	t.Setenv("CARDSHOP_ADMIN_TOKEN", "wrong-token-0123456789")
	if code, out, errOut := runCtl("product-update", "-url", url, "-product", "41", "-price", "1"); code != 1 || out != "" ||
		errOut != "cardshopctl: 401 unauthorized: missing or invalid credentials\n" {
		t.Errorf("product-update with a wrong token: exit %d, %q %q", code, out, errOut)
	}
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	show("product-show at the end", final)

	// A frozen product says so, with the reason on a line of its own.
	c.want(200, "POST", "/admin/products/41/freeze", adminToken, `{"reason":"stock audit"}`, nil)
	code, out, errOut = runCtl("product-show", "-url", url, "-product", "41")
	if code != 0 || !strings.HasPrefix(out, final) || !strings.Contains(out, "\nfrozen: true\nfrozen_reason: stock audit\ncreated_at: ") {
		t.Errorf("product-show of a frozen product: exit %d, %q %q", code, out, errOut)
	}
}

// TestProductCommandsUsage: -h prints each command's usage on stderr and exits 0, and help
// lists the commands.
func TestProductCommandsUsage(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want []string
	}{
		{"product-create", []string{"-name", "-price", "-max-per-order", "-id", "-tiers", "-stock-display", "-starts-at", "-ends-at",
			"-buyer-limit", "-refund-releases-limit", "-low-stock-threshold", "POST /admin/products", "Exit status"}},
		{"product-update", []string{"-product", "-tiers \"\"", "-starts-at \"\"", "-ends-at \"\"", "only the flags given",
			"PATCH /admin/products/ID", "Exit status"}},
		{"product-show", []string{"-product", "GET /admin/products/ID", "Exit status"}},
	} {
		code, out, errOut := runCtl(c.cmd, "-h")
		if code != 0 || out != "" || !strings.Contains(errOut, "Usage: cardshopctl "+c.cmd) || !strings.Contains(errOut, "CARDSHOP_ADMIN_TOKEN") {
			t.Errorf("%s -h: %d %q %q", c.cmd, code, out, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s -h does not mention %q:\n%s", c.cmd, w, errOut)
			}
		}
	}
	if code, out, _ := runCtl("help"); code != 0 || !strings.Contains(out, "product-create") || !strings.Contains(out, "product-update") ||
		!strings.Contains(out, "product-show") {
		t.Errorf("help does not list the product commands: %q", out)
	}
}
