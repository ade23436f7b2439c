package devpay

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"cardshop/domain"
)

// Deliver hands a notification to the shop exactly as if it had arrived at
// /api/payments/dev/notify: nil when the shop accepted it, an error when it refused it or
// could not judge it (for example ErrUnavailable).
type Deliver func(ctx context.Context, in domain.InboundRequest) error

// Page is a page of the pay flow, written as it is: status, content type, body.
type Page struct {
	Status      int
	ContentType string
	Body        []byte
}

// Limits of the signed link's free-text parts.
const (
	maxSubject   = 256
	maxReturnURL = 2048
)

// The parameters of a pay link (and of the confirm form, which adds "choice").
const (
	pOrderNo  = "order_no"
	pRef      = "ref"
	pAmount   = "amount"
	pCurrency = "currency"
	pSubject  = "subject"
	pExpires  = "expires"
	pReturn   = "return"
	pSig      = "sig"
	pChoice   = "choice"
)

var signedParams = []string{pOrderNo, pRef, pAmount, pCurrency, pSubject, pExpires, pReturn}

// link is what a pay link carries, signed.
type link struct {
	OrderNo  domain.OrderNo
	Ref      string
	Amount   domain.Money
	Currency domain.Currency
	Subject  string
	Expires  int64 // unix seconds
	Return   string
}

func (lk link) values() url.Values {
	return url.Values{
		pOrderNo:  {string(lk.OrderNo)},
		pRef:      {lk.Ref},
		pAmount:   {strconv.FormatInt(int64(lk.Amount), 10)},
		pCurrency: {lk.Currency.Code},
		pSubject:  {lk.Subject},
		pExpires:  {strconv.FormatInt(lk.Expires, 10)},
		pReturn:   {lk.Return},
	}
}

func (g *Gateway) pageSig(v url.Values) []byte {
	m := hmac.New(sha256.New, g.pageKey)
	m.Write([]byte(v.Encode())) // keys sorted, every value escaped: one encoding per link
	return m.Sum(nil)
}

// sign returns the link's parameters with their signature.
func (g *Gateway) sign(lk link) url.Values {
	v := lk.values()
	v.Set(pSig, hex.EncodeToString(g.pageSig(v)))
	return v
}

var errBadLink = errors.New("invalid pay link")

// parseLink checks a link's signature and reads it. Every signed parameter and the signature
// must appear exactly once; "choice" is allowed only in the confirm form; nothing else is.
func (g *Gateway) parseLink(in url.Values, confirm bool) (link, error) {
	signed := url.Values{}
	for k, vs := range in {
		if len(vs) != 1 {
			return link{}, errBadLink
		}
		switch k {
		case pSig:
		case pChoice:
			if !confirm {
				return link{}, errBadLink
			}
		default:
			signed[k] = vs
		}
	}
	if len(signed) != len(signedParams) {
		return link{}, errBadLink
	}
	for _, k := range signedParams {
		if _, ok := signed[k]; !ok {
			return link{}, errBadLink
		}
	}
	sig, err := hex.DecodeString(in.Get(pSig))
	if err != nil || !hmac.Equal(sig, g.pageSig(signed)) {
		return link{}, errBadLink
	}
	// Signed by this gateway: what follows only guards against its own mistakes.
	no, err := domain.ParseOrderNo(signed.Get(pOrderNo))
	if err != nil {
		return link{}, errBadLink
	}
	amount, err := strconv.ParseInt(signed.Get(pAmount), 10, 64)
	if err != nil || amount <= 0 {
		return link{}, errBadLink
	}
	cur, err := domain.ParseCurrency(signed.Get(pCurrency))
	if err != nil {
		return link{}, errBadLink
	}
	exp, err := strconv.ParseInt(signed.Get(pExpires), 10, 64)
	if err != nil || exp <= 0 {
		return link{}, errBadLink
	}
	subject, ret := signed.Get(pSubject), signed.Get(pReturn)
	if len(subject) > maxSubject || !utf8.ValidString(subject) || checkReturnURL(ret) != nil ||
		!validID(signed.Get(pRef), "dev_") {
		return link{}, errBadLink
	}
	return link{OrderNo: no, Ref: signed.Get(pRef), Amount: domain.Money(amount), Currency: cur,
		Subject: subject, Expires: exp, Return: ret}, nil
}

