package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/authtoken"
	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

type createProductRequest struct {
	ID                  int64      `json:"id"`
	Name                string     `json:"name"`
	Description         string     `json:"description"`
	Price               int64      `json:"price"`
	MinPerOrder         int        `json:"min_per_order"`
	MaxPerOrder         int        `json:"max_per_order"`
	CodeUses            *int       `json:"code_uses"` // absent: 1
	Group               string     `json:"group"`
	Variant             string     `json:"variant"`
	Tiers               []tierJSON `json:"tiers"`
	StockDisplay        string     `json:"stock_display"`
	StartsAt            *time.Time `json:"starts_at"`
	EndsAt              *time.Time `json:"ends_at"`
	BuyerLimit          int        `json:"buyer_limit"`
	RefundReleasesLimit bool       `json:"refund_releases_limit"`
	LowStockThreshold   int        `json:"low_stock_threshold"`
}

// patchTime is a time field of a PATCH: Set when the field is present, zero T for null (the
// bound is removed).
type patchTime struct {
	Set bool
	T   time.Time
}

func (p *patchTime) UnmarshalJSON(b []byte) error {
	p.Set, p.T = true, time.Time{}
	if string(b) == "null" {
		return nil
	}
	return json.Unmarshal(b, &p.T)
}

func (p patchTime) ptr() *time.Time {
	if !p.Set {
		return nil
	}
	return &p.T
}

func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// updateProductRequest is a PATCH: an absent (or null) field is left as it is; "tiers": []
// removes the quantity prices.
//
// "starts_at": null and "ends_at": null remove the bound.
type updateProductRequest struct {
	Name                *string     `json:"name"`
	Description         *string     `json:"description"` // "" removes it
	Price               *int64      `json:"price"`
	MinPerOrder         *int        `json:"min_per_order"`
	MaxPerOrder         *int        `json:"max_per_order"`
	CodeUses            *int        `json:"code_uses"` // fixed at creation: only the current value is accepted
	Group               *string     `json:"group"`
	Variant             *string     `json:"variant"`
	Tiers               *[]tierJSON `json:"tiers"`
	StockDisplay        *string     `json:"stock_display"`
	StartsAt            patchTime   `json:"starts_at"`
	EndsAt              patchTime   `json:"ends_at"`
	BuyerLimit          *int        `json:"buyer_limit"`
	RefundReleasesLimit *bool       `json:"refund_releases_limit"`
	LowStockThreshold   *int        `json:"low_stock_threshold"`
}

type productResponse struct {
	ID                  int64      `json:"id"`
	Name                string     `json:"name"`
	Description         string     `json:"description"`
	Price               int64      `json:"price"`
	MinPerOrder         int        `json:"min_per_order"`
	MaxPerOrder         int        `json:"max_per_order"`
	CodeUses            int        `json:"code_uses"`
	Group               string     `json:"group"`
	Variant             string     `json:"variant"`
	Tiers               []tierJSON `json:"tiers"`
	StockDisplay        string     `json:"stock_display"`
	StartsAt            *time.Time `json:"starts_at"`
	EndsAt              *time.Time `json:"ends_at"`
	BuyerLimit          int        `json:"buyer_limit"`
	RefundReleasesLimit bool       `json:"refund_releases_limit"`
	LowStockThreshold   int        `json:"low_stock_threshold"`
	StockState          string     `json:"stock_state"`
	Frozen              bool       `json:"frozen"`
	FrozenReason        string     `json:"frozen_reason,omitempty"`
	CreatedAt           time.Time  `json:"created_at"`
}

func newProductResponse(p domain.Product) productResponse {
	return productResponse{ID: int64(p.ID()), Name: p.Name(), Description: p.Description(), Price: int64(p.Price()),
		MinPerOrder: p.MinPerOrder(), MaxPerOrder: p.MaxPerOrder(), CodeUses: p.CodeUses(), Group: p.Group(), Variant: p.Variant(),
		Tiers: tiersJSON(p.Tiers()), StockDisplay: string(p.StockDisplay()),
		StartsAt: optionalTime(p.Sale().StartsAt), EndsAt: optionalTime(p.Sale().EndsAt), BuyerLimit: p.Sale().BuyerLimit,
		RefundReleasesLimit: p.RefundReleasesLimit(), LowStockThreshold: p.LowStockThreshold(),
		StockState: string(p.StockState()), Frozen: p.Frozen(), FrozenReason: p.FrozenReason(), CreatedAt: p.CreatedAt()}
}

