package console_test

import (
	"encoding/json"
	"html"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"cardshop/domain"
)

// page is one console page of the language test: how to get it, its status and its heading
// in each language ("" when the heading is data, a product's name).
type page struct {
	name     string
	get      func(lang string) resp
	status   int
	zh, en   string
	loggedIn bool
}

var (
	scriptStyleRE = regexp.MustCompile(`(?is)<(script|style)\b.*?</(script|style)>`)
	tagRE         = regexp.MustCompile(`<[^>]*>`)
	h1RE          = regexp.MustCompile(`(?s)<h1>(.*?)</h1>`)
	placeholderRE = regexp.MustCompile(`\{\{[^}]*\}\}`)
)

// visible is a page's text as a reader sees it: no tags, no scripts, entities decoded.
func visible(body string) string {
	s := scriptStyleRE.ReplaceAllString(body, " ")
	return html.UnescapeString(tagRE.ReplaceAllString(s, " "))
}

// englishFragments are the console catalogue's English words that a Chinese page must not
// show: every literal stretch of 6 or more characters (between placeholders) of an English
// message that the message's Chinese does not contain as well (a header's name, an example).
func englishFragments(t *testing.T) []string {
	t.Helper()
	read := func(l string) map[string]any {
		b, err := os.ReadFile("../i18n/locales/" + l + "/console.json")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	texts := func(v any) []string {
		if m, ok := v.(map[string]any); ok {
			var out []string
			for _, s := range m {
				out = append(out, s.(string))
			}
			return out
		}
		return []string{v.(string)}
	}
	en, zh := read("en"), read("zh-CN")
	var out []string
	for id, v := range en {
		if strings.HasPrefix(id, "console.field.") || strings.HasPrefix(id, "console.skip.") {
			continue // stored names, the same in both languages where data shows them (the audit log's parameters)
		}
		zhText := strings.Join(texts(zh[id]), " ")
		for _, s := range texts(v) {
			for _, f := range placeholderRE.Split(s, -1) {
				f = strings.TrimSpace(f)
				if len([]rune(f)) >= 6 && strings.IndexFunc(f, unicode.IsLetter) >= 0 && !strings.Contains(zhText, f) {
					out = append(out, f)
				}
			}
		}
	}
	return out
}

func hasHan(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.Is(unicode.Han, r) }) >= 0
}

