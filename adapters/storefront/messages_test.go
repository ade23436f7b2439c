package storefront_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"cardshop/adapters/i18n"
	"cardshop/application"
	"cardshop/domain"
)

// TestEveryMessageIsInTheCatalogues: every message id the pages use — written in a template
// or the code, or made from a status, a stock level or an order status — exists in both
// languages, so no page shows a raw id.
func TestEveryMessageIsInTheCatalogues(t *testing.T) {
	cat, err := i18n.Load()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	literal := regexp.MustCompile(`"(storefront\.[a-z_]+|common\.[a-z_]+)"`)
	files, _ := filepath.Glob("*.go")
	tmpls, _ := filepath.Glob("templates/*.html")
	for _, f := range append(files, tmpls...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllStringSubmatch(string(b), -1) {
			if !strings.HasSuffix(m[1], "_") && !strings.HasPrefix(m[1], "storefront.form") &&
				!strings.HasPrefix(m[1], "storefront.csrfseed") && !strings.HasPrefix(m[1], "storefront.payform") {
				ids[m[1]] = true
			}
		}
	}
	for _, st := range []application.CatalogueStatus{application.CatalogueOnSale, application.CatalogueSoldOut,
		application.CataloguePaused, application.CatalogueUpcoming, application.CatalogueEnded} {
		ids["storefront.status_"+string(st)] = true
	}
	for _, l := range []string{"none", "few", "plenty"} {
		ids["storefront.stock_"+l] = true
	}
	for _, st := range domain.AllOrderStatuses {
		ids["storefront.order_"+strings.ToLower(st.String())] = true
	}
	if len(ids) < 50 {
		t.Fatalf("found only %d ids: the scan is broken", len(ids))
	}
	for id := range ids {
		for _, l := range i18n.Langs {
			if !cat.Has(l, id) {
				t.Errorf("%s has no message %q", l, id)
			}
		}
	}
}