func (s *Server) createProduct(c *fiber.Ctx) error {
	var req createProductRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		return err
	}
	display, err := domain.ParseStockDisplay(req.StockDisplay)
	if err != nil {
		return err
	}
	uses := 1 // absent
	if req.CodeUses != nil {
		uses = *req.CodeUses
	}
	p, err := s.products.CreateProduct(c.UserContext(), application.NewProduct{ID: domain.ProductID(req.ID),
		Name: req.Name, Description: req.Description, Price: domain.Money(req.Price), MinPerOrder: req.MinPerOrder, MaxPerOrder: req.MaxPerOrder,
		CodeUses: uses, SharedKey: uses == domain.UnlimitedUses, Group: req.Group, Variant: req.Variant,
		Tiers: domainTiers(req.Tiers), StockDisplay: display,
		Sale:                domain.SaleRules{StartsAt: timeOrZero(req.StartsAt), EndsAt: timeOrZero(req.EndsAt), BuyerLimit: req.BuyerLimit},
		RefundReleasesLimit: req.RefundReleasesLimit, LowStockThreshold: req.LowStockThreshold})
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(newProductResponse(p))
}

// updateProduct changes a product, on sale or not; existing orders keep their prices.
func (s *Server) updateProduct(c *fiber.Ctx) error {
	id, err := productParam(c)
	if err != nil {
		return err
	}
	var req updateProductRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		return err
	}
	var patch application.ProductPatch
	patch.Name, patch.MinPerOrder, patch.MaxPerOrder = req.Name, req.MinPerOrder, req.MaxPerOrder
	patch.Description = req.Description
	patch.CodeUses = req.CodeUses
	patch.Group, patch.Variant = req.Group, req.Variant
	if req.Price != nil {
		price := domain.Money(*req.Price)
		patch.Price = &price
	}
	if req.Tiers != nil {
		tiers := domainTiers(*req.Tiers)
		patch.Tiers = &tiers
	}
	if req.StockDisplay != nil {
		display, err := domain.ParseStockDisplay(*req.StockDisplay)
		if err != nil || *req.StockDisplay == "" {
			return domain.Invalid("stock_display", `must be "exact" or "level"`)
		}
		patch.StockDisplay = &display
	}
	patch.StartsAt, patch.EndsAt = req.StartsAt.ptr(), req.EndsAt.ptr()
	patch.BuyerLimit, patch.RefundReleasesLimit, patch.LowStockThreshold = req.BuyerLimit, req.RefundReleasesLimit, req.LowStockThreshold
	p, err := s.products.UpdateProduct(c.UserContext(), id, patch)
	if err != nil {
		return err
	}
	return c.JSON(newProductResponse(p))
}

func (s *Server) listProducts(c *fiber.Ctx) error {
	ps, err := s.products.Products(c.UserContext())
	if err != nil {
		return err
	}
	out := make([]productResponse, 0, len(ps))
	for _, p := range ps {
		out = append(out, newProductResponse(p))
	}
	return c.JSON(fiber.Map{"products": out})
}

