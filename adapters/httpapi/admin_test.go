package httpapi_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
	"cardshop/adapters/paysig"
	"cardshop/domain"
)

var adminRoutes = []struct{ method, path string }{
	{"POST", "/admin/products"},
	{"GET", "/admin/products"},
	{"GET", "/admin/products/1"},
	{"POST", "/admin/products/1/codes"},
	{"POST", "/admin/products/1/freeze"},
	{"POST", "/admin/products/1/unfreeze"},
	{"GET", "/admin/products/1/reconcile"},
	{"POST", "/admin/products/1/reconcile?repair=true"},
	{"GET", "/admin/orders/2503011200001234123456789012"},
	{"POST", "/admin/orders/2503011200001234123456789012/refund"},
	{"POST", "/admin/orders/2503011200001234123456789012/fulfil"},
	{"POST", "/admin/tokens"},
	{"GET", "/admin/no-such-route"},
}

func TestAdminNeedsTheToken(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	buyer := h.token("alice")
	for _, rt := range adminRoutes {
		for name, auth := range map[string]string{
			"none":         "",
			"wrong":        "Bearer wrong-token-0123456789",
			"prefix":       "Bearer " + adminToken[:len(adminToken)-1],
			"longer":       "Bearer " + adminToken + "x",
			"not bearer":   "Basic " + adminToken,
			"bare":         adminToken,
			"buyer token":  "Bearer " + buyer,
			"empty bearer": "Bearer ",
		} {
			t.Run(rt.method+" "+rt.path+" "+name, func(t *testing.T) {
				hdr := []string{"Content-Type", "application/json"}
				if auth != "" {
					hdr = append(hdr, "Authorization", auth)
				}
				wantError(t, h.do(rt.method, rt.path, strings.NewReader(`{"id":5,"name":"x","price":1,"max_per_order":1}`), hdr...), 401, "unauthorized")
			})
		}
	}
	// Nothing was done by any of them.
	r := h.admin("GET", "/admin/products", "")
	wantStatus(t, r, 200)
	if strings.Contains(string(r.body), `"id":5`) {
		t.Fatal("an unauthenticated create went through")
	}
	// The scheme name is case-insensitive.
	wantStatus(t, h.do("GET", "/admin/products", nil, "Authorization", "bearer "+adminToken), 200)
}

