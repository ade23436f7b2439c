package bootstrap

import (
	"bytes"
	"context"
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
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"cardshop/adapters/adminclient"
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
  secrets print fresh random values for every secret cardshop needs, as an env file
  import-codes  stream a file of codes into a product's pool (admin API, CARDSHOP_ADMIN_TOKEN)
  codes-void    take a file's codes out of a frozen product's pool for good (admin API)
  reconcile     print a product's reconciliation, optionally repairing the gate (admin API)
  refund  refund an order: its money through its payment provider, then its codes (admin API)
  product-create  create a product: name, prices, sale window, limits (admin API)
  product-update  change the fields of a product given as flags, and only those (admin API)
  product-show    print a product (admin API)
  whoami          print who CARDSHOP_ADMIN_TOKEN is: an operator's name and role (admin API)
  operator-add    add an operator with a role; prints its token, shown only once (admin API)
  operator-list   list the operators and their roles (admin API)
  operator-role   change an operator's role (admin API)
  operator-rotate give an operator a new token, ending the old one (admin API)
  operator-remove remove an operator, ending its token (admin API)
  audit           print the audit log of writes, newest first, with filters (admin API)
  orders          search orders by buyer, product, status and time, newest first (admin API)
  alerts          print the open alerts (-all: every alert), newest first (admin API)
  alert-ack       acknowledge an open alert, with an optional note (admin API)

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
	case "secrets":
		err = secretsCmd(args[1:], stdout, stderr)
	case "import-codes":
		err = importCodes(args[1:], stdout, stderr)
	case "codes-void":
		err = codesVoid(args[1:], stdout, stderr)
	case "reconcile":
		err = reconcile(args[1:], stdout, stderr)
	case "refund":
		err = refund(args[1:], stdout, stderr)
	case "product-create":
		err = productCreate(args[1:], stdout, stderr)
	case "product-update":
		err = productUpdate(args[1:], stdout, stderr)
	case "product-show":
		err = productShow(args[1:], stdout, stderr)
	case "whoami":
		err = whoami(args[1:], stdout, stderr)
	case "operator-add":
		err = operatorAdd(args[1:], stdout, stderr)
	case "operator-list":
		err = operatorList(args[1:], stdout, stderr)
	case "operator-role":
		err = operatorRole(args[1:], stdout, stderr)
	case "operator-rotate":
		err = operatorRotate(args[1:], stdout, stderr)
	case "operator-remove":
		err = operatorRemove(args[1:], stdout, stderr)
	case "audit":
		err = audit(args[1:], stdout, stderr)
	case "orders":
		err = orders(args[1:], stdout, stderr)
	case "alerts":
		err = alerts(args[1:], stdout, stderr)
	case "alert-ack":
		err = alertAck(args[1:], stdout, stderr)
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
	var bad usageError
	if errors.As(err, &bad) {
		fmt.Fprintln(stderr, "cardshop:", err)
		return 2
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
	adminToken := os.Getenv("CARDSHOP_ADMIN_TOKEN")
	client := adminclient.New(*url, adminToken)
	if *amount < 0 {
		if adminToken == "" {
			return errors.New("give -amount, or set CARDSHOP_ADMIN_TOKEN to read the order's amount")
		}
		a, err := client.OrderAmount(context.Background(), *order)
		if err != nil {
			return err
		}
		*amount = a
	}
	if *ref == "" {
		*ref = fmt.Sprintf("cli-%d", time.Now().UnixNano())
	}
	answered, answer, err := client.Pay(context.Background(), signer,
		paysig.Notice{OrderNo: *order, Status: *status, Amount: *amount, PaymentRef: *ref}, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d %s\n", answered, bytes.TrimSpace(answer))
	if answered != http.StatusOK {
		return fmt.Errorf("callback answered %d", answered)
	}
	return nil
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
		def, _ = EnvDefault("CARDSHOP_MYSQL_DSN")
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
	if *format != "lines" && *format != "csv" {
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
	up := adminclient.Upload{Codes: in, Size: size, Chunked: name == "-", CSV: *format == "csv", Every: *every,
		Progress: func(p adminclient.Progress) {
			if p.Status == 0 {
				fmt.Fprintf(stderr, "import-codes: sent %s\n", p)
			} else {
				fmt.Fprintf(stderr, "import-codes: sent %s, answered %d\n", p, p.Status)
			}
		}}
	rep, err := adminclient.New(*base, adminToken).ImportCodes(ctx, *product, up)
	var cut *adminclient.SendError
	if errors.As(err, &cut) {
		return fmt.Errorf("import-codes after %s (what the service had read is imported; run again, it comes back as duplicates): %w",
			cut.Sent, cut.Err)
	}
	var refused *adminclient.ServiceError
	if errors.As(err, &refused) && refused.Import != nil {
		// An import that stopped half-way says what it did before the error.
		printImport(stdout, refused.Import)
		fmt.Fprintf(stdout, "stopped after line %d: lines 1 to %d are imported or listed above; send the rest from line %d\n",
			refused.Import.Through, refused.Import.Through, refused.Import.Through+1)
	}
	if err != nil {
		return err
	}
	printImport(stdout, &rep)
	return nil
}

// printImport writes the counts, then every line not imported that the service listed.
func printImport(w io.Writer, r *adminclient.ImportReport) {
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
	rep, err := adminclient.New(*base, adminToken).Reconcile(context.Background(), *product, *repair)
	if err != nil {
		return err
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

// refund refunds an order through the admin API and prints where its money and codes went.
func refund(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("refund", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	order := fs.String("order", "", "order number (required)")
	void := fs.Bool("void", false, "void the codes, revealed or not")
	recycle := fs.Bool("recycle", false, "recycle the codes even if the buyer has seen them")
	reason := fs.String("reason", "", "why (recorded on the order)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: cardshop refund -order NO [-url URL] [-void | -recycle] [-reason TEXT]

Refunds an order through the admin API (POST /admin/orders/NO/refund; admin token from
CARDSHOP_ADMIN_TOKEN): its money through the provider that took it (the same refund number on
every try, so running it again never pays out twice), then its codes. Without -void or
-recycle, codes the buyer has seen are voided and the others recycled. The choice (and the
reason) is kept with the refund of the money: a refund the provider finishes later applies it
then, and running the command again while it is under way does not change it. Exit status: 0 when
the order is REFUNDED or its provider finishes the refund later, 1 otherwise (a refusal, a
provider that cannot be reached: run it again).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *order == "" || fs.NArg() != 0 || (*void && *recycle) {
		fs.Usage()
		return errors.New("-order is required, -void and -recycle exclude each other, and nothing else")
	}
	adminToken := os.Getenv("CARDSHOP_ADMIN_TOKEN")
	if adminToken == "" {
		return errors.New("set CARDSHOP_ADMIN_TOKEN")
	}
	ans, err := adminclient.New(*base, adminToken).Refund(context.Background(), *order, *void, *recycle, *reason)
	if err != nil {
		return err
	}
	if m := ans.Money; m != nil {
		fmt.Fprintf(stdout, "money   %s at %s (refund %s", m.Status, m.Provider, m.RefundNo)
		if m.RefundRef != "" {
			fmt.Fprintf(stdout, ", provider ref %s", m.RefundRef)
		}
		fmt.Fprintln(stdout, ")")
		if m.ByHand {
			fmt.Fprintf(stdout, "        %s offers no refund through cardshop: return the money there by hand\n", m.Provider)
		}
	} else {
		fmt.Fprintln(stdout, "money   not through a provider (paid through the signed callback: the storefront returns it)")
	}
	if ans.Accepted {
		fmt.Fprintf(stdout, "order   %s %s: the provider finishes the refund later; the codes follow then, as its first run chose\n", ans.OrderNo, ans.Status)
		return nil
	}
	fmt.Fprintf(stdout, "order   %s %s · codes recycled %d, voided %d\n", ans.OrderNo, ans.Status, ans.CodesRecycled, ans.CodesVoided)
	return nil
}