func (s *Server) getProduct(c *fiber.Ctx) error {
	id, err := productParam(c)
	if err != nil {
		return err
	}
	p, err := s.products.Product(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(newProductResponse(p))
}

type importResponse struct {
	Added        int           `json:"added"`
	Uses         int           `json:"uses"`
	Duplicates   int           `json:"duplicates"`
	InPool       int           `json:"in_pool"`
	Invalid      int           `json:"invalid"`
	InvalidRows  []int         `json:"invalid_lines,omitempty"`
	Comments     int           `json:"comments"`
	Headers      int           `json:"headers"`
	Unterminated int           `json:"unterminated"`
	Skipped      []skippedLine `json:"skipped"`
	Truncated    bool          `json:"truncated"`
	ThroughLine  int           `json:"through_line"`
	Complete     bool          `json:"complete"`
	Filled       int           `json:"filled"`
}

type skippedLine struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

func newImportResponse(rep application.ImportReport, complete bool) importResponse {
	out := importResponse{Added: rep.Added, Uses: rep.Uses, Duplicates: rep.Duplicates, InPool: rep.InPool, Invalid: rep.Invalid,
		InvalidRows: rep.InvalidRows, Comments: rep.Comments, Headers: rep.Headers, Unterminated: rep.Unterminated,
		Skipped: make([]skippedLine, len(rep.Skipped)), Truncated: rep.Truncated, ThroughLine: rep.Through, Complete: complete,
		Filled: rep.Filled}
	for i, l := range rep.Skipped {
		out.Skipped[i] = skippedLine{Line: l.Line, Reason: l.Reason, Detail: l.Detail}
	}
	return out
}

// importFailed is an import that stopped on err after importing what its report says; the
// error answer carries the report (errorHandler).
type importFailed struct {
	rep importResponse
	err error
}

func (e *importFailed) Error() string { return e.err.Error() }
func (e *importFailed) Unwrap() error { return e.err }

// importCodes streams a text body (one code per line, or CSV with the code first) into the
// pool without holding it in memory. A body that does not end cleanly — over the import limit,
// shorter than its Content-Length, unreadable — never imports its unterminated last line (see
// importBody); the error answer carries the report of the lines before it.
func (s *Server) importCodes(c *fiber.Ctx) error {
	id, err := productParam(c)
	if err != nil {
		return err
	}
	if n := c.Request().Header.ContentLength(); n > 0 && int64(n) > s.cfg.MaxImportBytes {
		return webkit.ErrBodyTooLarge
	}
	body := &importBody{r: webkit.BodyReader(c), left: s.cfg.MaxImportBytes, length: int64(c.Request().Header.ContentLength())}
	rep, err := s.products.ImportCodes(c.UserContext(), id, body)
	if !errors.Is(err, domain.ErrProductNotFound) {
		c.Locals(auditOutcomeKey, webkit.NewImportAudit(rep, body.read).Fields())
	}
	switch {
	case err == nil:
		return c.JSON(newImportResponse(rep, true))
	case errors.Is(err, domain.ErrProductNotFound):
		return err
	case errors.Is(err, webkit.ErrBodyTooLarge), errors.Is(err, domain.ErrUnavailable), errors.Is(err, domain.ErrInvalidInput):
	case body.failed:
		err = fmt.Errorf("%w: %w", domain.Invalid("body", "could not be read to its end"), err)
	}
	return &importFailed{rep: newImportResponse(rep, false), err: err}
}

// importBody is an import's request body. It fails, rather than ending, when the body does not
// end cleanly, so that the import never takes a cut last line for a code:
//   - past the import limit it returns webkit.ErrBodyTooLarge (an io.LimitedReader would end the body
//     there, in the middle of a line);
//   - a body that ends before its Content-Length is io.ErrUnexpectedEOF (fasthttp's stream
//     reports a closed connection as the end);
//   - a body without a Content-Length (chunked) that ends without a final newline ends with
//     application.ErrUnconfirmedEnd: fasthttp reports a connection closed between two chunks
//     as the end too, so such a last line may be cut and is not imported.
type importBody struct {
	r      io.Reader
	left   int64 // bytes still allowed
	length int64 // the Content-Length, or negative
	read   int64
	last   byte // the last byte read
	failed bool // the body could not be read
}

func (b *importBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, webkit.ErrBodyTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte more than allowed tells an over-long body from one at the limit
	}
	n, err := b.r.Read(p)
	if int64(n) > b.left {
		n = int(b.left)
		b.left = -1
		err = webkit.ErrBodyTooLarge
	} else {
		b.left -= int64(n)
	}
	if n > 0 {
		b.read += int64(n)
		b.last = p[n-1]
	}
	switch {
	case errors.Is(err, webkit.ErrBodyTooLarge):
	case errors.Is(err, io.EOF) && b.length >= 0 && b.read < b.length:
		err, b.failed = io.ErrUnexpectedEOF, true
	case errors.Is(err, io.EOF) && b.length < 0 && b.read > 0 && b.last != '\n':
		err = application.ErrUnconfirmedEnd
	case err != nil && !errors.Is(err, io.EOF):
		b.failed = true
	}
	return n, err
}

type freezeRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) freezeProduct(c *fiber.Ctx) error {
	id, err := productParam(c)
	if err != nil {
		return err
	}
	var req freezeRequest
	if err := s.decodeJSON(c, &req, true); err != nil {
		return err
	}
	if err := s.products.FreezeProduct(c.UserContext(), id, req.Reason); err != nil {
		return err
	}
	return s.getProduct(c)
}

func (s *Server) unfreezeProduct(c *fiber.Ctx) error {
	id, err := productParam(c)
	if err != nil {
		return err
	}
	if err := s.products.UnfreezeProduct(c.UserContext(), id); err != nil {
		return err
	}
	return s.getProduct(c)
}

type reconcileResponse struct {
	ProductID   int64                 `json:"product_id"`
	OK          bool                  `json:"ok"`
	Differences int                   `json:"differences"`
	Repaired    bool                  `json:"repaired"`
	Gate        *gateLevels           `json:"gate"`
	Cards       map[string]int64      `json:"cards"`
	Orders      map[string]statusSums `json:"orders"`
	Checks      []application.Check   `json:"checks"`
}

type gateLevels struct {
	Stock  int64 `json:"stock"`
	Sold   int64 `json:"sold"`
	Frozen bool  `json:"frozen"`
}

type statusSums struct {
	Orders int64 `json:"orders"`
	Qty    int64 `json:"qty"`
}

// reconcile reports (GET) or, with POST ?repair=true, first rebuilds the gate from the ledger.
func (s *Server) reconcile(c *fiber.Ctx) error {
	id, err := productParam(c)
	if err != nil {
		return err
	}
	repair := c.Method() == fiber.MethodPost && c.QueryBool("repair", false)
	rep, err := s.products.Reconcile(c.UserContext(), id, repair)
	if err != nil {
		return err
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.ReconcileDifferences(rep.Differences)
	}
	out := reconcileResponse{ProductID: int64(rep.Product), OK: rep.OK(), Differences: rep.Differences,
		Repaired: rep.Repaired, Cards: rep.Cards, Orders: map[string]statusSums{}, Checks: rep.Checks}
	if rep.GateKnown {
		out.Gate = &gateLevels{Stock: rep.Gate.Stock, Sold: rep.Gate.Sold, Frozen: rep.Gate.Frozen}
	}
	for k, v := range rep.Orders {
		out.Orders[k] = statusSums{Orders: v.Orders, Qty: v.Qty}
	}
	return c.JSON(out)
}

func (s *Server) adminOrder(c *fiber.Ctx) error {
	no, err := orderParam(c)
	if err != nil {
		return err
	}
	withCodes := true
	if q := c.Query("codes"); q != "" {
		if withCodes, err = strconv.ParseBool(q); err != nil {
			return domain.Invalid("codes", "must be true or false")
		}
	}
	if withCodes && !identityOf(c).Role.Allows(domain.RoleOperator) {
		// A viewer sees orders but never their codes (?codes=false).
		return &forbidden{have: identityOf(c).Role, need: domain.RoleOperator}
	}
	// With codes this read is a reveal (a later refund voids them by default), and audited
	// (order.codes_read) before the codes are answered.
	var v application.OrderView
	if withCodes {
		v, err = s.sales.AdminOrderCodes(c.UserContext(), no, application.Reader{Identity: identityOf(c), ClientAddr: webkit.ClientIP(c)})
	} else {
		v, err = s.sales.AdminOrder(c.UserContext(), no)
	}
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(s.orderResponse(v.Order, v.Cards, true))
}

