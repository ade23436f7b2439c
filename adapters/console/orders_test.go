package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
	"cardshop/adapters/paysig"
	"cardshop/domain"
)

// placeOrder places an order of qty units of p for buyer through the buyer API and, with pay,
// pays it with a signed callback; it returns the order's number.
func (h *harness) placeOrder(p domain.Product, buyer, key string, qty int, pay bool) string {
	h.t.Helper()
	tok, _, err := h.tokens.Issue(domain.BuyerID(buyer), h.clock.Now(), time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	r := h.do("POST", "/api/order", strings.NewReader(fmt.Sprintf(`{"product_id":%d,"qty":%d}`, p.ID(), qty)),
		"Content-Type", "application/json", "Authorization", "Bearer "+tok, httpapi.HeaderIdempotencyKey, key)
	wantStatus(h.t, r, 201)
	var o struct {
		OrderNo string `json:"order_no"`
		Amount  int64  `json:"amount"`
	}
	if err := json.Unmarshal([]byte(r.body), &o); err != nil {
		h.t.Fatal(err)
	}
	if pay {
		body, ts, sig, err := h.signer.SignedBody(paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: o.Amount,
			PaymentRef: "pay-" + o.OrderNo}, h.clock.Now())
		if err != nil {
			h.t.Fatal(err)
		}
		wantStatus(h.t, h.do("POST", "/api/payments/callback", bytes.NewReader(body), "Content-Type", "application/json",
			paysig.HeaderTimestamp, ts, paysig.HeaderSignature, sig), 200)
	}
	return o.OrderNo
}

var orderLink = regexp.MustCompile(`<a href="/console/orders/([0-9A-Za-z-]+)">`)

