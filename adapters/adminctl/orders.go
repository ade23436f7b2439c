package adminctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"cardshop/adapters/adminclient"
)

const ordersUsage = `Usage: cardshopctl orders [-url URL] [-buyer B] [-product ID] [-status S[,S…]]
         [-from DURATION|RFC3339] [-to RFC3339] [-limit N] [-all]

Searches the orders through the admin API (GET /admin/orders; any role's token in
CARDSHOP_ADMIN_TOKEN) and prints them newest first, one a line under a header:

  ORDER_NO  CREATED_AT  BUYER  PRODUCT  QTY  AMOUNT  STATUS

with the creation time in RFC 3339 UTC and the amount in minor units and the shop's
currency (1999 CNY is 19.99 CNY). Every filter given must match. Codes are never printed:
a search is not a reveal.

-status takes one status or several separated by commas (PAID,UNFULFILLED): PENDING, PAID,
CLOSED, FAILED, REFUNDED or UNFULFILLED. -from takes a duration back from now (24h, 90m) or
an RFC 3339 time (orders created at or after it); -to an RFC 3339 time (orders created
before it). -limit is the page size (1 to 100, 50 by default): without -all one page is
printed, and when more orders may remain a note on stderr says so; -all follows the pages
(by cursor: orders placed meanwhile never shift them) to the oldest order.

`

// orderStatuses are the order statuses -status accepts.
var orderStatuses = []string{"PENDING", "PAID", "CLOSED", "FAILED", "REFUNDED", "UNFULFILLED"}

// buyerID is the form of a buyer id, as the service checks it.
var buyerID = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// orders prints the orders a search selects, newest first, one a line.
func orders(args []string, stdout, stderr io.Writer) error {
	fs, base := operatorFlagSet("orders", ordersUsage, stderr)
	now := time.Now()
	var q adminclient.OrderQuery
	fs.Func("buyer", "only this buyer's orders (a buyer `id`)", func(s string) error {
		if !buyerID.MatchString(s) {
			return errors.New("want 1 to 64 of A-Z a-z 0-9 . _ @ -")
		}
		q.Buyer = s
		return nil
	})
	fs.Func("product", "only orders of this product (an `id`)", func(s string) error {
		var id int64
		if _, err := fmt.Sscan(s, &id); err != nil || id < 1 || fmt.Sprint(id) != s {
			return errors.New("want a positive product id")
		}
		q.Product = id
		return nil
	})
	fs.Func("status", "only orders in one of these `statuses`, comma-separated: "+strings.Join(orderStatuses, ","), func(s string) error {
		for _, st := range strings.Split(s, ",") {
			st = strings.ToUpper(strings.TrimSpace(st))
			if !slices.Contains(orderStatuses, st) || slices.Contains(q.Statuses, st) {
				return fmt.Errorf("want distinct statuses of %s", strings.Join(orderStatuses, ", "))
			}
			q.Statuses = append(q.Statuses, st)
		}
		return nil
	})
	fs.Func("from", "orders created at or after this: a `DURATION|RFC3339` (24h back from now, or a time)", func(s string) (err error) {
		q.From, err = parseSince(s, now)
		return err
	})
	fs.Func("to", "orders created before this `RFC3339` time", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return errors.New("want an RFC 3339 time such as 2030-01-02T15:04:05Z")
		}
		q.To = t
		return nil
	})
	fs.IntVar(&q.Limit, "limit", 50, "orders a page, 1 to 100")
	all := fs.Bool("all", false, "follow the pages to the oldest order")
	if err := parseUsage(fs, args); err != nil {
		return err
	}
	if q.Limit < 1 || q.Limit > 100 {
		fs.Usage()
		return usageError{fmt.Errorf("-limit %d: want 1 to 100", q.Limit)}
	}
	if !q.From.IsZero() && !q.To.IsZero() && q.To.Before(q.From) {
		fs.Usage()
		return usageError{errors.New("-from must not be after -to")}
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER_NO\tCREATED_AT\tBUYER\tPRODUCT\tQTY\tAMOUNT\tSTATUS")
	for {
		page, err := client.Orders(context.Background(), q)
		if err != nil {
			_ = tw.Flush()
			return refusal(err)
		}
		for _, o := range page.Orders {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d %s\t%s\n", printable(o.OrderNo), o.CreatedAt.UTC().Format(time.RFC3339Nano),
				printable(o.BuyerID), o.ProductID, o.Qty, o.Amount, printable(o.Currency), printable(o.Status))
		}
		if page.NextCursor == "" {
			return tw.Flush()
		}
		if page.NextCursor == q.Cursor {
			_ = tw.Flush()
			return fmt.Errorf("the service's next page (cursor %s) is the page it answered", page.NextCursor)
		}
		if !*all {
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(stderr, "orders: older orders may remain: run with -all to print them")
			return nil
		}
		q.Cursor = page.NextCursor
	}
}
