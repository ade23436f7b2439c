package console

import (
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

// TestConsoleRolesAreTheAPIs: every console write is an admin action with the admin API's
// role, and a screen leading to a write (its form or confirmation page) needs that role too. The
// one POST that writes nothing of the shop, the settings' time zone (a cookie of the browser),
// is open to every role and records nothing; the void's confirmation, a POST that writes
// nothing, needs the void's role.
func TestConsoleRolesAreTheAPIs(t *testing.T) {
	api := application.ActionRoles()
	forms := map[string]string{"/products/new": "product.create", "/products/:id/edit": "product.update",
		"/orders/:order_no/refund": "order.refund", "/orders/:order_no/fulfil": "order.fulfil",
		"/products/:id/repair": "product.repair"}
	// An import's job page and progress are the import's answer: the importer's role.
	forms["/products/:id/imports/:job"] = "product.import"
	forms["/products/:id/imports/:job/progress"] = "product.import"
	// The manual confirmation's form, and the operators' screen (whose every form is an admin's).
	forms["/orders/:order_no/confirm-payment"] = "order.confirm_payment"
	forms["/operators"] = "operator.create"
	// The alert channels' list and edit form hold the channels' settings: admins only.
	forms["/alerts/channels"] = application.ActionAlertChannelCreate
	forms["/alerts/channels/:channel_id"] = application.ActionAlertChannelUpdate
	// The payment channels' list and form hold the providers' settings: admins only.
	forms["/payments"] = application.ActionChannelSave
	forms["/payments/:provider"] = application.ActionChannelSave
	for _, r := range routes(&console{guard: new(application.Guard), channels: new(application.AlertChannels),
		payChannels: new(application.Channels)}) {
		if r.method == "POST" && r.path == "/settings" {
			if r.action != "" || r.role != domain.RoleViewer {
				t.Errorf("POST /settings needs %s and records %q: a preference is no shop write", r.role, r.action)
			}
			continue
		}
		// The void's confirmation is a POST (the pasted codes are too many for a URL, and must
		// not be in one) that writes nothing: it needs the void's role and records nothing.
		if r.method == "POST" && r.path == "/products/:id/codes/void/confirm" {
			if r.action != "" || r.role != api["codes.void"] {
				t.Errorf("POST %s needs %s and records %q; want %s and nothing", r.path, r.role, r.action, api["codes.void"])
			}
			continue
		}
		if r.method == "POST" {
			want, ok := api[r.action]
			if !ok {
				t.Errorf("POST %s records %q, which is no admin action", r.path, r.action)
			} else if r.role != want {
				t.Errorf("POST %s (%s) needs %s, the API %s", r.path, r.action, r.role, want)
			}
			continue
		}
		if r.action != "" {
			t.Errorf("GET %s records an action: a GET changes nothing", r.path)
		}
		want := domain.RoleViewer
		if a, ok := forms[r.path]; ok {
			want = api[a]
		}
		if r.role != want {
			t.Errorf("GET %s needs %s, want %s", r.path, r.role, want)
		}
	}
}
