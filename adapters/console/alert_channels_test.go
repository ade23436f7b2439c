package console_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

// The alert channels page: admins only (an operator gets 403 and changes nothing); a bad
// secret is refused in the page's language with the form kept and nothing stored; a saved
// channel is listed with its fingerprint, never its secret, and audited without it; the edit
// form keeps the secret when left empty; a test without a pusher says it did not reach the
// channel; removal.
func TestAlertChannelsPage(t *testing.T) {
	h := newHarness(t, 0)
	const token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
	oper := h.login(h.operator("otto", domain.RoleOperator))
	wantStatus(t, oper.get("/console/alerts/channels"), 403)
	wantStatus(t, oper.post("/console/alerts/channels", url.Values{"name": {"x"}, "type": {"email"}, "target": {"a@b.example"}}), 403)
	if !strings.Contains(oper.get("/console/alerts").body, "/console/alerts") ||
		strings.Contains(oper.get("/console/alerts").body, `href="/console/alerts/channels"`) {
		t.Fatal("the alerts page links the channels for an operator")
	}

	adm := h.login(h.operator("ada", domain.RoleAdmin))
	if !strings.Contains(adm.get("/console/alerts").body, `href="/console/alerts/channels"`) {
		t.Fatal("the alerts page does not link the channels for an admin")
	}
	r := adm.post("/console/alerts/channels", url.Values{"name": {"phone"}, "type": {"telegram"}, "target": {"-100123"},
		"secret": {"not-a-token"}, "kind": {"mail_failed"}})
	wantStatus(t, r, 400)
	if !strings.Contains(r.body, "The secret does not fit the type") || !strings.Contains(r.body, `value="phone"`) ||
		strings.Contains(r.body, "not-a-token") {
		t.Fatalf("a refused save: %s", r.body)
	}
	if cs, _ := h.shop.AlertChannels.List(context.Background(), application.LegacyAdminIdentity); len(cs) != 0 {
		t.Fatalf("a refused save stored %+v", cs)
	}
	r = adm.post("/console/alerts/channels", url.Values{"name": {"phone"}, "type": {"telegram"}, "target": {"-100123"},
		"secret": {token}, "kind": {"mail_failed", "refund_failed"}, "other_kinds": {"low_stock"}, "stock": {"on"}, "enabled": {"on"}})
	wantStatus(t, r, 200)
	cs, _ := h.shop.AlertChannels.List(context.Background(), application.LegacyAdminIdentity)
	if len(cs) != 1 || cs[0].Secret != token || strings.Join(cs[0].Kinds, ",") != "low_stock,mail_failed,refund_failed" || !cs[0].Stock || !cs[0].Enabled {
		t.Fatalf("stored %+v", cs)
	}
	if strings.Contains(r.body, token) || strings.Contains(r.body, "AAHdq") || !strings.Contains(r.body, cs[0].Fingerprint()) {
		t.Fatalf("the list shows the secret or lacks its fingerprint: %s", r.body)
	}
	e := h.audit()[0]
	if e.Action != "alert_channel.create" || e.Result != "200" || strings.Contains(e.Params, "AAHdq") ||
		!strings.Contains(e.Params, `"credential_changed":"true"`) {
		t.Fatalf("audit entry %+v", e)
	}
	r = adm.post("/console/alerts/channels", url.Values{"name": {"phone"}, "type": {"email"}, "target": {"ops@shop.example"}})
	if r.status != 409 || !strings.Contains(r.body, "Another channel has that name.") {
		t.Fatalf("a taken name: %s", r)
	}
	id := strconv.FormatInt(cs[0].ID, 10)
	edit := adm.get("/console/alerts/channels/" + id)
	wantStatus(t, edit, 200)
	if strings.Contains(edit.body, "AAHdq") || !strings.Contains(edit.body, "keep the stored secret") {
		t.Fatalf("the edit form: %s", edit.body)
	}
	r = adm.post("/console/alerts/channels/"+id, url.Values{"name": {"phone 2"}, "target": {"@shop_alerts"}, "enabled": {"on"}})
	wantStatus(t, r, 200)
	c, _ := h.shop.AlertChannels.Channel(context.Background(), application.LegacyAdminIdentity, cs[0].ID)
	if c.Secret != token || c.Name != "phone 2" || c.Target != "@shop_alerts" || len(c.Kinds) != 0 || c.Stock {
		t.Fatalf("after the edit: %+v", c)
	}
	r = adm.post("/console/alerts/channels/"+id+"/test", nil)
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, "The test did not reach phone 2") {
		t.Fatalf("a test without a pusher: %s", r.body)
	}
	// In Chinese, a refusal is in Chinese too.
	r = h.postForm("/console/alerts/channels/"+id, url.Values{"name": {"phone 2"}, "target": {"not a chat"}, "csrf": {adm.csrf}},
		adm.cookie, "Accept-Language", "zh-CN")
	wantStatus(t, r, 400)
	if !strings.Contains(r.body, "会话 ID、邮箱或网址与所选类型不符") {
		t.Fatalf("a refusal in Chinese: %s", r.body)
	}
	wantStatus(t, adm.post("/console/alerts/channels/"+id+"/remove", nil), 200)
	wantStatus(t, adm.get("/console/alerts/channels/"+id), 404)
}
