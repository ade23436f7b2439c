// Package i18n holds the buyer- and owner-facing texts of cardshop in Simplified Chinese and
// English, as message catalogues (github.com/nicksnyder/go-i18n), and picks a visitor's
// language. Every text a page or an e-mail shows comes from here, never from a template's code.
//
// The catalogues are JSON files under locales/<language>/, one file per area (storefront.json,
// mail.json, …), embedded in the binary. A message id exists in every language: the package's
// test checks it, so a page cannot show a raw id in one language only.
package i18n

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// Lang is a language the shop speaks: a BCP 47 tag.
type Lang string

// The languages of the catalogues; Chinese first (the shop's home market).
const (
	Chinese Lang = "zh-CN"
	English Lang = "en"
)

// Langs are the catalogues' languages in the order a language switch shows them.
var Langs = []Lang{Chinese, English}

var matcher = language.NewMatcher([]language.Tag{language.SimplifiedChinese, language.English})

// Parse returns the catalogue language s names ("zh-CN", "zh", "en", "en-GB", any case), and
// false for anything else.
func Parse(s string) (Lang, bool) {
	t, err := language.Parse(strings.TrimSpace(s))
	if err != nil || s == "" {
		return "", false
	}
	switch base, _ := t.Base(); base.String() {
	case "zh":
		// Traditional Chinese readers get Simplified, the only Chinese we have.
		return Chinese, true
	case "en":
		return English, true
	}
	return "", false
}

// Negotiate picks the language of a request: the visitor's own choice (the language switch's
// cookie) when it names a catalogue language, else the best match of the Accept-Language
// header, else fallback.
func Negotiate(choice, acceptLanguage string, fallback Lang) Lang {
	if l, ok := Parse(choice); ok {
		return l
	}
	if acceptLanguage == "" {
		return fallback
	}
	tags, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil || len(tags) == 0 {
		return fallback
	}
	_, i, conf := matcher.Match(tags...)
	if conf == language.No {
		return fallback
	}
	return Langs[i]
}

//go:embed locales
var locales embed.FS

// Catalogue is the loaded message catalogues. It is safe for concurrent use.
type Catalogue struct {
	localizers map[Lang]*goi18n.Localizer
	ids        map[Lang]map[string]bool
}

// Load reads the embedded catalogues.
func Load() (*Catalogue, error) { return load(locales) }

func load(fsys fs.FS) (*Catalogue, error) {
	bundle := goi18n.NewBundle(language.SimplifiedChinese)
	bundle.RegisterUnmarshalFunc("json", json.Unmarshal)
	c := &Catalogue{localizers: map[Lang]*goi18n.Localizer{}, ids: map[Lang]map[string]bool{}}
	for _, l := range Langs {
		dir := path.Join("locales", string(l))
		files, err := fs.ReadDir(fsys, dir)
		if err != nil {
			return nil, fmt.Errorf("i18n: catalogue %s: %w", l, err)
		}
		c.ids[l] = map[string]bool{}
		for _, f := range files {
			if f.IsDir() || path.Ext(f.Name()) != ".json" {
				continue
			}
			b, err := fs.ReadFile(fsys, path.Join(dir, f.Name()))
			if err != nil {
				return nil, fmt.Errorf("i18n: %w", err)
			}
			// go-i18n reads the language from the file's name: give it the directory's.
			mf, err := bundle.ParseMessageFileBytes(b, string(l)+".json")
			if err != nil {
				return nil, fmt.Errorf("i18n: %s/%s: %w", l, f.Name(), err)
			}
			for _, m := range mf.Messages {
				if c.ids[l][m.ID] {
					return nil, fmt.Errorf("i18n: %s/%s: message %q is defined twice", l, f.Name(), m.ID)
				}
				c.ids[l][m.ID] = true
			}
		}
		c.localizers[l] = goi18n.NewLocalizer(bundle, string(l))
	}
	return c, nil
}

// T returns message id in language l, its {{.Name}} placeholders filled from data (one map, or
// none). An id missing from the catalogues returns the id itself, so a page still renders; the
// package's tests and each user's own test keep that from happening.
func (c *Catalogue) T(l Lang, id string, data ...map[string]any) string {
	return c.localize(l, id, nil, data)
}

// N is T for a message with plural forms ("one", "other"), chosen by count; {{.Count}} in
// the message is count.
func (c *Catalogue) N(l Lang, id string, count int, data ...map[string]any) string {
	return c.localize(l, id, count, data)
}

func (c *Catalogue) localize(l Lang, id string, count any, data []map[string]any) string {
	loc, ok := c.localizers[l]
	if !ok {
		loc = c.localizers[Chinese]
	}
	var td map[string]any
	if len(data) > 0 {
		td = data[0]
	}
	if count != nil {
		if td == nil {
			td = map[string]any{}
		} else {
			cp := make(map[string]any, len(td)+1)
			for k, v := range td {
				cp[k] = v
			}
			td = cp
		}
		td["Count"] = count
	}
	s, err := loc.Localize(&goi18n.LocalizeConfig{MessageID: id, TemplateData: td, PluralCount: count})
	if err != nil {
		return id
	}
	return s
}

// Has reports whether message id exists in language l.
func (c *Catalogue) Has(l Lang, id string) bool { return c.ids[l][id] }

// IDs lists the message ids of language l, sorted.
func (c *Catalogue) IDs(l Lang) []string {
	out := make([]string, 0, len(c.ids[l]))
	for id := range c.ids[l] {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Name is a language's own name, for the language switch ("中文", "English").
func Name(l Lang) string {
	if l == English {
		return "English"
	}
	return "中文"
}

// Args is a message's data from a template's or a caller's arguments: "Name", value, … pairs,
// or one map as it is. An odd last argument or a name that is no string is left out.
func Args(kv []any) map[string]any {
	if len(kv) == 1 {
		if m, ok := kv[0].(map[string]any); ok {
			return m
		}
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			m[k] = kv[i+1]
		}
	}
	return m
}
