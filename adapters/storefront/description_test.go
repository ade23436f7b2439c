package storefront_test

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"cardshop/application"
	"cardshop/domain"
)

var excerptRE = regexp.MustCompile(`<span class="excerpt">([^<]*)</span>`)

// TestDescriptionOnThePages: the product page shows a description whole, in paragraphs at
// blank lines with a line break between lines, under a heading in the page's language; the
// catalogue card shows its first line, cut with "…" when long (Chinese characters count
// double, so an excerpt is about as long on a phone in either language; words are not cut in
// the middle); a product without
// one shows neither. A change of the description is on the pages after the next refresh.
func TestDescriptionOnThePages(t *testing.T) {
	h := newHarness(t)
	zhLong := strings.Repeat("这是一张可以在官方商城兑换的礼品卡", 5) + "\n第二行"
	enLong := strings.Repeat("A gift card for the official store, ", 5) + "\nsecond line"
	short := h.product(application.NewProduct{Name: "Short", Price: 100, Description: "\n  Redeem in the app.\nOne code per order.\n\n\nValid for a year."}, 1)
	zh := h.product(application.NewProduct{Name: "中文", Price: 100, Description: zhLong}, 1)
	en := h.product(application.NewProduct{Name: "English", Price: 100, Description: enLong}, 1)
	plain := h.product(application.NewProduct{Name: "Plain", Price: 100}, 1)

	for lang, heading := range map[string]string{"en": "About this product", "zh-CN": "商品说明"} {
		b := h.browser(lang)
		r := b.get(path(short))
		wantContains(t, r, heading, "<p>Redeem in the app.<br>One code per order.</p>", "<p>Valid for a year.</p>")
		if r := b.get(path(plain)); strings.Contains(r.body, heading) || strings.Contains(r.body, `class="description"`) {
			t.Errorf("%s: a product without a description shows one: %s", lang, r.body)
		}
		cat := b.get("/")
		got := map[string]string{}
		for _, m := range excerptRE.FindAllStringSubmatch(cat.body, -1) {
			got[m[1]] = lang
		}
		if len(got) != 3 {
			t.Fatalf("%s: excerpts %q, want three (none for the product without a description)", lang, got)
		}
		if _, ok := got["Redeem in the app."]; !ok {
			t.Errorf("%s: the short description's first line is not the excerpt: %q", lang, got)
		}
		for e := range got {
			switch {
			case strings.HasPrefix(e, "这是"):
				// 90 columns: 45 Chinese characters, then "…".
				if !strings.HasSuffix(e, "…") || utf8.RuneCountInString(e) != 46 || !strings.HasPrefix(zhLong, strings.TrimSuffix(e, "…")) {
					t.Errorf("%s: Chinese excerpt %q", lang, e)
				}
			case strings.HasPrefix(e, "A gift"):
				// Cut at a word's end, near 90 columns.
				cut := strings.TrimSuffix(e, "…")
				if !strings.HasSuffix(e, "…") || utf8.RuneCountInString(e) > 91 || utf8.RuneCountInString(e) < 70 ||
					!strings.HasPrefix(enLong, cut+" ") {
					t.Errorf("%s: English excerpt %q", lang, e)
				}
			}
		}
		if strings.Contains(cat.body, "第二行") || strings.Contains(cat.body, "second line") {
			t.Errorf("%s: the catalogue shows more than the first line", lang)
		}
	}
	b := h.browser("en")
	wantContains(t, b.get(path(zh)), "<p>"+strings.Repeat("这是一张可以在官方商城兑换的礼品卡", 5)+"<br>第二行</p>")

	desc := "Now described."
	if _, err := h.shop.Catalogue.UpdateProduct(t.Context(), en.ID(), application.ProductPatch{Description: &desc}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	wantContains(t, b.get(path(en)), "<p>Now described.</p>")
	wantContains(t, b.get("/"), `<span class="excerpt">Now described.</span>`)
}

// TestCountdownDaysInThePagesLanguage: from a day on, the countdown's days carry the suffix of
// the page's language, on the page and for the script (data-day-suffix).
func TestCountdownDaysInThePagesLanguage(t *testing.T) {
	h := newHarness(t)
	p := h.product(application.NewProduct{Name: "Drop", Price: 100,
		Sale: domain.SaleRules{StartsAt: start.Add(2*24*time.Hour + time.Hour + 2*time.Minute + 3*time.Second)}}, 1)
	wantContains(t, h.browser("en").get(path(p)), `data-day-suffix="d"`, "2d 1:02:03")
	wantContains(t, h.browser("zh-CN").get(path(p)), `data-day-suffix="天"`, "2天 1:02:03")
}
