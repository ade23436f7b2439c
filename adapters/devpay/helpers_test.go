package devpay

import (
	"context"
	"encoding/xml"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

const (
	testSecret = "dev-secret-0123456789abcdef"
	testBase   = "http://127.0.0.1:8080"
	testOrder  = domain.OrderNo("2503011200001234123456789012")
)

var (
	cny = domain.Currency{Code: "CNY", Exponent: 2}
	jpy = domain.Currency{Code: "JPY", Exponent: 0}
	t0  = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
)

// clock is a settable clock for the gateway.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestGateway(t testing.TB, secret string) (*Gateway, *clock) {
	t.Helper()
	c := &clock{t: t0}
	g, err := New(Config{Secret: secret, BaseURL: testBase + "/", Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

func request(no domain.OrderNo, amount domain.Money, cur domain.Currency) domain.PaymentRequest {
	return domain.PaymentRequest{OrderNo: no, Amount: amount, Currency: cur, Subject: "Steam card 50 × 2",
		ExpiresAt: t0.Add(15 * time.Minute), ReturnURL: "https://shop.example/orders/" + string(no)}
}

// create creates a payment and returns it with its pay link's query.
func create(t testing.TB, g *Gateway, r domain.PaymentRequest) (domain.PaymentCreated, url.Values) {
	t.Helper()
	pc, err := g.Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	prefix := testBase + "/dev/pay/" + string(r.OrderNo) + "?"
	if !strings.HasPrefix(pc.PayURL, prefix) {
		t.Fatalf("PayURL %q does not start with %q", pc.PayURL, prefix)
	}
	q, err := url.ParseQuery(strings.TrimPrefix(pc.PayURL, prefix))
	if err != nil {
		t.Fatal(err)
	}
	return pc, q
}

// recorder is a deliver that keeps what it was handed and answers err (nil: accepted).
type recorder struct {
	mu  sync.Mutex
	got []domain.InboundRequest
	err error
}

func (r *recorder) deliver(_ context.Context, in domain.InboundRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, in)
	return r.err
}

func (r *recorder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.got) }

func accepting() *recorder {
	return &recorder{}
}

// withChoice is the form a press on the page posts: the hidden fields and the button.
func withChoice(page page, choice string) url.Values {
	form := url.Values{}
	for k, v := range page.hidden {
		form.Set(k, v)
	}
	form.Set("choice", choice)
	return form
}

// page is what a test reads off a rendered page.
type page struct {
	title, h1, amount, orderNo string
	text                       string // all visible text, spaces collapsed
	formMethod, formAction     string
	hidden                     map[string]string
	buttons                    map[string]string // value of choice → label
	links                      []string
}

// parsePage reads an HTML page with encoding/xml's lenient HTML mode: a tokenizer, no browser.
func parsePage(t testing.TB, body []byte) page {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(string(body)))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	p := page{hidden: map[string]string{}, buttons: map[string]string{}}
	var stack, ids []string // the open elements' names and ids
	var text, amount []string
	var button string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("page does not tokenize: %v\n%s", err, body)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range tk.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch tk.Name.Local {
			case "form":
				p.formMethod, p.formAction = attr["method"], attr["action"]
			case "input":
				if attr["type"] == "hidden" {
					p.hidden[attr["name"]] = attr["value"]
				}
				continue // void element: no end tag
			case "meta":
				continue
			case "button":
				button = attr["value"]
				if attr["name"] != "choice" || attr["type"] != "submit" {
					t.Errorf("button %v is not a submit of choice", attr)
				}
			case "a":
				p.links = append(p.links, attr["href"])
			}
			stack = append(stack, tk.Name.Local)
			ids = append(ids, attr["id"])
		case xml.EndElement:
			if len(stack) > 0 {
				stack, ids = stack[:len(stack)-1], ids[:len(ids)-1]
			}
			if tk.Name.Local == "button" {
				button = ""
			}
		case xml.CharData:
			s := string(tk)
			if len(stack) == 0 {
				continue
			}
			switch stack[len(stack)-1] {
			case "style":
				continue
			case "title":
				p.title += s
			case "h1":
				p.h1 += s
			case "button":
				p.buttons[button] += s
			}
			for _, id := range ids {
				switch id {
				case "amount":
					amount = append(amount, strings.Fields(s)...)
				case "order_no":
					p.orderNo += s
				}
			}
			text = append(text, strings.Fields(s)...)
		}
	}
	p.amount = strings.Join(amount, " ")
	p.text = strings.Join(text, " ")
	return p
}