// checkReturnURL accepts "" or an absolute http(s) URL in valid UTF-8 without control
// characters (the page shows it as a link: invalid bytes or controls, which url.Parse lets
// through in a fragment, would make the page itself invalid).
func checkReturnURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || len(s) > maxReturnURL || !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 ||
		(u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return domain.Invalid("return_url", "must be an absolute http(s) URL")
	}
	return nil
}

// PayPage renders the pay page of a signed link (the query of GET /dev/pay/{order_no}): 200
// with the "Pay" and "Fail" buttons while the payment is open; 200 with its outcome once it is
// paid or failed; 410 once it expired or was closed; 400 for a link that is not this gateway's
// (forged, altered, incomplete).
func (g *Gateway) PayPage(query url.Values) Page {
	lk, err := g.parseLink(query, false)
	if err != nil {
		return g.invalidPage()
	}
	now := g.now()
	st := stOpen
	g.mu.Lock()
	if rec := g.payments[lk.Ref]; rec != nil {
		st = rec.current(now)
	} else if now.Unix() >= lk.Expires {
		st = stExpired
	}
	g.mu.Unlock()
	v := g.details(lk, now)
	switch st {
	case stExpired:
		return g.expiredPage(v)
	case stPaid:
		v.Title, v.Tone, v.Message = "Already paid", toneOK, "This payment is paid. Nothing more to do here."
		return g.withBackLink(v, lk, http.StatusOK)
	case stFailed:
		v.Title, v.Tone, v.Message = "Payment failed", toneBad, "This payment failed. Nothing was charged; start a new order in the shop to try again."
		return g.withBackLink(v, lk, http.StatusOK)
	default: // open: the payment form below
	}
	v.Title, v.Tone = "Pay for your order", toneNeutral
	v.Form = &formView{Action: string(lk.OrderNo) + "/confirm"}
	for k, vs := range g.sign(lk) {
		v.Form.Fields = append(v.Form.Fields, field{Name: k, Value: vs[0]})
	}
	sortFields(v.Form.Fields)
	return render(http.StatusOK, v)
}

// Confirm handles a press on the pay page (the form of POST /dev/pay/{order_no}/confirm:
// the signed link and choice=pay or choice=fail). On an open payment it records the outcome,
// hands the signed notification to deliver and shows the result: "Paid" with a link back to
// the shop (200), "Payment failed" (200), or a warning when the shop did not accept it (502).
// The same press again resends the same notification; the other press after a final outcome
// changes nothing (409); a press on an expired or closed payment sends nothing (410); a forged
// form is 400.
func (g *Gateway) Confirm(ctx context.Context, form url.Values, deliver Deliver) Page {
	lk, err := g.parseLink(form, true)
	if err != nil {
		return g.invalidPage()
	}
	want := stPaid
	switch form.Get(pChoice) {
	case "pay":
	case "fail":
		want = stFailed
	default:
		return g.invalidPage()
	}
	now := g.now()
	v := g.details(lk, now)

	g.mu.Lock()
	rec := g.payments[lk.Ref]
	if rec == nil { // created before this process started: the signed link is the record
		rec = &payment{orderNo: lk.OrderNo, ref: lk.Ref, amount: lk.Amount, currency: lk.Currency,
			expires: time.Unix(lk.Expires, 0), state: stOpen}
		g.payments[rec.ref] = rec
		if g.byOrder[rec.orderNo] == nil {
			g.byOrder[rec.orderNo] = rec
		}
	}
	if rec.orderNo != lk.OrderNo {
		g.mu.Unlock()
		return g.invalidPage()
	}
	switch st := rec.current(now); {
	case st == stExpired:
		g.mu.Unlock()
		return g.expiredPage(v)
	case st == stOpen:
		rec.state, rec.eventID = want, "evt_"+randomHex(12)
	case st != want:
		g.mu.Unlock()
		v.Tone = toneWarn
		if st == stPaid {
			v.Title, v.Message = "Already paid", "This payment is already paid; the press was ignored."
		} else {
			v.Title, v.Message = "Payment already failed", "This payment already failed; the press was ignored. Start a new order in the shop to try again."
		}
		return g.withBackLink(v, lk, http.StatusConflict)
	}
	n := notice{EventID: rec.eventID, OrderNo: string(rec.orderNo), ProviderRef: rec.ref,
		Outcome: "paid", Amount: int64(lk.Amount), Currency: lk.Currency.Code}
	if want == stFailed {
		n.Outcome, n.Reason = "failed", "declined on the dev pay page"
	}
	g.mu.Unlock()

	if deliver == nil {
		err = errors.New("no delivery configured")
	} else {
		err = deliver(ctx, g.notification(n, now))
	}
	if err != nil {
		what := "paid"
		if want == stFailed {
			what = "failed"
		}
		v.Title, v.Tone = "The shop did not accept the notification", toneWarn
		v.Message = fmt.Sprintf("The dev provider recorded the payment as %s, but the shop could not take the notification (its log says why). Press the same button again to resend it; the shop also learns of it by querying the provider.", what)
		return g.withBackLink(v, lk, http.StatusBadGateway)
	}
	if want == stPaid {
		v.Title, v.Tone, v.Message = "Paid", toneOK, "The shop accepted the payment. Your codes are on the order."
	} else {
		v.Title, v.Tone, v.Message = "Payment failed", toneBad, "The shop was told the payment failed. Nothing was charged."
	}
	return g.withBackLink(v, lk, http.StatusOK)
}

