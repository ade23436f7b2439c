package adminctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"cardshop/adapters/adminclient"
)

// usageError is a command line that cannot run as given (a missing or malformed flag): Main
// exits 2 on it, where a failure exits 1.
type usageError struct{ error }

// parseUsage parses args into fs, and makes a malformed command line a usageError
// (flag.ErrHelp stays as it is: -h exits 0).
func parseUsage(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return usageError{fmt.Errorf("%s: unexpected argument %q (every value is given with a flag)", fs.Name(), fs.Arg(0))}
	}
	return nil
}

// refusal turns the service's JSON error into "400 invalid_request: ends_at: must be after
// starts_at"; any other error stays as it is.
func refusal(err error) error {
	var se *adminclient.ServiceError
	if errors.As(err, &se) && se.Code != "" {
		return fmt.Errorf("%d %s: %s", se.Status, se.Code, se.Message)
	}
	return err
}

const productFieldsHelp = `Prices are in minor units (cents): -price 500 is 5.00. -tiers are quantity prices for the
whole order, MIN_QTY:UNIT_PRICE pairs: "10:900,20:800" charges 9.00 a unit from 10 units on
and 8.00 from 20. -starts-at and -ends-at bound the sale window, in RFC 3339
(2030-01-02T15:04:05Z, or with an offset such as +08:00), kept to the millisecond: orders
before the start are refused as not started, from the end on as ended. -buyer-limit is the
most units one buyer may hold (0: no limit); -refund-releases-limit gives a refunded order's
units back to that limit; -low-stock-threshold is the stock at or below which the
product.low_stock event fires (0: never).

The product is printed as the service answers it, one "field: value" per line, times in
RFC 3339 UTC, "none" for an absent bound, limit or threshold.

Exit status: 0 on success; 1 when the service refuses (its code and message are printed,
such as "400 invalid_request: ends_at: must be after starts_at") or cannot be reached; 2 on
bad usage (a required flag missing, a value that does not parse, a stray argument).

Flags:
`

const productCreateUsage = `Usage: cardshopctl product-create [-url URL] -name N -price MINOR -max-per-order N [-id ID]
         [-description TEXT] [-code-uses N] [-tiers "10:900,20:800"] [-stock-display exact|level]
         [-starts-at RFC3339] [-ends-at RFC3339] [-buyer-limit N] [-refund-releases-limit]
         [-low-stock-threshold N]

Creates a product through the admin API (POST /admin/products; admin token from
CARDSHOP_ADMIN_TOKEN). Without -id the service chooses the id. A flag not given is the
service's default: one sale per code, no tiers, exact stock, always on sale, no limit, no
low-stock event. -code-uses sells each code up to N times (2 to 1000; 0: a shared key without a
limit, each import of it adding 1000 sales); it is fixed once the product exists.
`

const productUpdateUsage = `Usage: cardshopctl product-update -product ID [-url URL] [-name N] [-description TEXT]
         [-price MINOR] [-max-per-order N] [-tiers "10:900,20:800" | -tiers ""]
         [-stock-display exact|level]
         [-starts-at RFC3339 | -starts-at ""] [-ends-at RFC3339 | -ends-at ""] [-buyer-limit N]
         [-refund-releases-limit[=false]] [-low-stock-threshold N]

Changes a product through the admin API (PATCH /admin/products/ID; admin token from
CARDSHOP_ADMIN_TOKEN), sending only the flags given: every other field stays as it is.
-starts-at "" and -ends-at "" remove that bound of the sale window, -tiers "" removes the
quantity prices, -buyer-limit 0 and -low-stock-threshold 0 remove the limit and the threshold,
-refund-releases-limit=false turns it off, -description "" removes the description. The
service checks the product whole after the change (the tiers against the new price, the end
after the start); orders already placed keep their prices.
`

// productFlags are the fields of a product as flags; set names the ones given.
type productFlags struct {
	name                string
	description         string
	price               int64
	minPerOrder         int
	maxPerOrder         int
	group, variant      string
	tiers               []adminclient.Tier
	stockDisplay        string
	startsAt, endsAt    time.Time // zero: "" (no bound)
	buyerLimit          int
	refundReleasesLimit bool
	lowStockThreshold   int
}

