package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"cardshop/adapters/authtoken"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/paysig"
	"cardshop/domain"
)

const usage = `cardshop sells pre-generated card codes.

Usage: cardshop <command> [flags]

Commands:
  serve   run the HTTP service (configuration from CARDSHOP_* environment variables)
  migrate apply the MySQL schema (CARDSHOP_MYSQL_DSN)
  pay     send a signed payment callback for an order, as a payment provider would
  token   issue a buyer token
  import-codes  stream a file of codes into a product's pool (admin API, CARDSHOP_ADMIN_TOKEN)
  reconcile     print a product's reconciliation, optionally repairing the gate (admin API)

Run "cardshop <command> -h" for a command's flags.
`

// Main runs the command line and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"serve"}
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(args[1:], stderr)
	case "migrate":
		err = migrate(args[1:], stdout, stderr)
	case "pay":
		err = pay(args[1:], stdout, stderr)
	case "token":
		err = token(args[1:], stdout, stderr)
	case "import-codes":
		err = importCodes(args[1:], stdout, stderr)
	case "reconcile":
		err = reconcile(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "cardshop:", err)
		return 1
	}
	return 0
}

func serve(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: cardshop serve\n\nRuns the service until SIGINT/SIGTERM. Settings: %s\n", strings.Join(EnvNames(), ", "))
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := LoadConfig(os.Environ())
	if err != nil {
		return err
	}
	app := fx.New(Module(cfg), fx.WithLogger(func() fxevent.Logger { return fxevent.NopLogger }))
	if err := app.Err(); err != nil {
		return err
	}
	app.Run() // blocks until a signal, then stops every hook in reverse order
	return nil
}

