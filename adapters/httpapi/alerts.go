package httpapi

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// alertResponse is one alert of the alert log; acked_by, acked_at and ack_note are empty or
// absent while it is open.
type alertResponse struct {
	ID       int64      `json:"id"`
	Kind     string     `json:"kind"`
	Product  int64      `json:"product_id"`
	OrderNo  string     `json:"order_no"`
	Message  string     `json:"message"`
	RaisedAt time.Time  `json:"raised_at"`
	LastAt   time.Time  `json:"last_at"`
	Count    int64      `json:"count"`
	Open     bool       `json:"open"`
	AckedBy  string     `json:"acked_by,omitempty"`
	AckedAt  *time.Time `json:"acked_at,omitempty"`
	AckNote  string     `json:"ack_note,omitempty"`
}

func newAlertResponse(a domain.AlertRecord) alertResponse {
	out := alertResponse{ID: a.ID, Kind: a.Kind, Product: int64(a.Product), OrderNo: string(a.OrderNo), Message: a.Message,
		RaisedAt: a.RaisedAt.UTC(), LastAt: a.LastAt.UTC(), Count: a.Count, Open: a.Open(), AckedBy: string(a.AckedBy),
		AckNote: a.AckNote}
	if !a.Open() {
		at := a.AckedAt.UTC()
		out.AckedAt = &at
	}
	return out
}

// listAlerts answers GET /admin/alerts?status=open|acknowledged|all&kind=&product_id=&before_id=&limit=,
// newest first (open ones by default); next_before_id pages on (0 when this is the last page).
func (s *Server) listAlerts(c *fiber.Ctx) error {
	f, err := alertFilter(c)
	if err != nil {
		return err
	}
	alerts, err := s.operators.Alerts(c.UserContext(), f)
	if err != nil {
		return err
	}
	out := struct {
		Alerts       []alertResponse `json:"alerts"`
		NextBeforeID int64           `json:"next_before_id"`
	}{Alerts: make([]alertResponse, len(alerts))}
	for i, a := range alerts {
		out.Alerts[i] = newAlertResponse(a)
	}
	if n := len(alerts); n > 0 && n == f.Limit {
		out.NextBeforeID = alerts[n-1].ID
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(out)
}

func alertFilter(c *fiber.Ctx) (domain.AlertFilter, error) {
	return webkit.AlertFilter(func(k string) string { return c.Query(k) })
}

// ackAlert answers POST /admin/alerts/{id}/ack with an optional {"note": "…"}: the alert,
// acknowledged by the caller. 409 alert_acknowledged when someone did already.
func (s *Server) ackAlert(c *fiber.Ctx) error {
	id, err := webkit.ParseAlertID(c.Params("alert_id"))
	if err != nil {
		return err
	}
	var req struct {
		Note string `json:"note"`
	}
	if err := s.decodeJSON(c, &req, true); err != nil {
		return err
	}
	a, err := s.operators.AcknowledgeAlert(c.UserContext(), id, identityOf(c).Name, req.Note)
	if err != nil {
		return err
	}
	return c.JSON(newAlertResponse(a))
}