// defineProductFlags defines the product's fields on fs, checking the syntax of tiers, times
// and the stock display as they are parsed.
func defineProductFlags(fs *flag.FlagSet, f *productFlags) {
	fs.StringVar(&f.name, "name", "", "the product's name, 1 to 128 characters")
	fs.StringVar(&f.description, "description", "", "what buyers read about the product: plain text (never HTML), lines as given, at most 2000 characters (\"\": none)")
	fs.Int64Var(&f.price, "price", 0, "the unit price in minor units (cents)")
	fs.IntVar(&f.minPerOrder, "min-per-order", 0, "the fewest units one order may buy, 1 to -max-per-order (0 or absent on create: 1)")
	fs.IntVar(&f.maxPerOrder, "max-per-order", 0, "the most units one order may buy, 1 to 1000")
	fs.StringVar(&f.group, "group", "", "the variant group the product is shown in, with -variant (\"\": on its own)")
	fs.StringVar(&f.variant, "variant", "", "the product's label in its -group")
	fs.Func("tiers", "quantity prices as `MIN_QTY:UNIT_PRICE,...` such as \"10:900,20:800\" (\"\": none)", func(s string) error {
		tiers, err := parseTiers(s)
		f.tiers = tiers
		return err
	})
	fs.Func("stock-display", "what the public catalogue shows of the stock: `exact|level`, the number or plenty/few/none", func(s string) error {
		if s != "exact" && s != "level" {
			return errors.New(`want "exact" or "level"`)
		}
		f.stockDisplay = s
		return nil
	})
	fs.Func("starts-at", "when the sale starts, an `RFC3339` time such as 2030-01-02T15:04:05Z (\"\": no start bound)", func(s string) (err error) {
		f.startsAt, err = parseBound(s)
		return err
	})
	fs.Func("ends-at", "when the sale ends, an `RFC3339` time (\"\": no end bound)", func(s string) (err error) {
		f.endsAt, err = parseBound(s)
		return err
	})
	fs.IntVar(&f.buyerLimit, "buyer-limit", 0, "the most units one buyer may hold in pending and paid orders (0: no limit)")
	fs.BoolVar(&f.refundReleasesLimit, "refund-releases-limit", false, "a refunded order's units no longer count against -buyer-limit")
	fs.IntVar(&f.lowStockThreshold, "low-stock-threshold", 0, "the stock at or below which product.low_stock fires (0: never)")
}

// parseTiers reads "10:900,20:800"; "" is no tiers. It checks the syntax only: the service
// judges the values.
func parseTiers(s string) ([]adminclient.Tier, error) {
	tiers := []adminclient.Tier{}
	if strings.TrimSpace(s) == "" {
		return tiers, nil
	}
	for _, pair := range strings.Split(s, ",") {
		qty, price, ok := strings.Cut(strings.TrimSpace(pair), ":")
		q, qErr := strconv.Atoi(strings.TrimSpace(qty))
		p, pErr := strconv.ParseInt(strings.TrimSpace(price), 10, 64)
		if !ok || qErr != nil || pErr != nil {
			return nil, fmt.Errorf(`%q is not MIN_QTY:UNIT_PRICE (want pairs of integers separated by commas, such as "10:900,20:800")`, pair)
		}
		tiers = append(tiers, adminclient.Tier{MinQty: q, UnitPrice: p})
	}
	return tiers, nil
}

// parseBound reads an RFC 3339 time; "" is the zero time (no bound).
func parseBound(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New(`want an RFC 3339 time such as 2030-01-02T15:04:05Z or 2030-01-02T23:04:05+08:00 ("" for none)`)
	}
	return t, nil
}

// given lists the flags set on the command line.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// adminClient returns a client of the service at base with CARDSHOP_ADMIN_TOKEN.
func adminClient(base string) (*adminclient.Client, error) {
	adminToken := os.Getenv("CARDSHOP_ADMIN_TOKEN")
	if adminToken == "" {
		return nil, errors.New("set CARDSHOP_ADMIN_TOKEN")
	}
	return adminclient.New(base, adminToken), nil
}

// productFlagSet is the flag set of a command that takes the product's fields: -url, the
// fields (into the returned productFlags), and a usage of the command's text and the fields'.
func productFlagSet(name, usage string, stderr io.Writer) (*flag.FlagSet, *string, *productFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	f := &productFlags{}
	defineProductFlags(fs, f)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage+"\n"+productFieldsHelp)
		fs.PrintDefaults()
	}
	return fs, base, f
}

