package application_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"cardshop/application"
)

// FuzzImportCodes feeds arbitrary upload bodies to the code import: it never panics, accounts
// for every line (listing the ones not imported in order, within the bound), adds exactly the
// codes the gate is told about, leaves the invariants intact, and, when the same body ends in
// a read error, imports its complete lines only, never the text after the last newline.
func FuzzImportCodes(f *testing.F) {
	for _, seed := range []string{
		"CODE-0001\nCODE-0002\n", "a,b,c\n\"QUOTED-1\",x\n", "# comment\n\n  SPACED-CODE  \n",
		"dup-dup-1\ndup-dup-1\n", "x\n" + strings.Repeat("y", 200) + "\n", "\xff\xfe\x00bad\n", "ok-code\r\nwin-code\r\n",
		"code\n#HASH-1\n\ufeffＡＢＣＤ\nABCD\nCAFE\u0301\n", "Code,x\nlast-no-newline",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fx := newFixture(t)
		p := fx.createProduct(t, 3, 0)
		rep, err := fx.shop.Catalogue.ImportCodes(fx.ctx, p.ID(), bytes.NewReader(body))
		fx.mu.Lock()
		fx.imported[p.ID()] += int64(rep.Added)
		fx.mu.Unlock()
		if err != nil {
			t.Fatalf("import of a body that ends cleanly: %v", err) // a long line is an invalid line
		}
		lines := bytes.Count(body, []byte("\n"))
		if len(body) > 0 && body[len(body)-1] != '\n' {
			lines++
		}
		if rep.Through != lines || rep.Added+rep.NotImported() > lines || rep.Unterminated != 0 {
			t.Fatalf("report %+v of %d lines", rep, lines)
		}
		// Every line not imported is listed (up to the bound), in line order, by its reason.
		listed := map[string]int{}
		for i, s := range rep.Skipped {
			listed[s.Reason]++
			if s.Line < 1 || s.Line > lines || i > 0 && s.Line <= rep.Skipped[i-1].Line {
				t.Fatalf("listed %+v out of order or range", rep.Skipped)
			}
		}
		if rep.Truncated != (rep.NotImported() > len(rep.Skipped)) || len(rep.Skipped) > application.MaxReportedLines {
			t.Fatalf("listed %d of %d lines not imported, truncated %v", len(rep.Skipped), rep.NotImported(), rep.Truncated)
		}
		if !rep.Truncated && (listed[application.SkipInvalid] != rep.Invalid || listed[application.SkipDuplicate] != rep.Duplicates ||
			listed[application.SkipComment] != rep.Comments || listed[application.SkipHeader] != rep.Headers || rep.InPool != 0) {
			t.Fatalf("listed %v, counted %+v", listed, rep)
		}
		// The same body cut off by a read error: the complete lines only, never the last one
		// after the last newline.
		q := fx.createProduct(t, 3, 0)
		broken := errors.New("cut")
		cut, err := fx.shop.Catalogue.ImportCodes(fx.ctx, q.ID(), &cutReader{body: string(body), err: broken})
		fx.mu.Lock()
		fx.imported[q.ID()] += int64(cut.Added)
		fx.mu.Unlock()
		complete := bytes.Count(body, []byte("\n"))
		tail := len(body) > 0 && body[len(body)-1] != '\n'
		if !errors.Is(err, broken) || cut.Through != complete || (cut.Unterminated == 1) != tail {
			t.Fatalf("cut body: %+v, %v; want %d complete lines, unterminated %v", cut, err, complete, tail)
		}
		if cut.Added+cut.InPool+cut.Duplicates+cut.Invalid+cut.Comments+cut.Headers > complete {
			t.Fatalf("cut body: %+v counts more than its %d complete lines", cut, complete)
		}
		fx.assertInvariants(t, q.ID())
		if lv := fx.levels(t, p.ID()); lv.Stock != int64(rep.Added) {
			t.Fatalf("gate stock %d after adding %d codes", lv.Stock, rep.Added)
		}
		fx.assertInvariants(t, p.ID())
	})
}
