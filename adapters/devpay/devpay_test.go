package devpay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"cardshop/domain"
)

var ctx = context.Background()

func TestNewRefusesWeakSecretsAndBadBaseURLs(t *testing.T) {
	for _, s := range []string{"", "short-secret", "aaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababababab", "abcabcabcabcabcabcabc"} {
		if _, err := New(Config{Secret: s, BaseURL: testBase}); err == nil {
			t.Errorf("secret %q accepted", s)
		}
	}
	for _, b := range []string{"", "127.0.0.1:8080", "ftp://host", "http://", "http://h/?x=1", "http://h/#f", "http://u:p@h", "/dev"} {
		if _, err := New(Config{Secret: testSecret, BaseURL: b}); err == nil {
			t.Errorf("base URL %q accepted", b)
		}
	}
	g, err := New(Config{Secret: NewSecret(), BaseURL: "https://shop.example/cardshop/"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Provider() != "dev" {
		t.Fatalf("provider %q", g.Provider())
	}
	if a, b := NewSecret(), NewSecret(); a == b || len(a) < MinSecretLength {
		t.Fatal("NewSecret is not a fresh random secret")
	}
}

func TestPrintingTheGatewayShowsNoKey(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		out := fmt.Sprintf(f, g)
		for _, key := range [][]byte{g.pageKey, g.notifyKey} {
			if strings.Contains(out, fmt.Sprintf("%x", key)) || strings.Contains(out, string(key)) ||
				strings.Contains(out, fmt.Sprint(key)) || strings.Contains(out, testSecret) {
				t.Errorf("%s prints a key: %s", f, out)
			}
		}
		if !strings.Contains(out, "REDACTED") {
			t.Errorf("%s: %s", f, out)
		}
	}
}

func TestSupportsEveryShopCurrency(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	for _, code := range []string{"CNY", "USD", "EUR", "JPY", "KRW"} {
		c, err := domain.ParseCurrency(code)
		if err != nil || !g.Supports(c) {
			t.Errorf("%s not supported", code)
		}
	}
	for _, c := range []domain.Currency{{}, {Code: "XXX", Exponent: 2}, {Code: "CNY", Exponent: 0}, {Code: "cny", Exponent: 2}} {
		if g.Supports(c) {
			t.Errorf("%+v supported", c)
		}
	}
}

func TestCreateRefusesBadRequests(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	good := request(testOrder, 1999, cny)
	for name, mutate := range map[string]func(*domain.PaymentRequest){
		"order":    func(r *domain.PaymentRequest) { r.OrderNo = "bad/no" },
		"zero":     func(r *domain.PaymentRequest) { r.Amount = 0 },
		"negative": func(r *domain.PaymentRequest) { r.Amount = -1 },
		"currency": func(r *domain.PaymentRequest) { r.Currency = domain.Currency{Code: "XXX", Exponent: 2} },
		"expired":  func(r *domain.PaymentRequest) { r.ExpiresAt = t0 },
		"no exp":   func(r *domain.PaymentRequest) { r.ExpiresAt = time.Time{} },
		"return":   func(r *domain.PaymentRequest) { r.ReturnURL = "javascript:alert(1)" },
	} {
		r := good
		mutate(&r)
		if _, err := g.Create(ctx, r); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCreateThenPageShowsThePayment(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	r := request(testOrder, 1999, cny)
	r.Subject = `Steam card <b>50</b> & "more" × 2`
	pc, q := create(t, g, r)
	if !strings.HasPrefix(pc.ProviderRef, "dev_") || !validID(pc.ProviderRef, "dev_") {
		t.Fatalf("provider ref %q", pc.ProviderRef)
	}
	rep := g.PayPage(q)
	if rep.Status != http.StatusOK || rep.ContentType != "text/html; charset=utf-8" {
		t.Fatalf("page: %d %s", rep.Status, rep.ContentType)
	}
	p := parsePage(t, rep.Body)
	if p.h1 != "Pay for your order" || p.amount != "19.99 CNY" || p.orderNo != string(testOrder) {
		t.Fatalf("page shows h1 %q amount %q order %q", p.h1, p.amount, p.orderNo)
	}
	if !strings.Contains(p.text, r.Subject) || strings.Contains(string(rep.Body), "<b>50") {
		t.Fatalf("subject not shown as text: %s", p.text)
	}
	if !strings.Contains(p.text, "2025-03-01 12:15:00 UTC (in 15 min)") {
		t.Fatalf("expiry not shown: %s", p.text)
	}
	if p.formMethod != "post" || p.formAction != string(testOrder)+"/confirm" {
		t.Fatalf("form %s %s", p.formMethod, p.formAction)
	}
	// Relative to the page's URL, the form posts to /dev/pay/<order_no>/confirm.
	pageURL, _ := url.Parse(pc.PayURL)
	action, _ := url.Parse(p.formAction)
	if got := pageURL.ResolveReference(action).Path; got != "/dev/pay/"+string(testOrder)+"/confirm" {
		t.Fatalf("form posts to %s", got)
	}
	if p.buttons["pay"] != "Pay" || p.buttons["fail"] != "Fail" || len(p.buttons) != 2 {
		t.Fatalf("buttons %v", p.buttons)
	}
	if len(p.hidden) != len(q) {
		t.Fatalf("hidden fields %v, link %v", p.hidden, q)
	}
	for k := range q {
		if p.hidden[k] != q.Get(k) {
			t.Fatalf("hidden %s = %q, link has %q", k, p.hidden[k], q.Get(k))
		}
	}
	if strings.Contains(string(rep.Body), "<script") || strings.Contains(string(rep.Body), "src=") ||
		strings.Contains(string(rep.Body), "stylesheet") {
		t.Fatal("page uses scripts or external assets")
	}

	_, q = create(t, g, request("2503011200001234123456789013", 500, jpy))
	if p := parsePage(t, g.PayPage(q).Body); p.amount != "500 JPY" {
		t.Fatalf("JPY amount %q", p.amount)
	}
}

func TestCreateCleansTheSubject(t *testing.T) {
	for in, want := range map[string]string{
		"Steam\tcard\x00\n50":             "Steam card  50",
		"bad \xff byte":                   "bad \ufffd byte",
		"non\ufffechar":                   "non char",
		"全角\u3000空格":                      "全角\u3000空格",
		strings.Repeat("x", maxSubject):   strings.Repeat("x", maxSubject),
		strings.Repeat("x", maxSubject+1): strings.Repeat("x", maxSubject-3) + "…",
		strings.Repeat("é", maxSubject):   strings.Repeat("é", (maxSubject-3)/2) + "…",
	} {
		got := cleanSubject(in)
		if got != want || len(got) > maxSubject || !utf8.ValidString(got) {
			t.Errorf("cleanSubject(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCreateIsIdempotentWhileOpen(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	a, _ := create(t, g, request(testOrder, 1999, cny))
	b, _ := create(t, g, request(testOrder, 1999, cny))
	if a != b {
		t.Fatalf("retry created another payment: %+v %+v", a, b)
	}
	c, _ := create(t, g, request(testOrder, 2999, cny))
	if c.ProviderRef == a.ProviderRef {
		t.Fatal("another amount reused the payment")
	}
	if err := g.Close(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: c.ProviderRef}); err != nil {
		t.Fatal(err)
	}
	d, _ := create(t, g, request(testOrder, 2999, cny))
	if d.ProviderRef == c.ProviderRef {
		t.Fatal("a closed payment was handed out again")
	}
}

func TestPayPageRefusesForgedLinks(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	_, q := create(t, g, request(testOrder, 1999, cny))
	other, _ := newTestGateway(t, "another-secret-0123456789")
	_, foreign := create(t, other, request(testOrder, 1999, cny))

	cases := map[string]url.Values{"foreign": foreign}
	for _, k := range signedParams {
		forged := cloneValues(q)
		forged.Set(k, forged.Get(k)+"1")
		cases["altered "+k] = forged
		missing := cloneValues(q)
		missing.Del(k)
		cases["missing "+k] = missing
		twice := cloneValues(q)
		twice.Add(k, q.Get(k))
		cases["repeated "+k] = twice
	}
	noSig := cloneValues(q)
	noSig.Del(pSig)
	cases["no sig"] = noSig
	badSig := cloneValues(q)
	badSig.Set(pSig, "zz")
	cases["bad sig"] = badSig
	extra := cloneValues(q)
	extra.Set("utm", "x")
	cases["extra"] = extra
	choice := cloneValues(q)
	choice.Set(pChoice, "pay")
	cases["choice on the page"] = choice
	cheaper := cloneValues(q)
	cheaper.Set(pAmount, "1")
	cases["cheaper"] = cheaper

	for name, v := range cases {
		rep := g.PayPage(v)
		if rep.Status != http.StatusBadRequest {
			t.Errorf("%s: %d", name, rep.Status)
			continue
		}
		if p := parsePage(t, rep.Body); p.h1 != "This payment link is not valid" || p.formAction != "" {
			t.Errorf("%s: %q form %q", name, p.h1, p.formAction)
		}
		if name == "choice on the page" {
			continue // a genuine confirm form
		}
		form := cloneValues(v)
		form.Set(pChoice, "pay")
		rec := accepting()
		if rep := g.Confirm(ctx, form, rec.deliver); rep.Status != http.StatusBadRequest || rec.count() != 0 {
			t.Errorf("%s confirmed: %d, %d notifications", name, rep.Status, rec.count())
		}
	}
	for _, choice := range []string{"", "PAY", "refund"} {
		form := cloneValues(q)
		form.Set(pChoice, choice)
		rec := accepting()
		if rep := g.Confirm(ctx, form, rec.deliver); rep.Status != http.StatusBadRequest || rec.count() != 0 {
			t.Errorf("choice %q: %d, %d notifications", choice, rep.Status, rec.count())
		}
	}
	if rep := g.PayPage(q); rep.Status != http.StatusOK {
		t.Fatalf("the genuine link: %d", rep.Status)
	}
}

func TestExpiredLinkShowsExpiredAndPaysNothing(t *testing.T) {
	g, c := newTestGateway(t, testSecret)
	pc, q := create(t, g, request(testOrder, 1999, cny))
	p := parsePage(t, g.PayPage(q).Body)
	c.add(15 * time.Minute)
	rep := g.PayPage(q)
	if rep.Status != http.StatusGone || parsePage(t, rep.Body).h1 != "This payment has expired" {
		t.Fatalf("expired page: %d %s", rep.Status, rep.Body)
	}
	rec := accepting()
	rep = g.Confirm(ctx, withChoice(p, "pay"), rec.deliver)
	if rep.Status != http.StatusGone || parsePage(t, rep.Body).h1 != "This payment has expired" || rec.count() != 0 {
		t.Fatalf("confirm after expiry: %d, %d notifications", rep.Status, rec.count())
	}
	st, err := g.Query(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef})
	if err != nil || st.Outcome != domain.OutcomeExpired {
		t.Fatalf("query: %+v %v", st, err)
	}
}

// shop is a deliver that does what the notify use case does first: verify with the gateway.
type shop struct {
	g       *Gateway
	mu      sync.Mutex
	notices []domain.ProviderNotice
}

func (s *shop) deliver(ctx context.Context, in domain.InboundRequest) error {
	n, err := s.g.Verify(ctx, in)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.notices = append(s.notices, n)
	s.mu.Unlock()
	return nil
}

func TestConfirmPayNotifiesAndShowsPaid(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	r := request(testOrder, 1999, cny)
	pc, q := create(t, g, r)
	p := parsePage(t, g.PayPage(q).Body)
	s := &shop{g: g}

	rep := g.Confirm(ctx, withChoice(p, "pay"), s.deliver)
	if rep.Status != http.StatusOK {
		t.Fatalf("confirm: %d %s", rep.Status, rep.Body)
	}
	done := parsePage(t, rep.Body)
	if done.h1 != "Paid" || len(done.links) != 1 || done.links[0] != r.ReturnURL || !strings.Contains(done.text, "Back to the shop") {
		t.Fatalf("paid page: %q %v %s", done.h1, done.links, done.text)
	}
	if strings.Contains(done.text, "Expires") || !strings.Contains(done.text, "19.99 CNY") || done.formAction != "" {
		t.Fatalf("paid page shows an expiry or a form, or no amount: %s", done.text)
	}
	if len(s.notices) != 1 {
		t.Fatalf("%d notices", len(s.notices))
	}
	n := s.notices[0]
	want := domain.ProviderNotice{OrderNo: testOrder, ProviderRef: pc.ProviderRef, EventID: n.EventID,
		Outcome: domain.OutcomePaid, Amount: 1999, Currency: cny}
	if n != want || !validID(n.EventID, "evt_") {
		t.Fatalf("notice %+v, want %+v", n, want)
	}
	st, err := g.Query(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef})
	if err != nil || st != (domain.PaymentState{Outcome: domain.OutcomePaid, ProviderRef: pc.ProviderRef, Amount: 1999, Currency: cny}) {
		t.Fatalf("query: %+v %v", st, err)
	}
	if st, _ := g.Query(ctx, domain.Payment{OrderNo: testOrder}); st.Outcome != domain.OutcomePaid {
		t.Fatalf("query by order: %+v", st)
	}

	// The same press again resends the same event; the other press changes nothing.
	if rep := g.Confirm(ctx, withChoice(p, "pay"), s.deliver); rep.Status != http.StatusOK || len(s.notices) != 2 || s.notices[1] != n {
		t.Fatalf("second press: %d %+v", rep.Status, s.notices)
	}
	rep = g.Confirm(ctx, withChoice(p, "fail"), s.deliver)
	if rep.Status != http.StatusConflict || parsePage(t, rep.Body).h1 != "Already paid" || len(s.notices) != 2 {
		t.Fatalf("fail after pay: %d, %d notices", rep.Status, len(s.notices))
	}
	if rep := g.PayPage(q); rep.Status != http.StatusOK || parsePage(t, rep.Body).h1 != "Already paid" || parsePage(t, rep.Body).formAction != "" {
		t.Fatalf("page after pay: %d", rep.Status)
	}
	if err := g.Close(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef}); !errors.Is(err, domain.ErrAlreadyPaid) {
		t.Fatalf("close after pay: %v", err)
	}
}

func TestConfirmFailNotifiesFailed(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	r := request(testOrder, 100000, jpy)
	r.ReturnURL = ""
	pc, q := create(t, g, r)
	p := parsePage(t, g.PayPage(q).Body)
	s := &shop{g: g}
	rep := g.Confirm(ctx, withChoice(p, "fail"), s.deliver)
	done := parsePage(t, rep.Body)
	if rep.Status != http.StatusOK || done.h1 != "Payment failed" {
		t.Fatalf("confirm: %d %q", rep.Status, done.h1)
	}
	if len(done.links) != 1 || done.links[0] != testBase+"/api/orders/"+string(testOrder) {
		t.Fatalf("links %v", done.links)
	}
	if len(s.notices) != 1 || s.notices[0].Outcome != domain.OutcomeFailed || s.notices[0].Amount != 100000 ||
		s.notices[0].Currency != jpy || s.notices[0].Reason == "" {
		t.Fatalf("notices %+v", s.notices)
	}
	if st, _ := g.Query(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef}); st.Outcome != domain.OutcomeFailed {
		t.Fatalf("query: %+v", st)
	}
	if rep := g.Confirm(ctx, withChoice(p, "pay"), s.deliver); rep.Status != http.StatusConflict || len(s.notices) != 1 {
		t.Fatalf("pay after fail: %d, %d notices", rep.Status, len(s.notices))
	}
	if err := g.Close(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef}); err != nil {
		t.Fatalf("close after fail: %v", err)
	}
}