// details fills the parts of every page that show the payment.
func (g *Gateway) details(lk link, now time.Time) view {
	exp := time.Unix(lk.Expires, 0).UTC()
	return view{
		Subject:   lk.Subject,
		Amount:    lk.Currency.Format(lk.Amount),
		Currency:  lk.Currency.Code,
		OrderNo:   string(lk.OrderNo),
		Ref:       lk.Ref,
		Expires:   exp.Format("2006-01-02 15:04:05 UTC"),
		ExpiresIn: untilText(exp.Sub(now)),
		Details:   true,
		Expiry:    true,
	}
}

// untilText says how long is left, roughly.
func untilText(d time.Duration) string {
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return "in less than a minute"
	case d < 2*time.Hour:
		return fmt.Sprintf("in %d min", int(d/time.Minute))
	default:
		return fmt.Sprintf("in %d h", int(d/time.Hour))
	}
}

// withBackLink finishes a page about a settled payment: a link back instead of the expiry.
func (g *Gateway) withBackLink(v view, lk link, status int) Page {
	v.Expiry = false
	if lk.Return != "" {
		v.Link, v.LinkText = lk.Return, "Back to the shop"
	} else {
		v.Link, v.LinkText = g.base+"/api/orders/"+string(lk.OrderNo), "Back to the shop (the order, as JSON)"
	}
	return render(status, v)
}

func (g *Gateway) expiredPage(v view) Page {
	v.Title, v.Tone = "This payment has expired", toneWarn
	v.Message = "The time to pay this order is over, or the shop closed the payment. Nothing was charged; start a new order in the shop."
	return render(http.StatusGone, v)
}

func (g *Gateway) invalidPage() Page {
	return render(http.StatusBadRequest, view{Title: "This payment link is not valid", Tone: toneBad,
		Message: "It was altered or is incomplete, or it comes from another cardshop instance or from before a restart. Start again from the shop."})
}

// Tones of a page's banner.
const (
	toneNeutral = "neutral"
	toneOK      = "ok"
	toneBad     = "bad"
	toneWarn    = "warn"
)

type field struct{ Name, Value string }

type formView struct {
	Action string
	Fields []field
}

type view struct {
	Title, Tone, Message string
	Mark                 string
	Details, Expiry      bool
	Subject, Amount      string
	Currency, OrderNo    string
	Ref                  string
	Expires, ExpiresIn   string
	Form                 *formView
	Link, LinkText       string
}

func sortFields(fs []field) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].Name < fs[j-1].Name; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

var marks = map[string]string{toneOK: "✓", toneBad: "✕", toneWarn: "!"}

