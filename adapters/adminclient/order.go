package adminclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Order is an order as the admin search answers it (AdminOrder in openapi.json, without
// codes: a search never shows them).
type Order struct {
	OrderNo    string     `json:"order_no"`
	BuyerID    string     `json:"buyer_id"`
	ProductID  int64      `json:"product_id"`
	Qty        int        `json:"qty"`
	UnitPrice  int64      `json:"unit_price"`
	Amount     int64      `json:"amount"`
	Currency   string     `json:"currency"`
	Status     string     `json:"status"`
	Reason     string     `json:"reason,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	PaidAt     *time.Time `json:"paid_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	PaymentRef string     `json:"payment_ref,omitempty"`
	RevealedAt *time.Time `json:"revealed_at,omitempty"`
}

// OrderPage is one page of an order search (OrderPage in openapi.json): NextCursor is "" on
// the last page.
type OrderPage struct {
	Orders     []Order `json:"orders"`
	NextCursor string  `json:"next_cursor"`
}

// OrderQuery selects orders (GET /admin/orders); its zero fields are not sent (the service's
// default: every order, 50 a page).
type OrderQuery struct {
	Buyer    string
	Product  int64
	Statuses []string
	From, To time.Time // From inclusive, To exclusive
	Cursor   string
	Limit    int
}

// values is the query's URL parameters.
func (q OrderQuery) values() url.Values {
	v := url.Values{}
	if q.Buyer != "" {
		v.Set("buyer_id", q.Buyer)
	}
	if q.Product > 0 {
		v.Set("product_id", strconv.FormatInt(q.Product, 10))
	}
	if len(q.Statuses) > 0 {
		v.Set("status", strings.Join(q.Statuses, ","))
	}
	if !q.From.IsZero() {
		v.Set("from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.UTC().Format(time.RFC3339Nano))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Orders reads one page of the orders q selects, newest first (GET /admin/orders; any role).
func (c *Client) Orders(ctx context.Context, q OrderQuery) (OrderPage, error) {
	u := c.base + "/admin/orders"
	if v := q.values(); len(v) > 0 {
		u += "?" + v.Encode()
	}
	var page OrderPage
	err := c.operatorCall(ctx, http.MethodGet, u, nil, http.StatusOK, &page)
	return page, err
}