func TestCloseThenConfirmShowsExpiredAndSendsNothing(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	pc, q := create(t, g, request(testOrder, 1999, cny))
	p := parsePage(t, g.PayPage(q).Body)
	if st, _ := g.Query(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef}); st.Outcome != domain.OutcomePending {
		t.Fatalf("open payment queried as %v", st.Outcome)
	}
	if err := g.Close(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef}); err != nil {
		t.Fatal(err)
	}
	rec := accepting()
	for _, choice := range []string{"pay", "fail"} {
		rep := g.Confirm(ctx, withChoice(p, choice), rec.deliver)
		if rep.Status != http.StatusGone || parsePage(t, rep.Body).h1 != "This payment has expired" {
			t.Fatalf("%s after close: %d %s", choice, rep.Status, rep.Body)
		}
	}
	if rec.count() != 0 {
		t.Fatalf("%d notifications after close", rec.count())
	}
	if rep := g.PayPage(q); rep.Status != http.StatusGone {
		t.Fatalf("page after close: %d", rep.Status)
	}
	if st, _ := g.Query(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef}); st.Outcome != domain.OutcomeExpired {
		t.Fatalf("query after close: %v", st.Outcome)
	}
}

func TestConfirmWhenTheShopDoesNotAccept(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	pc, q := create(t, g, request(testOrder, 1999, cny))
	p := parsePage(t, g.PayPage(q).Body)
	for name, rec := range map[string]*recorder{
		"refused":     {err: domain.ErrBadSignature},
		"unavailable": {err: fmt.Errorf("ledger: %w", domain.ErrUnavailable)},
	} {
		rep := g.Confirm(ctx, withChoice(p, "pay"), rec.deliver)
		if rep.Status != http.StatusBadGateway || parsePage(t, rep.Body).h1 != "The shop did not accept the notification" || rec.count() != 1 {
			t.Fatalf("%s: %d %d", name, rep.Status, rec.count())
		}
		if strings.Contains(string(rep.Body), "ledger") {
			t.Fatalf("%s: the page shows the shop's error", name)
		}
	}
	if rep := g.Confirm(ctx, withChoice(p, "pay"), nil); rep.Status != http.StatusBadGateway {
		t.Fatalf("no deliver: %d", rep.Status)
	}
	// The provider took the money: the shop learns it by querying, and a later press resends.
	if st, _ := g.Query(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef}); st.Outcome != domain.OutcomePaid {
		t.Fatalf("query: %v", st.Outcome)
	}
	s := &shop{g: g}
	if rep := g.Confirm(ctx, withChoice(p, "pay"), s.deliver); rep.Status != http.StatusOK || len(s.notices) != 1 {
		t.Fatalf("resend: %d", rep.Status)
	}
}