type refundRequest struct {
	Void    bool   `json:"void"`
	Recycle bool   `json:"recycle"`
	Reason  string `json:"reason"`
}

// refundResponse is the REFUNDED order and where its codes went.
type refundResponse struct {
	orderResponse
	CodesRecycled int                  `json:"codes_recycled"`
	CodesVoided   int                  `json:"codes_voided"`
	Money         *moneyRefundResponse `json:"money_refund,omitempty"`
}

// moneyRefundResponse is where the return of the order's money stands at its provider.
type moneyRefundResponse struct {
	Provider  string `json:"provider"`
	Status    string `json:"status"`
	RefundNo  string `json:"refund_no,omitempty"`
	RefundRef string `json:"refund_ref,omitempty"`
	Reason    string `json:"reason,omitempty"`
	ByHand    bool   `json:"by_hand"`
}

func (s *Server) refund(c *fiber.Ctx) error {
	no, err := orderParam(c)
	if err != nil {
		return err
	}
	var req refundRequest
	if err := s.decodeJSON(c, &req, true); err != nil {
		return err
	}
	res, err := s.payments.RefundOrder(c.UserContext(), application.Refund{OrderNo: no, Void: req.Void,
		Recycle: req.Recycle, Reason: req.Reason})
	if err != nil {
		return err
	}
	out := refundResponse{orderResponse: s.orderResponse(res.Order, nil, true),
		CodesRecycled: res.Recycled, CodesVoided: res.Voided}
	if m := res.Money; m.Provider != "" {
		out.Money = &moneyRefundResponse{Provider: string(m.Provider), Status: m.Status.String(), RefundNo: m.RefundNo,
			RefundRef: m.Ref, Reason: m.Reason, ByHand: m.ByHand}
	}
	if res.Money.Status == domain.PaymentRefunding {
		// The provider took the refund and finishes it later: the order stays as it is until
		// its notification (or the next refund) says the money is back.
		return c.Status(fiber.StatusAccepted).JSON(out)
	}
	return c.JSON(out)
}

func (s *Server) fulfil(c *fiber.Ctx) error {
	no, err := orderParam(c)
	if err != nil {
		return err
	}
	o, err := s.sales.FulfilOrder(c.UserContext(), no)
	if err != nil {
		return err
	}
	return c.JSON(s.orderResponse(o, nil, true))
}

// mailResent is the answer to a resend of an order's e-mail.
type mailResent struct {
	OrderNo string `json:"order_no"`
	Queued  bool   `json:"queued"`
}

// resendMail queues a paid guest order's e-mail again (202: the mail relay sends it).
func (s *Server) resendMail(c *fiber.Ctx) error {
	no, err := orderParam(c)
	if err != nil {
		return err
	}
	if err := s.sales.ResendOrderMail(c.UserContext(), no, identityOf(c)); err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(mailResent{OrderNo: string(no), Queued: true})
}

type tokenRequest struct {
	BuyerID    string `json:"buyer_id"`
	TTLSeconds int64  `json:"ttl_seconds"`
}

type tokenResponse struct {
	Token     string    `json:"token"`
	BuyerID   string    `json:"buyer_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// issueToken issues a buyer token (default lifetime 24 h).
func (s *Server) issueToken(c *fiber.Ctx) error {
	var req tokenRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		return err
	}
	ttl := 24 * time.Hour
	if req.TTLSeconds < 0 || req.TTLSeconds > int64(authtoken.MaxTTL/time.Second) {
		return domain.Invalid("ttl_seconds", "must be between 1 and 2592000")
	}
	if req.TTLSeconds != 0 {
		ttl = time.Duration(req.TTLSeconds) * time.Second
	}
	tok, exp, err := s.tokens.Issue(domain.BuyerID(req.BuyerID), s.clock.Now(), ttl)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(tokenResponse{Token: tok, BuyerID: req.BuyerID, ExpiresAt: exp})
}
