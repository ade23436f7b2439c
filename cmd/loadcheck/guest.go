package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cardshop/adapters/lab/mailpit"
)

// The guest-checkout scenario (10): buyers without an account walk the built-in shop's form
// path with Go HTTP clients, one cookie jar each, on two instances of its own that send their
// order e-mails to a Mailpit of the load check's own; most of them pay through the dev
// provider's pay page. After the sale has settled and the mail backlog is empty, guest_mail.go
// reads every e-mail back from Mailpit and holds it to the orders.

// guestBuyers is how many buyers walk the shop at once, each a goroutine.
const guestBuyers = 64

// guestInstanceConns is the MariaDB pool of each of the scenario's two instances: beside the
// shared instance that creates the product (48) and the harness's (48), within MariaDB's 151.
const guestInstanceConns = 24

// guestMailFrom is the instances' CARDSHOP_SMTP_FROM.
const guestMailFrom = "Card shop <shop@load.example>"

// guestShop is the scenario's Mailpit and the two instances that send it their mail.
type guestShop struct {
	mail  *mailpit.Server
	insts []*instance
	stop  func()
}

// startGuestShop starts the scenario's own Mailpit (its data in the run's directory) and two
// instances sending to it, with the dev provider on; the shared instances beyond the first
// (which creates the product) are stopped first, as for the clock instances, to stay within
// MariaDB's connections. A missing Mailpit returns errNoMailpit.
func (e *env) startGuestShop(ctx context.Context) (*guestShop, error) {
	dir := filepath.Join(e.dir, "mailpit")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	mp, stopMail, err := mailpit.StartProcess(mailpit.Options{Dir: dir})
	if err != nil {
		if _, missing := mailpit.Binary(); missing != nil {
			return nil, fmt.Errorf("%w: %v", errNoMailpit, missing)
		}
		return nil, err
	}
	for len(e.instances) > 1 {
		e.stopInstance(e.instances[len(e.instances)-1])
	}
	g := &guestShop{mail: mp}
	g.stop = func() {
		for _, in := range g.insts {
			e.stopInstance(in)
		}
		stopMail()
	}
	for i := range 2 {
		in, err := e.startInstance(ctx, fmt.Sprintf("shop-%d", i+1), fmt.Sprintf("127.0.0.1:%d", 6091+i),
			"CARDSHOP_SMTP_ADDR="+mp.SMTPAddr, "CARDSHOP_SMTP_FROM="+guestMailFrom, "CARDSHOP_SMTP_TLS=none",
			"CARDSHOP_DEV_PAYMENTS=true", "CARDSHOP_DEV_PAYMENTS_ALLOW_REAL=true",
			fmt.Sprintf("CARDSHOP_MYSQL_MAX_CONNS=%d", guestInstanceConns))
		if err != nil {
			g.stop()
			return nil, err
		}
		g.insts = append(g.insts, in)
	}
	return g, nil
}

// errNoMailpit: the mailpit binary is not installed.
var errNoMailpit = errors.New("the guest-checkout scenario needs Mailpit")

// guestWalk is one buyer's walk through the shop, and what it saw.
type guestWalk struct {
	buyer int
	email string
	qty   int
	// double sends the form that places the order twice at once (same key). The review step
	// before it is sent once: two review pages answered at once would each give the browser a
	// CSRF cookie of its own, and only the last one set stays, as in a browser.
	double bool
	pays   bool
	base   string // the instance it walks
	// no and secret are the order's number and access secret of the confirmation page; no is
	// "" when no answer confirmed an order.
	no, secret string
	// named are the order numbers its answers named: a double submit's two answers, both
	// confirming, name the same order.
	named []string
	// inProgress counts answers that were not a confirmation (a double submit's twin may be
	// refused while the first is placing the order).
	inProgress int
	posts      []time.Duration // each POST /checkout's latency (the POST that places the order)
	reviews    []time.Duration // each other POST of the order forms' (POST /checkout/review)
	statuses   []int           // each POST's status, of both kinds
	paid       bool            // the dev provider's pay page confirmed the payment (200)
	err        string          // why the walk stopped short, "" when it did not
}

