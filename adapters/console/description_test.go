package console_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// TestProductFormDescription: the form's description (as a browser sends a textarea: CRLF
// line ends) is stored as plain text, shown escaped on the product page and in the edit form,
// emptied by saving the form without it; a refused one is said in the operator's language,
// shows the form again and changes nothing; the audit log keeps the first 200 characters typed.
func TestProductFormDescription(t *testing.T) {
	h := newHarness(t, 0)
	b := h.login(h.operator("otto", domain.RoleOperator))
	const markup = `<script>alert(1)</script> "><img src=x onerror=alert(1)>`
	form := url.Values{"name": {"Steam 50"}, "price": {"50.00"}, "max_per_order": {"3"},
		"description": {"充值卡\r\n" + markup + "\r\n" + strings.Repeat("长", 300)}}
	wantStatus(t, b.post("/console/products", form), fiber.StatusSeeOther)
	ps, _ := h.shop.Catalogue.Products(context.Background())
	if len(ps) != 1 {
		t.Fatalf("%d products", len(ps))
	}
	p := ps[0]
	want := "充值卡\n" + markup + "\n" + strings.Repeat("长", 300)
	if p.Description() != want {
		t.Fatalf("stored description %q, want %q", p.Description(), want)
	}
	pp := "/console/products/" + itoa(int64(p.ID()))
	escaped := "&lt;script&gt;alert(1)&lt;/script&gt; &#34;&gt;&lt;img src=x onerror=alert(1)&gt;"
	for _, page := range []string{pp, pp + "/edit"} {
		r := b.get(page)
		wantStatus(t, r, 200)
		if strings.Contains(r.body, "<script>alert") || strings.Contains(r.body, "<img src=x") || !strings.Contains(r.body, escaped) {
			t.Fatalf("%s does not show the description escaped: %s", page, r.body)
		}
	}
	var params map[string]string
	if err := json.Unmarshal([]byte(h.audit()[0].Params), &params); err != nil {
		t.Fatal(err)
	}
	if d := params["description"]; !strings.HasPrefix(form.Get("description"), strings.TrimSuffix(d, "…")) || len([]rune(d)) != 201 || !strings.HasSuffix(d, "…") {
		t.Fatalf("audit description %q, want the first 200 characters and …", d)
	}

	// Refused: a control character, and one character too many; said in Chinese.
	for _, tc := range []struct{ bad, want string }{
		{"bell\a", "描述：除换行和制表符外不能包含控制字符"},
		{strings.Repeat("长", 2001), "描述：不能超过 2000 个字符"},
	} {
		f := url.Values{"csrf": {b.csrf}}
		for k, v := range form {
			f[k] = v
		}
		f.Set("description", tc.bad)
		r := h.do("POST", pp, strings.NewReader(f.Encode()), "Cookie", b.cookie, "Accept-Language", "zh-CN",
			"Content-Type", "application/x-www-form-urlencoded")
		if r.status != 400 || !strings.Contains(visible(r.body), tc.want) {
			t.Errorf("description %.10q: %d, want 400 with %q:\n%s", tc.bad, r.status, tc.want, visible(r.body))
		}
	}
	if got := h.reload(p.ID()).Description(); got != want {
		t.Fatalf("refused forms changed the description to %q", got)
	}

	// The form sends every field: an empty description removes it.
	form.Set("description", "  ")
	wantStatus(t, b.post(pp, form), fiber.StatusSeeOther)
	if got := h.reload(p.ID()).Description(); got != "" {
		t.Fatalf("after saving an empty description: %q", got)
	}
}
