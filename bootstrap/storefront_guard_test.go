package bootstrap_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"cardshop/bootstrap"
)

// TestShopCheckoutIsScreenedByTheBlocklists: the service wires the bot defence into the
// shop's checkout. A buyer whose e-mail domain an operator blocked gets the refusal page (403,
// in the buyer's language, not saying which list) and no order; another domain buys.
func TestShopCheckoutIsScreenedByTheBlocklists(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_DEV_PAYMENTS=true"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	c := runService(t, cfg, io.Discard)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":41,"name":"Screened","price":100,"max_per_order":2}`, nil)
	c.want(200, "POST", "/admin/products/41/codes", adminToken, "SCREEN-1\nSCREEN-2\nSCREEN-3", nil)
	c.want(201, "POST", "/admin/blocklist", adminToken, `{"kind":"email_domain","value":"hoarders.example","note":"a bot farm"}`, nil)

	checkout := func(email string) (int, string) {
		t.Helper()
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		h := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		get(t, h, c.base+"/p/41")
		page := post(t, h, c.base+"/checkout/review", url.Values{"product": {"41"}, "qty": {"1"}, "email": {email}, "provider": {"dev"}})
		field := func(name string) string {
			m := regexp.MustCompile(`name="` + name + `" value="([^"]+)"`).FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("the product page has no %s field", name)
			}
			return m[1]
		}
		form := url.Values{"csrf": {field("csrf")}, "key": {field("key")}, "product": {"41"}, "qty": {"1"},
			"email": {field("email")}, "provider": {"dev"}}
		req, err := http.NewRequest(http.MethodPost, c.base+"/checkout", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept-Language", "en")
		resp, err := h.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	status, body := checkout("someone@mail.hoarders.example")
	if status != http.StatusForbidden || !strings.Contains(body, "<html") || strings.Contains(body, "hoarders") {
		t.Fatalf("a blocked domain's checkout: %d %q", status, body)
	}
	var orders struct {
		Orders []struct {
			OrderNo string `json:"order_no"`
		} `json:"orders"`
	}
	c.want(200, "GET", "/admin/orders?product_id=41", adminToken, "", &orders)
	if len(orders.Orders) != 0 {
		t.Fatalf("the refused checkout placed %d orders", len(orders.Orders))
	}
	if status, body := checkout("someone@fine.example"); status != http.StatusOK || !strings.Contains(body, "Order placed") {
		t.Fatalf("an unblocked checkout: %d %q", status, body)
	}
	c.want(200, "GET", "/admin/orders?product_id=41", adminToken, "", &orders)
	if len(orders.Orders) != 1 {
		t.Fatalf("%d orders after one good checkout, want 1", len(orders.Orders))
	}
}

func get(t *testing.T, h *http.Client, u string) string {
	t.Helper()
	resp, err := h.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

func post(t *testing.T, h *http.Client, u string, form url.Values) string {
	t.Helper()
	resp, err := h.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}
