package console_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// raise records an alert in the ledger at the harness clock's time.
func (h *harness) raise(a domain.Alert) int64 {
	h.t.Helper()
	id, err := h.ledger.Alerts().Raise(context.Background(), a, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

func (h *harness) alert(id int64) domain.AlertRecord {
	h.t.Helper()
	a, err := h.ledger.Alerts().Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// The list shows the open alerts (folded raises counted), the overview counts them, and an
// operator acknowledges one with a note: it leaves the open list, shows who and when on the
// acknowledged one, and the audit log has the alert.ack entry.
func TestAlertsListAndAcknowledge(t *testing.T) {
	h := newHarness(t, 0)
	a := h.raise(domain.Alert{Kind: "paid_unfulfilled", Product: 3, OrderNo: "250301120000000000000001", Message: "no codes <b>left</b>"})
	h.raise(domain.Alert{Kind: "paid_unfulfilled", Product: 3, OrderNo: "250301120000000000000001", Message: "no codes <b>left</b>"})
	b := h.raise(domain.Alert{Kind: "refund_failed", Message: "declined"})
	oper := h.login(h.operator("otto", domain.RoleOperator))

	home := oper.get("/console")
	if !strings.Contains(home.body, `href="/console/alerts">2 open alerts</a>`) {
		t.Fatalf("the overview does not count 2 open alerts: %s", home.body)
	}
	list := oper.get("/console/alerts")
	wantStatus(t, list, 200)
	for _, want := range []string{`id="alert-` + itoa(a) + `"`, `id="alert-` + itoa(b) + `"`, "no codes &lt;b&gt;left&lt;/b&gt;",
		`<td data-label="Times" class="num">2</td>`, `action="/console/alerts/` + itoa(a) + `/ack"`, `href="/console/orders/250301120000000000000001"`,
		`href="/console/alerts">Alerts</a>`} {
		if !strings.Contains(list.body, want) {
			t.Errorf("the alert list lacks %s", want)
		}
	}
	if strings.Index(list.body, "alert-"+itoa(b)) > strings.Index(list.body, "alert-"+itoa(a)) {
		t.Error("the list is not newest first")
	}

	h.clock.Advance(time.Minute)
	r := oper.post("/console/alerts/"+itoa(a)+"/ack", url.Values{"note": {"refunding it by hand"}})
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, "Alert "+itoa(a)+" acknowledged.") || strings.Contains(r.body, `id="alert-`+itoa(a)+`"`) {
		t.Fatalf("after the acknowledgement the open list still shows it or says nothing: %s", r.body)
	}
	got := h.alert(a)
	if got.Open() || got.AckedBy != "otto" || got.AckNote != "refunding it by hand" || !got.AckedAt.Equal(h.clock.Now()) {
		t.Fatalf("the alert after the acknowledgement: %+v", got)
	}
	acked := oper.get("/console/alerts?status=acknowledged")
	if !strings.Contains(acked.body, "Acknowledged by otto at 2025-03-01 12:01:00 UTC: refunding it by hand") {
		t.Fatalf("the acknowledged list does not say who and when: %s", acked.body)
	}
	if !strings.Contains(oper.get("/console").body, ">1 open alert</a>") {
		t.Error("the overview does not count the one alert left open")
	}
	e := h.audit()[0]
	if e.Operator != "otto" || e.Action != "alert.ack" || e.Target != "alert "+itoa(a) || e.Result != "200" ||
		!strings.Contains(e.Params, "refunding it by hand") || strings.Contains(e.Params, "csrf") {
		t.Fatalf("the acknowledgement's audit entry: %+v", e)
	}

	// Acknowledged already: said on the list, the first acknowledgement stays, and recorded.
	again := oper.post("/console/alerts/"+itoa(a)+"/ack", url.Values{"note": {"me too"}})
	wantStatus(t, again, 409)
	if got := h.alert(a); got.AckNote != "refunding it by hand" {
		t.Fatalf("a second acknowledgement changed the alert: %+v", got)
	}
	if e := h.audit()[0]; e.Result != "409 alert_acknowledged" {
		t.Fatalf("the second acknowledgement's audit entry: %+v", e)
	}
}

// A viewer sees the list without a form and cannot acknowledge (403, nothing changes, the
// refusal is audited); a forged or missing CSRF token, or another site's Origin, is refused
// before anything runs.
func TestAlertAcknowledgementNeedsTheRoleAndTheCSRFToken(t *testing.T) {
	h := newHarness(t, 0)
	a := h.raise(domain.Alert{Kind: "stock_inconsistency", Product: 1})
	viewer := h.login(h.operator("vera", domain.RoleViewer))
	oper := h.login(h.operator("otto", domain.RoleOperator))
	post := "/console/alerts/" + itoa(a) + "/ack"

	list := viewer.get("/console/alerts")
	wantStatus(t, list, 200)
	if !strings.Contains(list.body, `id="alert-`+itoa(a)+`"`) || strings.Contains(list.body, post) {
		t.Fatalf("a viewer's list lacks the alert or offers the form: %s", list.body)
	}
	wantStatus(t, viewer.post(post, url.Values{"note": {"x"}}), 403)
	if e := h.audit()[0]; e.Operator != "vera" || e.Action != "alert.ack" || e.Result != "403 forbidden" {
		t.Fatalf("the viewer's refusal is audited as %+v", e)
	}
	before := len(h.audit())
	for name, tok := range map[string]string{"no": "", "forged": "forged-token", "another session's": viewer.csrf} {
		f := url.Values{"note": {"forged"}}
		if tok != "" {
			f.Set("csrf", tok)
		}
		if r := h.postForm(post, f, oper.cookie); r.status != fiber.StatusForbidden {
			t.Errorf("an acknowledgement with %s token: status %d, want 403", name, r.status)
		}
	}
	if r := h.postForm(post, url.Values{"csrf": {oper.csrf}}, oper.cookie, "Origin", "https://evil.example"); r.status != fiber.StatusForbidden {
		t.Errorf("an acknowledgement from another origin: status %d, want 403", r.status)
	}
	if !h.alert(a).Open() {
		t.Fatal("a refused acknowledgement closed the alert")
	}
	if n := len(h.audit()); n != before {
		t.Fatalf("forged posts reached the audit log: %d entries, had %d", n, before)
	}
}

// Bad input shows its error and changes nothing: a note too long, an id that is no number or
// no alert, an unknown status filter.
func TestAlertsBadInput(t *testing.T) {
	h := newHarness(t, 0)
	a := h.raise(domain.Alert{Kind: "gate_rebuilt", Product: 1})
	oper := h.login(h.operator("otto", domain.RoleOperator))
	long := oper.post("/console/alerts/"+itoa(a)+"/ack", url.Values{"note": {strings.Repeat("n", domain.MaxAlertNote+1)}})
	wantStatus(t, long, 400)
	if !strings.Contains(long.body, `class="error"`) || !h.alert(a).Open() {
		t.Fatalf("a note too long: the page shows no error or the alert closed: %s", long.body)
	}
	wantStatus(t, oper.post("/console/alerts/x/ack", nil), 400)
	wantStatus(t, oper.post("/console/alerts/999/ack", nil), 404)
	wantStatus(t, oper.get("/console/alerts?status=closed"), 400)
	wantStatus(t, oper.get("/console/alerts?product_id=x"), 400)
	if !h.alert(a).Open() {
		t.Fatal("bad input closed the alert")
	}
}

// The list pages by before_id, keeping the filter.
func TestAlertsPageByBeforeID(t *testing.T) {
	h := newHarness(t, 0)
	var ids []int64
	for i := range 51 {
		ids = append(ids, h.raise(domain.Alert{Kind: "orphan_reservation_released", Product: 2, OrderNo: domain.OrderNo(fmt.Sprintf("25030112000000000000%04d", i))}))
	}
	h.raise(domain.Alert{Kind: "other"})
	b := h.login(h.operator("vera", domain.RoleViewer))
	first := b.get("/console/alerts?kind=orphan_reservation_released")
	wantStatus(t, first, 200)
	if strings.Contains(first.body, `id="alert-`+itoa(ids[0])+`"`) || !strings.Contains(first.body, `id="alert-`+itoa(ids[1])+`"`) {
		t.Fatal("the first page is not the 50 newest of the kind")
	}
	next := "/console/alerts?before_id=" + itoa(ids[1]) + "&amp;kind=orphan_reservation_released&amp;status=open"
	if !strings.Contains(first.body, `href="`+next+`"`) {
		t.Fatalf("no link to the older page %s: %s", next, first.body)
	}
	second := b.get(strings.ReplaceAll(next, "&amp;", "&"))
	if !strings.Contains(second.body, `id="alert-`+itoa(ids[0])+`"`) || strings.Count(second.body, `<tr id="alert-`) != 1 || strings.Contains(second.body, "Older alerts") {
		t.Fatalf("the second page: %s", second.body)
	}
}
