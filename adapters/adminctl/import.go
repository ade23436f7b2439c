package adminctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"cardshop/adapters/adminclient"
)

const importUsage = `Usage: cardshopctl import-codes -product ID [-url URL] [-format lines|csv] [-progress 1s] FILE|-

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
		f, err := os.Open(name) //nolint:gosec // G304: the operator's own file argument
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
	uses := 0 // printed for a product of multi-use codes only: the stock the codes added
	if r.Uses != r.Added {
		uses = r.Uses
	}
	for _, c := range []struct {
		label string
		n     int
	}{{"uses", uses}, {"comments", r.Comments}, {"header", r.Headers}, {"cut line", r.Unterminated}, {"filled", r.Filled}} {
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