// TestConvertedPagesSpeakChineseAndEnglish: every console page converted to the catalogues
// renders in Chinese for a browser asking for it (Accept-Language: zh-CN) with no English word
// of the catalogue left, and in English, as before, for a client that asks for nothing.
func TestConvertedPagesSpeakChineseAndEnglish(t *testing.T) {
	h := newHarness(t, 0)
	ada := h.login(adminToken)
	p := h.product("Gift card", 500)
	no := h.paidOrder(p, []string{"CODE-A", "CODE-B"}, 1)
	base := "/console/products/" + itoa(int64(p.ID()))
	job := startedJob(t, ada.upload(p.ID(), "codes.txt", "NEW-CODE-1\nCODE-B\nnot a code!\n"))
	ada.waitDone(job)
	wantStatus(t, ada.post("/console/blocklist", url.Values{"kind": {"email_domain"}, "value": {"mailinator.com"}}), 200)
	wantStatus(t, ada.post(base+"/freeze", url.Values{"reason": {"supplier recall"}}), 200)

	as := func(lang string) []string {
		hdr := []string{"Cookie", ada.cookie}
		if lang != "" {
			hdr = append(hdr, "Accept-Language", lang)
		}
		return hdr
	}
	get := func(target string) func(string) resp {
		return func(lang string) resp { return h.do("GET", target, nil, as(lang)...) }
	}
	post := func(target string, form url.Values) func(string) resp {
		return func(lang string) resp {
			f := url.Values{"csrf": {ada.csrf}}
			for k, v := range form {
				f[k] = v
			}
			hdr := append(as(lang), "Content-Type", "application/x-www-form-urlencoded")
			return h.do("POST", target, strings.NewReader(f.Encode()), hdr...)
		}
	}
	pages := []page{
		{"login", func(lang string) resp {
			if lang == "" {
				return h.do("GET", "/console/login", nil)
			}
			return h.do("GET", "/console/login", nil, "Accept-Language", lang)
		}, 200, "登录", "Log in", false},
		{"home", get("/console"), 200, "概览", "Overview", true},
		{"products", get("/console/products"), 200, "商品", "Products", true},
		{"product", get(base), 200, "", "", true},
		{"new product", get("/console/products/new"), 200, "添加商品", "New product", true},
		{"edit product", get(base + "/edit"), 200, "编辑商品 #" + itoa(int64(p.ID())), "Edit product #" + itoa(int64(p.ID())), true},
		{"product form error", post("/console/products", url.Values{"name": {"X"}, "price": {"a lot"}, "max_per_order": {"1"}}), 400,
			"添加商品", "New product", true},
		{"codes", get(base + "/codes"), 200, "Gift card 的卡密", "Codes of Gift card", true},
		{"import job", get(job), 200, "导入卡密：Gift card", "Import of Gift card", true},
		{"void confirmation", post(base+"/codes/void/confirm", url.Values{"codes": {"CODE-A\n# c\n"}, "reason": {"leak"}}), 200,
			"确认：作废 Gift card 的卡密", "Confirm: void codes of Gift card", true},
		{"void refused", post(base+"/codes/void/confirm", url.Values{"codes": {""}, "reason": {"leak"}}), 400,
			"Gift card 的卡密", "Codes of Gift card", true},
		{"reconcile", get(base + "/reconcile"), 200, "对账：Gift card", "Reconcile Gift card", true},
		{"repair confirmation", get(base + "/repair"), 200, "确认：修复 Gift card 的库存闸门", "Confirm: repair the gate of Gift card", true},
		{"refund confirmation", get("/console/orders/" + no + "/refund"), 200, "确认：退款订单 " + no, "Confirm: refund order " + no, true},
		{"audit", get("/console/audit"), 200, "审计日志", "Audit log", true},
		{"audit error", get("/console/audit?from=yesterday"), 400, "审计日志", "Audit log", true},
		{"settings", get("/console/settings?saved=1"), 200, "设置", "Settings", true},
		{"blocklist", get("/console/blocklist"), 200, "黑名单", "Blocklist", true},
		{"error", get("/console/no-such-page"), 404, "出错了", "Error", true},
	}
	english := englishFragments(t)
	for _, pg := range pages {
		t.Run(pg.name, func(t *testing.T) {
			zh := pg.get("zh-CN,zh;q=0.9,en;q=0.5")
			wantStatus(t, zh, pg.status)
			text := visible(zh.body)
			if !strings.Contains(zh.body, `<html lang="zh-CN">`) || zh.header.Get("Content-Language") != "zh-CN" {
				t.Errorf("not a Chinese page: %s", zh.body)
			}
			if m := h1RE.FindStringSubmatch(zh.body); m == nil || (pg.zh != "" && html.UnescapeString(m[1]) != pg.zh) {
				t.Errorf("Chinese heading %q, want %q", m, pg.zh)
			}
			if pg.loggedIn && (!strings.Contains(text, "商品") || !strings.Contains(text, "审计日志") || !strings.Contains(text, "退出登录")) {
				t.Errorf("no Chinese navigation: %s", text)
			}
			for _, f := range english {
				if strings.Contains(text, f) {
					t.Errorf("the Chinese page shows English %q:\n%s", f, text)
				}
			}
			for _, w := range []string{"Dashboard", "Products", "Orders", "Audit log", "Log out", "Back to", "Cancel", "Save"} {
				if strings.Contains(text, w) {
					t.Errorf("the Chinese page shows %q", w)
				}
			}

			en := pg.get("")
			wantStatus(t, en, pg.status)
			text = visible(en.body)
			if !strings.Contains(en.body, `<html lang="en">`) {
				t.Errorf("not an English page: %s", en.body)
			}
			if m := h1RE.FindStringSubmatch(en.body); m == nil || (pg.en != "" && html.UnescapeString(m[1]) != pg.en) {
				t.Errorf("English heading %q, want %q", m, pg.en)
			}
			if pg.loggedIn && (!strings.Contains(text, "Products") || !strings.Contains(text, "Log out")) {
				t.Errorf("no English navigation: %s", text)
			}
			// The only Chinese on an English page is the language switch's own name.
			if rest := strings.ReplaceAll(text, "中文", ""); hasHan(rest) {
				t.Errorf("the English page shows Chinese:\n%s", text)
			}
		})
	}
}