func render(status int, v view) Page {
	if v.Form == nil {
		v.Mark = marks[v.Tone]
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, v); err != nil {
		// The template and its data are the package's own: an error here is a bug.
		return Page{Status: http.StatusInternalServerError, ContentType: "text/plain; charset=utf-8",
			Body: []byte("dev pay page could not be rendered")}
	}
	return Page{Status: status, ContentType: "text/html; charset=utf-8", Body: b.Bytes()}
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<meta name="referrer" content="no-referrer">
<title>{{.Title}} · cardshop dev payments</title>
<style>
*{box-sizing:border-box}
body{margin:0;min-height:100vh;background:#f3f4f7;color:#1d2330;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Helvetica Neue",Arial,sans-serif;display:flex;align-items:flex-start;justify-content:center;padding:48px 16px}
main{width:100%;max-width:440px;background:#fff;border:1px solid #e2e5eb;border-radius:12px;box-shadow:0 1px 2px rgba(16,24,40,.04),0 8px 24px rgba(16,24,40,.06);overflow:hidden}
header{display:flex;align-items:center;justify-content:space-between;padding:14px 24px;border-bottom:1px solid #eceef2;font-size:13px;color:#5b6475}
header b{color:#1d2330;letter-spacing:.01em}
.badge{background:#fff4d6;color:#8a5a00;border:1px solid #f3d58a;border-radius:999px;padding:1px 9px;font-size:11px;font-weight:600;letter-spacing:.06em;text-transform:uppercase}
.body{padding:24px}
h1{margin:0 0 4px;font-size:19px;font-weight:650}
.tone-ok h1{color:#0f7a3d}.tone-bad h1{color:#b42318}.tone-warn h1{color:#8a5a00}
.mark{width:40px;height:40px;border-radius:50%;display:flex;align-items:center;justify-content:center;font-size:21px;font-weight:700;margin:0 0 14px}
.tone-ok .mark{background:#e3f5ea;color:#0f7a3d}.tone-bad .mark{background:#fdecea;color:#b42318}.tone-warn .mark{background:#fff4d6;color:#8a5a00}
.body>:last-child{margin-bottom:0}
.msg{margin:0 0 16px;color:#4a5263}
.subject{margin:0;color:#4a5263;overflow-wrap:anywhere}
.amount{margin:6px 0 20px;font-size:34px;font-weight:700;letter-spacing:-.01em;font-variant-numeric:tabular-nums}
.amount small{font-size:15px;font-weight:600;color:#5b6475;margin-left:6px;letter-spacing:.04em}
dl{display:grid;grid-template-columns:auto 1fr;gap:6px 16px;margin:0 0 22px;padding:14px 16px;background:#f8f9fb;border:1px solid #eceef2;border-radius:8px;font-size:13px}
dt{color:#6b7383}dd{margin:0;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;overflow-wrap:anywhere}
dd span{font-family:system-ui,sans-serif;color:#6b7383}
.buttons{display:flex;gap:12px}
button{flex:1;font:inherit;font-weight:600;padding:11px 0;border-radius:8px;cursor:pointer}
.pay{background:#1f6feb;border:1px solid #1f6feb;color:#fff}.pay:hover{background:#1a5fd0}
.fail{background:#fff;border:1px solid #e0b4b0;color:#b42318}.fail:hover{background:#fff5f4}
a.back{display:inline-block;margin-top:2px;color:#1f6feb;font-weight:600;text-decoration:none}a.back:hover{text-decoration:underline}
footer{padding:12px 24px;border-top:1px solid #eceef2;font-size:12px;color:#7a8292;background:#fbfbfc}
code{font-size:11.5px}
</style>
</head>
<body>
<main class="tone-{{.Tone}}">
<header><b>cardshop · dev payments</b><span class="badge">Test mode</span></header>
<div class="body">
{{if .Mark}}<div class="mark" aria-hidden="true">{{.Mark}}</div>{{end}}
<h1>{{.Title}}</h1>
{{if .Message}}<p class="msg">{{.Message}}</p>{{end}}
{{if .Details}}
{{if .Subject}}<p class="subject">{{.Subject}}</p>{{end}}
<p class="amount" id="amount">{{.Amount}}<small>{{.Currency}}</small></p>
<dl>
<dt>Order</dt><dd id="order_no">{{.OrderNo}}</dd>
<dt>Payment</dt><dd>{{.Ref}}</dd>
{{if .Expiry}}<dt>Expires</dt><dd>{{.Expires}} <span>({{.ExpiresIn}})</span></dd>{{end}}
</dl>
{{end}}
{{with .Form}}<form method="post" action="{{.Action}}">
{{range .Fields}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{end}}<div class="buttons"><button class="pay" type="submit" name="choice" value="pay">Pay</button><button class="fail" type="submit" name="choice" value="fail">Fail</button></div>
</form>{{end}}
{{if .Link}}<a class="back" href="{{.Link}}">{{.LinkText}} →</a>{{end}}
</div>
<footer>Nothing is charged. This is cardshop's built-in provider, enabled with <code>CARDSHOP_DEV_PAYMENTS=true</code>.</footer>
</main>
</body>
</html>
`))
