package httpapi_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

// orderPageJSON is an answer of GET /admin/orders.
type orderPageJSON struct {
	Orders     []orderJSON `json:"orders"`
	NextCursor string      `json:"next_cursor"`
}

func (h *harness) searchOrders(query string) orderPageJSON {
	h.t.Helper()
	r := h.admin("GET", "/admin/orders"+query, "")
	wantStatus(h.t, r, 200)
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		h.t.Fatalf("Cache-Control %q, want no-store", cc)
	}
	var page orderPageJSON
	r.decode(h.t, &page)
	return page
}

func orderNos(os []orderJSON) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.OrderNo
	}
	return out
}

func TestAdminOrderSearchFiltersAndPages(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.createProduct(2, 250, 5)
	h.importCodes(1, codes("SEARCH-A", 5)...)
	h.importCodes(2, codes("SEARCH-B", 5)...)
	t0 := h.clock.Now()
	// o[i] is placed at t0+i minutes; o[0] and o[2] are paid.
	var o []orderJSON
	for i, spec := range []struct {
		buyer   string
		product int64
		pay     bool
	}{{"bea", 1, true}, {"bob", 1, false}, {"bea", 2, true}, {"bob", 2, false}, {"bea", 1, false}} {
		h.clock.Set(t0.Add(time.Duration(i) * time.Minute))
		placed := h.placeOrder(h.token(domain.BuyerID(spec.buyer)), fmt.Sprintf("key-search-%04d", i), spec.product, 1)
		if spec.pay {
			h.pay(placed)
		}
		o = append(o, placed)
	}
	nos := func(is ...int) []string {
		out := make([]string, len(is))
		for k, i := range is {
			out[k] = o[i].OrderNo
		}
		return out
	}
	at := func(minutes int) string {
		return url.QueryEscape(t0.Add(time.Duration(minutes) * time.Minute).Format(time.RFC3339))
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", nos(4, 3, 2, 1, 0)},
		{"?buyer_id=bea", nos(4, 2, 0)},
		{"?product_id=1", nos(4, 1, 0)},
		{"?status=PAID", nos(2, 0)},
		{"?product_id=1&status=PAID", nos(0)},
		{"?product_id=2&status=PENDING,PAID", nos(3, 2)},
		{"?product_id=2&status=pending&status=paid", nos(3, 2)},
		{"?from=" + at(1) + "&to=" + at(3), nos(2, 1)},
		{"?buyer_id=bob&product_id=2&status=PENDING&from=" + at(0), nos(3)},
		{"?buyer_id=nobody", nil},
		{"?from=" + at(2) + "&to=" + at(2), nil},
	} {
		page := h.searchOrders(c.query)
		if got := orderNos(page.Orders); !slices.Equal(got, c.want) || page.NextCursor != "" {
			t.Errorf("GET /admin/orders%s = %v (next %q), want %v", c.query, got, page.NextCursor, c.want)
		}
	}

	// An operator sees the buyer and the payment, never a code.
	page := h.searchOrders("?status=PAID")
	for _, got := range page.Orders {
		if got.BuyerID != "bea" || got.PaymentRef == "" || got.Codes != nil || got.Currency == "" {
			t.Errorf("order %+v: want its buyer and payment, no codes", got)
		}
	}
	if r := h.admin("GET", "/admin/orders?status=PAID", ""); strings.Contains(string(r.body), "SEARCH-") {
		t.Fatalf("the search shows codes: %s", r.body)
	}
	if got := h.adminOrderWithoutCodes(o[0].OrderNo); got.RevealedAt != nil {
		t.Fatalf("a search revealed the codes: %v", got.RevealedAt)
	}

	// Pages of 2 list the 5 orders once each, newest first; a full page carries a cursor.
	var seen []string
	next := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		page := h.searchOrders("?limit=2" + next)
		seen = append(seen, orderNos(page.Orders)...)
		if (page.NextCursor != "") != (len(page.Orders) == 2) {
			t.Fatalf("page of %d orders with next_cursor %q", len(page.Orders), page.NextCursor)
		}
		if page.NextCursor == "" {
			break
		}
		next = "&cursor=" + url.QueryEscape(page.NextCursor)
	}
	if !slices.Equal(seen, nos(4, 3, 2, 1, 0)) {
		t.Fatalf("pages listed %v, want %v", seen, nos(4, 3, 2, 1, 0))
	}
}

// adminOrderWithoutCodes reads an order as a viewer would, not revealing its codes.
func (h *harness) adminOrderWithoutCodes(no string) orderJSON {
	h.t.Helper()
	r := h.admin("GET", "/admin/orders/"+no+"?codes=false", "")
	wantStatus(h.t, r, 200)
	var o orderJSON
	r.decode(h.t, &o)
	return o
}

func TestAdminOrderSearchRefusesBadInput(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.importCodes(1, codes("BAD", 2)...)
	h.placeOrder(h.token("bea"), "key-search-bad-1", 1, 1)
	later := url.QueryEscape(h.clock.Now().Add(time.Hour).Format(time.RFC3339))
	now := url.QueryEscape(h.clock.Now().Format(time.RFC3339))
	for _, c := range []struct{ query, field string }{
		{"?status=SHIPPED", "status"},
		{"?status=PAID,", "status"},
		{"?status=PAID&status=PAID", "status"},
		{"?from=" + later + "&to=" + now, "from"},
		{"?from=yesterday", "from"},
		{"?to=2030-13-01T00:00:00Z", "to"},
		{"?cursor=garbage", "cursor"},
		{"?cursor=" + url.QueryEscape("MTIzL2EgYg"), "cursor"},
		{"?limit=0", "limit"},
		{"?limit=101", "limit"},
		{"?limit=ten", "limit"},
		{"?product_id=0", "product_id"},
		{"?product_id=x", "product_id"},
		{"?buyer_id=" + url.QueryEscape("two words"), "buyer_id"},
	} {
		e := wantError(t, h.admin("GET", "/admin/orders"+c.query, ""), 400, "invalid_request")
		if e.Field != c.field {
			t.Errorf("GET /admin/orders%s: field %q, want %q", c.query, e.Field, c.field)
		}
	}
	// The largest page is fine.
	if page := h.searchOrders("?limit=100"); len(page.Orders) != 1 {
		t.Fatalf("limit=100: %+v", page)
	}
}

// The export: an operator's POST streams the CSV of the orders the query selects (a BOM, the
// header, no code) and is audited with its query; a viewer is refused; a bad query is a 400.
func TestAdminExportOrders(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.importCodes(1, "EXPORT-CODE-1", "EXPORT-CODE-2")
	paid := h.placeOrder(h.token("alice"), "export-key-1", 1, 1)
	h.pay(paid)
	h.placeOrder(h.token("bob"), "export-key-2", 1, 1)
	r := h.admin("POST", "/admin/orders/export?status=PAID&product_id=1", "")
	wantStatus(t, r, 200)
	body := string(r.body)
	if !strings.HasPrefix(body, "\ufeff"+"order_no,created_at,") || strings.Contains(body, "EXPORT-CODE") ||
		strings.Count(body, "\n") != 2 || !strings.Contains(body, paid.OrderNo+",") {
		t.Fatalf("export %q", body)
	}
	wantError(t, h.admin("POST", "/admin/orders/export?status=LOST", ""), 400, "invalid_request")
	wantError(t, h.admin("POST", "/admin/orders/export?from=yesterday", ""), 400, "invalid_request")
	viewer := h.newOperator("vera", "viewer")
	wantError(t, h.as(viewer, "POST", "/admin/orders/export", ""), 403, "forbidden")
}
