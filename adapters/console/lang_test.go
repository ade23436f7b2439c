package console_test

import (
	"net/http"
	"strings"
	"testing"

	"cardshop/domain"
)

// The console answers in the browser's language (Accept-Language), and an operator's choice
// with the switch, kept in the console's own cookie, wins over it; a client with neither gets
// English. The switch only sends the browser back to a console page.
func TestConsoleSpeaksTheOperatorsLanguage(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(h.operator("alice", domain.RoleAdmin))

	english := h.do("GET", "/console/products", nil, "Cookie", b.cookie)
	chinese := h.do("GET", "/console/products", nil, "Cookie", b.cookie, "Accept-Language", "zh-CN,zh;q=0.9,en;q=0.5")
	wantStatus(t, english, 200)
	wantStatus(t, chinese, 200)
	if !strings.Contains(english.body, `<html lang="en">`) || !strings.Contains(english.body, ">Products</a>") ||
		english.header.Get("Content-Language") != "en" {
		t.Fatalf("no Accept-Language: want English, got %s", english.body)
	}
	if !strings.Contains(chinese.body, `<html lang="zh-CN">`) || !strings.Contains(chinese.body, ">商品</a>") ||
		!strings.Contains(chinese.body, ">退出登录</button>") || strings.Contains(chinese.body, ">Products</a>") ||
		chinese.header.Get("Content-Language") != "zh-CN" {
		t.Fatalf("Accept-Language zh-CN: want Chinese, got %s", chinese.body)
	}

	// The switch (no session needed: the login page has it too) sets the choice and goes back.
	sw := h.do("GET", "/console/lang?to=zh-CN&back=%2Fconsole%2Fproducts%3Fx%3D1", nil)
	if sw.status != http.StatusSeeOther || sw.header.Get("Location") != "/console/products?x=1" {
		t.Fatalf("switch: %d to %q", sw.status, sw.header.Get("Location"))
	}
	var choice string
	for _, c := range (&http.Response{Header: sw.header}).Cookies() {
		if c.Name == "console_lang" {
			if c.Path != "/console" || !c.HttpOnly {
				t.Fatalf("language cookie: %+v", c)
			}
			choice = c.Name + "=" + c.Value
		}
	}
	if choice != "console_lang=zh-CN" {
		t.Fatalf("language cookie %q", choice)
	}
	chosen := h.do("GET", "/console/products", nil, "Cookie", b.cookie+"; "+choice, "Accept-Language", "en-US")
	if !strings.Contains(chosen.body, ">商品</a>") {
		t.Fatalf("the switch's choice must win over Accept-Language: %s", chosen.body)
	}
	login := h.do("GET", "/console/login", nil, "Cookie", choice)
	if !strings.Contains(login.body, `<html lang="zh-CN">`) || !strings.Contains(login.body, `href="/console/lang?`) {
		t.Fatalf("login page: no Chinese or no switch: %s", login.body)
	}
	// A page the console does not have is an error page in the language too.
	if r := h.do("GET", "/console/nowhere", nil, "Cookie", b.cookie+"; "+choice); r.status != 404 || !strings.Contains(r.body, "没有这个页面") {
		t.Fatalf("404 page: %s", r)
	}

	for _, back := range []string{"https://evil.example/console", "//evil.example/console", "/\\evil.example", "/api/orders", "", "/consolex"} {
		r := h.do("GET", "/console/lang?to=en&back="+strings.ReplaceAll(back, "/", "%2F"), nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console" {
			t.Fatalf("back %q: sent to %q", back, r.header.Get("Location"))
		}
	}
	// An unknown language sets nothing.
	if r := h.do("GET", "/console/lang?to=klingon&back=/console", nil); len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("unknown language set a cookie: %v", r.header.Values("Set-Cookie"))
	}
}
