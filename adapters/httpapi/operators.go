package httpapi

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// adminRoute is one admin endpoint: the least role that may call it and, for a write, the
// action the audit log records (body: whether the request's JSON body is recorded with it).
type adminRoute struct {
	method, path string
	role         domain.Role
	action       string
	body         bool
	handler      fiber.Handler
}

// adminRoutes is the admin API with its roles: a read states its role, a write (act) takes its
// action's (application.ActionRole). The blocklists' routes exist when the server has a guard.
func adminRoutes(s *Server) []adminRoute {
	const v, a, act = domain.RoleViewer, domain.RoleAdmin, domain.Role("")
	rs := []adminRoute{
		{"POST", "/products", act, "product.create", true, s.createProduct},
		{"GET", "/products", v, "", false, s.listProducts},
		{"GET", "/products/:id", v, "", false, s.getProduct},
		{"PATCH", "/products/:id", act, "product.update", true, s.updateProduct},
		// The body is the codes: never recorded, nor read twice (it is streamed).
		{"POST", "/products/:id/codes", act, "product.import", false, s.importCodes},
		// Voiding destroys sellable stock for good, as a refund that voids does: admin. The
		// body (the codes) is never recorded; the handler records the reason and the counts.
		{"POST", "/products/:id/codes/void", act, "codes.void", false, s.voidCodes},
		{"POST", "/products/:id/freeze", act, "product.freeze", true, s.freezeProduct},
		{"POST", "/products/:id/unfreeze", act, "product.unfreeze", true, s.unfreezeProduct},
		{"GET", "/products/:id/reconcile", v, "", false, s.reconcile},
		{"POST", "/products/:id/reconcile", act, "product.repair", false, s.reconcile},
		{"GET", "/orders", v, "", false, s.searchOrders},
		{"GET", "/orders/:order_no", v, "", false, s.adminOrder}, // codes: operator (adminOrder)
		{"GET", "/orders/:order_no/payments", v, "", false, s.listOrderPayments},
		{"GET", "/payments/notifications", v, "", false, s.listNotifications},
		{"POST", "/orders/:order_no/refund", act, "order.refund", true, s.refund},
		{"POST", "/orders/:order_no/fulfil", act, "order.fulfil", true, s.fulfil},
		{"POST", "/orders/:order_no/mail", act, application.ActionMailResent, false, s.resendMail},
		{"POST", "/tokens", act, "buyer_token.issue", true, s.issueToken},
		{"GET", "/whoami", v, "", false, s.whoami},
		{"GET", "/operators", a, "", false, s.listOperators},
		{"POST", "/operators", act, "operator.create", true, s.createOperator},
		{"PATCH", "/operators/:name", act, "operator.update", true, s.updateOperator},
		{"POST", "/operators/:name/rotate", act, "operator.rotate", false, s.rotateOperator},
		{"DELETE", "/operators/:name", act, "operator.remove", false, s.removeOperator},
		{"POST", "/operators/:name/disable", act, "operator.disable", false, s.disableOperator},
		{"POST", "/operators/:name/enable", act, "operator.enable", false, s.enableOperator},
		{"POST", "/orders/:order_no/manual-payment", act, "order.confirm_payment", true, s.confirmPayment},
		{"GET", "/audit", v, "", false, s.listAudit},
		{"GET", "/alerts", v, "", false, s.listAlerts},
		{"POST", "/alerts/:alert_id/ack", act, "alert.ack", true, s.ackAlert},
	}
	if s.guard != nil {
		rs = append(rs,
			adminRoute{"GET", "/blocklist", v, "", false, s.listBlocklist},
			adminRoute{"POST", "/blocklist", act, "blocklist.add", true, s.addBlock},
			adminRoute{"DELETE", "/blocklist/:block_id", act, "blocklist.remove", false, s.removeBlock})
	}
	if s.coupons != nil {
		rs = append(rs,
			adminRoute{"GET", "/coupons", v, "", false, s.listCoupons},
			adminRoute{"POST", "/coupons", act, application.ActionCouponCreate, true, s.createCoupon},
			adminRoute{"POST", "/coupons/:code/disable", act, application.ActionCouponDisable, false, s.disableCoupon},
			adminRoute{"POST", "/coupons/:code/enable", act, application.ActionCouponEnable, false, s.enableCoupon})
	}
	if s.reports != nil {
		// The filter is the query, recorded; the answer is a stream of CSV.
		rs = append(rs, adminRoute{"POST", "/orders/export", act, application.ActionOrdersExport, false, s.exportOrders})
	}
	return withActionRoles(rs)
}

// withActionRoles gives each write its action's role.
func withActionRoles(rs []adminRoute) []adminRoute {
	for i, r := range rs {
		if r.action != "" {
			role, ok := application.ActionRole(r.action)
			if !ok {
				panic("httpapi: no role for the action " + r.action)
			}
			rs[i].role = role
		}
	}
	return rs
}

