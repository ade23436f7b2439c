package httpapi

import (
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

type createPaymentRequest struct {
	Provider string `json:"provider"`
}

// paymentResponse is a payment as the API shows it.
type paymentResponse struct {
	OrderNo     string    `json:"order_no"`
	Provider    string    `json:"provider"`
	Status      string    `json:"status"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	PayURL      string    `json:"pay_url,omitempty"`
	QRCode      string    `json:"qr_code,omitempty"`
	ProviderRef string    `json:"provider_ref,omitempty"`
	RefundNo    string    `json:"refund_no,omitempty"`
	RefundRef   string    `json:"refund_ref,omitempty"`
	RefundWhy   string    `json:"refund_reason,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func newPaymentResponse(p domain.Payment) paymentResponse {
	return paymentResponse{OrderNo: string(p.OrderNo), Provider: string(p.Provider), Status: p.Status.String(),
		Amount: int64(p.Amount), Currency: p.Currency.Code, PayURL: p.PayURL, QRCode: p.QRCode,
		ProviderRef: p.ProviderRef, RefundNo: p.RefundNo, RefundRef: p.RefundRef, RefundWhy: p.RefundReason,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

// createPayment creates (201) or returns (200) the buyer's order's payment at a provider.
func (s *Server) createPayment(c *fiber.Ctx) error {
	no, err := orderParam(c)
	if err != nil {
		return err
	}
	var req createPaymentRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		return err
	}
	provider, err := domain.ParseProvider(req.Provider)
	if err != nil {
		return err
	}
	p, created, err := s.payments.CreatePayment(c.UserContext(), application.NewPayment{Buyer: buyerOf(c), OrderNo: no,
		Provider: provider, ClientIP: webkit.ClientIP(c)})
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(status).JSON(newPaymentResponse(p))
}

// providerNotify hands a provider's notification, as received, to its gateway through the
// use case, and answers exactly what the provider expects (its success reply, or its refusal
// so that it resends). An unreachable dependency answers 503 with the refusal's body.
func (s *Server) providerNotify(c *fiber.Ctx) error {
	provider, err := domain.ParseProvider(c.Params("provider"))
	if err != nil {
		return domain.ErrProviderUnknown
	}
	b, err := webkit.ReadBody(c, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	in := domain.InboundRequest{Method: c.Method(), Header: domain.Header{}, Query: url.Values{}, Body: b, At: s.clock.Now()}
	c.Request().Header.VisitAll(func(k, v []byte) { in.Header.Add(string(k), string(v)) })
	c.Request().URI().QueryArgs().VisitAll(func(k, v []byte) { in.Query.Add(string(k), string(v)) })
	replier, ok := s.cfg.Replies[provider]
	if !ok {
		return domain.ErrProviderUnknown
	}
	err = s.payments.HandleNotification(c.UserContext(), provider, in, webkit.ClientIP(c))
	if errors.Is(err, domain.ErrProviderUnknown) {
		return err
	}
	status, contentType, body := replier.Reply(err == nil)
	if errors.Is(err, domain.ErrUnavailable) {
		status = fiber.StatusServiceUnavailable
	}
	if err != nil && !errors.Is(err, application.ErrUnverified) { // those the use case logs at a limited pace
		s.log.InfoContext(c.UserContext(), "payment notification not accepted", "provider", provider, "status", status, "err", err)
	}
	if contentType != "" {
		c.Set(fiber.HeaderContentType, contentType)
	}
	return c.Status(status).Send(body)
}

// notificationResponse is one logged provider notification.
type notificationResponse struct {
	ID          int64     `json:"id"`
	Provider    string    `json:"provider"`
	At          time.Time `json:"received_at"`
	Method      string    `json:"method"`
	Remote      string    `json:"remote,omitempty"`
	Verified    bool      `json:"verified"`
	Accepted    bool      `json:"accepted"`
	Result      string    `json:"result"`
	OrderNo     string    `json:"order_no,omitempty"`
	EventID     string    `json:"event_id,omitempty"`
	ProviderRef string    `json:"provider_ref,omitempty"`
	Outcome     string    `json:"outcome,omitempty"`
	Amount      int64     `json:"amount,omitempty"`
	Currency    string    `json:"currency,omitempty"`
	BodyBytes   int       `json:"body_bytes"`
	// Count is how many notifications the record stands for: 1, or for an aggregate of
	// notifications refused before verification, how many came from its address in its window.
	Count         int64      `json:"count"`
	RefusedWindow *time.Time `json:"refused_window,omitempty"`
}

// listNotifications is the notification log for operators: ?order_no=, ?verified= (true: the
// verified notifications only, false: the aggregates of refused ones only) and ?limit= (≤ 1000).
func (s *Server) listNotifications(c *fiber.Ctx) error {
	q := domain.NotificationQuery{}
	if v := c.Query("order_no"); v != "" {
		parsed, err := domain.ParseOrderNo(v)
		if err != nil {
			return domain.Invalid("order_no", "malformed")
		}
		q.OrderNo = parsed
	}
	if v := c.Query("verified"); v != "" {
		verified, err := strconv.ParseBool(v)
		if err != nil {
			return domain.Invalid("verified", "must be true or false")
		}
		q.Verified = &verified
	}
	limit := 100
	if q := c.Query("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 1000 {
			return domain.Invalid("limit", "must be 1 to 1000")
		}
		limit = n
	}
	q.Limit = limit
	recs, err := s.payments.Notifications(c.UserContext(), q)
	if err != nil {
		return err
	}
	out := make([]notificationResponse, 0, len(recs))
	for _, r := range recs {
		resp := notificationResponse{ID: r.ID, Provider: string(r.Provider), At: r.At, Method: r.Method,
			Remote: r.Remote, Verified: r.Verified, Accepted: r.Accepted, Result: r.Result, OrderNo: string(r.OrderNo),
			EventID: r.EventID, ProviderRef: r.ProviderRef, Outcome: r.Outcome, Amount: int64(r.Amount),
			Currency: r.Currency, BodyBytes: r.BodyBytes, Count: max(r.Count, 1)}
		if !r.RefusedWindow.IsZero() {
			resp.RefusedWindow = &r.RefusedWindow
		}
		out = append(out, resp)
	}
	return c.JSON(fiber.Map{"notifications": out})
}

// listOrderPayments lists an order's payments, for operators.
func (s *Server) listOrderPayments(c *fiber.Ctx) error {
	no, err := orderParam(c)
	if err != nil {
		return err
	}
	ps, err := s.payments.OrderPayments(c.UserContext(), no)
	if err != nil {
		return err
	}
	out := make([]paymentResponse, 0, len(ps))
	for _, p := range ps {
		out = append(out, newPaymentResponse(p))
	}
	return c.JSON(fiber.Map{"payments": out})
}
