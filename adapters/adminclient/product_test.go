package adminclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"cardshop/adapters/adminclient"
)

const token = "admin-token-0123456789"

// recorder answers every request with status and answer, and keeps what it was sent.
type recorder struct {
	method, path, query, auth, contentType string
	body                                   []byte
}

func serve(t *testing.T, rec *recorder, status int, answer string) *adminclient.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.method, rec.path, rec.auth, rec.contentType = r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		rec.query = r.URL.RawQuery
		rec.body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, answer)
	}))
	t.Cleanup(srv.Close)
	return adminclient.New(srv.URL+"/", token)
}

const productAnswer = `{"id":7,"name":"Gift","price":1000,"max_per_order":20,"tiers":[{"min_qty":10,"unit_price":900}],
	"stock_display":"level","starts_at":"2030-01-02T03:04:05.678Z","ends_at":null,"buyer_limit":3,
	"refund_releases_limit":true,"low_stock_threshold":5,"stock_state":"","frozen":false,"created_at":"2026-12-01T17:00:00Z"}`

// The patch sends exactly the fields it sets: a zero bound as null, empty tiers as [].
func TestUpdateProductSendsOnlyTheFieldsSet(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 678e6, time.UTC)
	price, limit, releases := int64(1200), 0, false
	for _, c := range []struct {
		name  string
		patch adminclient.ProductPatch
		want  string
	}{
		{"one field", adminclient.ProductPatch{Price: &price}, `{"price":1200}`},
		{"a zero limit and false", adminclient.ProductPatch{BuyerLimit: &limit, RefundReleasesLimit: &releases},
			`{"buyer_limit":0,"refund_releases_limit":false}`},
		{"bounds", adminclient.ProductPatch{StartsAt: &start, EndsAt: &time.Time{}},
			`{"ends_at":null,"starts_at":"2030-01-02T03:04:05.678Z"}`},
		{"no tiers", adminclient.ProductPatch{Tiers: &[]adminclient.Tier{}}, `{"tiers":[]}`},
		{"nil tiers", adminclient.ProductPatch{Tiers: new([]adminclient.Tier)}, `{"tiers":[]}`},
		{"nothing", adminclient.ProductPatch{}, `{}`},
	} {
		var rec recorder
		p, err := serve(t, &rec, 200, productAnswer).UpdateProduct(context.Background(), 7, c.patch)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if rec.method != "PATCH" || rec.path != "/admin/products/7" || rec.auth != "Bearer "+token || rec.contentType != "application/json" {
			t.Errorf("%s: sent %s %s, %q, %q", c.name, rec.method, rec.path, rec.auth, rec.contentType)
		}
		if string(rec.body) != c.want {
			t.Errorf("%s: sent %s, want %s", c.name, rec.body, c.want)
		}
		if p.ID != 7 || p.StartsAt == nil || !p.StartsAt.Equal(start) || p.EndsAt != nil || len(p.Tiers) != 1 || p.Tiers[0] != (adminclient.Tier{MinQty: 10, UnitPrice: 900}) ||
			p.StockDisplay != "level" || p.BuyerLimit != 3 || !p.RefundReleasesLimit || p.LowStockThreshold != 5 {
			t.Errorf("%s: decoded %+v", c.name, p)
		}
	}
}

// A new product sends its required fields and only the optional ones that are set.
func TestCreateProductOmitsDefaults(t *testing.T) {
	var rec recorder
	c := serve(t, &rec, 201, productAnswer)
	if _, err := c.CreateProduct(context.Background(), adminclient.NewProduct{Name: "Gift", Price: 1000, MaxPerOrder: 20}); err != nil {
		t.Fatal(err)
	}
	if rec.method != "POST" || rec.path != "/admin/products" || string(rec.body) != `{"name":"Gift","price":1000,"max_per_order":20}` {
		t.Fatalf("sent %s %s %s", rec.method, rec.path, rec.body)
	}
	var sent map[string]any
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := c.CreateProduct(context.Background(), adminclient.NewProduct{ID: 7, Name: "Gift", Price: 1000, MaxPerOrder: 20,
		Tiers: []adminclient.Tier{{MinQty: 10, UnitPrice: 900}}, StockDisplay: "level", StartsAt: &start, BuyerLimit: 3, RefundReleasesLimit: true,
		LowStockThreshold: 5}); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rec.body, &sent); err != nil || len(sent) != 10 || sent["starts_at"] != "2030-01-02T03:04:05Z" {
		t.Fatalf("sent %s (%v)", rec.body, err)
	}
}

// A refusal is a *ServiceError with the service's code and message; another answer keeps
// only the status and the body.
func TestProductRefusals(t *testing.T) {
	var rec recorder
	_, err := serve(t, &rec, 400, `{"code":"invalid_request","message":"ends_at: must be after starts_at","field":"ends_at","request_id":"r1"}`).
		CreateProduct(context.Background(), adminclient.NewProduct{Name: "x", Price: 1, MaxPerOrder: 1})
	var se *adminclient.ServiceError
	if !errors.As(err, &se) || se.Status != 400 || se.Code != "invalid_request" || se.Message != "ends_at: must be after starts_at" {
		t.Fatalf("refusal: %#v", err)
	}
	_, err = serve(t, &rec, 502, `<html>bad gateway</html>`).Product(context.Background(), 7)
	if !errors.As(err, &se) || se.Status != 502 || se.Code != "" || se.Message != "" || string(se.Answer) != "<html>bad gateway</html>" {
		t.Fatalf("a proxy's page: %#v", err)
	}
	if rec.method != "GET" || rec.path != "/admin/products/7" || len(rec.body) != 0 {
		t.Errorf("Product sent %s %s %q", rec.method, rec.path, rec.body)
	}
	// A 200 to a create is not the 201 the service answers: something else answered.
	if _, err := serve(t, &rec, 200, productAnswer).CreateProduct(context.Background(), adminclient.NewProduct{Name: "x", Price: 1, MaxPerOrder: 1}); !errors.As(err, &se) {
		t.Fatalf("a 200 to a create: %v", err)
	}
}
