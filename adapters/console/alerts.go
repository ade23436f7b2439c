package console

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// alertPageSize is one page of the alert list in the console.
const alertPageSize = 50

// alertsData is the alert list: the filter as asked (Status, Kind, Product as typed), the
// page's alerts, and the link to the next (older) page, empty on the last.
type alertsData struct {
	Alerts  []domain.AlertRecord
	Status  string
	Kind    string
	Product string
	Older   string
	// Channels links the alert channels page (an admin, on a console that has it).
	Channels bool
}

// alerts lists the alerts, open ones unless the filter says otherwise, newest first, filtered
// by status, kind and product, paged by before_id (the API's query, read by the same parser).
func (k *console) alerts(c *fiber.Ctx) error {
	return k.alertsPage(c, fiber.StatusOK, "", "")
}

// alertsPage renders the alert list of the request's query with an error or notice.
func (k *console) alertsPage(c *fiber.Ctx, status int, errMsg, notice string) error {
	d := alertsData{Status: c.Query("status", string(domain.AlertsOpen)), Kind: c.Query("kind"), Product: c.Query("product_id"),
		Channels: k.channels != nil && identityOf(c).Role.Allows(roleOf(application.ActionAlertChannelCreate))}
	f, err := webkit.AlertFilter(func(key string) string { return c.Query(key) })
	if err != nil {
		_, msg := describe(err)
		return k.render(c, fiber.StatusBadRequest, "alerts", view{Title: "console.alerts.title", Error: msg, Data: d})
	}
	f.Limit = alertPageSize
	if d.Alerts, err = k.operators.Alerts(c.UserContext(), f); err != nil {
		return k.fail(c, err)
	}
	if n := len(d.Alerts); n == alertPageSize {
		q := url.Values{"status": {string(f.Status)}, "before_id": {strconv.FormatInt(d.Alerts[n-1].ID, 10)}}
		if d.Kind != "" {
			q.Set("kind", d.Kind)
		}
		if d.Product != "" {
			q.Set("product_id", d.Product)
		}
		d.Older = "/console/alerts?" + q.Encode()
	}
	return k.render(c, status, "alerts", view{Title: "console.alerts.title", Error: errMsg, Notice: notice, Data: d})
}

// ackAlert acknowledges an open alert with the form's optional note, and shows the list again
// with the outcome: a note refused or an alert acknowledged meanwhile by someone else is said
// on the list (nothing changed), an unknown alert is the not-found page.
func (k *console) ackAlert(c *fiber.Ctx) error {
	note := strings.TrimSpace(formValue(c, "note"))
	id, err := webkit.ParseAlertID(c.Params("alert_id"))
	if err == nil {
		_, err = k.operators.AcknowledgeAlert(c.UserContext(), id, identityOf(c).Name, note)
	}
	k.record(c, "alert.ack", map[string]string{"note": note}, err)
	switch {
	case err == nil:
		return k.alertsPage(c, fiber.StatusOK, "", k.text(k.lang(c), "console.alerts.acked", "ID", id))
	case errors.Is(err, domain.ErrAlertNotFound):
		return k.fail(c, err)
	}
	status, msg := describe(err)
	if status >= 500 {
		return k.fail(c, err)
	}
	return k.alertsPage(c, status, msg, "")
}