func TestAdminProducts(t *testing.T) {
	h := newHarness(t)
	p := h.createProduct(10, 1999, 3)
	if p.ID != 10 || p.Name != "Gift card 10" || p.Price != 1999 || p.MaxPerOrder != 3 || p.Frozen || !p.CreatedAt.Equal(start) {
		t.Fatalf("created %+v", p)
	}
	// id 0: the catalogue chooses.
	r := h.admin("POST", "/admin/products", `{"name":"auto","price":5,"max_per_order":1}`)
	wantStatus(t, r, 201)
	var auto productJSON
	r.decode(t, &auto)
	if auto.ID <= 0 || auto.ID == 10 {
		t.Fatalf("assigned id %d", auto.ID)
	}
	wantError(t, h.admin("POST", "/admin/products", `{"id":10,"name":"again","price":5,"max_per_order":1}`), 409, "product_exists")

	invalid := []struct{ body, field string }{
		{`{"id":-1,"name":"x","price":5,"max_per_order":1}`, "id"},
		{`{"id":20,"name":"","price":5,"max_per_order":1}`, "name"},
		{`{"id":20,"name":"   ","price":5,"max_per_order":1}`, "name"},
		{`{"id":20,"name":"` + strings.Repeat("n", 129) + `","price":5,"max_per_order":1}`, "name"},
		{`{"id":20,"name":"x","price":0,"max_per_order":1}`, "price"},
		{`{"id":20,"name":"x","price":-5,"max_per_order":1}`, "price"},
		{`{"id":20,"name":"x","price":5,"max_per_order":0}`, "max_per_order"},
		{`{"id":20,"name":"x","price":5,"max_per_order":1001}`, "max_per_order"},
		{`{"id":20,"name":"x","price":5}`, "max_per_order"},
		{`{"id":20,"name":"x","price":"5","max_per_order":1}`, "price"},
		{`{"id":20,"name":"x","price":5.5,"max_per_order":1}`, "price"},
		{`{"id":20,"name":"x","price":5,"max_per_order":1,"stock":9}`, "stock"},
		{``, "body"},
		{`{"id":20`, "body"},
	}
	for _, tt := range invalid {
		e := wantError(t, h.admin("POST", "/admin/products", tt.body), 400, "invalid_request")
		if e.Field != tt.field {
			t.Errorf("%s: field %q, want %q", tt.body, e.Field, tt.field)
		}
	}

	r = h.admin("GET", "/admin/products", "")
	wantStatus(t, r, 200)
	var list struct {
		Products []productJSON `json:"products"`
	}
	r.decode(t, &list)
	if len(list.Products) != 2 || list.Products[0].ID != 10 || list.Products[1].ID != auto.ID {
		t.Fatalf("list %+v", list)
	}
	r = h.admin("GET", "/admin/products/10", "")
	wantStatus(t, r, 200)
	var got productJSON
	r.decode(t, &got)
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("get %+v, want %+v", got, p)
	}
	for _, bad := range []string{"999", "0", "-1", "abc", "1.5", "99999999999999999999"} {
		wantError(t, h.admin("GET", "/admin/products/"+bad, ""), 404, "product_not_found")
	}

	// Freeze with and without a reason, unfreeze, unknown products.
	r = h.admin("POST", "/admin/products/10/freeze", `{"reason":"supplier recall"}`)
	wantStatus(t, r, 200)
	r.decode(t, &got)
	if !got.Frozen || got.FrozenReason != "supplier recall" {
		t.Fatalf("frozen %+v", got)
	}
	if l := h.levels(10); !l.Frozen {
		t.Error("the gate is not frozen")
	}
	r = h.admin("POST", "/admin/products/10/unfreeze", "")
	wantStatus(t, r, 200)
	got = productJSON{}
	r.decode(t, &got)
	if got.Frozen || got.FrozenReason != "" || h.levels(10).Frozen {
		t.Fatalf("unfrozen %+v", got)
	}
	r = h.admin("POST", "/admin/products/10/freeze", "")
	wantStatus(t, r, 200)
	r.decode(t, &got)
	if !got.Frozen || got.FrozenReason == "" {
		t.Fatalf("frozen without a reason %+v", got)
	}
	wantError(t, h.admin("POST", "/admin/products/10/freeze", `{"reason":1}`), 400, "invalid_request")
	wantError(t, h.admin("POST", "/admin/products/999/freeze", ""), 404, "product_not_found")
	wantError(t, h.admin("POST", "/admin/products/999/unfreeze", ""), 404, "product_not_found")
	wantError(t, h.admin("GET", "/admin/products/999/reconcile", ""), 404, "product_not_found")
}

