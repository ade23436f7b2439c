package adminctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"cardshop/adapters/adminclient"
)

// operatorName is the form of an operator's name, as the service checks it.
var operatorName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// sharedAdminName is the name the shared CARDSHOP_ADMIN_TOKEN calls as: no operator takes it.
const sharedAdminName = "admin-token"

// checkOperatorName checks an operator's name; shared allows "admin-token" (the audit log
// records the shared token under it).
func checkOperatorName(s string, shared bool) error {
	if !operatorName.MatchString(s) {
		return errors.New("want 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter")
	}
	if !shared && s == sharedAdminName {
		return errors.New(`"admin-token" is the shared admin token's name, not an operator's`)
	}
	return nil
}

// checkRole checks a role name.
func checkRole(s string) error {
	if s != "viewer" && s != "operator" && s != "admin" {
		return errors.New(`want "viewer", "operator" or "admin"`)
	}
	return nil
}

const operatorExitHelp = `Exit status: 0 on success; 1 when the service refuses (its status, code and message are
printed, such as "403 forbidden: the role viewer may not do this; it needs admin" or
"404 operator_not_found: no such operator") or cannot be reached; 2 on bad usage (a required
flag missing, a name or role that is not valid, a stray argument), checked before anything
is sent.

Flags:
`

const rolesHelp = `Roles, each allowing all the ones before it: viewer reads everything but codes and
operators, the audit log included; operator also runs the shop (products, imports, freezes,
fulfilment, buyer tokens, an order's codes); admin also refunds, repairs the gate and manages
operators. A name is 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter.
`

const whoamiUsage = `Usage: cardshopctl whoami [-url URL]

Prints who CARDSHOP_ADMIN_TOKEN calls the admin API as (GET /admin/whoami), "name: N" and
"role: R": an operator's name and role for an operator's token (<name>.<secret>), or
"admin-token" and admin for the shared admin token.

`

const operatorAddUsage = `Usage: cardshopctl operator-add -name N -role viewer|operator|admin [-url URL]

Adds an operator through the admin API (POST /admin/operators; an admin's token in
CARDSHOP_ADMIN_TOKEN: the shared admin token makes the first one). Prints the operator, one
"field: value" per line, then its token on the last line, alone: it is shown this once (the
service keeps only its hash), so keep it now; a lost token is replaced with operator-rotate.
The operator uses it as its CARDSHOP_ADMIN_TOKEN.

` + rolesHelp + "\n"

const operatorListUsage = `Usage: cardshopctl operator-list [-url URL]

Lists the operators by name (GET /admin/operators; an admin's token in
CARDSHOP_ADMIN_TOKEN): name, role, when it was created and when its token was last
replaced, in RFC 3339 UTC. Tokens are never shown.

`

const operatorRoleUsage = `Usage: cardshopctl operator-role -name N -role viewer|operator|admin [-url URL]

Changes an operator's role (PATCH /admin/operators/N; an admin's token in
CARDSHOP_ADMIN_TOKEN) from its next request on, and prints the operator.

` + rolesHelp + "\n"

const operatorRotateUsage = `Usage: cardshopctl operator-rotate -name N [-url URL]

Gives an operator a new token (POST /admin/operators/N/rotate; an admin's token in
CARDSHOP_ADMIN_TOKEN): the old one stops working at once. Prints the operator, then the
new token on the last line, alone: it is shown this once, so keep it now.

`

const operatorRemoveUsage = `Usage: cardshopctl operator-remove -name N [-url URL]

Removes an operator (DELETE /admin/operators/N; an admin's token in
CARDSHOP_ADMIN_TOKEN): its token stops working at once. Its entries stay in the audit log.

`

const auditUsage = `Usage: cardshopctl audit [-url URL] [-operator N] [-action A] [-since DURATION|RFC3339]
         [-until RFC3339] [-limit N] [-all]

Prints the audit log of writes through the admin API (GET /admin/audit; any role's token in
CARDSHOP_ADMIN_TOKEN), newest first, one entry a line:

  <at, RFC 3339 UTC> <operator> (<role>) <action> <target> → <result>  <params>

such as "2030-05-20T08:12:45Z olga (operator) product.update product 1001 → 200
{"price":4900}". The target is "-" when the write has none, the operator and role "- (-)"
for a refusal that names no operator (a refused token or login); the result is the HTTP status
and, for a refusal, its code ("403 forbidden"); the parameters are the request's, secrets
and codes left out. The shared admin token's writes are recorded as "admin-token".

-since takes a duration back from now (24h, 90m) or an RFC 3339 time; -until an RFC 3339
time (entries before it). -limit is the page size (1 to 1000, 100 by default): without -all
one page is printed, and when older entries remain a note on stderr says so; -all follows
the pages to the oldest entry.

`

