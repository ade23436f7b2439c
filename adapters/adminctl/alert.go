package adminctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cardshop/adapters/adminclient"
)

const alertsUsage = `Usage: cardshopctl alerts [-url URL] [-all] [-kind K] [-product ID] [-limit N]

Prints the alert log through the admin API (GET /admin/alerts; any role's token in
CARDSHOP_ADMIN_TOKEN), newest first, one alert a line:

  #<id> <raised at, RFC 3339 UTC> <kind> [product <id>] [order <no>] ×<count>, last <at>: <message>

followed, for an acknowledged alert, by "  acknowledged by <operator> at <at>[: <note>]".
Raising a condition again while its alert is open counts in that alert (×count, last) rather
than adding a line. Without -all only the open alerts are printed, the newest page of -limit
(1 to 1000, 100 by default); with -all every alert, open or acknowledged, every page.

`

const alertAckUsage = `Usage: cardshopctl alert-ack [-url URL] ID [-note TEXT]

Acknowledges the open alert ID (POST /admin/alerts/{id}/ack; an operator's or an admin's
token in CARDSHOP_ADMIN_TOKEN), with an optional note of at most 500 characters, and prints
the alert. The acknowledgement is recorded in the audit log (alert.ack). An alert that
someone acknowledged already is refused with 409 alert_acknowledged (the first
acknowledgement stays); an unknown one with 404 alert_not_found.

`

// alerts prints the alert log.
func alerts(args []string, stdout, stderr io.Writer) error {
	fs, base := operatorFlagSet("alerts", alertsUsage, stderr)
	all := fs.Bool("all", false, "every alert, open or acknowledged, every page (default: the open ones, one page)")
	var q adminclient.AlertQuery
	fs.Func("kind", "only alerts of this `kind`, such as paid_unfulfilled", func(s string) error {
		if strings.TrimSpace(s) == "" || strings.ContainsAny(s, " \t\r\n") {
			return errors.New("want a kind without spaces, such as paid_unfulfilled")
		}
		q.Kind = s
		return nil
	})
	fs.Func("product", "only alerts about this product `ID`", func(s string) (err error) {
		if q.Product, err = strconv.ParseInt(s, 10, 64); err != nil || q.Product < 1 {
			return errors.New("want a positive product id")
		}
		return nil
	})
	fs.IntVar(&q.Limit, "limit", 100, "alerts a page, 1 to 1000")
	if err := parseUsage(fs, args); err != nil {
		return err
	}
	if q.Limit < 1 || q.Limit > 1000 {
		fs.Usage()
		return usageError{fmt.Errorf("-limit %d: want 1 to 1000", q.Limit)}
	}
	if *all {
		q.Status = "all"
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	printed := 0
	for {
		page, err := client.Alerts(context.Background(), q)
		if err != nil {
			return refusal(err)
		}
		for _, a := range page.Alerts {
			printAlert(stdout, a)
		}
		printed += len(page.Alerts)
		if page.NextBeforeID == 0 {
			break
		}
		if q.BeforeID > 0 && page.NextBeforeID >= q.BeforeID {
			return fmt.Errorf("the service's next page (before id %d) does not go back from this one (before id %d)", page.NextBeforeID, q.BeforeID)
		}
		if !*all {
			fmt.Fprintf(stderr, "alerts: older open alerts may remain (before id %d): run with -all to print every alert\n", page.NextBeforeID)
			return nil
		}
		q.BeforeID = page.NextBeforeID
	}
	if printed == 0 && !*all {
		fmt.Fprintln(stdout, "no open alerts")
	}
	return nil
}

// alertAck acknowledges an alert: its id is the one argument, before or after the flags.
func alertAck(args []string, stdout, stderr io.Writer) error {
	fs, base := operatorFlagSet("alert-ack", alertAckUsage, stderr)
	note := fs.String("note", "", "why, or what was done (optional, at most 500 characters)")
	var idArg string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		idArg, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	rest := fs.Args()
	if idArg == "" && len(rest) > 0 {
		idArg, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		fs.Usage()
		return usageError{fmt.Errorf("alert-ack: unexpected argument %q (one alert id)", rest[0])}
	}
	id, err := strconv.ParseInt(idArg, 10, 64)
	if idArg == "" || err != nil || id < 1 {
		fs.Usage()
		return usageError{fmt.Errorf("alert-ack: want one alert id, a positive number (got %q)", idArg)}
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(*note)); n > 500 {
		fs.Usage()
		return usageError{fmt.Errorf("-note: %d characters, want at most 500", n)}
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	a, err := client.AckAlert(context.Background(), id, *note)
	if err != nil {
		return refusal(err)
	}
	printAlert(stdout, a)
	return nil
}

// printAlert writes one alert on one line, and its acknowledgement on a second when it has one.
func printAlert(w io.Writer, a adminclient.Alert) {
	line := fmt.Sprintf("#%d %s %s", a.ID, a.RaisedAt.UTC().Format(time.RFC3339), printable(a.Kind))
	if a.Product != 0 {
		line += fmt.Sprintf(" product %d", a.Product)
	}
	if a.OrderNo != "" {
		line += " order " + printable(a.OrderNo)
	}
	line += fmt.Sprintf(" ×%d, last %s: %s", a.Count, a.LastAt.UTC().Format(time.RFC3339), printable(a.Message))
	fmt.Fprintln(w, line)
	if !a.Open && a.AckedAt != nil {
		ack := fmt.Sprintf("  acknowledged by %s at %s", printable(a.AckedBy), a.AckedAt.UTC().Format(time.RFC3339))
		if a.AckNote != "" {
			ack += ": " + printable(a.AckNote)
		}
		fmt.Fprintln(w, ack)
	}
}
