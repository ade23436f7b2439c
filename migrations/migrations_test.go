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

var name = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.sql$`)

// TestFilesAreNumberedInOrder: every file is NNNN_words.sql, numbered 0001, 0002, … without
// gaps or repeats, so name order is apply order.
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
			t.Fatalf("%s: want NNNN_lower_case_words.sql", n)
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

// Versions names every embedded file, in name order, without ".sql".
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
		if !slices.Contains(names, v+".sql") {
			t.Fatalf("Versions() names %s, which is not embedded", v)
		}
	}
}