func TestAdminImportCodes(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	body := strings.Join([]string{
		"# header comment",
		"CODE-0001",
		"CODE-0002",
		"",
		"   CODE-0003   ",
		"CODE-0001",              // duplicate of line 2
		"abc",                    // too short: line 7
		"has space",              // line 8
		"CODE-0004,2025-01-01,x", // CSV: the first field
		`"CODE-0005",batch`,      // quoted CSV field
		"CODE-0002",              // duplicate
		"\t",
		"bad\x00code", // line 13
	}, "\n")
	r := h.do("POST", "/admin/products/1/codes", strings.NewReader(body), "Authorization", bearer(adminToken), "Content-Type", "text/plain")
	wantStatus(t, r, 200)
	var rep importJSON
	r.decode(t, &rep)
	if rep.Added != 5 || rep.Duplicates != 2 || rep.Invalid != 3 || fmt.Sprint(rep.InvalidLines) != "[7 8 13]" {
		t.Fatalf("import report %+v", rep)
	}
	// A second import of the same codes adds nothing; CRLF line ends work.
	rep = h.importCodes(1, "CODE-0001\r", "CODE-0006\r")
	if rep.Added != 1 || rep.Duplicates != 1 || rep.Invalid != 0 {
		t.Fatalf("second import %+v", rep)
	}
	if l := h.levels(1); l.Stock != 6 {
		t.Fatalf("gate stock %d, want 6", l.Stock)
	}
	// Empty body: nothing happens.
	r = h.do("POST", "/admin/products/1/codes", nil, "Authorization", bearer(adminToken))
	wantStatus(t, r, 200)
	rep = importJSON{}
	r.decode(t, &rep)
	if rep.Added != 0 || rep.Duplicates != 0 || rep.Invalid != 0 {
		t.Fatalf("empty import %+v", rep)
	}
	// A line over 64 KiB is an invalid line; an unknown product is refused.
	r = h.do("POST", "/admin/products/1/codes", strings.NewReader("CODE-0100\n"+strings.Repeat("x", 70<<10)+"\n"),
		"Authorization", bearer(adminToken))
	wantStatus(t, r, 200)
	rep = importJSON{}
	r.decode(t, &rep)
	if rep.Added != 1 || rep.Invalid != 1 || rep.skippedLines() != "2:invalid" || rep.Skipped[0].Detail != "longer than 64 KiB" {
		t.Errorf("long line: %+v", rep)
	}
	wantError(t, h.do("POST", "/admin/products/999/codes", strings.NewReader("CODE-9999\n"), "Authorization", bearer(adminToken)), 404, "product_not_found")
	wantError(t, h.do("POST", "/admin/products/x/codes", strings.NewReader("CODE-9999\n"), "Authorization", bearer(adminToken)), 404, "product_not_found")

	// A large import.
	big := codes("BULK", 50_000)
	rep = h.importCodes(1, append(big, big[:100]...)...)
	if rep.Added != 50_000 || rep.Duplicates != 100 || rep.Invalid != 0 {
		t.Fatalf("large import %+v", rep)
	}
	c := h.cardCounts(1)
	total := int64(0)
	for _, n := range c {
		total += n
	}
	if c[domain.CardUnsold] != 50_007 || total != 50_007 {
		t.Fatalf("pool after the large import: %v", c)
	}
	if l := h.levels(1); l.Stock != 50_007 || l.Sold != 0 {
		t.Fatalf("gate after the large import: %+v", l)
	}
	rec := h.admin("GET", "/admin/products/1/reconcile", "")
	wantStatus(t, rec, 200)
	if !strings.Contains(string(rec.body), `"ok":true`) {
		t.Fatalf("reconcile after imports: %s", rec.body)
	}
}

func TestAdminImportLimit(t *testing.T) {
	h := newHarness(t, func(c *httpapi.Config) { c.MaxImportBytes = 1000 })
	h.createProduct(1, 100, 5)
	// Declared too large: refused before reading.
	body := strings.Join(codes("LIM", 200), "\n")
	wantError(t, h.do("POST", "/admin/products/1/codes", strings.NewReader(body), "Authorization", bearer(adminToken)), 413, "body_too_large")
	if c := h.cardCounts(1); c[domain.CardUnsold] != 0 {
		t.Fatalf("a refused import added codes: %v", c)
	}
	// Within the limit: fine.
	if rep := h.importCodes(1, codes("OK", 10)...); rep.Added != 10 {
		t.Fatalf("small import %+v", rep)
	}
}