func TestLinkSurvivesARestartOfTheProvider(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	pc, q := create(t, g, request(testOrder, 1999, cny))
	p := parsePage(t, g.PayPage(q).Body)

	again, _ := newTestGateway(t, testSecret) // same secret, empty memory
	if st, err := again.Query(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef}); err != nil || st.Outcome != domain.OutcomePending {
		t.Fatalf("unknown payment queried: %+v %v", st, err)
	}
	s := &shop{g: again}
	if rep := again.Confirm(ctx, withChoice(p, "pay"), s.deliver); rep.Status != http.StatusOK || len(s.notices) != 1 || s.notices[0].ProviderRef != pc.ProviderRef {
		t.Fatalf("confirm after restart: %d %+v", rep.Status, s.notices)
	}

	closed, _ := newTestGateway(t, testSecret)
	if err := closed.Close(ctx, domain.Payment{OrderNo: testOrder, ProviderRef: pc.ProviderRef, Amount: 1999, Currency: cny}); err != nil {
		t.Fatal(err)
	}
	rec := accepting()
	if rep := closed.Confirm(ctx, withChoice(p, "pay"), rec.deliver); rep.Status != http.StatusGone || rec.count() != 0 {
		t.Fatalf("confirm of a payment closed after restart: %d, %d", rep.Status, rec.count())
	}
}

func TestQueryAndCloseRefuseAnotherOrdersPayment(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	pc, _ := create(t, g, request(testOrder, 1999, cny))
	other := domain.Payment{OrderNo: "2503011200001234123456789099", ProviderRef: pc.ProviderRef}
	if _, err := g.Query(ctx, other); err == nil {
		t.Fatal("query of another order's payment")
	}
	if err := g.Close(ctx, other); err == nil {
		t.Fatal("close of another order's payment")
	}
}

func TestConcurrentPressesSettleOnce(t *testing.T) {
	g, _ := newTestGateway(t, testSecret)
	_, q := create(t, g, request(testOrder, 1999, cny))
	p := parsePage(t, g.PayPage(q).Body)
	s := &shop{g: g}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Confirm(ctx, withChoice(p, []string{"pay", "fail"}[i%2]), s.deliver)
		}()
	}
	wg.Wait()
	if len(s.notices) == 0 {
		t.Fatal("no notification")
	}
	for _, n := range s.notices {
		if n != s.notices[0] {
			t.Fatalf("two different outcomes notified: %+v", s.notices)
		}
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}
