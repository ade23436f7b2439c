package httpapi

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/paysig"
	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// HeaderReplayed marks the answer to a repeated submission.
const HeaderReplayed = "Idempotent-Replayed"

// HeaderIdempotencyKey carries the client's idempotency key.
const HeaderIdempotencyKey = "Idempotency-Key"

type placeOrderRequest struct {
	ProductID int64  `json:"product_id"`
	Qty       int    `json:"qty"`
	Coupon    string `json:"coupon,omitempty"`
}

// orderResponse is an order as the API shows it.
type orderResponse struct {
	OrderNo    string     `json:"order_no"`
	ProductID  int64      `json:"product_id"`
	Qty        int        `json:"qty"`
	UnitPrice  int64      `json:"unit_price"`
	Amount     int64      `json:"amount"`
	Coupon     string     `json:"coupon,omitempty"`   // the coupon the order carries
	Discount   int64      `json:"discount,omitempty"` // what it took off: amount = unit_price × qty − discount
	Currency   string     `json:"currency"`
	Status     string     `json:"status"`
	Reason     string     `json:"reason,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	PaidAt     *time.Time `json:"paid_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	BuyerID    string     `json:"buyer_id,omitempty"`
	PaymentRef string     `json:"payment_ref,omitempty"`
	RevealedAt *time.Time `json:"revealed_at,omitempty"`
	Codes      []string   `json:"codes,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// orderResponse shows an order: amounts in the shop's currency.
func (s *Server) orderResponse(o domain.Order, cards []domain.Card, admin bool) orderResponse {
	r := orderResponse{OrderNo: string(o.No()), ProductID: int64(o.Product()), Qty: o.Qty(),
		UnitPrice: int64(o.UnitPrice()), Amount: int64(o.Amount()), Coupon: string(o.Coupon()), Discount: int64(o.Discount()),
		Currency: s.sales.Currency().Code,
		Status:   o.Status().String(),
		Reason:   o.Reason(), CreatedAt: o.CreatedAt(), ExpiresAt: o.ExpiresAt(), PaidAt: timePtr(o.PaidAt()),
		EndedAt: timePtr(o.EndedAt())}
	if admin {
		r.BuyerID, r.PaymentRef, r.RevealedAt = string(o.Buyer()), o.PaymentRef(), timePtr(o.RevealedAt())
	}
	for _, c := range cards {
		r.Codes = append(r.Codes, c.Code.Reveal()) // the one place a code leaves the process
	}
	return r
}

// placeOrder is POST /api/order. The checks, in order: the middleware's (the deadline, the
// per-IP limit, the blocked addresses, the buyer's token), then the body, then the refusals
// the service gives from memory (application.Sales.RefusedFromMemory: sold out under the
// gate's lease, a sale clearly not started), then the per-buyer limit (chargeBuyer), then the
// use case, which reserves at the gate. So a sold-out answer costs no limiter round trip,
// while every order that can reserve is charged.
func (s *Server) placeOrder(c *fiber.Ctx) error {
	b, err := webkit.ReadBody(c, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	req, ok := parsePlaceOrder(b)
	if !ok {
		if err := decodeBody(b, &req, false); err != nil {
			return err
		}
	}
	if req.ProductID <= 0 {
		return domain.Invalid("product_id", "must be a positive integer")
	}
	cmd := application.PlaceOrder{Buyer: buyerOf(c), Product: domain.ProductID(req.ProductID), Qty: req.Qty,
		IdempotencyKey: c.Get(HeaderIdempotencyKey), Coupon: req.Coupon}
	// Sold out under the gate's lease, or clearly before the start: answered before the buyer's
	// budget is charged (see RateLimits.PerBuyer); every order that can reserve is charged.
	if err := s.sales.RefusedFromMemory(cmd); err != nil {
		return err
	}
	if err := s.chargeBuyer(c); err != nil {
		return err
	}
	res, err := s.sales.PlaceOrder(c.UserContext(), cmd)
	if err != nil {
		return err
	}
	status := fiber.StatusCreated
	if res.Replayed {
		c.Set(HeaderReplayed, "true")
		status = fiber.StatusOK
	}
	return sendOrder(c.Status(status), s.orderResponse(res.Order, nil, false))
}

// sendOrder answers r as JSON: appended by hand when it can be (appendJSON), else encoded.
func sendOrder(c *fiber.Ctx, r orderResponse) error {
	b, ok := r.appendJSON(make([]byte, 0, 256))
	if !ok {
		return c.JSON(r)
	}
	c.Response().SetBodyRaw(b)
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	return nil
}

func (s *Server) getOrder(c *fiber.Ctx) error {
	no, err := orderParam(c)
	if err != nil {
		return err
	}
	v, err := s.sales.BuyerOrder(c.UserContext(), buyerOf(c), no)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(s.orderResponse(v.Order, v.Cards, false))
}

type callbackResponse struct {
	Result  string `json:"result"`
	OrderNo string `json:"order_no"`
	Status  string `json:"status"`
}

// paymentCallback verifies and applies a provider callback. Success (also for a duplicate)
// answers 200 {"result":"success"}; anything else is an error the provider should retry
// (5xx) or give up on (4xx).
func (s *Server) paymentCallback(c *fiber.Ctx) error {
	b, err := webkit.ReadBody(c, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	o, err := s.payments.HandlePaymentCallback(c.UserContext(), application.SignedCallback{
		Timestamp: c.Get(paysig.HeaderTimestamp), Signature: c.Get(paysig.HeaderSignature), Body: b})
	if err != nil {
		return err
	}
	return c.JSON(callbackResponse{Result: "success", OrderNo: string(o.No()), Status: o.Status().String()})
}

// appendJSON appends r exactly as encoding/json encodes it, for the answer to a new order (no
// reason, no end, no admin field, no code, texts that need no escaping, years 0-9999); ok is
// false for any other order, which the caller encodes with encoding/json. That answer is on the
// hot path of a sale: encoding/json's reflection was 5% of the service's CPU per successful
// order (TestOrderJSONIsEncodingJSONs compares the two).
func (r *orderResponse) appendJSON(b []byte) (_ []byte, ok bool) {
	if r.Reason != "" || r.PaidAt != nil || r.EndedAt != nil || r.BuyerID != "" || r.PaymentRef != "" || r.RevealedAt != nil ||
		r.Codes != nil || !plainJSON(r.OrderNo) || !plainJSON(r.Currency) || !plainJSON(r.Status) || !plainJSON(r.Coupon) ||
		!jsonYear(r.CreatedAt) || !jsonYear(r.ExpiresAt) {
		return b, false
	}
	b = append(b, `{"order_no":"`...)
	b = append(b, r.OrderNo...)
	b = append(b, `","product_id":`...)
	b = strconv.AppendInt(b, r.ProductID, 10)
	b = append(b, `,"qty":`...)
	b = strconv.AppendInt(b, int64(r.Qty), 10)
	b = append(b, `,"unit_price":`...)
	b = strconv.AppendInt(b, r.UnitPrice, 10)
	b = append(b, `,"amount":`...)
	b = strconv.AppendInt(b, r.Amount, 10)
	if r.Coupon != "" {
		b = append(b, `,"coupon":"`...)
		b = append(b, r.Coupon...)
		b = append(b, '"')
	}
	if r.Discount != 0 {
		b = append(b, `,"discount":`...)
		b = strconv.AppendInt(b, r.Discount, 10)
	}
	b = append(b, `,"currency":"`...)
	b = append(b, r.Currency...)
	b = append(b, `","status":"`...)
	b = append(b, r.Status...)
	b = append(b, `","created_at":"`...)
	b = r.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","expires_at":"`...)
	b = r.ExpiresAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `"}`...)
	return b, true
}

// plainJSON reports whether encoding/json writes s as it is between quotes: printable ASCII
// other than the quote, the backslash and the characters it escapes for HTML (<, >, &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// jsonYear reports whether encoding/json can encode t (it refuses years outside 0-9999).
func jsonYear(t time.Time) bool { return t.Year() >= 0 && t.Year() <= 9999 }
