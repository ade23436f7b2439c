package application_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

// skipped renders a report's list of lines not imported as "line:reason …".
func skipped(rep application.ImportReport) string {
	var b strings.Builder
	for i, s := range rep.Skipped {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%s", s.Line, s.Reason)
	}
	return b.String()
}

// TestImportReportsEveryLineNotImported: a single-column header "code" is a header, not a
// code; comments are counted; codes that differ only by width or invisible characters are
// one code, Unicode-form variants are refused; a code of another product is refused; every
// line not imported is listed with its number and reason.
func TestImportReportsEveryLineNotImported(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 0)
	q := f.createProduct(t, 3, 0)
	f.importLines(t, q.ID(), "OTHER-0001\n")
	text := strings.Join([]string{
		"code",                  // 1 header (single column)
		"# exported 2025-03-01", // 2 comment
		"#HASH-0001",            // 3 a code starting with # is a comment
		"AAAA-0001",             // 4
		"",                      // 5 blank: ignored
		"ＡＡＡＡ－０００１",             // 6 full-width: the same code
		"\ufeffAAAA-0001\u200b", // 7 BOM and zero-width space: the same code
		"CAF\u00c9-0001",        // 8 NFC: refused
		"CAFE\u0301-0001",       // 9 NFD: refused
		"OTHER-0001",            // 10 another product's
		"aaaa-0001",             // 11 case counts: a new code
		"AB\u200bCD-0001",       // 12 invisible inside: refused
		"code",                  // 13 not the first line: a (valid) code
	}, "\n")
	rep := f.importLines(t, p.ID(), text)
	want := "1:header 2:comment 3:comment 6:duplicate 7:duplicate 8:invalid 9:invalid 10:in_pool 12:invalid"
	if got := skipped(rep); got != want {
		t.Fatalf("skipped %q, want %q", got, want)
	}
	if rep.Added != 3 || rep.Duplicates != 2 || rep.InPool != 1 || rep.Invalid != 3 || rep.Comments != 2 ||
		rep.Headers != 1 || rep.Unterminated != 0 || rep.Truncated || rep.Through != 13 || fmt.Sprint(rep.InvalidRows) != "[8 9 12]" {
		t.Fatalf("report %+v", rep)
	}
	for _, s := range rep.Skipped {
		if s.Reason == application.SkipInvalid && (s.Detail == "" || strings.Contains(s.Detail, "CAF")) {
			t.Fatalf("line %d: invalid without a reason, or with the code in it: %q", s.Line, s.Detail)
		}
	}
	if c := f.counts(t, q.ID()); c[domain.CardUnsold] != 1 {
		t.Fatalf("product q pool %v, want its one code", c)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 3 {
		t.Fatalf("gate %+v, want 3 free", lv)
	}
	f.assertInvariants(t, p.ID())
	f.assertInvariants(t, q.ID())

	// A CSV header: its first field is "code".
	rep = f.importLines(t, p.ID(), "\ufeff\"Code\",expires\nBBBB-0001,2027-01-01\n")
	if got := skipped(rep); rep.Added != 1 || got != "1:header" {
		t.Fatalf("CSV with a header: %+v", rep)
	}
}

// cutReader returns body, then err in place of the end.
type cutReader struct {
	body string
	err  error
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.body == "" {
		return 0, c.err
	}
	n := copy(p, c.body)
	c.body = c.body[n:]
	return n, nil
}

