package adminclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Alert is one alert of the alert log (Alert in openapi.json): AckedBy, AckedAt and AckNote
// are empty while it is open.
type Alert struct {
	ID       int64      `json:"id"`
	Kind     string     `json:"kind"`
	Product  int64      `json:"product_id"` // 0 when the alert names no product
	OrderNo  string     `json:"order_no"`   // "" when it names no order
	Message  string     `json:"message"`
	RaisedAt time.Time  `json:"raised_at"`
	LastAt   time.Time  `json:"last_at"`
	Count    int64      `json:"count"` // raises folded into this alert
	Open     bool       `json:"open"`
	AckedBy  string     `json:"acked_by"`
	AckedAt  *time.Time `json:"acked_at"`
	AckNote  string     `json:"ack_note"`
}

// AlertPage is one page of the alert log, newest first; NextBeforeID is the BeforeID of the
// next page, 0 when this is the last.
type AlertPage struct {
	Alerts       []Alert `json:"alerts"`
	NextBeforeID int64   `json:"next_before_id"`
}

// AlertQuery selects alerts (GET /admin/alerts); its zero fields are not sent (the service's
// default: open alerts, 100 a page).
type AlertQuery struct {
	Status   string // "open", "acknowledged" or "all"
	Kind     string
	Product  int64
	BeforeID int64
	Limit    int
}

func (q AlertQuery) values() url.Values {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.Kind != "" {
		v.Set("kind", q.Kind)
	}
	if q.Product > 0 {
		v.Set("product_id", strconv.FormatInt(q.Product, 10))
	}
	if q.BeforeID > 0 {
		v.Set("before_id", strconv.FormatInt(q.BeforeID, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Alerts reads one page of the alert log, newest first (GET /admin/alerts; viewer).
func (c *Client) Alerts(ctx context.Context, q AlertQuery) (AlertPage, error) {
	u := c.base + "/admin/alerts"
	if v := q.values(); len(v) > 0 {
		u += "?" + v.Encode()
	}
	var page AlertPage
	err := c.operatorCall(ctx, http.MethodGet, u, nil, http.StatusOK, &page)
	return page, err
}

// AckAlert acknowledges an open alert with an optional note (POST /admin/alerts/{id}/ack;
// operator) and returns it as it now stands.
func (c *Client) AckAlert(ctx context.Context, id int64, note string) (Alert, error) {
	var body []byte
	if note != "" {
		body, _ = json.Marshal(map[string]string{"note": note}) // a map of strings always encodes
	}
	var a Alert
	err := c.operatorCall(ctx, http.MethodPost, c.base+"/admin/alerts/"+strconv.FormatInt(id, 10)+"/ack", body, http.StatusOK, &a)
	return a, err
}