// maxAuditParams bounds the parameters recorded with an audit entry.
const maxAuditParams = 4096

// audited records the write in the audit log after it ran, whatever its outcome: who, with
// what role, the action, its target (the route's product, order or operator), its parameters
// (the query and, when body is set, the JSON body without secret fields), the status and
// error code, and the client's address. The write has happened by then; an entry that cannot
// be stored is logged as an error (the service cannot un-write), never silently lost.
func (s *Server) audited(action string, body bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		params := auditParams(c, body)
		err := c.Next()
		if out, ok := c.Locals(auditOutcomeKey).(map[string]any); ok {
			params = withOutcome(params, out)
		}
		id := identityOf(c)
		e := domain.AuditEntry{Operator: id.Name, Role: id.Role, Action: action, Target: webkit.AuditTarget(c),
			Params: params, Result: webkit.AuditResult(c.Response().StatusCode(), err), ClientAddr: webkit.ClientIP(c)}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.UserContext()), 5*time.Second)
		defer cancel()
		if _, aerr := s.operators.Record(ctx, e); aerr != nil {
			s.log.ErrorContext(ctx, "audit entry not stored", "operator", e.Operator, "action", e.Action,
				"target", e.Target, "result", e.Result, "err", aerr)
		}
		return err
	}
}

// auditOutcomeKey holds, in a request's locals, what a handler adds to its audit entry's
// parameters about the outcome (an import's counts), as JSON object fields.
const auditOutcomeKey = "cardshop.audit_outcome"

// withOutcome adds the outcome's fields to the parameters' JSON object (they win over a
// parameter of the same name).
func withOutcome(params string, out map[string]any) string {
	p := map[string]any{}
	if params != "" {
		_ = json.Unmarshal([]byte(params), &p) // a clipped object starts over from the outcome
	}
	for k, v := range out {
		p[k] = v
	}
	return clipParams(p)
}

// auditParams is the request's query and, with body, its JSON object's fields (secret ones
// left out), as compact JSON.
func auditParams(c *fiber.Ctx, body bool) string {
	p := map[string]any{}
	for k, v := range c.Queries() {
		if !webkit.SecretField(k) {
			p[k] = v
		}
	}
	if body && len(c.Body()) > 0 {
		var fields map[string]any
		if json.Unmarshal(c.Body(), &fields) == nil {
			for k, v := range fields {
				if !webkit.SecretField(k) {
					p[k] = v
				}
			}
		}
	}
	return clipParams(p)
}

// clipParams encodes recorded parameters, clipped to maxAuditParams ("" for none).
func clipParams(p map[string]any) string {
	if len(p) == 0 {
		return ""
	}
	b, _ := json.Marshal(p) // values decoded from JSON, and outcomes' numbers, always encode
	if len(b) > maxAuditParams {
		return string(b[:maxAuditParams-1]) + "…"
	}
	return string(b)
}

type identityResponse struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// whoami answers GET /admin/whoami: the caller's name and role.
func (s *Server) whoami(c *fiber.Ctx) error {
	id := identityOf(c)
	return c.JSON(identityResponse{Name: string(id.Name), Role: string(id.Role)})
}

type operatorResponse struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	CreatedAt time.Time  `json:"created_at"`
	RotatedAt time.Time  `json:"rotated_at"`
	Disabled  *time.Time `json:"disabled_at,omitempty"` // only while it is disabled
	Token     string     `json:"token,omitempty"`       // only in the answer that made it
}

func newOperatorResponse(o domain.Operator, token string) operatorResponse {
	r := operatorResponse{Name: string(o.Name), Role: string(o.Role), CreatedAt: o.CreatedAt.UTC(),
		RotatedAt: o.RotatedAt.UTC(), Token: token}
	if o.Disabled() {
		at := o.DisabledAt.UTC()
		r.Disabled = &at
	}
	return r
}

func (s *Server) listOperators(c *fiber.Ctx) error {
	ops, err := s.operators.Operators(c.UserContext())
	if err != nil {
		return err
	}
	out := struct {
		Operators []operatorResponse `json:"operators"`
	}{Operators: make([]operatorResponse, len(ops))}
	for i, o := range ops {
		out.Operators[i] = newOperatorResponse(o, "")
	}
	return c.JSON(out)
}

type operatorRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

func (s *Server) createOperator(c *fiber.Ctx) error {
	var req operatorRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		return err
	}
	o, token, err := s.operators.CreateOperator(c.UserContext(), req.Name, req.Role)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(fiber.StatusCreated).JSON(newOperatorResponse(o, token))
}

func (s *Server) updateOperator(c *fiber.Ctx) error {
	var req struct {
		Role string `json:"role"`
	}
	if err := s.decodeJSON(c, &req, false); err != nil {
		return err
	}
	o, err := s.operators.SetOperatorRole(c.UserContext(), c.Params("name"), req.Role)
	if err != nil {
		return err
	}
	return c.JSON(newOperatorResponse(o, ""))
}