// TestImportOfACutBodyNeverImportsItsLastLine: when the body fails (a size limit, a broken
// connection), the complete lines are imported and the unterminated last one never is, even
// when it looks like a valid code; the report says through which line.
func TestImportOfACutBodyNeverImportsItsLastLine(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 0)
	broken := errors.New("connection reset")
	rep, err := f.shop.Catalogue.ImportCodes(f.ctx, p.ID(), &cutReader{body: "CUT-00001\n# note\nCUT-00002\nCUT-000", err: broken})
	f.imported[p.ID()] += int64(rep.Added)
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "after line 3") {
		t.Fatalf("err = %v, want the read error after line 3", err)
	}
	if rep.Added != 2 || rep.Unterminated != 1 || rep.Through != 3 || skipped(rep) != "2:comment 4:unterminated" {
		t.Fatalf("report %+v, want lines 1-3 done and line 4 unterminated", rep)
	}
	// The cut line was not imported: the whole code still is new.
	rep = f.importLines(t, p.ID(), "CUT-000\n")
	if rep.Added != 1 {
		t.Fatalf("the cut line's text was imported before: %+v", rep)
	}

	// Cut right after a newline: nothing is unterminated.
	rep, err = f.shop.Catalogue.ImportCodes(f.ctx, p.ID(), &cutReader{body: "CUT-00003\n", err: io.ErrUnexpectedEOF})
	f.imported[p.ID()] += int64(rep.Added)
	if !errors.Is(err, io.ErrUnexpectedEOF) || rep.Added != 1 || rep.Unterminated != 0 || rep.Through != 1 {
		t.Fatalf("cut after a newline: %+v, %v", rep, err)
	}

	// An end that cannot be told from a cut (a chunked body): the last line without a newline
	// is reported, the rest is a normal import.
	rep, err = f.shop.Catalogue.ImportCodes(f.ctx, p.ID(), &cutReader{body: "CUT-00004\nCUT-00005", err: application.ErrUnconfirmedEnd})
	f.imported[p.ID()] += int64(rep.Added)
	if err != nil || rep.Added != 1 || rep.Unterminated != 1 || skipped(rep) != "2:unterminated" || rep.Through != 1 {
		t.Fatalf("unconfirmed end: %+v, %v", rep, err)
	}
	rep, err = f.shop.Catalogue.ImportCodes(f.ctx, p.ID(), &cutReader{body: "CUT-00006\n", err: application.ErrUnconfirmedEnd})
	f.imported[p.ID()] += int64(rep.Added)
	if err != nil || rep.Added != 1 || rep.Unterminated != 0 || rep.Through != 1 {
		t.Fatalf("unconfirmed end after a newline: %+v, %v", rep, err)
	}
	// A clean end without a final newline imports the last line.
	if rep = f.importLines(t, p.ID(), "CUT-00007\nCUT-00008"); rep.Added != 2 || rep.Through != 2 {
		t.Fatalf("clean end: %+v", rep)
	}
	if lv := f.levels(t, p.ID()); lv.Stock != 8 {
		t.Fatalf("gate %+v, want 8 free", lv)
	}
	f.assertInvariants(t, p.ID())
}

// TestImportReportIsBounded: a file of thousands of bad lines gets complete counts and the
// first MaxReportedLines lines in line order, duplicates found at commit included.
func TestImportReportIsBounded(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 0)
	known := f.addCodes(t, p.ID(), 1)[0]
	var lines []string
	for i := range 3000 {
		switch i % 3 {
		case 0:
			lines = append(lines, known) // a duplicate, known only when its batch commits
		case 1:
			lines = append(lines, "bad")
		default:
			lines = append(lines, fmt.Sprintf("FRESH-%06d", i))
		}
	}
	lines = append(lines, strings.Repeat("L", 70<<10)) // line 3001: over 64 KiB
	rep := f.importLines(t, p.ID(), strings.Join(lines, "\n"))
	if rep.Added != 1000 || rep.Duplicates != 1000 || rep.Invalid != 1001 || rep.Through != 3001 ||
		len(rep.Skipped) != application.MaxReportedLines || !rep.Truncated || len(rep.InvalidRows) != 20 {
		t.Fatalf("added %d duplicates %d invalid %d through %d listed %d truncated %v", rep.Added, rep.Duplicates,
			rep.Invalid, rep.Through, len(rep.Skipped), rep.Truncated)
	}
	for i, s := range rep.Skipped {
		want := application.SkipDuplicate
		if i%2 == 1 {
			want = application.SkipInvalid
		}
		// The lines not imported are 1, 2, 4, 5, 7, 8, …: two of every three.
		if s.Line != i/2*3+i%2+1 || s.Reason != want {
			t.Fatalf("listed[%d] = %+v, want line %d %s", i, s, i/2*3+i%2+1, want)
		}
	}
	if rep = f.importLines(t, p.ID(), strings.Repeat("L", 70<<10)+"\nLONG-0001\n"); rep.Invalid != 1 || rep.Added != 1 ||
		rep.Skipped[0].Detail != "longer than 64 KiB" {
		t.Fatalf("a line over 64 KiB: %+v", rep)
	}
	f.assertInvariants(t, p.ID())
}

// TestCardCountsCountsByStatus: the pool's codes of one product by status (another product's
// apart); an unknown product is an error, not an empty pool.
func TestCardCountsCountsByStatus(t *testing.T) {
	f := newFixture(t)
	p := f.createProduct(t, 3, 0)
	q := f.createProduct(t, 3, 0)
	f.importLines(t, p.ID(), "COUNT-0001\nCOUNT-0002\n")
	f.importLines(t, q.ID(), "COUNT-0003\n")
	got, err := f.shop.Catalogue.CardCounts(t.Context(), p.ID())
	if err != nil || len(got) != 1 || got[domain.CardUnsold] != 2 {
		t.Fatalf("CardCounts = %v, %v; want 2 UNSOLD", got, err)
	}
	if _, err := f.shop.Catalogue.CardCounts(t.Context(), 999); !errors.Is(err, domain.ErrProductNotFound) {
		t.Fatalf("unknown product: %v", err)
	}
}