// operatorFlagSet is the flag set of an operator command: -url and the usage of the command's
// text and the exit status.
func operatorFlagSet(name, usage string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage+operatorExitHelp)
		fs.PrintDefaults()
	}
	return fs, base
}

// nameFlag defines -name on fs, checked as it is parsed.
func nameFlag(fs *flag.FlagSet) *string {
	name := new(string)
	fs.Func("name", "the operator's `name`: 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter (required)", func(s string) error {
		if err := checkOperatorName(s, false); err != nil {
			return err
		}
		*name = s
		return nil
	})
	return name
}

// roleFlag defines -role on fs, checked as it is parsed.
func roleFlag(fs *flag.FlagSet) *string {
	role := new(string)
	fs.Func("role", "the operator's role: `viewer|operator|admin` (required)", func(s string) error {
		if err := checkRole(s); err != nil {
			return err
		}
		*role = s
		return nil
	})
	return role
}

// whoami prints who the admin token calls as.
func whoami(args []string, stdout, stderr io.Writer) error {
	fs, base := operatorFlagSet("whoami", whoamiUsage, stderr)
	if err := parseUsage(fs, args); err != nil {
		return err
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	id, err := client.Whoami(context.Background())
	if err != nil {
		return refusal(err)
	}
	fmt.Fprintf(stdout, "name: %s\nrole: %s\n", printable(id.Name), id.Role)
	return nil
}

// operatorArgs parses the flags of a command on one operator: -url, -name and, with withRole,
// -role, all required; it returns the admin client and the values.
func operatorArgs(command, usage string, withRole bool, args []string, stderr io.Writer) (*adminclient.Client, string, string, error) {
	fs, base := operatorFlagSet(command, usage, stderr)
	name, role := nameFlag(fs), new(string)
	if withRole {
		role = roleFlag(fs)
	}
	if err := parseUsage(fs, args); err != nil {
		return nil, "", "", err
	}
	switch {
	case withRole && (*name == "" || *role == ""):
		fs.Usage()
		return nil, "", "", usageError{errors.New("-name and -role are required")}
	case *name == "":
		fs.Usage()
		return nil, "", "", usageError{errors.New("-name is required")}
	}
	client, err := adminClient(*base)
	return client, *name, *role, err
}

// operatorAdd adds an operator and prints it with its token.
func operatorAdd(args []string, stdout, stderr io.Writer) error {
	client, name, role, err := operatorArgs("operator-add", operatorAddUsage, true, args, stderr)
	if err != nil {
		return err
	}
	o, err := client.CreateOperator(context.Background(), name, role)
	if err != nil {
		return refusal(err)
	}
	return printOperatorToken(stdout, o)
}

// operatorList prints the operators, one a line.
func operatorList(args []string, stdout, stderr io.Writer) error {
	fs, base := operatorFlagSet("operator-list", operatorListUsage, stderr)
	if err := parseUsage(fs, args); err != nil {
		return err
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	ops, err := client.Operators(context.Background())
	if err != nil {
		return refusal(err)
	}
	if len(ops) == 0 {
		fmt.Fprintln(stdout, "no operators (the shared admin token adds the first with operator-add)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tCREATED_AT\tROTATED_AT")
	for _, o := range ops {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", printable(o.Name), o.Role, utc(o.CreatedAt), utc(o.RotatedAt))
	}
	return tw.Flush()
}

// operatorRole changes an operator's role and prints the operator.
func operatorRole(args []string, stdout, stderr io.Writer) error {
	client, name, role, err := operatorArgs("operator-role", operatorRoleUsage, true, args, stderr)
	if err != nil {
		return err
	}
	o, err := client.SetOperatorRole(context.Background(), name, role)
	if err != nil {
		return refusal(err)
	}
	printOperator(stdout, o)
	return nil
}

// operatorRotate replaces an operator's token and prints the new one.
func operatorRotate(args []string, stdout, stderr io.Writer) error {
	client, name, _, err := operatorArgs("operator-rotate", operatorRotateUsage, false, args, stderr)
	if err != nil {
		return err
	}
	o, err := client.RotateOperator(context.Background(), name)
	if err != nil {
		return refusal(err)
	}
	return printOperatorToken(stdout, o)
}

// operatorRemove removes an operator.
func operatorRemove(args []string, stdout, stderr io.Writer) error {
	client, name, _, err := operatorArgs("operator-remove", operatorRemoveUsage, false, args, stderr)
	if err != nil {
		return err
	}
	if err := client.RemoveOperator(context.Background(), name); err != nil {
		return refusal(err)
	}
	fmt.Fprintf(stdout, "removed operator %s: its token no longer works\n", name)
	return nil
}

// utc formats t in RFC 3339 UTC, to the microsecond the service keeps.
func utc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// printOperator writes an operator, one "field: value" per line.
func printOperator(w io.Writer, o adminclient.Operator) {
	fmt.Fprintf(w, "name: %s\nrole: %s\ncreated_at: %s\nrotated_at: %s\n", printable(o.Name), o.Role, utc(o.CreatedAt), utc(o.RotatedAt))
}

// printOperatorToken writes an operator, the note that its token is shown once, and the token
// alone on the last line (for `| tail -n 1`).
func printOperatorToken(w io.Writer, o adminclient.Operator) error {
	if o.Token == "" {
		return fmt.Errorf("the service answered operator %s without its token", o.Name)
	}
	printOperator(w, o)
	fmt.Fprintf(w, "token (shown only this once: keep it now, the service stores only its hash; give it as CARDSHOP_ADMIN_TOKEN):\n%s\n", o.Token)
	return nil
}

// parseSince reads -since: a duration back from now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, errors.New("want a positive duration back from now, such as 24h")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("want a duration back from now (24h, 90m) or an RFC 3339 time such as 2030-01-02T15:04:05Z")
	}
	return t, nil
}

// audit prints the audit log, newest first, one entry a line.
func audit(args []string, stdout, stderr io.Writer) error {
	fs, base := operatorFlagSet("audit", auditUsage, stderr)
	now := time.Now()
	var q adminclient.AuditQuery
	fs.Func("operator", "only this operator's entries (a `name`; admin-token for the shared admin token)", func(s string) error {
		if err := checkOperatorName(s, true); err != nil {
			return err
		}
		q.Operator = s
		return nil
	})
	fs.Func("action", "only this `action`, such as product.update, order.refund, operator.create", func(s string) error {
		if strings.TrimSpace(s) == "" || strings.ContainsAny(s, " \t\r\n") {
			return errors.New("want an action name without spaces, such as product.update")
		}
		q.Action = s
		return nil
	})
	fs.Func("since", "entries at or after this: a `DURATION|RFC3339` (24h back from now, or a time)", func(s string) (err error) {
		q.From, err = parseSince(s, now)
		return err
	})
	fs.Func("until", "entries before this `RFC3339` time", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return errors.New("want an RFC 3339 time such as 2030-01-02T15:04:05Z")
		}
		q.To = t
		return nil
	})
	fs.IntVar(&q.Limit, "limit", 100, "entries a page, 1 to 1000")
	all := fs.Bool("all", false, "follow the pages to the oldest entry")
	if err := parseUsage(fs, args); err != nil {
		return err
	}
	if q.Limit < 1 || q.Limit > 1000 {
		fs.Usage()
		return usageError{fmt.Errorf("-limit %d: want 1 to 1000", q.Limit)}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		fs.Usage()
		return usageError{errors.New("-since must be before -until")}
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	for {
		page, err := client.Audit(context.Background(), q)
		if err != nil {
			return refusal(err)
		}
		for _, e := range page.Entries {
			printAuditEntry(stdout, e)
		}
		if page.NextBeforeID == 0 {
			return nil
		}
		if q.BeforeID > 0 && page.NextBeforeID >= q.BeforeID {
			return fmt.Errorf("the service's next page (before id %d) does not go back from this one (before id %d)", page.NextBeforeID, q.BeforeID)
		}
		if !*all {
			fmt.Fprintf(stderr, "audit: older entries may remain (before id %d): run with -all to print them\n", page.NextBeforeID)
			return nil
		}
		q.BeforeID = page.NextBeforeID
	}
}

// orDash is s, or "-" when s is empty: every field of an audit line is one word.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printAuditEntry writes one entry on one line.
func printAuditEntry(w io.Writer, e adminclient.AuditEntry) {
	line := fmt.Sprintf("%s %s (%s) %s %s → %s", e.At.UTC().Format(time.RFC3339), printable(orDash(e.Operator)),
		printable(orDash(e.Role)), printable(e.Action), printable(orDash(e.Target)), printable(e.Result))
	if e.Params != "" {
		line += "  " + printable(e.Params)
	}
	fmt.Fprintln(w, line)
}