func (s *Server) rotateOperator(c *fiber.Ctx) error {
	o, token, err := s.operators.RotateOperator(c.UserContext(), c.Params("name"))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(newOperatorResponse(o, token))
}

func (s *Server) removeOperator(c *fiber.Ctx) error {
	if err := s.operators.RemoveOperator(c.UserContext(), c.Params("name")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (s *Server) disableOperator(c *fiber.Ctx) error {
	o, err := s.operators.DisableOperator(c.UserContext(), c.Params("name"))
	if err != nil {
		return err
	}
	return c.JSON(newOperatorResponse(o, ""))
}

func (s *Server) enableOperator(c *fiber.Ctx) error {
	o, err := s.operators.EnableOperator(c.UserContext(), c.Params("name"))
	if err != nil {
		return err
	}
	return c.JSON(newOperatorResponse(o, ""))
}

// manualPaymentRequest is the body of POST /admin/orders/{order_no}/manual-payment.
type manualPaymentRequest struct {
	Provider  string `json:"provider"`
	Reference string `json:"reference"`
	Note      string `json:"note"`
	Override  string `json:"override"`
}

// manualPaymentResponse is the order after a manual confirmation, with what the provider's
// query answered and whether an admin overrode it.
type manualPaymentResponse struct {
	Order      orderResponse `json:"order"`
	Provider   string        `json:"provider"`
	Reference  string        `json:"reference"`
	Queried    string        `json:"queried"`
	Overridden bool          `json:"overridden"`
}

// confirmPayment marks an order paid by hand (补单): application.ConfirmPaymentManually.
func (s *Server) confirmPayment(c *fiber.Ctx) error {
	no, err := orderParam(c)
	if err != nil {
		return err
	}
	var req manualPaymentRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		return err
	}
	res, err := s.payments.ConfirmPaymentManually(c.UserContext(), application.ManualPaymentRequest{By: identityOf(c),
		OrderNo: no, Provider: req.Provider, Reference: req.Reference, Note: req.Note, Override: req.Override})
	if err != nil {
		return err
	}
	return c.JSON(manualPaymentResponse{Order: s.orderResponse(res.Order, nil, true), Provider: string(res.Record.Provider),
		Reference: res.Record.Reference, Queried: res.Record.Queried, Overridden: res.Record.Override != ""})
}

type auditEntryResponse struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Operator   string    `json:"operator"`
	Role       string    `json:"role"`
	Action     string    `json:"action"`
	Target     string    `json:"target"`
	Params     string    `json:"params"`
	Result     string    `json:"result"`
	ClientAddr string    `json:"client_addr"`
}

// listAudit answers GET /admin/audit?operator=&action=&from=&to=&before_id=&limit=, newest
// first; next_before_id pages on (0 when this is the last page).
func (s *Server) listAudit(c *fiber.Ctx) error {
	f, err := auditFilter(c)
	if err != nil {
		return err
	}
	entries, err := s.operators.AuditLog(c.UserContext(), f)
	if err != nil {
		return err
	}
	out := struct {
		Entries      []auditEntryResponse `json:"entries"`
		NextBeforeID int64                `json:"next_before_id"`
	}{Entries: make([]auditEntryResponse, len(entries))}
	for i, e := range entries {
		out.Entries[i] = auditEntryResponse{ID: e.ID, At: e.At.UTC(), Operator: string(e.Operator), Role: string(e.Role),
			Action: e.Action, Target: e.Target, Params: e.Params, Result: e.Result, ClientAddr: e.ClientAddr}
	}
	if n := len(entries); n > 0 && n == f.Limit {
		out.NextBeforeID = entries[n-1].ID
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(out)
}

func auditFilter(c *fiber.Ctx) (domain.AuditFilter, error) {
	f := domain.AuditFilter{Operator: domain.OperatorName(c.Query("operator")), Action: c.Query("action"), Limit: 100}
	var err error
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if q := c.Query(t.name); q != "" {
			if *t.dst, err = time.Parse(time.RFC3339Nano, q); err != nil {
				return f, domain.Invalid(t.name, "must be an RFC 3339 time")
			}
		}
	}
	if q := c.Query("before_id"); q != "" {
		if f.BeforeID, err = strconv.ParseInt(q, 10, 64); err != nil || f.BeforeID < 1 {
			return f, domain.Invalid("before_id", "must be a positive entry id")
		}
	}
	if q := c.Query("limit"); q != "" {
		if f.Limit, err = strconv.Atoi(q); err != nil || f.Limit < 1 || f.Limit > application.MaxAuditPage {
			return f, domain.Invalid("limit", "must be from 1 to 1000")
		}
	}
	return f, nil
}
