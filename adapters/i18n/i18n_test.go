package i18n_test

import (
	"testing"
	"testing/fstest"

	"cardshop/adapters/i18n"
)

func TestEveryMessageExistsInEveryLanguage(t *testing.T) {
	c, err := i18n.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range i18n.Langs {
		for _, b := range i18n.Langs {
			for _, id := range c.IDs(a) {
				if !c.Has(b, id) {
					t.Errorf("message %q is in %s but not in %s", id, a, b)
				}
			}
		}
	}
	if len(c.IDs(i18n.Chinese)) == 0 {
		t.Fatal("no messages loaded")
	}
}

func TestTranslates(t *testing.T) {
	c, err := i18n.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.T(i18n.Chinese, "common.shop_name"); got != "卡密商店" {
		t.Errorf("zh-CN: %q", got)
	}
	if got := c.T(i18n.English, "common.shop_name"); got != "Card shop" {
		t.Errorf("en: %q", got)
	}
	if got := c.T(i18n.English, "no.such.id"); got != "no.such.id" {
		t.Errorf("missing id: %q", got)
	}
}

func TestNegotiate(t *testing.T) {
	cases := []struct {
		choice, accept string
		want           i18n.Lang
	}{
		{"", "zh-CN,zh;q=0.9,en;q=0.8", i18n.Chinese},
		{"", "en-US,en;q=0.9", i18n.English},
		{"", "zh-TW", i18n.Chinese},
		{"", "fr-FR", i18n.English}, // fallback
		{"", "", i18n.English},
		{"", "garbage;;;", i18n.English},
		{"en", "zh-CN", i18n.English}, // the switch wins
		{"zh-CN", "en-US", i18n.Chinese},
		{"xx", "zh-CN", i18n.Chinese}, // an unknown choice is ignored
	}
	for _, tc := range cases {
		if got := i18n.Negotiate(tc.choice, tc.accept, i18n.English); got != tc.want {
			t.Errorf("Negotiate(%q, %q) = %s, want %s", tc.choice, tc.accept, got, tc.want)
		}
	}
}

func TestLoadRefusesAnIDDefinedTwice(t *testing.T) {
	fsys := fstest.MapFS{
		"locales/zh-CN/a.json": {Data: []byte(`{"x": "一"}`)},
		"locales/zh-CN/b.json": {Data: []byte(`{"x": "二"}`)},
		"locales/en/a.json":    {Data: []byte(`{"x": "one"}`)},
	}
	if _, err := i18n.LoadFS(fsys); err == nil {
		t.Fatal("a message defined in two files was accepted")
	}
}

func TestPlural(t *testing.T) {
	fsys := fstest.MapFS{
		"locales/zh-CN/a.json": {Data: []byte(`{"n": {"other": "{{.Count}} 个"}}`)},
		"locales/en/a.json":    {Data: []byte(`{"n": {"one": "{{.Count}} code", "other": "{{.Count}} codes"}}`)},
	}
	c, err := i18n.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		l    i18n.Lang
		n    int
		want string
	}{{i18n.English, 1, "1 code"}, {i18n.English, 2, "2 codes"}, {i18n.Chinese, 2, "2 个"}} {
		if got := c.N(tc.l, "n", tc.n); got != tc.want {
			t.Errorf("N(%s, %d) = %q, want %q", tc.l, tc.n, got, tc.want)
		}
	}
}
