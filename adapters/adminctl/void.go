package adminctl

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"cardshop/adapters/adminclient"
	"cardshop/application"
	"cardshop/domain"
)

// codesVoid voids the codes of a file through the admin API, in calls of at most
// MaxVoidCodes codes, and prints the counts (never a code).
func codesVoid(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("codes-void", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	product := fs.Int64("product", 0, "product id (required)")
	file := fs.String("file", "", "file of codes, one per line, or - for standard input (required)")
	reason := fs.String("reason", "", "why (required, at most 500 characters; recorded in the audit log)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: cardshopctl codes-void -product ID -file FILE|- -reason TEXT [-url URL]

Takes the file's codes out of a frozen product's pool for good (a leaked batch), through the
admin API (POST /admin/products/ID/codes/void; an admin's token in CARDSHOP_ADMIN_TOKEN).
Freeze the product first. One code per line, read as an import reads it (surrounding space
trimmed); blank lines and lines starting with # are skipped. The codes are sent %d per
call; each call voids the product's sellable codes among them, or none when they exceed the
gate's free stock (the rest is promised to orders in flight). Prints the counts: voided, not
found, not voidable (SOLD, VOID already, another product's); never a code.

Flags:
`, application.MaxVoidCodes)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *product <= 0 || *file == "" || strings.TrimSpace(*reason) == "" || fs.NArg() != 0 {
		fs.Usage()
		return errors.New("-product, -file and -reason are required, and nothing else")
	}
	adminToken := os.Getenv("CARDSHOP_ADMIN_TOKEN")
	if adminToken == "" {
		return errors.New("set CARDSHOP_ADMIN_TOKEN")
	}
	in := io.Reader(os.Stdin)
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	codes, err := readVoidCodes(in)
	if err != nil {
		return err
	}
	if len(codes) == 0 {
		return errors.New("the file holds no codes")
	}
	client := adminclient.New(*base, adminToken)
	var total adminclient.VoidAnswer
	for start := 0; start < len(codes); start += application.MaxVoidCodes {
		batch := codes[start:min(start+application.MaxVoidCodes, len(codes))]
		ans, err := client.VoidCodes(context.Background(), *product, batch, *reason)
		if err != nil {
			if start > 0 {
				fmt.Fprintf(stdout, "voided %d · not found %d · not voidable %d (the first %d codes)\n",
					total.Voided, total.NotFound, total.NotVoidable, start)
			}
			return fmt.Errorf("codes %d to %d: %w", start+1, start+len(batch), err)
		}
		total.Voided += ans.Voided
		total.NotFound += ans.NotFound
		total.NotVoidable += ans.NotVoidable
	}
	fmt.Fprintf(stdout, "voided %d · not found %d · not voidable %d (%d codes)\n", total.Voided, total.NotFound, total.NotVoidable, len(codes))
	return nil
}

// readVoidCodes reads one code per line, normalised as an import normalises a line; blank
// lines and comments are skipped.
func readVoidCodes(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	var out []string
	for sc.Scan() {
		c := domain.NormalizeCardCode(sc.Text())
		if c == "" || strings.HasPrefix(c, "#") {
			continue
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read codes: %w", err)
	}
	return out, nil
}
