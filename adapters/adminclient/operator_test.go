package adminclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cardshop/adapters/adminclient"
)

const operatorAnswer = `{"name":"vera","role":"viewer","created_at":"2026-12-01T17:00:00.123456Z","rotated_at":"2026-12-01T18:00:00Z","token":"vera.c2VjcmV0"}`

// Each operator call sends its method, path and body, and decodes the answer.
func TestOperatorCalls(t *testing.T) {
	ctx := context.Background()
	var rec recorder
	o, err := serve(t, &rec, 201, operatorAnswer).CreateOperator(ctx, "vera", "viewer")
	if err != nil || rec.method != "POST" || rec.path != "/admin/operators" || string(rec.body) != `{"name":"vera","role":"viewer"}` ||
		rec.auth != "Bearer "+token || rec.contentType != "application/json" {
		t.Fatalf("CreateOperator sent %s %s %s %q (%v)", rec.method, rec.path, rec.body, rec.auth, err)
	}
	if o.Name != "vera" || o.Role != "viewer" || o.Token != "vera.c2VjcmV0" ||
		!o.CreatedAt.Equal(time.Date(2026, 12, 1, 17, 0, 0, 123456e3, time.UTC)) || !o.RotatedAt.Equal(time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)) {
		t.Fatalf("CreateOperator decoded %+v", o)
	}
	if _, err := serve(t, &rec, 200, operatorAnswer).SetOperatorRole(ctx, "vera", "admin"); err != nil ||
		rec.method != "PATCH" || rec.path != "/admin/operators/vera" || string(rec.body) != `{"role":"admin"}` {
		t.Fatalf("SetOperatorRole sent %s %s %s (%v)", rec.method, rec.path, rec.body, err)
	}
	if o, err := serve(t, &rec, 200, operatorAnswer).RotateOperator(ctx, "vera"); err != nil || o.Token == "" ||
		rec.method != "POST" || rec.path != "/admin/operators/vera/rotate" || len(rec.body) != 0 {
		t.Fatalf("RotateOperator sent %s %s %q (%v)", rec.method, rec.path, rec.body, err)
	}
	if err := serve(t, &rec, 204, "").RemoveOperator(ctx, "vera"); err != nil || rec.method != "DELETE" || rec.path != "/admin/operators/vera" {
		t.Fatalf("RemoveOperator sent %s %s (%v)", rec.method, rec.path, err)
	}
	list, err := serve(t, &rec, 200, `{"operators":[`+operatorAnswer+`]}`).Operators(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "vera" || rec.method != "GET" || rec.path != "/admin/operators" {
		t.Fatalf("Operators: %+v %v (sent %s %s)", list, err, rec.method, rec.path)
	}
	id, err := serve(t, &rec, 200, `{"name":"admin-token","role":"admin"}`).Whoami(ctx)
	if err != nil || id != (adminclient.Identity{Name: "admin-token", Role: "admin"}) || rec.method != "GET" || rec.path != "/admin/whoami" {
		t.Fatalf("Whoami: %+v %v (sent %s %s)", id, err, rec.method, rec.path)
	}
	// A 200 to a removal is not the service's 204, and a refusal carries its code.
	var se *adminclient.ServiceError
	if err := serve(t, &rec, 200, "{}").RemoveOperator(ctx, "vera"); !errors.As(err, &se) || se.Status != 200 {
		t.Fatalf("a 200 to a removal: %v", err)
	}
	if _, err := serve(t, &rec, 403, `{"code":"forbidden","message":"your role does not allow this"}`).CreateOperator(ctx, "x", "viewer"); !errors.As(err, &se) ||
		se.Status != 403 || se.Code != "forbidden" || se.Message != "your role does not allow this" {
		t.Fatalf("a refusal: %#v", err)
	}
}

// Audit sends only the filters set, times in RFC 3339 UTC, and decodes the page.
func TestAuditQuery(t *testing.T) {
	var rec recorder
	answer := `{"entries":[{"id":9,"at":"2026-12-01T18:00:00.5Z","operator":"olga","role":"operator","action":"product.create",
		"target":"product 7","params":"{\"name\":\"Gift\"}","result":"201","client_addr":"127.0.0.1"}],"next_before_id":9}`
	c := serve(t, &rec, 200, answer)
	page, err := c.Audit(context.Background(), adminclient.AuditQuery{})
	if err != nil || rec.path != "/admin/audit" || len(page.Entries) != 1 || page.NextBeforeID != 9 {
		t.Fatalf("Audit: %+v %v", page, err)
	}
	e := page.Entries[0]
	if e.ID != 9 || e.Operator != "olga" || e.Role != "operator" || e.Action != "product.create" || e.Target != "product 7" ||
		e.Params != `{"name":"Gift"}` || e.Result != "201" || e.ClientAddr != "127.0.0.1" || !e.At.Equal(time.Date(2026, 12, 1, 18, 0, 0, 5e8, time.UTC)) {
		t.Fatalf("decoded %+v", e)
	}
	c = serve(t, &rec, 200, answer)
	from := time.Date(2026, 12, 1, 20, 0, 0, 0, time.FixedZone("", 8*3600))
	if _, err := c.Audit(context.Background(), adminclient.AuditQuery{Operator: "olga", Action: "order.refund", From: from,
		To: from.Add(time.Hour), BeforeID: 9, Limit: 50}); err != nil {
		t.Fatal(err)
	}
	if got := rec.query; got != "action=order.refund&before_id=9&from=2026-12-01T12%3A00%3A00Z&limit=50&operator=olga&to=2026-12-01T13%3A00%3A00Z" {
		t.Fatalf("sent the query %q", got)
	}
}
