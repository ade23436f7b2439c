package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"time"

	"cardshop/adapters/lab/mailpit"
)

// The guest-checkout scenario's mail checks: after the sale has settled, every e-mail is read
// back from the scenario's Mailpit and held to the orders of the ledger and to the codes each
// paid order's page shows with its access secret.

// mailWait bounds the wait for the instances' mail backlog to drain.
const mailWait = 2 * time.Minute

// saleOrder is one order of the sale as the ledger holds it.
type saleOrder struct {
	no, status, email, buyer string
	qty                      int
}

// inboxMail is one e-mail as Mailpit received it.
type inboxMail struct {
	subject string
	to      []string
	text    string
}

// guestChecks waits for the mail to be sent, reads the orders, the paid orders' codes and the
// e-mails, prints what it found and returns the scenario's own checks.
func (e *env) guestChecks(ctx context.Context, pid int64, g *guestRun) ([]Check, error) {
	took, err := waitMail(ctx, g.shop)
	if err != nil {
		return nil, err
	}
	orders, err := saleOrders(ctx, e.db, pid)
	if err != nil {
		return nil, err
	}
	codes, readErrs := readCodes(ctx, g, orders)
	mails, err := readInbox(ctx, g.shop.mail)
	if err != nil {
		return nil, err
	}
	paid := 0
	for _, o := range orders {
		if o.status == "PAID" {
			paid++
		}
	}
	fmt.Printf("   mail      %d e-mails received for %d PAID orders; backlog empty and the inbox still after %s\n",
		len(mails), paid, took.Round(100*time.Millisecond))
	codeIn := regexp.MustCompile(fmt.Sprintf(`LC-%d-\d{8}`, pid))
	checks := []Check{walkCheck(g.walks)}
	checks = append(checks, mailChecks(orders, codes, readErrs, mails, codeIn)...)
	return append(checks, doubleCheck(g.walks, orders)), nil
}

// waitMail waits until every instance's mail backlog (cardshop_mail_backlog) is empty and
// the inbox has stopped growing for two seconds, at most mailWait.
func waitMail(ctx context.Context, shop *guestShop) (time.Duration, error) {
	start := time.Now()
	last, since := -1, time.Now()
	for {
		var backlog int64
		for _, in := range shop.insts {
			n, err := in.metric(ctx, "cardshop_mail_backlog", "")
			if err != nil {
				return 0, err
			}
			backlog += n
		}
		ms, err := shop.mail.Messages(ctx)
		if err != nil {
			return 0, err
		}
		if len(ms) != last {
			last, since = len(ms), time.Now()
		}
		if backlog == 0 && time.Since(since) >= 2*time.Second {
			return time.Since(start), nil
		}
		if time.Since(start) > mailWait {
			fmt.Printf("   mail      backlog %d and %d e-mails after %s: the checks say what is missing\n", backlog, len(ms), mailWait)
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// saleOrders reads the product's orders from the ledger, by number.
func saleOrders(ctx context.Context, db *sql.DB, pid int64) (map[string]saleOrder, error) {
	out := map[string]saleOrder{}
	err := query(ctx, db, "SELECT order_no, status, COALESCE(buyer_email,''), buyer_id, qty FROM orders WHERE product_id=?",
		[]any{pid}, func(r *sql.Rows) error {
			var o saleOrder
			if err := r.Scan(&o.no, &o.status, &o.email, &o.buyer, &o.qty); err != nil {
				return err
			}
			out[o.no] = o
			return nil
		})
	return out, err
}

// readCodes reads every PAID order's codes from its order page, as the e-mail's link does:
// GET /orders/{no}?key=<secret> puts the secret in a cookie and answers 303 to the page. The
// orders whose page could not be read are in errs, with why.
func readCodes(ctx context.Context, g *guestRun, orders map[string]saleOrder) (map[string][]string, map[string]string) {
	walks := g.orders()
	codes, errs := map[string][]string{}, map[string]string{}
	var mu sync.Mutex
	jobs := make(chan *guestWalk)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for w := range jobs {
				got, err := orderPageCodes(ctx, w)
				mu.Lock()
				if err != nil {
					errs[w.no] = err.Error()
				} else {
					codes[w.no] = got
				}
				mu.Unlock()
			}
		})
	}
	for no, o := range orders {
		if o.status != "PAID" {
			continue
		}
		if w := walks[no]; w != nil {
			jobs <- w
		} else {
			errs[no] = "no walk was shown this order's secret"
		}
	}
	close(jobs)
	wg.Wait()
	return codes, errs
}

