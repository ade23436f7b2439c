package bootstrap_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// checkConsole logs in to the console the service serves with the shared admin token, over
// real HTTP, and reads its pages for a product and an order: they answer with the console's
// headers, name the product, and show none of codes (nor does the freeze they post).
func checkConsole(t *testing.T, c client, productID, productName, orderNo string, codes []string) {
	t.Helper()
	hc := &http.Client{Timeout: c.http.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.PostForm(c.base+"/console/login", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "cardshop_console" {
			cookie = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || cookie == nil || !cookie.HttpOnly {
		t.Fatalf("console login: %d, cookie %v", res.StatusCode, cookie)
	}
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", c.base+path, nil)
		req.AddCookie(cookie)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") ||
			res.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("console %s: %d %v", path, res.StatusCode, res.Header)
		}
		for _, code := range codes {
			if strings.Contains(string(b), code) {
				t.Fatalf("console %s shows the code %s", path, code)
			}
		}
		return string(b)
	}
	if home := get("/console"); !strings.Contains(home, productName) {
		t.Fatalf("console home does not list %q", productName)
	}
	if dash := get("/console/dashboard"); !strings.Contains(dash, productName) {
		t.Fatalf("console dashboard does not show %q", productName)
	}
	get("/console/products/" + productID)
	get("/console/orders/" + orderNo)
	page := get("/console/audit")
	if m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page); m == nil {
		t.Fatal("console page without a csrf field")
	}
}
