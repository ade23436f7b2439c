package mail

import (
	"bytes"
	"embed"
	htmltemplate "html/template"
	"strconv"
	"strings"
	texttemplate "text/template"

	"cardshop/adapters/i18n"
	"cardshop/domain"
)

//go:embed templates
var templateFS embed.FS

// templates are the order mail's two bodies: text/template for the plain part, html/template
// (every value escaped for its context) for the HTML part.
type templates struct {
	text *texttemplate.Template
	html *htmltemplate.Template
}

// parseTemplates reads the embedded templates.
func parseTemplates() (*templates, error) {
	t, err := texttemplate.ParseFS(templateFS, "templates/order.txt")
	if err != nil {
		return nil, err
	}
	h, err := htmltemplate.ParseFS(templateFS, "templates/order.html")
	if err != nil {
		return nil, err
	}
	return &templates{text: t, html: h}, nil
}

// view is what the templates show: the order's values and the texts in the buyer's language.
type view struct {
	Lang     string
	OrderNo  string
	Product  string
	Qty      string
	Amount   string
	PaidAt   string
	Codes    []string
	OrderURL string
	T        map[string]string // the catalogue's texts, by the part of their id after "mail."
}

// textIDs are the catalogue's messages the templates show, without their "mail." prefix; the
// subject, which has a placeholder, is rendered on its own.
var textIDs = []string{"greeting", "intro_codes", "intro_link", "order_no", "product", "qty", "amount",
	"paid_at", "codes", "order_link", "open_order", "keep_private", "auto", "colon"}

// subjectID is the subject's message; {{.OrderNo}} is the order number.
const subjectID = "mail.subject"

// MessageIDs are every catalogue message an order mail uses, for the catalogue's test.
func MessageIDs() []string {
	ids := []string{subjectID}
	for _, id := range textIDs {
		ids = append(ids, "mail."+id)
	}
	return ids
}

// view fills the templates' view of m in language l.
func (ml *Mailer) view(l i18n.Lang, m domain.OrderMail) view {
	v := view{
		Lang: string(l), OrderNo: string(m.OrderNo), Product: m.Product, Qty: strconv.Itoa(m.Qty),
		Amount: m.Amount, Codes: m.Codes, OrderURL: m.OrderURL, T: make(map[string]string, len(textIDs)+1),
	}
	if !m.PaidAt.IsZero() {
		v.PaidAt = m.PaidAt.In(ml.cfg.Location).Format("2006-01-02 15:04:05 MST")
	}
	v.T["subject"] = ml.cat.T(l, subjectID, map[string]any{"OrderNo": string(m.OrderNo)})
	for _, id := range textIDs {
		v.T[id] = ml.cat.T(l, "mail."+id)
	}
	// A label that ends its line ends with the colon alone ("Your codes:").
	v.T["colon_end"] = strings.TrimSpace(v.T["colon"])
	return v
}

// rendered is one mail's subject and bodies.
type rendered struct{ subject, text, html string }

// render writes v's subject, text body and HTML body.
func (t *templates) render(v view) (rendered, error) {
	var tb, hb bytes.Buffer
	if err := t.text.Execute(&tb, v); err != nil {
		return rendered{}, err
	}
	if err := t.html.Execute(&hb, v); err != nil {
		return rendered{}, err
	}
	// A subject is one header line: no line breaks, whatever the catalogue holds.
	subject := strings.Join(strings.Fields(v.T["subject"]), " ")
	return rendered{subject: subject, text: tb.String(), html: hb.String()}, nil
}