// orderPageCodes opens the order's page with its access secret in a fresh browser and reads
// its codes.
func orderPageCodes(ctx context.Context, w *guestWalk) ([]string, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: noRedirect}
	path := "/orders/" + url.PathEscape(w.no)
	st, _, err := get(ctx, c, w.base+path+"?"+url.Values{"key": {w.secret}}.Encode())
	if err != nil || st != http.StatusSeeOther {
		return nil, fmt.Errorf("GET %s?key=…: %d %v, want 303", path, st, err)
	}
	st, page, err := get(ctx, c, w.base+path)
	if err != nil || st != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %v", path, st, err)
	}
	return pageCodes(page), nil
}

// readInbox reads every e-mail of the inbox with its text body.
func readInbox(ctx context.Context, mp *mailpit.Server) ([]inboxMail, error) {
	list, err := mp.Messages(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]inboxMail, len(list))
	errs := make([]error, len(list))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				m, err := mp.Message(ctx, list[i].ID)
				errs[i] = err
				out[i] = inboxMail{subject: m.Subject, text: m.Text}
				for _, a := range m.To {
					out[i].to = append(out[i].to, a.Address)
				}
			}
		})
	}
	for i := range list {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out, firstError(errs...)
}

// tokenRe finds the words of a subject that may be an order number.
var tokenRe = regexp.MustCompile(`[0-9A-Za-z-]+`)

// mailOrder is the order of the sale whose number the subject names, "" for none.
func mailOrder(subject string, orders map[string]saleOrder) string {
	for _, t := range tokenRe.FindAllString(subject, -1) {
		if _, ok := orders[t]; ok {
			return t
		}
	}
	return ""
}

// mailChecks holds the e-mails to the orders: every PAID order got exactly one, to its buyer,
// holding exactly its codes (those its order page shows, codeIn finding them in the text), and
// no order that is not PAID, nor any address but a paid buyer's, got one.
func mailChecks(orders map[string]saleOrder, codes map[string][]string, readErrs map[string]string, mails []inboxMail,
	codeIn *regexp.Regexp) []Check {
	byNo, byTo := map[string][]inboxMail{}, map[string]int{}
	var stray []string // e-mails naming no order of the sale, or one not PAID, or sent to another address
	for _, m := range mails {
		for _, to := range m.to {
			byTo[to]++
		}
		no := mailOrder(m.subject, orders)
		switch {
		case no == "":
			stray = append(stray, fmt.Sprintf("%q to %v names no order of the sale", m.subject, m.to))
		case orders[no].status != "PAID":
			stray = append(stray, fmt.Sprintf("%s is %s", no, orders[no].status))
		case !slices.Equal(m.to, []string{orders[no].email}):
			stray = append(stray, fmt.Sprintf("%s's e-mail went to %v, its buyer is %s", no, m.to, orders[no].email))
		}
		if no != "" {
			byNo[no] = append(byNo[no], m)
		}
	}
	var paid, one int
	var none, several, wrongCodes []string
	for _, o := range sortedOrders(orders) {
		if o.status != "PAID" {
			continue
		}
		paid++
		switch n := len(byNo[o.no]); {
		case n == 0:
			none = append(none, o.no)
			continue
		case n > 1 || byTo[o.email] != 1:
			several = append(several, fmt.Sprintf("%s (%d by number, %d to %s)", o.no, n, byTo[o.email], o.email))
			continue
		}
		one++
		page, ok := codes[o.no]
		if !ok {
			wrongCodes = append(wrongCodes, fmt.Sprintf("%s: its page was not read: %s", o.no, readErrs[o.no]))
			continue
		}
		inMail := codeIn.FindAllString(byNo[o.no][0].text, -1)
		if why := sameCodes(inMail, page, o.qty); why != "" {
			wrongCodes = append(wrongCodes, o.no+": "+why)
		}
	}
	return []Check{
		{Name: "guest mail: every PAID order got exactly one e-mail, to its buyer (by order number and by recipient)",
			OK: paid > 0 && one == paid,
			Detail: fmt.Sprintf("%d PAID orders, %d with exactly one; without: %d%s; with several, or not one to its buyer: %d%s", paid, one,
				len(none), examples(none), len(several), examples(several))},
		{Name: "guest mail: each paid order's e-mail holds exactly its codes (as its order page shows them with the access secret)",
			OK:     one > 0 && len(wrongCodes) == 0,
			Detail: fmt.Sprintf("%d e-mails read against their order pages; wrong: %d%s", one, len(wrongCodes), examples(wrongCodes))},
		{Name: "guest mail: no e-mail for an order that is not PAID, to another address, or naming no order of the sale",
			OK:     len(stray) == 0,
			Detail: fmt.Sprintf("%d e-mails in the inbox; stray: %d%s", len(mails), len(stray), examples(stray))},
	}
}

