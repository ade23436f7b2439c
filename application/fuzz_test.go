package application_test

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzImportCodes feeds arbitrary upload bodies to the code import: it never panics, never
// counts more outcomes than lines, adds exactly the codes the gate is told about, and leaves
// the invariants intact.
func FuzzImportCodes(f *testing.F) {
	for _, seed := range []string{
		"CODE-0001\nCODE-0002\n", "a,b,c\n\"QUOTED-1\",x\n", "# comment\n\n  SPACED-CODE  \n",
		"dup-dup-1\ndup-dup-1\n", "x\n" + strings.Repeat("y", 200) + "\n", "\xff\xfe\x00bad\n", "ok-code\r\nwin-code\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fx := newFixture(t)
		p := fx.createProduct(t, 3, 0)
		rep, err := fx.shop.ImportCodes(fx.ctx, p.ID(), bytes.NewReader(body))
		fx.mu.Lock()
		fx.imported[p.ID()] += int64(rep.Added) // batches before a refused line stay imported
		fx.mu.Unlock()
		if err != nil {
			fx.assertInvariants(t, p.ID())
			return // a line over 64 KiB is refused
		}
		lines := bytes.Count(body, []byte("\n")) + 1
		if rep.Added+rep.Duplicates+rep.Invalid > lines {
			t.Fatalf("report %+v counts more than %d lines", rep, lines)
		}
		if lv := fx.levels(t, p.ID()); lv.Stock != int64(rep.Added) {
			t.Fatalf("gate stock %d after adding %d codes", lv.Stock, rep.Added)
		}
		fx.assertInvariants(t, p.ID())
	})
}
