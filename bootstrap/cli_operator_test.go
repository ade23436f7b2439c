package bootstrap_test

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

const rfc3339UTC = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`

// operatorPrinted matches what operator-add and operator-rotate print: the operator, the note,
// and the token alone on the last line.
var operatorPrinted = regexp.MustCompile(`\Aname: ([a-z][a-z0-9_-]*)\nrole: (viewer|operator|admin)\ncreated_at: (` + rfc3339UTC + `)\n` +
	`rotated_at: (` + rfc3339UTC + `)\ntoken \(shown only this once: keep it now[^\n]*\):\n([^\n]+)\n\z`)

// wantOperatorToken checks the output of operator-add or operator-rotate for name and role and
// returns the token printed.
func wantOperatorToken(t *testing.T, what string, code int, out, errOut, name, role string) string {
	t.Helper()
	m := operatorPrinted.FindStringSubmatch(out)
	if code != 0 || errOut != "" || m == nil || m[1] != name || m[2] != role || !strings.HasPrefix(m[7], name+".") {
		t.Fatalf("%s: exit %d, stderr %q, printed\n%s\nwant operator %s (%s) and its token on the last line", what, code, errOut, out, name, role)
	}
	return m[7]
}

// as runs the CLI with token as CARDSHOP_ADMIN_TOKEN.
func as(t *testing.T, token string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("CARDSHOP_ADMIN_TOKEN", token)
	return runCtl(args...)
}

// auditLine matches one line of cardshopctl audit; the groups are the operator, role, action,
// target, result and params.
var auditLine = regexp.MustCompile(`\A` + `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ` + ` (\S+) \((\S*)\) (\S+) (.+?) → (\d{3}(?: [a-z_]+)?)(?:  (.*))?\z`)

// auditLines splits audit's output into "operator (role) action target → result  params"
// lines without their times, checking each line's form and that the times go back.
func auditLines(t *testing.T, what string, code int, out, errOut string) []string {
	t.Helper()
	if code != 0 {
		t.Fatalf("%s: exit %d, %q %q", what, code, out, errOut)
	}
	var lines []string
	var last time.Time
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		if auditLine.FindStringSubmatch(l) == nil {
			t.Fatalf("%s: line %q does not match %s", what, l, auditLine)
		}
		at, err := time.Parse(time.RFC3339, l[:20])
		if err != nil || (!last.IsZero() && at.After(last)) {
			t.Fatalf("%s: line %q: time %v after %v (%v)", what, l, at, last, err)
		}
		last = at
		lines = append(lines, l[21:])
	}
	return lines
}

// TestOperatorCommands: the shared admin token adds the first operator, whose token then works
// for whoami and a product-create; a viewer's operator-add exits 1 with 403 forbidden; a
// rotation ends the old token (401), a role change applies at once, a removal ends the token;
// audit lists every write newest first, filtered by -operator and -action, and pages with
// -limit and -all; bad command lines exit 2 before anything is sent.
func TestOperatorCommands(t *testing.T) {
	c := startService(t)
	url := c.base

	code, out, errOut := as(t, adminToken, "whoami", "-url", url)
	if code != 0 || errOut != "" || out != "name: admin-token\nrole: admin\n" {
		t.Fatalf("whoami with the shared token: exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut = as(t, adminToken, "operator-list", "-url", url)
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "no operators") {
		t.Fatalf("operator-list before any: exit %d, %q %q", code, out, errOut)
	}

	// The first operator, made with the shared admin token; its token works at once.
	code, out, errOut = as(t, adminToken, "operator-add", "-url", url, "-name", "olga", "-role", "operator")
	olga := wantOperatorToken(t, "operator-add olga", code, out, errOut, "olga", "operator")
	code, out, errOut = as(t, olga, "whoami", "-url", url)
	if code != 0 || errOut != "" || out != "name: olga\nrole: operator\n" {
		t.Fatalf("whoami as olga: exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut = as(t, olga, "product-create", "-url", url, "-id", "61", "-name", "Olga's", "-price", "300", "-max-per-order", "3")
	wantProduct(t, "product-create as olga", code, out, errOut, productOut("61", "Olga's", "300", "3", "none", "exact", "none", "none", "none", "false", "none"))

	// A viewer: it reads, but may not add an operator (nor list them); nothing is made.
	code, out, errOut = as(t, adminToken, "operator-add", "-url", url, "-name", "vera", "-role", "viewer")
	vera := wantOperatorToken(t, "operator-add vera", code, out, errOut, "vera", "viewer")
	for _, args := range [][]string{{"operator-add", "-name", "victor", "-role", "viewer"}, {"operator-list"}, {"operator-rotate", "-name", "olga"}} {
		code, out, errOut = as(t, vera, append(args, "-url", url)...)
		if code != 1 || out != "" || errOut != "cardshopctl: 403 forbidden: the role viewer may not do this; it needs admin\n" {
			t.Errorf("%q as a viewer: exit %d, %q %q; want exit 1 and 403 forbidden", args, code, out, errOut)
		}
	}
	if code, out, errOut = as(t, vera, "product-show", "-url", url, "-product", "61"); code != 0 {
		t.Errorf("product-show as a viewer: exit %d, %q %q", code, out, errOut)
	}

	code, out, errOut = as(t, adminToken, "operator-list", "-url", url)
	list := regexp.MustCompile(`\ANAME +ROLE +CREATED_AT +ROTATED_AT\nolga +operator +` + rfc3339UTC + ` +` + rfc3339UTC + `\n` +
		`vera +viewer +` + rfc3339UTC + ` +` + rfc3339UTC + `\n\z`)
	if code != 0 || errOut != "" || !list.MatchString(out) || strings.Contains(out, olga) || strings.Contains(out, vera) {
		t.Fatalf("operator-list: exit %d, stderr %q, printed\n%s", code, errOut, out)
	}

	// Rotation: the old token is refused at once, the new one works.
	code, out, errOut = as(t, adminToken, "operator-rotate", "-url", url, "-name", "olga")
	olga2 := wantOperatorToken(t, "operator-rotate olga", code, out, errOut, "olga", "operator")
	if olga2 == olga {
		t.Fatal("operator-rotate printed the old token")
	}
	if code, out, errOut = as(t, olga, "whoami", "-url", url); code != 1 || out != "" || errOut != "cardshopctl: 401 unauthorized: missing or invalid credentials\n" {
		t.Errorf("whoami with olga's old token: exit %d, %q %q", code, out, errOut)
	}
	if code, out, errOut = as(t, olga2, "whoami", "-url", url); code != 0 || out != "name: olga\nrole: operator\n" {
		t.Errorf("whoami with olga's new token: exit %d, %q %q", code, out, errOut)
	}

	// A role change applies to the next request.
	code, out, errOut = as(t, adminToken, "operator-role", "-url", url, "-name", "vera", "-role", "admin")
	if m := regexp.MustCompile(`\Aname: vera\nrole: admin\ncreated_at: ` + rfc3339UTC + `\nrotated_at: ` + rfc3339UTC + `\n\z`); code != 0 || errOut != "" || !m.MatchString(out) {
		t.Fatalf("operator-role: exit %d, %q %q", code, out, errOut)
	}
	if code, out, errOut = as(t, vera, "whoami", "-url", url); code != 0 || out != "name: vera\nrole: admin\n" {
		t.Errorf("whoami as vera after the change: exit %d, %q %q", code, out, errOut)
	}
	// Vera, an admin now, adds and removes an operator herself.
	code, out, errOut = as(t, vera, "operator-add", "-url", url, "-name", "tmp_1", "-role", "viewer")
	tmp := wantOperatorToken(t, "operator-add as vera", code, out, errOut, "tmp_1", "viewer")
	if code, out, errOut = as(t, adminToken, "operator-remove", "-url", url, "-name", "tmp_1"); code != 0 || errOut != "" ||
		out != "removed operator tmp_1: its token no longer works\n" {
		t.Fatalf("operator-remove: exit %d, %q %q", code, out, errOut)
	}
	if code, out, errOut = as(t, tmp, "whoami", "-url", url); code != 1 || errOut != "cardshopctl: 401 unauthorized: missing or invalid credentials\n" {
		t.Errorf("whoami with a removed operator's token: exit %d, %q %q", code, out, errOut)
	}

	// The service's refusals: exit 1 with its status, code and message.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"operator-remove", "-name", "tmp_1"}, "cardshopctl: 404 operator_not_found: no such operator\n"},
		{[]string{"operator-rotate", "-name", "nobody"}, "cardshopctl: 404 operator_not_found: no such operator\n"},
		{[]string{"operator-role", "-name", "nobody", "-role", "viewer"}, "cardshopctl: 404 operator_not_found: no such operator\n"},
		{[]string{"operator-add", "-name", "olga", "-role", "admin"}, "cardshopctl: 409 operator_exists: an operator with this name exists\n"},
	} {
		code, out, errOut := as(t, adminToken, append(c.args, "-url", url)...)
		if code != 1 || out != "" || errOut != c.want {
			t.Errorf("%q: exit %d, %q %q; want exit 1 and %q", c.args, code, out, errOut, c.want)
		}
	}

	// The audit log, newest first: every write, refused ones too, by whom and with what role, and
	// every refused token (no operator: the name its token claims is the target).
	want := []string{
		"admin-token (admin) operator.create - → 409 operator_exists  {\"name\":\"olga\",\"role\":\"admin\"}",
		"admin-token (admin) operator.update operator nobody → 404 operator_not_found  {\"role\":\"viewer\"}",
		"admin-token (admin) operator.rotate operator nobody → 404 operator_not_found",
		"admin-token (admin) operator.remove operator tmp_1 → 404 operator_not_found",
		"- (-) admin.auth_failed operator tmp_1 → 401 unauthorized", // the removed operator's token
		"admin-token (admin) operator.remove operator tmp_1 → 204",
		"vera (admin) operator.create - → 201  {\"name\":\"tmp_1\",\"role\":\"viewer\"}",
		"admin-token (admin) operator.update operator vera → 200  {\"role\":\"admin\"}",
		"- (-) admin.auth_failed operator olga → 401 unauthorized", // olga's token before the rotation
		"admin-token (admin) operator.rotate operator olga → 200",
		"vera (viewer) operator.rotate operator olga → 403 forbidden",
		"vera (viewer) operator.create - → 403 forbidden  {\"name\":\"victor\",\"role\":\"viewer\"}",
		"admin-token (admin) operator.create - → 201  {\"name\":\"vera\",\"role\":\"viewer\"}",
		"olga (operator) product.create - → 201  {\"id\":61,\"max_per_order\":3,\"name\":\"Olga's\",\"price\":300}",
		"admin-token (admin) operator.create - → 201  {\"name\":\"olga\",\"role\":\"operator\"}",
	}
	code, out, errOut = as(t, vera, "audit", "-url", url) // a viewer's read (vera is an admin now: any role reads it)
	if got := auditLines(t, "audit", code, out, errOut); strings.Join(got, "\n") != strings.Join(want, "\n") || errOut != "" {
		t.Fatalf("audit printed\n%s\nwant\n%s\n(stderr %q)", strings.Join(got, "\n"), strings.Join(want, "\n"), errOut)
	}
	if strings.Contains(out, olga) || strings.Contains(out, olga2) || strings.Contains(out, vera) {
		t.Fatal("audit printed a token")
	}
	filter := func(what string, keep func(string) bool, args ...string) {
		t.Helper()
		code, out, errOut := runCtl(append([]string{"audit", "-url", url}, args...)...)
		var w []string
		for _, l := range want {
			if keep(l) {
				w = append(w, l)
			}
		}
		if got := auditLines(t, what, code, out, errOut); strings.Join(got, "\n") != strings.Join(w, "\n") || errOut != "" {
			t.Errorf("%s printed\n%s\nwant\n%s\n(stderr %q)", what, strings.Join(got, "\n"), strings.Join(w, "\n"), errOut)
		}
	}
	filter("audit -operator olga", func(l string) bool { return strings.HasPrefix(l, "olga ") }, "-operator", "olga")
	filter("audit -operator vera -action operator.create", func(l string) bool { return strings.HasPrefix(l, "vera ") && strings.Contains(l, " operator.create ") },
		"-operator", "vera", "-action", "operator.create")
	filter("audit -action operator.rotate", func(l string) bool { return strings.Contains(l, " operator.rotate ") }, "-action", "operator.rotate")
	filter("audit -since 1h", func(string) bool { return true }, "-since", "1h")
	filter("audit -since a minute ago -until in a minute", func(string) bool { return true },
		"-since", time.Now().Add(-time.Minute).Format(time.RFC3339), "-until", time.Now().Add(time.Minute).Format(time.RFC3339))
	filter("audit -until 2000", func(string) bool { return false }, "-until", "2000-01-01T00:00:00Z")
	filter("audit -since in an hour", func(string) bool { return false }, "-since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	filter("audit -limit 5 -all", func(string) bool { return true }, "-limit", "5", "-all")
	filter("audit -limit 1 -all -operator olga", func(l string) bool { return strings.HasPrefix(l, "olga ") }, "-limit", "1", "-all", "-operator", "olga")
	filter("audit -limit 13 -all", func(string) bool { return true }, "-limit", "13", "-all") // a full last page, then an empty one

	// Without -all, one page, and a note on stderr that older entries may remain.
	code, out, errOut = runCtl("audit", "-url", url, "-limit", "5")
	if got := auditLines(t, "audit -limit 5", code, out, ""); strings.Join(got, "\n") != strings.Join(want[:5], "\n") ||
		!regexp.MustCompile(`\Aaudit: older entries may remain \(before id \d+\): run with -all to print them\n\z`).MatchString(errOut) {
		t.Errorf("audit -limit 5 printed\n%s\nstderr %q", out, errOut)
	}

	// Bad command lines: exit 2, the usage and a message naming the problem, before any call.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"whoami", "olga"}, `unexpected argument "olga"`},
		{[]string{"whoami", "-name", "olga"}, "flag provided but not defined: -name"},
		{[]string{"operator-add", "-name", "x"}, "-name and -role are required"},
		{[]string{"operator-add", "-role", "viewer"}, "-name and -role are required"},
		{[]string{"operator-add", "-name", "x", "-role", "root"}, `invalid value "root" for flag -role: want "viewer", "operator" or "admin"`},
		{[]string{"operator-add", "-name", "Olga", "-role", "viewer"}, `invalid value "Olga" for flag -name: want 1 to 64 of a-z`},
		{[]string{"operator-add", "-name", "9lives", "-role", "viewer"}, `invalid value "9lives" for flag -name`},
		{[]string{"operator-add", "-name", strings.Repeat("a", 65), "-role", "viewer"}, "for flag -name: want 1 to 64"},
		{[]string{"operator-add", "-name", "olga.x", "-role", "viewer"}, `invalid value "olga.x" for flag -name`},
		{[]string{"operator-add", "-name", "admin-token", "-role", "admin"}, `"admin-token" is the shared admin token's name`},
		{[]string{"operator-role", "-name", "vera"}, "-name and -role are required"},
		{[]string{"operator-role", "-name", "vera", "-role", "Admin"}, `invalid value "Admin" for flag -role`},
		{[]string{"operator-rotate"}, "-name is required"},
		{[]string{"operator-rotate", "-name", "olga", "now"}, `unexpected argument "now"`},
		{[]string{"operator-remove"}, "-name is required"},
		{[]string{"operator-remove", "-name", ""}, `invalid value "" for flag -name`},
		{[]string{"operator-list", "-all"}, "flag provided but not defined: -all"},
		{[]string{"audit", "-since", "yesterday"}, `invalid value "yesterday" for flag -since: want a duration back from now`},
		{[]string{"audit", "-since", "-1h"}, `invalid value "-1h" for flag -since: want a positive duration`},
		{[]string{"audit", "-until", "5m"}, `invalid value "5m" for flag -until: want an RFC 3339 time`},
		{[]string{"audit", "-until", "2030-01-02"}, `invalid value "2030-01-02" for flag -until`},
		{[]string{"audit", "-since", "2030-01-02T00:00:00Z", "-until", "2030-01-01T00:00:00Z"}, "-since must be before -until"},
		{[]string{"audit", "-limit", "0"}, "-limit 0: want 1 to 1000"},
		{[]string{"audit", "-limit", "1001"}, "-limit 1001: want 1 to 1000"},
		{[]string{"audit", "-limit", "many"}, `invalid value "many" for flag -limit`},
		{[]string{"audit", "-operator", "Olga"}, `invalid value "Olga" for flag -operator`},
		{[]string{"audit", "-action", "product update"}, `invalid value "product update" for flag -action`},
		{[]string{"audit", "olga"}, `unexpected argument "olga"`},
	} {
		code, out, errOut := as(t, adminToken, append([]string{c.args[0], "-url", url}, c.args[1:]...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "Usage: cardshopctl "+c.args[0]) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, the usage and %q", c.args, code, out, errOut, c.want)
		}
	}
	// Nothing of them reached the service: the log is as it was.
	filter("audit after the bad command lines", func(string) bool { return true })

	// No token: exit 1, as every admin command.
	for _, cmd := range []string{"whoami", "operator-list", "audit"} {
		if code, out, errOut := as(t, "", cmd, "-url", url); code != 1 || out != "" || errOut != "cardshopctl: set CARDSHOP_ADMIN_TOKEN\n" {
			t.Errorf("%s without a token: exit %d, %q %q", cmd, code, out, errOut)
		}
	}
}