// guestRun is the scenario's walks and its Mailpit.
type guestRun struct {
	shop    *guestShop
	walks   []*guestWalk
	elapsed time.Duration
}

// orders are the distinct orders the walks were shown.
func (g *guestRun) orders() map[string]*guestWalk {
	out := map[string]*guestWalk{}
	for _, w := range g.walks {
		if w.no != "" {
			out[w.no] = w
		}
	}
	return out
}

// accepted are the orders whose payment the dev provider's pay page confirmed.
func (g *guestRun) accepted() map[string]bool {
	out := map[string]bool{}
	for _, w := range g.walks {
		if w.no != "" && w.paid {
			out[w.no] = true
		}
	}
	return out
}

// guestLoad runs guestBuyers goroutines for the scenario's duration, each walking the form
// path for one new buyer after another (the last walks finish after it), spread over insts.
// It returns the checkout POSTs as a WrkResult (rate, latency percentiles, statuses).
func (e *env) guestLoad(ctx context.Context, sc scenario, insts []*instance, pid int64, res *scenarioResult) (WrkResult, error) {
	for _, in := range insts {
		if err := expectPage(ctx, in, fmt.Sprintf("/p/%d", pid)); err != nil {
			return WrkResult{}, err
		}
	}
	g := res.guest
	transport := &http.Transport{MaxIdleConnsPerHost: 2 * guestBuyers, MaxConnsPerHost: 4 * guestBuyers}
	defer transport.CloseIdleConnections()
	var next atomic.Int64
	var mu sync.Mutex
	start := time.Now()
	deadline := start.Add(e.o.duration)
	var wg sync.WaitGroup
	for range guestBuyers {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				w := &guestWalk{buyer: i, email: fmt.Sprintf("lc%d-%06d@load.example", pid, i), qty: 1 + i%max(sc.qtyMax, 1),
					double: i%5 == 3, pays: float64(i%10) < e.o.payShare*10, base: insts[i%len(insts)].base}
				w.walk(ctx, transport, pid)
				mu.Lock()
				g.walks = append(g.walks, w)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	g.elapsed = time.Since(start)
	if ctx.Err() != nil {
		return WrkResult{}, ctx.Err()
	}
	return g.result(), nil
}

// result is the checkout POSTs as a WrkResult (the statuses are of every POST of the order
// forms, review steps too).
func (g *guestRun) result() WrkResult {
	out := WrkResult{Status: map[int]int64{}, Counts: map[string]int64{}}
	var lat []time.Duration
	for _, w := range g.walks {
		lat = append(lat, w.posts...)
		for _, st := range w.statuses {
			out.Status[st]++
		}
	}
	slices.Sort(lat)
	out.Requests = int64(len(lat))
	if g.elapsed > 0 {
		out.RPS = float64(len(lat)) / g.elapsed.Seconds()
	}
	out.P50, out.P90, out.P99 = percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99)
	if len(lat) > 0 {
		out.Max = lat[len(lat)-1]
	}
	return out
}

// reviewLatency is the p50 and p99 of the review step's POSTs, zero without any.
func (g *guestRun) reviewLatency() (p50, p99 time.Duration, n int) {
	var lat []time.Duration
	for _, w := range g.walks {
		lat = append(lat, w.reviews...)
	}
	slices.Sort(lat)
	return percentile(lat, 0.50), percentile(lat, 0.99), len(lat)
}

