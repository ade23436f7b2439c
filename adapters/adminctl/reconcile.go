package adminctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"cardshop/adapters/adminclient"
)

// reconcile prints a product's reconciliation (GET), or repairs the gate first (POST
// ?repair=true), and fails when differences remain.
func reconcile(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	product := fs.Int64("product", 0, "product id (required)")
	repair := fs.Bool("repair", false, "drain the outbox and rebuild the gate from the ledger first (the ledger wins); the report then describes the repaired state")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: cardshopctl reconcile -product ID [-url URL] [-repair]

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