type reconcileJSON struct {
	ProductID   int64 `json:"product_id"`
	OK          bool  `json:"ok"`
	Differences int   `json:"differences"`
	Repaired    bool  `json:"repaired"`
	Gate        *struct {
		Stock  int64 `json:"stock"`
		Sold   int64 `json:"sold"`
		Frozen bool  `json:"frozen"`
	} `json:"gate"`
	Cards  map[string]int `json:"cards"`
	Orders map[string]struct {
		Orders int64 `json:"orders"`
		Qty    int64 `json:"qty"`
	} `json:"orders"`
	Checks []struct {
		Name string `json:"name"`
		Want int64  `json:"want"`
		Got  int64  `json:"got"`
		OK   bool   `json:"ok"`
	} `json:"checks"`
}

// An UNFULFILLED order whose payment is REFUNDING (its refund pending at the provider) is not
// fulfilled, even with stock back: 409 refund_in_progress, nothing allocated.
func TestFulfilDuringAPendingRefund(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 300, 5)
	h.importCodes(1, "F-0001")
	late := h.placeOrder(h.token("alice"), "key-00000001", 1, 1)
	h.clock.Advance(16 * time.Minute)
	if _, err := h.shop.Sales.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.pay(h.placeOrder(h.token("bob"), "key-00000002", 1, 1)) // takes the only code
	wantStatus(t, h.callback(paysig.Notice{OrderNo: late.OrderNo, Status: "paid", Amount: late.Amount, PaymentRef: "acme:ref-late"}), 200)
	if got := h.adminOrder(late.OrderNo); got.Status != "UNFULFILLED" {
		t.Fatalf("late payment with no stock left: %+v", got)
	}
	no := domain.OrderNo(late.OrderNo)
	if err := h.ledger.Payments().Create(context.Background(), domain.Payment{OrderNo: no, Provider: "acme", ProviderRef: "ref-late",
		Amount: domain.Money(late.Amount), Currency: h.shop.Config().Currency, Status: domain.PaymentRefunding,
		RefundNo: domain.RefundNoOf(no), CreatedAt: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	h.importCodes(1, "F-0002")
	wantError(t, h.admin("POST", "/admin/orders/"+late.OrderNo+"/fulfil", ""), 409, "refund_in_progress")
	// A reason longer than a refund stores is refused before anything moves.
	wantError(t, h.admin("POST", "/admin/orders/"+late.OrderNo+"/refund", `{"reason":"`+strings.Repeat("x", domain.MaxRefundNote+1)+`"}`), 400, "invalid_request")
	if got := h.adminOrder(late.OrderNo); got.Status != "UNFULFILLED" || len(got.Codes) != 0 {
		t.Fatalf("order after the refused fulfil: %+v", got)
	}
	if c := h.cardCounts(1); c[domain.CardSold] != 1 {
		t.Fatalf("codes after the refused fulfil: %v; want only bob's SOLD", c)
	}
}

func TestAdminOrdersRefundFulfilReconcile(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 300, 5)
	h.importCodes(1, codes("R", 6)...)
	alice, bob := h.token("alice"), h.token("bob")

	reconcile := func(method, path string) reconcileJSON {
		t.Helper()
		r := h.admin(method, path, "")
		wantStatus(t, r, 200)
		var rec reconcileJSON
		r.decode(t, &rec)
		if !rec.OK || rec.Differences != 0 || rec.ProductID != 1 || len(rec.Checks) == 0 || rec.Gate == nil {
			t.Fatalf("%s %s: %s", method, path, r.body)
		}
		return rec
	}
	if rec := reconcile("GET", "/admin/products/1/reconcile"); rec.Repaired {
		t.Error("GET repaired")
	}
	if rec := reconcile("GET", "/admin/products/1/reconcile?repair=true"); rec.Repaired {
		t.Error("GET with repair=true repaired: only POST may")
	}

	paid := h.placeOrder(alice, "key-00000001", 1, 2)
	h.pay(paid)
	pending := h.placeOrder(alice, "key-00000002", 1, 1)

	// The admin view shows the buyer and the payment reference; with codes=false it shows no
	// code and records no reveal, so an operator can look before refunding.
	r := h.admin("GET", "/admin/orders/"+paid.OrderNo+"?codes=false", "")
	wantStatus(t, r, 200)
	var v orderJSON
	r.decode(t, &v)
	if v.BuyerID != "alice" || v.Status != "PAID" || len(v.Codes) != 0 || v.PaymentRef == "" || v.RevealedAt != nil {
		t.Fatalf("admin view without codes %+v", v)
	}
	wantError(t, h.admin("GET", "/admin/orders/"+paid.OrderNo+"?codes=maybe", ""), 400, "invalid_request")
	// With codes (the default) it is a reveal, like the buyer's read.
	v = h.adminOrder(paid.OrderNo)
	if v.BuyerID != "alice" || v.Status != "PAID" || len(v.Codes) != 2 || v.PaymentRef == "" || v.RevealedAt == nil {
		t.Fatalf("admin view %+v", v)
	}
	wantError(t, h.admin("GET", "/admin/orders/2503011200009999999999999999", ""), 404, "order_not_found")
	wantError(t, h.admin("GET", "/admin/orders/bad_no", ""), 404, "order_not_found")

	refund := func(no, body string) refundJSON {
		t.Helper()
		r := h.admin("POST", "/admin/orders/"+no+"/refund", body)
		wantStatus(t, r, 200)
		var ref refundJSON
		r.decode(t, &ref)
		return ref
	}
	// Refunds: PENDING cannot be refunded; PAID can, once, and again answers the same.
	wantError(t, h.admin("POST", "/admin/orders/"+pending.OrderNo+"/refund", ""), 409, "invalid_order_state")
	wantError(t, h.admin("POST", "/admin/orders/2503011200009999999999999999/refund", ""), 404, "order_not_found")
	wantError(t, h.admin("POST", "/admin/orders/"+paid.OrderNo+"/refund", `{"void":"yes"}`), 400, "invalid_request")
	if e := wantError(t, h.admin("POST", "/admin/orders/"+paid.OrderNo+"/refund", `{"void":true,"recycle":true}`), 400, "invalid_request"); e.Field != "recycle" {
		t.Fatalf("void and recycle: field %q, want recycle", e.Field)
	}
	// The codes were read: the default refund voids them and the stock stays out.
	ref := refund(paid.OrderNo, `{"reason":"buyer asked"}`)
	if ref.Status != "REFUNDED" || ref.Reason != "buyer asked" || ref.BuyerID != "alice" || len(ref.Codes) != 0 ||
		ref.CodesVoided != 2 || ref.CodesRecycled != 0 || ref.RevealedAt == nil || !ref.RevealedAt.Equal(*v.RevealedAt) {
		t.Fatalf("refund answer %+v", ref)
	}
	if c := h.cardCounts(1); c[domain.CardVoid] != 2 || c[domain.CardSold] != 0 {
		t.Fatalf("codes after refunding read codes: %v", c)
	}
	if l := h.levels(1); l.Stock != 3 || l.Sold != 1 {
		t.Fatalf("gate after refunding read codes: %+v", l)
	}
	if again := refund(paid.OrderNo, `{"recycle":true}`); again.Status != "REFUNDED" || again.Reason != "buyer asked" ||
		again.CodesVoided != 2 || again.CodesRecycled != 0 {
		t.Fatalf("second refund %+v", again)
	}
	if c := h.cardCounts(1); c[domain.CardVoid] != 2 || c[domain.CardRecycled] != 0 {
		t.Fatalf("a repeated refund changed codes: %v", c)
	}
	reconcile("GET", "/admin/products/1/reconcile")

	// Codes nobody read go back to the pool, stock and all.
	second := h.placeOrder(bob, "key-00000003", 1, 2)
	h.pay(second)
	if ref := refund(second.OrderNo, ""); ref.CodesRecycled != 2 || ref.CodesVoided != 0 || ref.RevealedAt != nil {
		t.Fatalf("refund of unread codes %+v", ref)
	}
	if c := h.cardCounts(1); c[domain.CardRecycled] != 2 || c[domain.CardSold] != 0 {
		t.Fatalf("codes after a recycling refund: %v", c)
	}
	if l := h.levels(1); l.Stock != 3 || l.Sold != 1 {
		t.Fatalf("gate after a recycling refund: %+v", l)
	}

	// Read codes recycled all the same when the operator says so.
	third := h.placeOrder(bob, "key-00000005", 1, 2)
	h.pay(third)
	wantStatus(t, h.getOrder(bob, third.OrderNo), 200)
	if ref := refund(third.OrderNo, `{"recycle":true,"reason":"never used"}`); ref.CodesRecycled != 2 || ref.CodesVoided != 0 || ref.RevealedAt == nil {
		t.Fatalf("refund with recycle %+v", ref)
	}
	if c := h.cardCounts(1); c[domain.CardRecycled] != 4 || c[domain.CardVoid] != 2 || c[domain.CardSold] != 0 {
		t.Fatalf("codes after recycling read codes: %v", c)
	}
	if l := h.levels(1); l.Stock != 3 || l.Sold != 1 {
		t.Fatalf("gate after recycling read codes: %+v", l)
	}
	reconcile("GET", "/admin/products/1/reconcile")

	// Fulfil: only an UNFULFILLED order.
	wantError(t, h.admin("POST", "/admin/orders/"+pending.OrderNo+"/fulfil", ""), 409, "invalid_order_state")
	wantError(t, h.admin("POST", "/admin/orders/"+second.OrderNo+"/fulfil", ""), 409, "invalid_order_state")
	wantError(t, h.admin("POST", "/admin/orders/2503011200009999999999999999/fulfil", ""), 404, "order_not_found")

	// Make one: the pending order times out, its stock is sold to bob, then its payment arrives.
	h.clock.Advance(16 * time.Minute)
	if _, err := h.shop.Sales.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.adminOrder(pending.OrderNo); got.Status != "CLOSED" {
		t.Fatalf("after the sweep: %+v", got)
	}
	rest := h.placeOrder(h.token("bob"), "key-00000004", 1, 4)
	h.pay(rest)
	r = h.callback(paysig.Notice{OrderNo: pending.OrderNo, Status: "paid", Amount: pending.Amount, PaymentRef: "late-1"})
	wantStatus(t, r, 200)
	var cb callbackJSON
	r.decode(t, &cb)
	if cb.Status != "UNFULFILLED" {
		t.Fatalf("late payment with no stock left: %+v", cb)
	}
	// Fulfilling it while the pool is still empty: sold out, still UNFULFILLED.
	wantError(t, h.admin("POST", "/admin/orders/"+pending.OrderNo+"/fulfil", ""), 409, "sold_out")
	// The import fills it (the oldest waiting order) and says so; an operator's fulfil after
	// it finds nothing to do.
	if rep := h.importCodes(1, "R-NEW-0001"); rep.Filled != 1 {
		t.Fatalf("import answer %+v, want 1 waiting order filled", rep)
	}
	ful := h.adminOrder(pending.OrderNo)
	if ful.Status != "PAID" || ful.PaymentRef != "late-1" {
		t.Fatalf("filled on restock %+v", ful)
	}
	wantError(t, h.admin("POST", "/admin/orders/"+pending.OrderNo+"/fulfil", ""), 409, "invalid_order_state")
	if v := h.adminOrder(pending.OrderNo); len(v.Codes) != 1 || v.Codes[0] != "R-NEW-0001" {
		t.Fatalf("fulfilled order's codes %v", v.Codes)
	}
	reconcile("GET", "/admin/products/1/reconcile")

	// Repair: the gate drifts (Redis restored from an old snapshot); GET shows it, POST fixes it.
	if err := h.gate.Rebuild(context.Background(), 1, domain.GateLevels{Stock: 100, Sold: 0}); err != nil {
		t.Fatal(err)
	}
	r = h.admin("GET", "/admin/products/1/reconcile", "")
	wantStatus(t, r, 200)
	var drift reconcileJSON
	r.decode(t, &drift)
	if drift.OK || drift.Differences == 0 {
		t.Fatalf("drift not seen: %s", r.body)
	}
	if rec := reconcile("POST", "/admin/products/1/reconcile?repair=true"); !rec.Repaired {
		t.Error("POST ?repair=true did not say repaired")
	}
	if rec := reconcile("POST", "/admin/products/1/reconcile"); rec.Repaired {
		t.Error("POST without repair=true repaired")
	}
}

