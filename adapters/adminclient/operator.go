package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// operatorTimeout bounds one call of the operators and the audit log.
const operatorTimeout = 30 * time.Second

// Identity is who the token calls as (Identity in openapi.json): an operator's name and role,
// or "admin-token" (an admin) for the shared CARDSHOP_ADMIN_TOKEN.
type Identity struct {
	Name string `json:"name"`
	Role string `json:"role"` // "viewer", "operator" or "admin"
}

// Operator is an operator as the admin API answers it (Operator in openapi.json). Token is
// set only in the answer that made it (a creation, a rotation): the service keeps only its hash.
type Operator struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	RotatedAt time.Time `json:"rotated_at"`
	Token     string    `json:"token,omitempty"`
}

// AuditEntry is one write recorded in the audit log (AuditEntry in openapi.json).
type AuditEntry struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Operator   string    `json:"operator"`
	Role       string    `json:"role"`
	Action     string    `json:"action"`
	Target     string    `json:"target"` // "" when the write has none
	Params     string    `json:"params"` // JSON, secrets and codes left out; "" when none
	Result     string    `json:"result"` // such as "201" or "403 forbidden"
	ClientAddr string    `json:"client_addr"`
}

// AuditPage is one page of the audit log, newest first; NextBeforeID is the BeforeID of the
// next page, 0 when this is the last.
type AuditPage struct {
	Entries      []AuditEntry `json:"entries"`
	NextBeforeID int64        `json:"next_before_id"`
}

// AuditQuery selects audit entries (GET /admin/audit); its zero fields are not sent (the
// service's default: every entry, 100 a page).
type AuditQuery struct {
	Operator string
	Action   string
	From, To time.Time // From inclusive, To exclusive
	BeforeID int64
	Limit    int
}

// values is the query's URL parameters.
func (q AuditQuery) values() url.Values {
	v := url.Values{}
	if q.Operator != "" {
		v.Set("operator", q.Operator)
	}
	if q.Action != "" {
		v.Set("action", q.Action)
	}
	if !q.From.IsZero() {
		v.Set("from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.UTC().Format(time.RFC3339Nano))
	}
	if q.BeforeID > 0 {
		v.Set("before_id", strconv.FormatInt(q.BeforeID, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Whoami reads who the client's token calls as (GET /admin/whoami).
func (c *Client) Whoami(ctx context.Context) (Identity, error) {
	var id Identity
	err := c.operatorCall(ctx, http.MethodGet, c.base+"/admin/whoami", nil, http.StatusOK, &id)
	return id, err
}

// Operators lists the operators, without their tokens (GET /admin/operators; admin).
func (c *Client) Operators(ctx context.Context) ([]Operator, error) {
	var list struct {
		Operators []Operator `json:"operators"`
	}
	err := c.operatorCall(ctx, http.MethodGet, c.base+"/admin/operators", nil, http.StatusOK, &list)
	return list.Operators, err
}

// CreateOperator adds an operator with a role (POST /admin/operators; admin) and returns it
// with its token, which the service never shows again.
func (c *Client) CreateOperator(ctx context.Context, name, role string) (Operator, error) {
	body, err := json.Marshal(struct {
		Name string `json:"name"`
		Role string `json:"role"`
	}{name, role})
	if err != nil {
		return Operator{}, err
	}
	var o Operator
	err = c.operatorCall(ctx, http.MethodPost, c.base+"/admin/operators", body, http.StatusCreated, &o)
	return o, err
}

// SetOperatorRole changes an operator's role (PATCH /admin/operators/{name}; admin) and
// returns the operator.
func (c *Client) SetOperatorRole(ctx context.Context, name, role string) (Operator, error) {
	body, err := json.Marshal(struct {
		Role string `json:"role"`
	}{role})
	if err != nil {
		return Operator{}, err
	}
	var o Operator
	err = c.operatorCall(ctx, http.MethodPatch, c.operatorURL(name), body, http.StatusOK, &o)
	return o, err
}

// RotateOperator gives an operator a new token (POST /admin/operators/{name}/rotate; admin)
// and returns the operator with it; the old token stops working at once.
func (c *Client) RotateOperator(ctx context.Context, name string) (Operator, error) {
	var o Operator
	err := c.operatorCall(ctx, http.MethodPost, c.operatorURL(name)+"/rotate", nil, http.StatusOK, &o)
	return o, err
}

// RemoveOperator deletes an operator (DELETE /admin/operators/{name}; admin); its token stops
// working at once.
func (c *Client) RemoveOperator(ctx context.Context, name string) error {
	return c.operatorCall(ctx, http.MethodDelete, c.operatorURL(name), nil, http.StatusNoContent, nil)
}

// Audit reads one page of the audit log, newest first (GET /admin/audit; viewer).
func (c *Client) Audit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	u := c.base + "/admin/audit"
	if v := q.values(); len(v) > 0 {
		u += "?" + v.Encode()
	}
	var page AuditPage
	err := c.operatorCall(ctx, http.MethodGet, u, nil, http.StatusOK, &page)
	return page, err
}

func (c *Client) operatorURL(name string) string {
	return c.base + "/admin/operators/" + url.PathEscape(name)
}

// operatorCall sends one request and decodes the answer into out (nil: none is read).
func (c *Client) operatorCall(ctx context.Context, method, u string, body []byte, ok int, out any) error {
	answer, err := c.adminJSON(ctx, &http.Client{Timeout: operatorTimeout}, method, u, body, ok)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("unreadable answer %q: %w", answer, err)
	}
	return nil
}
