package migrations_test

import (
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"cardshop/migrations"
)

var name = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.up\.sql$`)

// TestFilesAreNumberedInOrder: every file is NNNN_words.up.sql, numbered 0001, 0002, … without
// gaps or repeats, so name order is apply order. (bun/migrate would skip a file not named
// *.up.sql without a word.)
func TestFilesAreNumberedInOrder(t *testing.T) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no migrations embedded")
	}
	slices.Sort(names)
	for i, n := range names {
		m := name.FindStringSubmatch(n)
		if m == nil {
			t.Fatalf("%s: want NNNN_lower_case_words.up.sql", n)
		}
		if num, _ := strconv.Atoi(m[1]); num != i+1 {
			t.Fatalf("%s: number %s, want %04d (no gaps, no repeats)", n, m[1], i+1)
		}
	}
}

// TestStatementsAreRerunnable: MySQL commits DDL at once, so a half-applied file is run again
// from the top; every CREATE must tolerate that.
func TestStatementsAreRerunnable(t *testing.T) {
	creates := regexp.MustCompile(`(?i)\bCREATE\s+(TABLE|INDEX|UNIQUE\s+INDEX)\s+(IF\s+NOT\s+EXISTS\s+)?`)
	names, _ := fs.Glob(migrations.FS, "*.sql")
	for _, n := range names {
		body, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), ";") {
			t.Errorf("%s holds no statement", n)
		}
		for _, m := range creates.FindAllStringSubmatch(string(body), -1) {
			if m[2] == "" {
				t.Errorf("%s: %q without IF NOT EXISTS", n, strings.TrimSpace(m[0]))
			}
		}
	}
}

// TestOneStatementPerPart: bun/migrate sends the text between two "--bun:split" lines as one
// query, and the connection runs one statement per query: a part holds exactly one statement,
// the one its last code line ends with ";" (the files put every statement's end at the end of
// a line), and no part is only comments (the server refuses an empty query).
func TestOneStatementPerPart(t *testing.T) {
	names, _ := fs.Glob(migrations.FS, "*.sql")
	for _, n := range names {
		body, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		for i, part := range strings.Split(string(body), "\n--bun:split\n") {
			var code []string
			for line := range strings.Lines(part) {
				if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") && !strings.HasPrefix(l, "#") {
					code = append(code, l)
				}
			}
			if len(code) == 0 {
				t.Errorf("%s part %d: no statement", n, i+1)
				continue
			}
			for j, l := range code {
				if last := j == len(code)-1; strings.HasSuffix(l, ";") != last {
					t.Errorf("%s part %d: a statement ends before the part does (or the last does not end with ;): %q", n, i+1, l)
				}
			}
		}
	}
}

// Versions names every embedded file, in name order, without ".up.sql".
func TestVersions(t *testing.T) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	got := migrations.Versions()
	if len(got) != len(names) || !slices.IsSorted(got) {
		t.Fatalf("Versions() = %v, want the %d files sorted", got, len(names))
	}
	for _, v := range got {
		if !slices.Contains(names, v+migrations.Suffix) {
			t.Fatalf("Versions() names %s, which is not embedded", v)
		}
	}
}

// TestHistoryKept: the migrations released before bun/migrate keep their numbers and names,
// so that the versions the old runner recorded in schema_migrations name the same files
// (mysqlstore.Migrate copies them into bun_migrations by number).
func TestHistoryKept(t *testing.T) {
	released := []string{"0001_init", "0002_outbox_retry", "0003_outbox_retry_default", "0004_code_unique",
		"0005_order_revealed", "0006_payments", "0007_payment_refunds", "0008_product_prices",
		"0009_product_sale_rules", "0010_operators_audit", "0011_alerts", "0012_order_search",
		"0013_payment_refund_decision", "0014_notification_retention", "0015_operator_logout"}
	if got := migrations.Versions(); len(got) < len(released) || !slices.Equal(got[:len(released)], released) {
		t.Fatalf("Versions() = %v, want it to start with the released %v", got, released)
	}
}