// productCreate creates a product and prints it.
func productCreate(args []string, stdout, stderr io.Writer) error {
	fs, base, f := productFlagSet("product-create", productCreateUsage, stderr)
	id := fs.Int64("id", 0, "the product's id (default: the service chooses)")
	uses := fs.Int("code-uses", 1, "how many times each code is sold: 1, 2 to 1000, or 0 for a shared key (unlimited); fixed once created")
	if err := parseUsage(fs, args); err != nil {
		return err
	}
	set := given(fs)
	if !set["name"] || !set["price"] || !set["max-per-order"] {
		fs.Usage()
		return usageError{errors.New("-name, -price and -max-per-order are required")}
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	np := adminclient.NewProduct{ID: *id, Name: f.name, Description: f.description, Price: f.price, MinPerOrder: f.minPerOrder,
		MaxPerOrder: f.maxPerOrder, Group: f.group, Variant: f.variant, Tiers: f.tiers,
		StockDisplay: f.stockDisplay, BuyerLimit: f.buyerLimit, RefundReleasesLimit: f.refundReleasesLimit,
		LowStockThreshold: f.lowStockThreshold}
	if set["code-uses"] {
		np.CodeUses = uses
	}
	if !f.startsAt.IsZero() {
		np.StartsAt = &f.startsAt
	}
	if !f.endsAt.IsZero() {
		np.EndsAt = &f.endsAt
	}
	p, err := client.CreateProduct(context.Background(), np)
	if err != nil {
		return refusal(err)
	}
	printProduct(stdout, p)
	return nil
}

// productUpdate changes the fields given on the command line, and only those, and prints the
// product as it is now.
func productUpdate(args []string, stdout, stderr io.Writer) error {
	fs, base, f := productFlagSet("product-update", productUpdateUsage, stderr)
	id := fs.Int64("product", 0, "product id (required)")
	if err := parseUsage(fs, args); err != nil {
		return err
	}
	set := given(fs)
	if *id <= 0 {
		fs.Usage()
		return usageError{errors.New("-product is required")}
	}
	var patch adminclient.ProductPatch
	if set["name"] {
		patch.Name = &f.name
	}
	if set["description"] {
		patch.Description = &f.description
	}
	if set["price"] {
		patch.Price = &f.price
	}
	if set["min-per-order"] {
		patch.MinPerOrder = &f.minPerOrder
	}
	if set["max-per-order"] {
		patch.MaxPerOrder = &f.maxPerOrder
	}
	if set["group"] {
		patch.Group = &f.group
	}
	if set["variant"] {
		patch.Variant = &f.variant
	}
	if set["tiers"] {
		patch.Tiers = &f.tiers
	}
	if set["stock-display"] {
		patch.StockDisplay = &f.stockDisplay
	}
	if set["starts-at"] {
		patch.StartsAt = &f.startsAt // the zero time ("") removes the bound
	}
	if set["ends-at"] {
		patch.EndsAt = &f.endsAt
	}
	if set["buyer-limit"] {
		patch.BuyerLimit = &f.buyerLimit
	}
	if set["refund-releases-limit"] {
		patch.RefundReleasesLimit = &f.refundReleasesLimit
	}
	if set["low-stock-threshold"] {
		patch.LowStockThreshold = &f.lowStockThreshold
	}
	if patch == (adminclient.ProductPatch{}) {
		fs.Usage()
		return usageError{errors.New("give at least one field to change")}
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	p, err := client.UpdateProduct(context.Background(), *id, patch)
	if err != nil {
		return refusal(err)
	}
	printProduct(stdout, p)
	return nil
}

// productShow prints a product.
func productShow(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("product-show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	id := fs.Int64("product", 0, "product id (required)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: cardshopctl product-show -product ID [-url URL]

Prints a product as the admin API has it (GET /admin/products/ID; admin token from
CARDSHOP_ADMIN_TOKEN), one "field: value" per line, times in RFC 3339 UTC, "none" for an
absent bound, limit or threshold. Exit status: 0 when printed, 1 when the service refuses
(such as "404 product_not_found: no such product") or cannot be reached, 2 on bad usage.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseUsage(fs, args); err != nil {
		return err
	}
	if *id <= 0 {
		fs.Usage()
		return usageError{errors.New("-product is required")}
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	p, err := client.Product(context.Background(), *id)
	if err != nil {
		return refusal(err)
	}
	printProduct(stdout, p)
	return nil
}

// codeUses prints a product's sales per code, "unlimited" for a shared key.
func codeUses(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

// printProduct writes a product, one "field: value" per line, in the API's order.
func printProduct(w io.Writer, p adminclient.Product) {
	none := func(n int) string {
		if n == 0 {
			return "none"
		}
		return strconv.Itoa(n)
	}
	bound := func(t *time.Time) string {
		if t == nil {
			return "none"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	tiers := make([]string, len(p.Tiers))
	for i, t := range p.Tiers {
		tiers[i] = fmt.Sprintf("%d:%d", t.MinQty, t.UnitPrice)
	}
	lines := [][2]string{
		{"id", strconv.FormatInt(p.ID, 10)},
		{"name", printable(p.Name)},
		{"description", printable(p.Description)},
		{"price", strconv.FormatInt(p.Price, 10)},
		{"min_per_order", strconv.Itoa(p.MinPerOrder)},
		{"max_per_order", strconv.Itoa(p.MaxPerOrder)},
		{"code_uses", codeUses(p.CodeUses)},
		{"group", printable(p.Group)},
		{"variant", printable(p.Variant)},
		{"tiers", strings.Join(tiers, ",")},
		{"stock_display", p.StockDisplay},
		{"starts_at", bound(p.StartsAt)},
		{"ends_at", bound(p.EndsAt)},
		{"buyer_limit", none(p.BuyerLimit)},
		{"refund_releases_limit", strconv.FormatBool(p.RefundReleasesLimit)},
		{"low_stock_threshold", none(p.LowStockThreshold)},
		{"stock_state", p.StockState},
		{"frozen", strconv.FormatBool(p.Frozen)},
	}
	if p.Frozen || p.FrozenReason != "" {
		lines = append(lines, [2]string{"frozen_reason", printable(p.FrozenReason)})
	}
	lines = append(lines, [2]string{"created_at", p.CreatedAt.UTC().Format(time.RFC3339Nano)})
	for _, l := range lines {
		if l[1] == "" {
			l[1] = "none"
		}
		fmt.Fprintf(w, "%s: %s\n", l[0], l[1])
	}
}

// printable quotes a text that would not print on one line as it is (a newline, a control or
// invisible character).
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