func TestAdminTokens(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.importCodes(1, codes("T", 3)...)
	r := h.admin("POST", "/admin/tokens", `{"buyer_id":"carol@example.com"}`)
	wantStatus(t, r, 201)
	var tok struct {
		Token     string    `json:"token"`
		BuyerID   string    `json:"buyer_id"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	r.decode(t, &tok)
	if tok.BuyerID != "carol@example.com" || !tok.ExpiresAt.Equal(start.Add(24*time.Hour)) || tok.Token == "" {
		t.Fatalf("token %+v", tok)
	}
	o := h.placeOrder(tok.Token, "key-00000001", 1, 1)
	if v := h.adminOrder(o.OrderNo); v.BuyerID != "carol@example.com" {
		t.Fatalf("order placed as %q", v.BuyerID)
	}

	r = h.admin("POST", "/admin/tokens", `{"buyer_id":"dave","ttl_seconds":60}`)
	wantStatus(t, r, 201)
	r.decode(t, &tok)
	if !tok.ExpiresAt.Equal(start.Add(time.Minute)) {
		t.Fatalf("ttl 60: expires %v", tok.ExpiresAt)
	}
	h.clock.Advance(61 * time.Second)
	wantError(t, h.order(tok.Token, "key-00000002", `{"product_id":1,"qty":1}`), 401, "unauthorized")

	for body, field := range map[string]string{
		`{"buyer_id":"dave","ttl_seconds":-1}`:      "ttl_seconds",
		`{"buyer_id":"dave","ttl_seconds":2592001}`: "ttl_seconds",
		`{"buyer_id":"dave","ttl_seconds":"60"}`:    "ttl_seconds",
		`{"buyer_id":"dave","ttl_seconds":1.5}`:     "ttl_seconds",
		`{"buyer_id":""}`:                           "buyer_id",
		`{"buyer_id":"has space"}`:                  "buyer_id",
		`{}`:                                        "buyer_id",
		``:                                          "body",
		`{"buyer_id":"dave","scope":"admin"}`:       "scope",
	} {
		e := wantError(t, h.admin("POST", "/admin/tokens", body), 400, "invalid_request")
		if e.Field != field {
			t.Errorf("%s: field %q, want %q", body, e.Field, field)
		}
	}
	wantStatus(t, h.admin("POST", "/admin/tokens", `{"buyer_id":"dave","ttl_seconds":2592000}`), 201)
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/healthz", nil)
	wantStatus(t, r, 200)
	var health map[string]string
	r.decode(t, &health)
	if health["status"] != "ok" {
		t.Fatalf("healthz %s", r.body)
	}
	for _, path := range []string{"/", "/nope", "/api", "/api/orders", "/api/orders/", "/healthz/x"} {
		wantError(t, h.do("GET", path, nil), 404, "route_not_found")
	}
	wantError(t, h.admin("GET", "/admin/nope", ""), 404, "route_not_found")
	wantError(t, h.do("GET", "/api/order", nil), 405, "method_not_allowed")
	wantError(t, h.do("DELETE", "/healthz", nil), 405, "method_not_allowed")
	// Each answer carries its own request id.
	a, b := h.do("GET", "/nope", nil), h.do("GET", "/nope", nil)
	if a.header.Get("X-Request-ID") == "" || a.header.Get("X-Request-ID") == b.header.Get("X-Request-ID") {
		t.Errorf("request ids %q %q", a.header.Get("X-Request-ID"), b.header.Get("X-Request-ID"))
	}
}