// pay signs and sends a callback, reading CARDSHOP_PAYMENT_SECRET. Without -amount it asks
// the admin API for the order's amount (needs CARDSHOP_ADMIN_TOKEN).
func pay(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	order := fs.String("order", "", "order number (required)")
	amount := fs.Int64("amount", -1, "paid amount in minor units (default: the order's amount, read with the admin token)")
	status := fs.String("status", "paid", `"paid" or "failed"`)
	ref := fs.String("ref", "", "provider payment reference (default: generated)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArguments(fs); err != nil {
		return err
	}
	if *order == "" {
		fs.Usage()
		return errors.New("-order is required")
	}
	signer, err := paysig.New(os.Getenv("CARDSHOP_PAYMENT_SECRET"), 0)
	if err != nil {
		return fmt.Errorf("CARDSHOP_PAYMENT_SECRET: %w", err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if *amount < 0 {
		a, err := orderAmount(client, *url, *order, os.Getenv("CARDSHOP_ADMIN_TOKEN"))
		if err != nil {
			return err
		}
		*amount = a
	}
	if *ref == "" {
		*ref = fmt.Sprintf("cli-%d", time.Now().UnixNano())
	}
	body, ts, sig, err := signer.SignedBody(paysig.Notice{OrderNo: *order, Status: *status, Amount: *amount, PaymentRef: *ref}, time.Now())
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(*url, "/")+"/api/payments/callback", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(paysig.HeaderTimestamp, ts)
	req.Header.Set(paysig.HeaderSignature, sig)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Fprintf(stdout, "%d %s\n", resp.StatusCode, bytes.TrimSpace(out))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("callback answered %d", resp.StatusCode)
	}
	return nil
}

func orderAmount(client *http.Client, base, order, adminToken string) (int64, error) {
	if adminToken == "" {
		return 0, errors.New("give -amount, or set CARDSHOP_ADMIN_TOKEN to read the order's amount")
	}
	// codes=false: only the amount is needed, and a read with codes would count as a reveal
	// (a later refund would void the codes of a paid order).
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+"/admin/orders/"+order+"?codes=false", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading order %s answered %d", order, resp.StatusCode)
	}
	var o struct {
		Amount int64 `json:"amount"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return 0, fmt.Errorf("reading order %s: %w", order, err)
	}
	return o.Amount, nil
}

// token issues a buyer token offline with CARDSHOP_TOKEN_SECRET.
func token(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	buyer := fs.String("buyer", "", "buyer id (required)")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArguments(fs); err != nil {
		return err
	}
	issuer, err := authtoken.New(os.Getenv("CARDSHOP_TOKEN_SECRET"))
	if err != nil {
		return fmt.Errorf("CARDSHOP_TOKEN_SECRET: %w", err)
	}
	tok, _, err := issuer.Issue(domain.BuyerID(*buyer), time.Now(), *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// migrate applies the embedded schema to CARDSHOP_MYSQL_DSN (or -dsn) and lists what it did.
func migrate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("CARDSHOP_MYSQL_DSN")
	if def == "" {
		def = envVars["CARDSHOP_MYSQL_DSN"].def
	}
	dsn := fs.String("dsn", def, "MySQL DSN (default: CARDSHOP_MYSQL_DSN)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArguments(fs); err != nil { // "migrate DSN" must not migrate the default database
		return err
	}
	db, err := mysqlstore.Open(*dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	applied, err := mysqlstore.Migrate(ctx, db)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "schema up to date")
	}
	for _, v := range applied {
		fmt.Fprintln(stdout, "applied", v)
	}
	return nil
}

const importUsage = `Usage: cardshop import-codes -product ID [-url URL] [-format lines|csv] [-progress 1s] FILE|-

Streams FILE (or standard input with "-") to POST /admin/products/ID/codes with the admin
token from CARDSHOP_ADMIN_TOKEN. The file is never held in memory: it is the request body,
read as it is sent, so any size the service accepts works (1 GiB by default). Standard input
is sent chunked, each chunk ending a line, with a final newline added if it lacks one.
Progress (bytes sent, and the percentage when the size is known) goes to stderr; at the end
the service's report is printed: codes added, duplicates (the product already has them: an
earlier line or an earlier import), invalid lines, codes in another product's pool, comments,
the header, and every line not imported with its number and reason (the first 1,000).

Input: one code per line; blank lines are ignored and lines starting with # are comments; for
CSV the first field is the code and the rest of the line is ignored; a first line "code" (or
"code,…") is a header. Surrounding spaces and invisible characters are trimmed and full-width
letters folded; a code is then 4 to 128 printable ASCII characters without spaces, commas or
double quotes, case-sensitive, and unique across every product. The service reads both forms
the same way: -format only checks your intent and labels the upload (text/plain or text/csv).

Exit status: 0 when the service answered 200 (even with lines not imported), 1 on any other
answer (its JSON error is printed) or failure. An upload cut short (413 body_too_large, a body
that could not be read) keeps the lines the service had already imported, and its answer says
through which line: the report is printed with "send the rest from line N". Running the whole
file again is safe too: the codes already in come back as duplicates.

Flags:
`

// importCodes streams a file of codes to the admin API and prints the service's report.
func importCodes(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("import-codes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	product := fs.Int64("product", 0, "product id (required)")
	format := fs.String("format", "lines", `"lines" (one code per line) or "csv" (code in the first field); the service accepts both either way`)
	every := fs.Duration("progress", time.Second, "how often to print progress to stderr (0: never)")
	fs.Usage = func() {
		fmt.Fprint(stderr, importUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *product <= 0 {
		fs.Usage()
		return errors.New("-product is required")
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("give one FILE, or - for standard input")
	}
	contentType := "text/plain; charset=utf-8"
	switch *format {
	case "lines":
	case "csv":
		contentType = "text/csv; charset=utf-8"
	default:
		fs.Usage()
		return fmt.Errorf("-format %q: want lines or csv", *format)
	}
	adminToken := os.Getenv("CARDSHOP_ADMIN_TOKEN")
	if adminToken == "" {
		return errors.New("set CARDSHOP_ADMIN_TOKEN")
	}

	name := fs.Arg(0)
	var in *os.File
	size := int64(-1) // unknown
	if name == "-" {
		in = os.Stdin
		if st, err := in.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size() // for the percentage only: stdin may not start at offset 0
		}
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file (pipe it on standard input with -)", name)
		}
		in, size = f, st.Size()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Ask for the product first: a refusal (unknown product, wrong token) answered while a
	// large upload is still being sent resets the connection, and its JSON would be lost.
	productURL := fmt.Sprintf("%s/admin/products/%d", strings.TrimRight(*base, "/"), *product)
	if _, err := adminCall(ctx, &http.Client{Timeout: 30 * time.Second}, http.MethodGet, productURL, adminToken); err != nil {
		return err
	}
	var src io.Reader = in
	if name == "-" {
		src = newLineChunks(in) // sent chunked: every chunk ends a line
	}
	body := &countingReader{r: src}
	url := productURL + "/codes"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return err
	}
	if name != "-" {
		req.ContentLength = size // lets the service refuse a file over its limit before reading it
		if size == 0 {
			req.Body = http.NoBody
		}
	} // else chunked
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+adminToken)

	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	if *every > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(*every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					fmt.Fprintf(stderr, "import-codes: sent %s\n", progress(body.n.Load(), size, time.Since(start)))
				}
			}
		}()
	}
	// No client timeout: the service answers once it has imported the whole upload.
	resp, err := (&http.Client{}).Do(req)
	close(done)
	wg.Wait() // the progress goroutine no longer writes to stderr
	if err != nil {
		return fmt.Errorf("import-codes after %s (what the service had read is imported; run again, it comes back as duplicates): %w",
			progress(body.n.Load(), size, time.Since(start)), err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if *every > 0 {
		fmt.Fprintf(stderr, "import-codes: sent %s, answered %d\n", progress(body.n.Load(), size, time.Since(start)), resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		// An import that stopped half-way says what it did before the error.
		var failed struct {
			Import *importReport `json:"import"`
		}
		if json.Unmarshal(answer, &failed) == nil && failed.Import != nil {
			failed.Import.print(stdout)
			fmt.Fprintf(stdout, "stopped after line %d: lines 1 to %d are imported or listed above; send the rest from line %d\n",
				failed.Import.Through, failed.Import.Through, failed.Import.Through+1)
		}
		return fmt.Errorf("the service answered %d: %s", resp.StatusCode, bytes.TrimSpace(answer))
	}
	var rep importReport
	if err := json.Unmarshal(answer, &rep); err != nil {
		return fmt.Errorf("unreadable answer %q: %w", answer, err)
	}
	rep.print(stdout)
	return nil
}

// importReport is the service's answer to an import (ImportReport in openapi.json).
type importReport struct {
	Added        int `json:"added"`
	Duplicates   int `json:"duplicates"`
	InPool       int `json:"in_pool"`
	Invalid      int `json:"invalid"`
	Comments     int `json:"comments"`
	Headers      int `json:"headers"`
	Unterminated int `json:"unterminated"`
	Skipped      []struct {
		Line   int    `json:"line"`
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	} `json:"skipped"`
	Truncated bool `json:"truncated"`
	Through   int  `json:"through_line"`
}

// print writes the counts, then every line not imported that the service listed.
func (r *importReport) print(w io.Writer) {
	fmt.Fprintf(w, "added       %d\nduplicates  %d\ninvalid     %d\nin pool     %d\n", r.Added, r.Duplicates, r.Invalid, r.InPool)
	for _, c := range []struct {
		label string
		n     int
	}{{"comments", r.Comments}, {"header", r.Headers}, {"cut line", r.Unterminated}} {
		if c.n > 0 {
			fmt.Fprintf(w, "%-12s%d\n", c.label, c.n)
		}
	}
	for _, l := range r.Skipped {
		if l.Reason == "invalid" || l.Reason == "unterminated" {
			fmt.Fprintf(w, "line %d: %s (%s)\n", l.Line, l.Reason, l.Detail)
		} else {
			fmt.Fprintf(w, "line %d: %s\n", l.Line, l.Reason)
		}
	}
	if r.Truncated {
		total := r.Duplicates + r.InPool + r.Invalid + r.Comments + r.Headers + r.Unterminated
		fmt.Fprintf(w, "… and %d more lines not imported (the service lists the first %d; the counts above are complete)\n",
			total-len(r.Skipped), len(r.Skipped))
	}
}

// lineChunks passes a stream on in reads that end at a line end, and ends it with a newline.
// The HTTP client sends each read of a body of unknown size as one chunk, and the service
// cannot tell a connection cut between two chunks from the body's end: so every chunk ends a
// line, and a last line is never cut (the service does not import a last line without a
// newline from a chunked body). Only a line longer than a whole read — never a valid code —
// is split.
type lineChunks struct {
	r   io.Reader
	buf []byte // read and not passed on yet
	eof bool
}

func newLineChunks(r io.Reader) *lineChunks { return &lineChunks{r: r, buf: make([]byte, 0, 64<<10)} }

func (l *lineChunks) Read(p []byte) (int, error) {
	for {
		if i := bytes.LastIndexByte(l.buf[:min(len(l.buf), len(p))], '\n'); i >= 0 {
			return l.pass(p, i+1), nil
		}
		if len(l.buf) >= len(p) || len(l.buf) == cap(l.buf) {
			return l.pass(p, min(len(l.buf), len(p))), nil
		}
		if l.eof {
			if len(l.buf) == 0 {
				return 0, io.EOF
			}
			n := copy(p, l.buf) // less than p holds, without a newline: add one
			p[n] = '\n'
			l.buf = l.buf[:0]
			return n + 1, nil
		}
		n, err := l.r.Read(l.buf[len(l.buf):cap(l.buf)])
		l.buf = l.buf[:len(l.buf)+n]
		if errors.Is(err, io.EOF) {
			l.eof = true
		} else if err != nil {
			return 0, err
		}
	}
}

// pass copies the first n buffered bytes to p and drops them from the buffer.
func (l *lineChunks) pass(p []byte, n int) int {
	copy(p, l.buf[:n])
	l.buf = append(l.buf[:0], l.buf[n:]...)
	return n
}

// countingReader counts the bytes read through it; the progress goroutine reads the count.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// progress describes n bytes sent of size (-1: unknown) in elapsed.
func progress(n, size int64, elapsed time.Duration) string {
	s := mib(n)
	if size > 0 {
		s += fmt.Sprintf(" of %s (%d%%)", mib(size), n*100/size)
	}
	s += " in " + elapsed.Round(100*time.Millisecond).String()
	if elapsed >= time.Second/2 {
		s += fmt.Sprintf(", %s/s", mib(int64(float64(n)/elapsed.Seconds())))
	}
	return s
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// reconcile prints a product's reconciliation (GET), or repairs the gate first (POST
// ?repair=true), and fails when differences remain.
func reconcile(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	product := fs.Int64("product", 0, "product id (required)")
	repair := fs.Bool("repair", false, "drain the outbox and rebuild the gate from the ledger first (the ledger wins); the report then describes the repaired state")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: cardshop reconcile -product ID [-url URL] [-repair]

Compares a product's gate, card pool, orders and stock flow through the admin API
(GET /admin/products/ID/reconcile, or POST ...?repair=true with -repair; admin token from
CARDSHOP_ADMIN_TOKEN) and prints one line per check with want, got and OK or DIFF, the gate
levels, and "N differences". The numbers are exact only when nothing is in flight for the
product. Exit status: 0 when every check agrees, 1 when differences remain or on failure.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *product <= 0 || fs.NArg() != 0 {
		fs.Usage()
		return errors.New("-product is required, and nothing else")
	}
	adminToken := os.Getenv("CARDSHOP_ADMIN_TOKEN")
	if adminToken == "" {
		return errors.New("set CARDSHOP_ADMIN_TOKEN")
	}
	method, url := http.MethodGet, fmt.Sprintf("%s/admin/products/%d/reconcile", strings.TrimRight(*base, "/"), *product)
	if *repair {
		method, url = http.MethodPost, url+"?repair=true"
	}
	answer, err := adminCall(context.Background(), &http.Client{Timeout: time.Minute}, method, url, adminToken)
	if err != nil {
		return err
	}
	var rep struct {
		ProductID   int64 `json:"product_id"`
		Differences int   `json:"differences"`
		Repaired    bool  `json:"repaired"`
		Gate        *struct {
			Stock  int64 `json:"stock"`
			Sold   int64 `json:"sold"`
			Frozen bool  `json:"frozen"`
		} `json:"gate"`
		Cards  map[string]int64 `json:"cards"`
		Orders map[string]struct {
			Orders int64 `json:"orders"`
			Qty    int64 `json:"qty"`
		} `json:"orders"`
		Checks []struct {
			Name string `json:"name"`
			Want int64  `json:"want"`
			Got  int64  `json:"got"`
			OK   bool   `json:"ok"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(answer, &rep); err != nil {
		return fmt.Errorf("unreadable answer %q: %w", answer, err)
	}
	fmt.Fprintf(stdout, "product %d", rep.ProductID)
	if rep.Repaired {
		fmt.Fprint(stdout, " (gate rebuilt from the ledger)")
	}
	fmt.Fprintln(stdout)
	if rep.Gate != nil {
		fmt.Fprintf(stdout, "gate    stock %d, sold %d, frozen %t\n", rep.Gate.Stock, rep.Gate.Sold, rep.Gate.Frozen)
	} else {
		fmt.Fprintln(stdout, "gate    unknown (not built: run with -repair)")
	}
	fmt.Fprintf(stdout, "cards   %s\n", sortedPairs(rep.Cards, func(v int64) string { return strconv.FormatInt(v, 10) }))
	orders := map[string]string{}
	for k, v := range rep.Orders {
		orders[k] = fmt.Sprintf("%d (qty %d)", v.Orders, v.Qty)
	}
	fmt.Fprintf(stdout, "orders  %s\n", sortedPairs(orders, func(v string) string { return v }))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, c := range rep.Checks {
		verdict := "OK"
		if !c.OK {
			verdict = "DIFF"
		}
		fmt.Fprintf(tw, "%s\t%s\twant %d\tgot %d\n", verdict, c.Name, c.Want, c.Got)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d differences\n", rep.Differences)
	if rep.Differences != 0 {
		hint := ""
		if !*repair {
			hint = " (if the gate is wrong, -repair rebuilds it from the ledger)"
		}
		return fmt.Errorf("%d differences remain%s", rep.Differences, hint)
	}
	return nil
}

// noArguments refuses what is left after the flags: the flag package stops at the first
// argument that is not a flag, so "migrate DSN" or "pay N -amount 5" would otherwise run with
// the defaults of everything after it.
func noArguments(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	fs.Usage()
	return fmt.Errorf("%s: unexpected argument %q (every value is given with a flag)", fs.Name(), fs.Arg(0))
}

// sortedPairs prints a map as "k1 v1, k2 v2" in key order, or "none".
func sortedPairs[V any](m map[string]V, str func(V) string) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + str(m[k])
	}
	return strings.Join(parts, ", ")
}

// adminCall sends a bodiless admin request and returns the answer of a 200, or an error
// carrying the service's JSON error.
func adminCall(ctx context.Context, client *http.Client, method, url, adminToken string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the service answered %d: %s", resp.StatusCode, bytes.TrimSpace(answer))
	}
	return answer, nil
}