// TestChineseMessagesOfWrites: what a write says (its notice, its refusal) is in the
// operator's language, the English as before.
func TestChineseMessagesOfWrites(t *testing.T) {
	h := newHarness(t, 0)
	ada := h.login(adminToken)
	p := h.product("Gift card", 500)
	no := h.paidOrder(p, []string{"CODE-A"}, 1)
	base := "/console/products/" + itoa(int64(p.ID()))
	zh := func(target string, form url.Values) resp {
		f := url.Values{"csrf": {ada.csrf}}
		for k, v := range form {
			f[k] = v
		}
		return h.do("POST", target, strings.NewReader(f.Encode()), "Cookie", ada.cookie, "Accept-Language", "zh-CN",
			"Content-Type", "application/x-www-form-urlencoded")
	}
	for _, tc := range []struct {
		name, target string
		form         url.Values
		status       int
		want         string
	}{
		{"freeze without a reason", base + "/freeze", url.Values{"reason": {" "}}, 400, "原因：请说明冻结商品的原因"},
		{"freeze", base + "/freeze", url.Values{"reason": {"recall"}}, 200, "已冻结：商品已下架。"},
		{"unfreeze", base + "/unfreeze", nil, 200, "已解除冻结：商品重新上架销售。"},
		{"a void of an unfrozen product", base + "/codes/void/confirm", url.Values{"codes": {"CODE-Z"}, "reason": {""}}, 400, "原因：必填"},
		{"a bad price", "/console/products", url.Values{"name": {"X"}, "price": {"lots"}, "max_per_order": {"1"}}, 400,
			"价格：必须是以 CNY 计的金额，例如 19.99"},
		{"a bad zone", "/console/settings", url.Values{"time_zone": {"Mars/Olympus"}}, 400, "时区：必须是时区名"},
		{"a repeated block", "/console/blocklist", url.Values{"kind": {"ip"}, "value": {"198.51.100.7"}}, 200, "已添加 ip 198.51.100.7"},
		{"the same block again", "/console/blocklist", url.Values{"kind": {"ip"}, "value": {"198.51.100.7"}}, 409, "黑名单中已有这个条目"},
		{"a refund", "/console/orders/" + no + "/refund", url.Values{"reason": {"asked"}}, 200, "已退款：作废 0 个卡密，回收 1 个。款项是通过店铺前台支付的，由前台退回。"},
		{"a fulfil of a refunded order", "/console/orders/" + no + "/fulfil", nil, 409, "订单当前状态不允许此操作"},
	} {
		r := zh(tc.target, tc.form)
		if r.status != tc.status || !strings.Contains(visible(r.body), tc.want) {
			t.Errorf("%s: %d, want %d with %q:\n%s", tc.name, r.status, tc.status, tc.want, visible(r.body))
		}
	}
	// A role that may not: said in Chinese, with the roles' names.
	vic := h.login(h.operator("vic", domain.RoleViewer))
	r := h.do("GET", base+"/edit", nil, "Cookie", vic.cookie, "Accept-Language", "zh-CN")
	if r.status != 403 || !strings.Contains(visible(r.body), "你的角色（只读）无权执行此操作，需要操作员权限。") {
		t.Errorf("a viewer's edit: %s", r)
	}
}
