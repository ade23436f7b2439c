package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

type alertJSON struct {
	ID       int64      `json:"id"`
	Kind     string     `json:"kind"`
	Product  int64      `json:"product_id"`
	OrderNo  string     `json:"order_no"`
	Message  string     `json:"message"`
	RaisedAt time.Time  `json:"raised_at"`
	LastAt   time.Time  `json:"last_at"`
	Count    int64      `json:"count"`
	Open     bool       `json:"open"`
	AckedBy  string     `json:"acked_by"`
	AckedAt  *time.Time `json:"acked_at"`
	AckNote  string     `json:"ack_note"`
}

type alertPageJSON struct {
	Alerts       []alertJSON `json:"alerts"`
	NextBeforeID int64       `json:"next_before_id"`
}

func (h *harness) raise(a domain.Alert) int64 {
	h.t.Helper()
	id, err := h.ledger.Alerts().Raise(h.t.Context(), a, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

func (h *harness) alertPage(token, query string) alertPageJSON {
	h.t.Helper()
	r := h.as(token, "GET", "/admin/alerts"+query, "")
	wantStatus(h.t, r, 200)
	var page alertPageJSON
	r.decode(h.t, &page)
	return page
}

func alertIDs(p alertPageJSON) []int64 {
	var ids []int64
	for _, a := range p.Alerts {
		ids = append(ids, a.ID)
	}
	return ids
}

// TestAlertsListAndAcknowledge: a viewer lists the open alerts, newest first, filtered and
// paged; an operator acknowledges one once (with a note, audited as alert.ack), a second
// acknowledgement is 409 alert_acknowledged, and the alert moves to the acknowledged list.
func TestAlertsListAndAcknowledge(t *testing.T) {
	h := newHarness(t)
	vic, otto := h.newOperator("vic", "viewer"), h.newOperator("otto", "operator")
	a := h.raise(domain.Alert{Kind: "paid_unfulfilled", Product: 3, OrderNo: "2501", Message: "first"})
	b := h.raise(domain.Alert{Kind: "refund_failed", Product: 4, OrderNo: "2502", Message: "declined"})
	h.clock.Advance(time.Second)
	if again := h.raise(domain.Alert{Kind: "paid_unfulfilled", Product: 3, OrderNo: "2501", Message: "second"}); again != a {
		t.Fatalf("a repeated raise made alert %d, want it folded into %d", again, a)
	}
	c := h.raise(domain.Alert{Kind: "gate_rebuilt", Product: 3})

	page := h.alertPage(vic, "")
	if got := alertIDs(page); fmt.Sprint(got) != fmt.Sprint([]int64{c, b, a}) || page.NextBeforeID != 0 {
		t.Fatalf("open alerts %v (next %d), want %v", got, page.NextBeforeID, []int64{c, b, a})
	}
	if first := page.Alerts[2]; first.Count != 2 || first.Message != "second" || !first.Open || first.AckedAt != nil ||
		!first.LastAt.Equal(start.Add(time.Second)) || !first.RaisedAt.Equal(start) || first.OrderNo != "2501" || first.Product != 3 {
		t.Fatalf("the folded alert reads %+v", first)
	}
	if got := alertIDs(h.alertPage(vic, "?kind=paid_unfulfilled")); fmt.Sprint(got) != fmt.Sprint([]int64{a}) {
		t.Fatalf("kind filter: %v", got)
	}
	if got := alertIDs(h.alertPage(vic, "?product_id=3")); fmt.Sprint(got) != fmt.Sprint([]int64{c, a}) {
		t.Fatalf("product filter: %v", got)
	}
	p1 := h.alertPage(vic, "?limit=2")
	p2 := h.alertPage(vic, fmt.Sprintf("?limit=2&before_id=%d", p1.NextBeforeID))
	if fmt.Sprint(alertIDs(p1), alertIDs(p2), p2.NextBeforeID) != fmt.Sprint([]int64{c, b}, []int64{a}, 0) {
		t.Fatalf("pages %v then %v (next %d)", alertIDs(p1), alertIDs(p2), p2.NextBeforeID)
	}

	r := h.as(otto, "POST", fmt.Sprintf("/admin/alerts/%d/ack", a), `{"note":"refunding by hand"}`)
	wantStatus(t, r, 200)
	var acked alertJSON
	r.decode(t, &acked)
	if acked.ID != a || acked.Open || acked.AckedBy != "otto" || acked.AckNote != "refunding by hand" ||
		acked.AckedAt == nil || !acked.AckedAt.Equal(h.clock.Now()) {
		t.Fatalf("acknowledged: %+v", acked)
	}
	wantError(t, h.as(otto, "POST", fmt.Sprintf("/admin/alerts/%d/ack", a), ""), 409, "alert_acknowledged")
	// Without a body: no note.
	wantStatus(t, h.as(otto, "POST", fmt.Sprintf("/admin/alerts/%d/ack", b), ""), 200)

	if got := alertIDs(h.alertPage(vic, "")); fmt.Sprint(got) != fmt.Sprint([]int64{c}) {
		t.Fatalf("open after the acknowledgements: %v", got)
	}
	if got := alertIDs(h.alertPage(vic, "?status=acknowledged")); fmt.Sprint(got) != fmt.Sprint([]int64{b, a}) {
		t.Fatalf("acknowledged: %v", got)
	}
	if got := alertIDs(h.alertPage(vic, "?status=all")); fmt.Sprint(got) != fmt.Sprint([]int64{c, b, a}) {
		t.Fatalf("all: %v", got)
	}

	var audit auditPageJSON
	h.admin("GET", "/admin/audit?action=alert.ack", "").decode(t, &audit)
	if len(audit.Entries) != 3 {
		t.Fatalf("alert.ack entries %+v, want 3", audit.Entries)
	}
	if e := audit.Entries[2]; e.Operator != "otto" || e.Target != fmt.Sprintf("alert %d", a) || e.Result != "200" ||
		!strings.Contains(e.Params, "refunding by hand") {
		t.Fatalf("the first acknowledgement is audited as %+v", e)
	}
	if e := audit.Entries[1]; e.Result != "409 alert_acknowledged" {
		t.Fatalf("the second acknowledgement is audited as %+v", e)
	}
}

// TestAlertsBadInput: bad ids, filters and notes are 400 (unknown ids 404 alert_not_found), a
// viewer may not acknowledge, and none of it changes the alert.
func TestAlertsBadInput(t *testing.T) {
	h := newHarness(t)
	vic, otto := h.newOperator("vic", "viewer"), h.newOperator("otto", "operator")
	a := h.raise(domain.Alert{Kind: "paid_unfulfilled", Product: 3})
	ack := fmt.Sprintf("/admin/alerts/%d/ack", a)
	for _, q := range []string{"?status=closed", "?product_id=x", "?product_id=0", "?before_id=-1", "?limit=0", "?limit=1001"} {
		wantError(t, h.as(vic, "GET", "/admin/alerts"+q, ""), 400, "invalid_request")
	}
	for _, c := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/admin/alerts/x/ack", "", 400, "invalid_request"},
		{"/admin/alerts/0/ack", "", 400, "invalid_request"},
		{"/admin/alerts/99999/ack", "", 404, "alert_not_found"},
		{ack, fmt.Sprintf(`{"note":%q}`, strings.Repeat("n", domain.MaxAlertNote+1)), 400, "invalid_request"},
		{ack, `{"note":"bell\u0007"}`, 400, "invalid_request"},
		{ack, `{"note":1}`, 400, "invalid_request"},
		{ack, `{"reason":"x"}`, 400, "invalid_request"},
	} {
		wantError(t, h.as(otto, "POST", c.path, c.body), c.status, c.code)
	}
	wantError(t, h.as(vic, "POST", ack, ""), 403, "forbidden")
	if got := h.alertPage(vic, ""); len(got.Alerts) != 1 || !got.Alerts[0].Open {
		t.Fatalf("after refused acknowledgements: %+v", got)
	}
	// A note of exactly the limit is fine.
	wantStatus(t, h.as(otto, "POST", ack, fmt.Sprintf(`{"note":%q}`, strings.Repeat("n", domain.MaxAlertNote))), 200)
}
