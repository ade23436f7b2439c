package bootstrap_test

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"cardshop/bootstrap"
	"cardshop/domain"
)

// TestAlertCommands: alerts prints the open alerts newest first (a repeated raise counted in
// its alert), a viewer's alert-ack exits 1 with 403 forbidden, an operator's acknowledges with
// a note (audited as alert.ack) and a second exits 1 with 409; alerts -all prints the
// acknowledged one with who acknowledged it; bad command lines exit 2 before anything is sent.
func TestAlertCommands(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		cfg, err := bootstrap.LoadConfig(env())
		if err != nil {
			t.Fatal(err)
		}
		cfg.HTTPAddr = freeAddr(t)
		testAlertCommands(t, cfg, nil)
	})
	t.Run("real", func(t *testing.T) {
		// A database of its own, emptied of the tables this test counts once the service
		// has migrated it: earlier runs leave their alerts, operators and entries behind.
		cfg, _, db := realConfigIn(t, time.Minute, "cardshop_test_alert_cli")
		testAlertCommands(t, cfg, func() {
			for _, table := range []string{"alerts", "operators", "audit_log"} {
				if _, err := db.Exec("DELETE FROM " + table); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
}

// testAlertCommands runs TestAlertCommands on the service of cfg; empty, when set, empties
// the ledger of earlier runs once the service has started.
func testAlertCommands(t *testing.T, cfg bootstrap.Config, empty func()) {
	var ledger domain.Ledger
	c := runService(t, cfg, io.Discard, fx.Populate(&ledger))
	if empty != nil {
		empty()
	}
	url := c.base
	raise := func(a domain.Alert) int64 {
		id, err := ledger.Alerts().Raise(context.Background(), a, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return id
	}

	code, out, errOut := as(t, adminToken, "alerts", "-url", url)
	if code != 0 || out != "no open alerts\n" {
		t.Fatalf("alerts before any: exit %d, %q %q", code, out, errOut)
	}
	a := raise(domain.Alert{Kind: "paid_unfulfilled", Product: 7, OrderNo: "250301120000000000000001", Message: "no codes left"})
	raise(domain.Alert{Kind: "paid_unfulfilled", Product: 7, OrderNo: "250301120000000000000001", Message: "no codes left"})
	b := raise(domain.Alert{Kind: "refund_failed", Message: "declined"})

	_, vtok, _ := as(t, adminToken, "operator-add", "-url", url, "-name", "vic", "-role", "viewer")
	_, otok, _ := as(t, adminToken, "operator-add", "-url", url, "-name", "olga", "-role", "operator")
	vic, olga := lastLine(vtok), lastLine(otok)

	code, out, errOut = as(t, vic, "alerts", "-url", url)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	first := regexp.MustCompile(fmt.Sprintf(`\A#%d `+rfc3339UTC+` refund_failed ×1, last `+rfc3339UTC+`: declined\z`, b))
	second := regexp.MustCompile(fmt.Sprintf(`\A#%d `+rfc3339UTC+` paid_unfulfilled product 7 order 250301120000000000000001 ×2, last `+rfc3339UTC+`: no codes left\z`, a))
	if code != 0 || errOut != "" || len(lines) != 2 || !first.MatchString(lines[0]) || !second.MatchString(lines[1]) {
		t.Fatalf("alerts: exit %d, stderr %q, printed\n%s", code, errOut, out)
	}
	code, out, _ = as(t, vic, "alerts", "-url", url, "-kind", "refund_failed")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, fmt.Sprintf("#%d ", b)) {
		t.Fatalf("alerts -kind: exit %d, %q", code, out)
	}

	code, out, errOut = as(t, vic, "alert-ack", "-url", url, fmt.Sprint(a))
	if code != 1 || !strings.Contains(errOut, "403 forbidden") {
		t.Fatalf("a viewer's alert-ack: exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut = as(t, olga, "alert-ack", fmt.Sprint(a), "-url", url, "-note", "refunding by hand")
	if code != 0 || errOut != "" || !regexp.MustCompile(`\n  acknowledged by olga at `+rfc3339UTC+`: refunding by hand\n\z`).MatchString(out) {
		t.Fatalf("alert-ack: exit %d, stderr %q, printed\n%s", code, errOut, out)
	}
	code, _, errOut = as(t, olga, "alert-ack", "-url", url, fmt.Sprint(a))
	if code != 1 || !strings.Contains(errOut, "409 alert_acknowledged") {
		t.Fatalf("a second alert-ack: exit %d, %q", code, errOut)
	}
	code, _, errOut = as(t, olga, "alert-ack", "-url", url, "99999")
	if code != 1 || !strings.Contains(errOut, "404 alert_not_found") {
		t.Fatalf("alert-ack of an unknown alert: exit %d, %q", code, errOut)
	}

	code, out, _ = as(t, vic, "alerts", "-url", url)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, fmt.Sprintf("#%d ", b)) {
		t.Fatalf("alerts after the acknowledgement: exit %d, %q", code, out)
	}
	code, out, _ = as(t, vic, "alerts", "-url", url, "-all", "-limit", "1")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "  acknowledged by olga at ") {
		t.Fatalf("alerts -all: exit %d, %q", code, out)
	}
	audit := auditLines(t, "audit -action alert.ack", 0, mustRun(t, olga, "audit", "-url", url, "-action", "alert.ack"), "")
	want := []string{
		"olga (operator) alert.ack alert 99999 → 404 alert_not_found",
		fmt.Sprintf("olga (operator) alert.ack alert %d → 409 alert_acknowledged", a),
		fmt.Sprintf(`olga (operator) alert.ack alert %d → 200  {"note":"refunding by hand"}`, a),
		fmt.Sprintf("vic (viewer) alert.ack alert %d → 403 forbidden", a),
	}
	if strings.Join(audit, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit of alert.ack:\n%s\nwant\n%s", strings.Join(audit, "\n"), strings.Join(want, "\n"))
	}

	for _, bad := range [][]string{
		{"alert-ack", "-url", url},
		{"alert-ack", "-url", url, "x"},
		{"alert-ack", "-url", url, "0"},
		{"alert-ack", "-url", url, "1", "2"},
		{"alert-ack", "-url", url, "1", "-note", strings.Repeat("n", 501)},
		{"alerts", "-url", url, "-limit", "0"},
		{"alerts", "-url", url, "-product", "x"},
		{"alerts", "-url", url, "-kind", "two words"},
		{"alerts", "-url", url, "stray"},
	} {
		if code, out, errOut := as(t, olga, bad...); code != 2 || out != "" {
			t.Errorf("%q: exit %d, %q %q; want 2 and nothing printed", bad, code, out, errOut)
		}
	}
	if got, err := ledger.Alerts().Get(context.Background(), b); err != nil || !got.Open() {
		t.Fatalf("bad command lines changed alert %d: %+v %v", b, got, err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func mustRun(t *testing.T, token string, args ...string) string {
	t.Helper()
	code, out, errOut := as(t, token, args...)
	if code != 0 {
		t.Fatalf("%q: exit %d, %q", args, code, errOut)
	}
	return out
}