// TestOperatorCommandsUsage: -h prints each command's usage on stderr and exits 0, and help
// lists the commands.
func TestOperatorCommandsUsage(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want []string
	}{
		{"whoami", []string{"GET /admin/whoami", "admin-token"}},
		{"operator-add", []string{"-name", "-role", "POST /admin/operators", "shown this once", "viewer", "operator", "admin"}},
		{"operator-list", []string{"GET /admin/operators"}},
		{"operator-role", []string{"-name", "-role", "PATCH /admin/operators/N"}},
		{"operator-rotate", []string{"-name", "POST /admin/operators/N/rotate", "shown", "once"}},
		{"operator-remove", []string{"-name", "DELETE /admin/operators/N"}},
		{"audit", []string{"-operator", "-action", "-since", "-until", "-limit", "-all", "GET /admin/audit", "→"}},
	} {
		code, out, errOut := runCtl(c.cmd, "-h")
		if code != 0 || out != "" || !strings.Contains(errOut, "Usage: cardshopctl "+c.cmd) || !strings.Contains(errOut, "CARDSHOP_ADMIN_TOKEN") ||
			!strings.Contains(errOut, "Exit status") {
			t.Errorf("%s -h: %d %q %q", c.cmd, code, out, errOut)
		}
		for _, w := range append(c.want, "-url") {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s -h does not mention %q:\n%s", c.cmd, w, errOut)
			}
		}
	}
	code, out, _ := runCtl("help")
	for _, cmd := range []string{"whoami", "operator-add", "operator-list", "operator-role", "operator-rotate", "operator-remove", "audit"} {
		if code != 0 || !strings.Contains(out, "\n  "+cmd+" ") {
			t.Errorf("help does not list %s: %q", cmd, out)
		}
	}
}