// percentile is the q-th quantile of sorted durations (nearest rank), 0 for none.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// noRedirect makes a client hand back a redirect instead of following it: the walk reads
// where it leads.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// walk is one buyer: the product page, its form posted (twice at once for a double submit),
// the review page's form too when the shop answers one, and, for a paying buyer, the pay form
// and the dev provider's Pay button.
func (w *guestWalk) walk(ctx context.Context, t http.RoundTripper, pid int64) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: t, Timeout: 30 * time.Second, CheckRedirect: noRedirect}
	st, page, err := get(ctx, c, w.base+fmt.Sprintf("/p/%d", pid))
	if err != nil || st != http.StatusOK {
		w.err = fmt.Sprintf("GET /p/%d: %d %v", pid, st, err)
		return
	}
	form, ok := productForm(page)
	if !ok {
		w.err = fmt.Sprintf("GET /p/%d: no order form", pid)
		return
	}
	fill := map[string]string{"qty": strconv.Itoa(w.qty), "email": w.email, "provider": "dev"}
	var confirmed string
	// The product page's form, then the review page's when the shop answers one: at most a
	// few steps, never a loop.
	for step := 0; step < 3 && confirmed == ""; step++ {
		answers := w.submit(ctx, c, form.action, form.fill(fill))
		var review *pageForm
		for _, a := range answers {
			if no, secret, ok := confirmation(a.page); ok {
				w.named = append(w.named, no)
				if confirmed == "" {
					confirmed, w.no, w.secret = a.page, no, secret
				}
				continue
			}
			if f, ok := keyForm(a.page); ok && a.status == http.StatusOK {
				if review == nil {
					review = &f
				}
				continue
			}
			w.inProgress++
			if w.err == "" {
				w.err = fmt.Sprintf("POST %s: %d %s", form.action, a.status, trim(pageText(a.text()), 160))
			}
		}
		if confirmed != "" {
			w.err = ""
			break
		}
		if review == nil {
			return
		}
		form = *review
	}
	if confirmed == "" {
		w.err = "no confirmation after three forms"
		return
	}
	if w.pays {
		w.pay(ctx, c, confirmed)
	}
}

// answer is one POST's answer.
type answer struct {
	status int
	page   string
	err    error
}

// text is the answer's page, or its error.
func (a answer) text() string {
	if a.err != nil {
		return a.err.Error()
	}
	return a.page
}

// submit posts the form (twice at once for a double submit of a form with a key) and times
// each POST.
func (w *guestWalk) submit(ctx context.Context, c *http.Client, action string, form url.Values) []answer {
	n := 1
	if _, placing := form["key"]; w.double && placing {
		n = 2
	}
	out := make([]answer, n)
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			out[i].status, out[i].page, out[i].err = postForm(ctx, c, w.base+action, form)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i := range n {
		if action == "/checkout" {
			w.posts = append(w.posts, took[i])
		} else {
			w.reviews = append(w.reviews, took[i])
		}
		w.statuses = append(w.statuses, out[i].status)
	}
	return out
}

// pay posts the confirmation page's pay form with the dev provider, follows the 303 to the
// provider's pay link and presses Pay there (the link's signed parameters and choice=pay).
func (w *guestWalk) pay(ctx context.Context, c *http.Client, confirmed string) {
	csrf := csrfOf(confirmed, "/pay")
	if csrf == "" {
		w.err = "the confirmation page has no pay form"
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.base+"/orders/"+url.PathEscape(w.no)+"/pay",
		strings.NewReader(url.Values{"csrf": {csrf}, "provider": {"dev"}}.Encode()))
	if err != nil {
		w.err = err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		w.err = "POST pay: " + err.Error()
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	link, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil || !strings.HasPrefix(link.Path, "/dev/pay/") {
		w.err = fmt.Sprintf("POST pay: %d to %q, want 303 to the dev pay page", resp.StatusCode, resp.Header.Get("Location"))
		return
	}
	form := link.Query()
	form.Set("choice", "pay")
	confirm := link.Scheme + "://" + link.Host + link.Path + "/confirm"
	st, page, err := postForm(ctx, c, confirm, form)
	if err != nil || st != http.StatusOK {
		w.err = fmt.Sprintf("POST %s: %d %v %s", link.Path+"/confirm", st, err, trim(pageText(page), 160))
		return
	}
	w.paid = true
}

// get fetches a page.
func get(ctx context.Context, c *http.Client, u string) (int, string, error) {
	st, b, err := request(ctx, c, http.MethodGet, u, nil)
	return st, string(b), err
}

// postForm posts a form and returns the answer's status and page.
func postForm(ctx context.Context, c *http.Client, u string, form url.Values) (int, string, error) {
	st, b, err := request(ctx, c, http.MethodPost, u, strings.NewReader(form.Encode()),
		"Content-Type", "application/x-www-form-urlencoded")
	return st, string(b), err
}