// listed is the order numbers a search page lists, in order.
func listed(body string) []string {
	var out []string
	for _, m := range orderLink.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

var pageLink = regexp.MustCompile(`<a href="([^"]+)" rel="(prev|next)">`)

// pageLinks are a search page's Newer (prev) and Older (next) links, "" when absent.
func pageLinks(body string) (newer, older string) {
	for _, m := range pageLink.FindAllStringSubmatch(body, -1) {
		if m[2] == "prev" {
			newer = html.UnescapeString(m[1])
		} else {
			older = html.UnescapeString(m[1])
		}
	}
	return newer, older
}

func TestOrderSearchFilters(t *testing.T) {
	h := newHarness(t, 0)
	gift, game := h.product("Gift card", 1999), h.product("Game card", 500)
	ctx := context.Background()
	for _, p := range []domain.Product{gift, game} {
		if _, err := h.shop.Catalogue.ImportCodes(ctx, p.ID(), strings.NewReader("SECRET-"+itoa(int64(p.ID()))+"-1\nSECRET-"+itoa(int64(p.ID()))+"-2\n")); err != nil {
			t.Fatal(err)
		}
	}
	// o[i] is placed at start+i hours.
	var o []string
	for i, spec := range []struct {
		p     domain.Product
		buyer string
		pay   bool
	}{{gift, "bea", true}, {gift, "bob", false}, {game, "bea", true}, {game, "bob", false}} {
		h.clock.Set(start.Add(time.Duration(i) * time.Hour))
		o = append(o, h.placeOrder(spec.p, spec.buyer, fmt.Sprintf("key-search-%04d", i), 1, spec.pay))
	}
	b := h.login(h.operator("vera", domain.RoleViewer))
	before := len(h.audit())

	first := b.get("/console/orders")
	wantStatus(t, first, 200)
	if got := listed(first.body); strings.Join(got, " ") != strings.Join([]string{o[3], o[2], o[1], o[0]}, " ") {
		t.Fatalf("all orders, newest first: %v", got)
	}
	for _, want := range []string{`<option value="` + itoa(int64(gift.ID())) + `">Gift card`, `name="status" value="UNFULFILLED"`,
		`type="datetime-local"`, `data-label="Buyer">bea<`, "19.99 CNY"} {
		if !strings.Contains(first.body, want) {
			t.Errorf("the search page lacks %q", want)
		}
	}
	hour := func(i int) string { return start.Add(time.Duration(i) * time.Hour).Format("2006-01-02T15:04") }
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"buyer=bea", []string{o[2], o[0]}},
		{"product=" + itoa(int64(game.ID())), []string{o[3], o[2]}},
		{"status=PAID", []string{o[2], o[0]}},
		{"status=PENDING&status=PAID&product=" + itoa(int64(gift.ID())), []string{o[1], o[0]}},
		{"from=" + hour(1) + "&to=" + hour(3), []string{o[2], o[1]}},
		{"buyer=bob&status=PAID", nil},
		{"buyer=&product=&from=&to=", []string{o[3], o[2], o[1], o[0]}}, // an empty form is every order
	} {
		r := b.get("/console/orders?" + c.query)
		wantStatus(t, r, 200)
		if got := listed(r.body); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: listed %v, want %v", c.query, got, c.want)
		}
		if strings.Contains(r.body, "SECRET-") {
			t.Errorf("%s: the page shows a code", c.query)
		}
	}
	// The form shows what was asked.
	r := b.get("/console/orders?buyer=bea&status=PAID&product=" + itoa(int64(game.ID())) + "&from=" + hour(1))
	for _, want := range []string{`name="buyer" value="bea"`, `value="PAID" checked`, `value="` + itoa(int64(game.ID())) + `" selected`,
		`value="` + hour(1) + `"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the form does not keep %q", want)
		}
	}
	// An order number goes straight to its page.
	r = b.get("/console/orders?no=" + o[1])
	if r.status != 303 || r.header.Get("Location") != "/console/orders/"+o[1] {
		t.Fatalf("lookup: %s", r)
	}
	if n := len(h.audit()); n != before {
		t.Fatalf("searching wrote %d audit entries", n-before)
	}
}

func TestOrderSearchBadInputShowsTheErrorAndChangesNothing(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	no := h.paidOrder(p, []string{"SECRET-CODE-1"}, 1)
	b := h.login(h.operator("vera", domain.RoleViewer))
	before := len(h.audit())
	for _, c := range []struct{ query, want string }{
		{"status=SHIPPED", "status"},
		{"from=2025-03-02T00:00&to=2025-03-01T00:00", "from"},
		{"from=yesterday", "from"},
		{"to=2025-13-01T00:00", "to"},
		{"cursor=garbage", "cursor"},
		{"cursor=&trail=garbage", "cursor"},
		{"product=gift", "product"},
		{"product=-1", "product"},
		{"buyer=" + url.QueryEscape("two words"), "buyer_id"},
		{"no=" + url.QueryEscape("no such/number"), "not an order number"},
	} {
		r := b.get("/console/orders?" + c.query)
		wantStatus(t, r, 400)
		if !strings.Contains(r.body, `role="alert"`) || !strings.Contains(r.body, c.want) {
			t.Errorf("%s: the page does not say what is wrong (%q): %s", c.query, c.want, r.body)
		}
		if got := listed(r.body); len(got) != 0 {
			t.Errorf("%s: a refused search lists orders %v", c.query, got)
		}
		if !strings.Contains(r.body, `name="buyer"`) {
			t.Errorf("%s: the refused search does not show the form again", c.query)
		}
	}
	if n := len(h.audit()); n != before || h.orderStatus(no) != domain.StatusPaid {
		t.Fatal("a refused search changed something")
	}
}

func TestOrderSearchPagesOlderAndNewer(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 100)
	other := h.product("Game card", 100)
	var codes strings.Builder
	for i := range 121 {
		fmt.Fprintf(&codes, "PAGE-CODE-%04d\n", i)
	}
	if _, err := h.shop.Catalogue.ImportCodes(context.Background(), p.ID(), strings.NewReader(codes.String())); err != nil {
		t.Fatal(err)
	}
	if _, err := h.shop.Catalogue.ImportCodes(context.Background(), other.ID(), strings.NewReader("OTHER-CODE-1\n")); err != nil {
		t.Fatal(err)
	}
	// 120 orders of the product, three a second: ties are broken by the number.
	var want []string
	second := map[string]int{}
	for i := range 120 {
		h.clock.Set(start.Add(time.Duration(i/3) * time.Second))
		no := h.placeOrder(p, fmt.Sprintf("buyer-%d", i), fmt.Sprintf("key-page-%04d", i), 1, false)
		want, second[no] = append(want, no), i/3
	}
	// Newest first: later seconds first, and within a second the higher number first.
	slices.SortFunc(want, func(a, b string) int {
		if second[a] != second[b] {
			return second[b] - second[a]
		}
		return strings.Compare(b, a)
	})
	h.placeOrder(other, "buyer-other", "key-page-other", 1, false) // not listed: another product
	b := h.login(adminToken)
	var pages [][]string
	target := "/console/orders?product=" + itoa(int64(p.ID()))
	for target != "" {
		if len(pages) > 5 {
			t.Fatal("paging does not end")
		}
		r := b.get(target)
		wantStatus(t, r, 200)
		pages = append(pages, listed(r.body))
		newer, older := pageLinks(r.body)
		if (newer != "") != (len(pages) > 1) {
			t.Fatalf("page %d: Newer link %q", len(pages), newer)
		}
		if newer != "" {
			// Newer goes back exactly one page.
			back := b.get(newer)
			if got := listed(back.body); strings.Join(got, " ") != strings.Join(pages[len(pages)-2], " ") {
				t.Fatalf("page %d: Newer lists %v, want the page before", len(pages), got)
			}
		}
		if older != "" && !strings.Contains(older, "product="+itoa(int64(p.ID()))) {
			t.Fatalf("the Older link drops the filter: %s", older)
		}
		target = older
	}
	var all []string
	for _, pg := range pages {
		all = append(all, pg...)
	}
	if len(pages) != 3 || len(pages[0]) != 50 || strings.Join(all, " ") != strings.Join(want, " ") {
		t.Fatalf("%d pages listed %d orders; want 3 pages listing the 120 newest first, each once", len(pages), len(all))
	}
}

func TestOrderPageShowsFlowNotificationsAndDelivery(t *testing.T) {
	h := newHarness(t, 0)
	ctx := context.Background()
	p := h.product("Gift card", 1999)
	no := h.paidOrder(p, []string{"SECRET-CODE-0001", "SECRET-CODE-0002"}, 1)
	b := h.login(h.operator("vera", domain.RoleViewer))

	// Before the relay runs, the delivery to the broker is pending.
	r := b.get("/console/orders/" + no)
	wantStatus(t, r, 200)
	for _, want := range []string{"<h2>Stock flow</h2>", `data-label="Change">reserve<`, `data-label="Change">pay<`,
		`the message broker <span class="hint">order.delivered</span>`, `data-label="State">pending<`,
		"No notification from a provider."} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the order page before the relay lacks %q", want)
		}
	}

	// The relay sends it; the storefront's webhook failed once and waits; a provider told us.
	if _, err := h.shop.Relay.RelayOutbox(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.ledger.Outbox().Add(ctx, domain.OutboxMessage{Topic: domain.TopicWebhook, Key: no,
		Payload: []byte(`{"order_no":"` + no + `"}`), At: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	msgs, err := h.ledger.Outbox().ByKey(ctx, no, domain.TopicWebhook)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("webhook messages %+v, %v", msgs, err)
	}
	retry := h.clock.Now().Add(5 * time.Minute)
	if err := h.ledger.Outbox().MarkFailed(ctx, msgs[0].ID, retry); err != nil {
		t.Fatal(err)
	}
	if err := h.ledger.Notifications().Record(ctx, domain.NotificationRecord{Provider: "stripe", At: h.clock.Now(),
		Method: "POST", Verified: true, Accepted: true, Result: "paid", OrderNo: domain.OrderNo(no), Outcome: "paid",
		Amount: 1999, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	r = b.get("/console/orders/" + no)
	wantStatus(t, r, 200)
	for _, want := range []string{
		`data-label="State">sent ` + h.clock.Now().Format("2006-01-02 15:04:05 UTC"),
		`the storefront&#39;s webhook <span class="hint">webhook.order.delivered</span>`,
		`data-label="Failed attempts">1<`, `data-label="Next try">` + retry.Format("2006-01-02 15:04:05 UTC"),
		`data-label="Provider">stripe<`, `data-label="Signature">verified<`, "accepted: paid", `data-label="Amount">19.99 CNY<`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the order page lacks %q", want)
		}
	}
	if strings.Contains(r.body, "SECRET-CODE") {
		t.Fatal("the order page shows a code")
	}
	if v, err := h.shop.Sales.AdminOrder(ctx, domain.OrderNo(no)); err != nil || v.Order.Revealed() {
		t.Fatalf("the order page revealed the codes: %v", err)
	}
	// An order never paid has nothing to deliver and only its reservation in the flow.
	pending := h.placeOrder(p, "bob", "key-detail-0002", 1, false)
	r = b.get("/console/orders/" + pending)
	if !strings.Contains(r.body, "Nothing to deliver") || strings.Contains(r.body, `data-label="Change">pay<`) {
		t.Fatalf("a pending order's page: %s", r.body)
	}
}