// sameCodes says how the codes of an e-mail differ from the page's ("" when they are the same
// codes, each once, qty of them).
func sameCodes(inMail, page []string, qty int) string {
	a, b := slices.Clone(inMail), slices.Clone(page)
	slices.Sort(a)
	slices.Sort(b)
	switch {
	case len(b) != qty:
		return fmt.Sprintf("the page shows %d codes, the order is for %d", len(b), qty)
	case !slices.Equal(a, b):
		return fmt.Sprintf("the e-mail holds %v, the page %v", a, b)
	}
	return ""
}

// sortedOrders lists the orders by number, so that the examples of a failure are stable.
func sortedOrders(orders map[string]saleOrder) []saleOrder {
	out := make([]saleOrder, 0, len(orders))
	for _, o := range orders {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b saleOrder) int {
		if a.no < b.no {
			return -1
		}
		if a.no > b.no {
			return 1
		}
		return 0
	})
	return out
}

// walkCheck: every buyer's walk ended on a confirmation page, and every paying buyer's on the
// dev provider's "Paid".
func walkCheck(walks []*guestWalk) Check {
	var confirmed, pays, paid int
	var bad []string
	for _, w := range walks {
		if w.no != "" {
			confirmed++
		}
		if w.pays && w.no != "" {
			pays++
			if w.paid {
				paid++
			}
		}
		if w.err != "" {
			bad = append(bad, fmt.Sprintf("buyer %d: %s", w.buyer, w.err))
		}
	}
	return Check{Name: "guest checkout: every walk of the form path placed its order, and every paying buyer was told Paid",
		OK: len(walks) > 0 && confirmed == len(walks) && paid == pays && len(bad) == 0,
		Detail: fmt.Sprintf("%d walks, %d confirmed; %d paying, %d paid; failed: %d%s", len(walks), confirmed, pays, paid,
			len(bad), examples(bad))}
}

// doubleCheck: a form sent twice at once (same key) made one order: both answers that
// confirmed named the same one, and no buyer (one e-mail address each) has two orders.
func doubleCheck(walks []*guestWalk, orders map[string]saleOrder) Check {
	var doubles, both, twin int
	var split []string
	for _, w := range walks {
		if !w.double {
			continue
		}
		doubles++
		named := slices.Compact(slices.Sorted(slices.Values(w.named)))
		if len(named) > 1 {
			split = append(split, fmt.Sprintf("buyer %d shown %v", w.buyer, named))
		}
		if len(w.named) == 2 {
			both++
		}
		twin += w.inProgress
	}
	perBuyer := map[string]int{}
	for _, o := range orders {
		perBuyer[o.buyer]++
	}
	var dup []string
	for b, n := range perBuyer {
		if n > 1 {
			dup = append(dup, fmt.Sprintf("%s: %d orders", b, n))
		}
	}
	slices.Sort(dup)
	return Check{Name: "guest checkout: a form sent twice at once makes one order",
		OK: doubles > 0 && len(split) == 0 && len(dup) == 0,
		Detail: fmt.Sprintf("%d double submits: %d with both answers confirming the order, %d answers refused while the twin placed it; shown two orders: %d%s; buyers with several orders: %d%s",
			doubles, both, twin, len(split), examples(split), len(dup), examples(dup))}
}
