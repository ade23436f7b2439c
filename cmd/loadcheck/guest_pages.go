package main

import (
	"html"
	"net/url"
	"regexp"
	"strings"
)

// What the guest-checkout scenario (guest.go) reads of the shop's pages, as a browser would:
// the forms it posts and the values the confirmation and order pages show. The pages are the
// service's own html/template output, so a few patterns read them without an HTML parser.

// pageForm is one form of a page: where it posts and what a browser would send as it is.
type pageForm struct {
	action string
	fields url.Values
	// open are the fields the buyer fills in (visible inputs, radio groups): the walk sets its
	// own values there, and sends every hidden field as the page gave it.
	open map[string]bool
}

var (
	formRe   = regexp.MustCompile(`(?is)<form\b([^>]*)>(.*?)</form>`)
	inputRe  = regexp.MustCompile(`(?is)<input\b([^>]*)>`)
	attrRe   = regexp.MustCompile(`(?is)([a-z][a-z0-9-]*)(?:\s*=\s*"([^"]*)")?`)
	orderRe  = regexp.MustCompile(`(?is)<dl class="summary">.*?<code>([^<]+)</code>`)
	secretRe = regexp.MustCompile(`(?is)class="secret-value">\s*<code>([^<]+)</code>`)
	codesRe  = regexp.MustCompile(`(?is)<section class="codes">(.*?)</section>`)
	codeRe   = regexp.MustCompile(`(?is)<code id="code-\d+">([^<]*)</code>`)
)

// attrs reads a tag's attributes (a boolean attribute has the value "").
func attrs(tag string) map[string]string {
	out := map[string]string{}
	for _, m := range attrRe.FindAllStringSubmatch(tag, -1) {
		out[strings.ToLower(m[1])] = html.UnescapeString(m[2])
	}
	return out
}

// parseForms reads every form of a page: its action and the fields a browser sends (radio
// buttons and checkboxes only when checked).
func parseForms(page string) []pageForm {
	var out []pageForm
	for _, m := range formRe.FindAllStringSubmatch(page, -1) {
		f := pageForm{action: attrs(m[1])["action"], fields: url.Values{}, open: map[string]bool{}}
		for _, in := range inputRe.FindAllStringSubmatch(m[2], -1) {
			a := attrs(in[1])
			name, typ := a["name"], strings.ToLower(a["type"])
			if name == "" {
				continue
			}
			if typ != "hidden" {
				f.open[name] = true
			}
			_, checked := a["checked"]
			if (typ == "radio" || typ == "checkbox") && !checked {
				continue
			}
			f.fields.Add(name, a["value"])
		}
		out = append(out, f)
	}
	return out
}

// keyForm is the form of a page that places an order: the first form with an idempotency key
// field (the review page's, or a product page's that places the order at once).
func keyForm(page string) (pageForm, bool) {
	for _, f := range parseForms(page) {
		if _, ok := f.fields["key"]; ok {
			return f, true
		}
	}
	return pageForm{}, false
}

// productForm is the product page's order form: the form that places the order, or else the
// first form posting to /checkout/… (the review step's, which carries no key: the page is the
// same for every buyer).
func productForm(page string) (pageForm, bool) {
	if f, ok := keyForm(page); ok {
		return f, true
	}
	for _, f := range parseForms(page) {
		if f.action == "/checkout" || strings.HasPrefix(f.action, "/checkout/") {
			return f, true
		}
	}
	return pageForm{}, false
}

// fill sets the buyer's values in the fields the buyer fills in; hidden fields keep the
// page's values.
func (f pageForm) fill(values map[string]string) url.Values {
	out := url.Values{}
	for k, vs := range f.fields {
		out[k] = append([]string(nil), vs...)
	}
	for k, v := range values {
		if f.open[k] {
			out.Set(k, v)
		}
	}
	return out
}

// confirmation reads the order number (.summary code) and the access secret (.secret-value
// code) of a confirmation page; ok is false on any other page.
func confirmation(page string) (no, secret string, ok bool) {
	o, s := orderRe.FindStringSubmatch(page), secretRe.FindStringSubmatch(page)
	if o == nil || s == nil {
		return "", "", false
	}
	return strings.TrimSpace(html.UnescapeString(o[1])), strings.TrimSpace(html.UnescapeString(s[1])), true
}

// pageCodes reads the codes an order page shows (.codes), in their order.
func pageCodes(page string) []string {
	sec := codesRe.FindStringSubmatch(page)
	if sec == nil {
		return nil
	}
	var out []string
	for _, m := range codeRe.FindAllStringSubmatch(sec[1], -1) {
		out = append(out, strings.TrimSpace(html.UnescapeString(m[1])))
	}
	return out
}

var (
	mainRe = regexp.MustCompile(`(?is)<main\b[^>]*>(.*?)</main>`)
	tagRe  = regexp.MustCompile(`(?s)<[^>]*>`)
)

// pageText is what a page says, for a failure's detail: the text of its <main> (of the whole
// answer when it has none), without tags, on one line.
func pageText(page string) string {
	if m := mainRe.FindStringSubmatch(page); m != nil {
		page = m[1]
	}
	return strings.Join(strings.Fields(html.UnescapeString(tagRe.ReplaceAllString(page, " "))), " ")
}

// csrfOf is the CSRF token of the page's form posting to an action ending in suffix ("/pay").
func csrfOf(page, suffix string) string {
	for _, f := range parseForms(page) {
		if strings.HasSuffix(f.action, suffix) {
			return f.fields.Get("csrf")
		}
	}
	return ""
}
