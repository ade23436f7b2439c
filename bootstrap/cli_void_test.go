package bootstrap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The codes-void command voids a file's codes of a frozen product and prints counts only; a
// product on sale and missing flags are refused.
func TestCodesVoidCommand(t *testing.T) {
	c := startService(t)
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":8,"name":"Leaky","price":300,"max_per_order":2}`, nil)
	c.want(200, "POST", "/admin/products/8/codes", adminToken, "LK-0001\nLK-0002\nLK-0003\n", nil)
	file := filepath.Join(t.TempDir(), "leaked.txt")
	if err := os.WriteFile(file, []byte("# leaked on a forum\n LK-0001 \n\nLK-0002\nLK-9999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"codes-void", "-url", c.base, "-product", "8", "-file", file, "-reason", "leaked batch"}
	if code, out, errOut := runCtl(args...); code != 1 || !strings.Contains(errOut, "product_not_frozen") {
		t.Fatalf("a product on sale: exit %d\n%s%s", code, out, errOut)
	}
	c.want(200, "POST", "/admin/products/8/freeze", adminToken, `{"reason":"leak"}`, nil)
	code, out, errOut := runCtl(args...)
	if code != 0 || !strings.Contains(out, "voided 2 · not found 1 · not voidable 0 (3 codes)") || strings.Contains(out+errOut, "LK-") {
		t.Fatalf("codes-void: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCtl(args...); code != 0 || !strings.Contains(out, "voided 0 · not found 1 · not voidable 2") {
		t.Fatalf("codes-void again: exit %d\n%s", code, out)
	}
	if code, _, errOut := runCtl("codes-void", "-url", c.base, "-product", "8", "-file", file); code == 0 || !strings.Contains(errOut, "-reason") {
		t.Fatalf("no reason: exit %d, %s", code, errOut)
	}
}
