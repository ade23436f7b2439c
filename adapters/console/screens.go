package console

import (
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// productRow is one product as the home and product list show it: the ledger's product, what
// the public catalogue says of it (its status), and its gate's numbers (stock left, sold).
type productRow struct {
	Product domain.Product
	Item    application.CatalogueItem
	Listed  bool
	Gate    domain.GateLevels
	GateOK  bool
}

// productRows lists the products with the catalogue's status and the gate's numbers of each:
// the catalogue snapshot is a read of memory, the gate one round trip for all the products.
func (k *console) productRows(c *fiber.Ctx) ([]productRow, domain.Currency, error) {
	ps, err := k.catalogue.Products(c.UserContext())
	if err != nil {
		return nil, domain.Currency{}, err
	}
	snap, err := k.sales.Catalogue(c.UserContext())
	if err != nil {
		return nil, domain.Currency{}, err
	}
	ids := make([]domain.ProductID, len(ps))
	for i, p := range ps {
		ids[i] = p.ID()
	}
	levels, err := k.catalogue.StockLevels(c.UserContext(), ids...)
	if err != nil {
		return nil, domain.Currency{}, err
	}
	rows := make([]productRow, len(ps))
	for i, p := range ps {
		it, ok := snap.Item(p.ID())
		rows[i] = productRow{Product: p, Item: it, Listed: ok}
		rows[i].Gate, rows[i].GateOK = levels[p.ID()]
	}
	return rows, k.sales.Currency(), nil
}

type productsData struct {
	Rows     []productRow
	Currency domain.Currency
}

// homeData is the overview: the products, and how many alerts are open.
type homeData struct {
	productsData
	OpenAlerts int64
}

func (k *console) home(c *fiber.Ctx) error {
	rows, cur, err := k.productRows(c)
	if err != nil {
		return k.fail(c, err)
	}
	open, err := k.operators.OpenAlerts(c.UserContext())
	if err != nil {
		return k.fail(c, err)
	}
	d := homeData{productsData: productsData{rows, cur}}
	for _, n := range open {
		d.OpenAlerts += n
	}
	return k.render(c, fiber.StatusOK, "home", view{Title: "console.home.title", Data: d})
}

func (k *console) products(c *fiber.Ctx) error {
	rows, cur, err := k.productRows(c)
	if err != nil {
		return k.fail(c, err)
	}
	return k.render(c, fiber.StatusOK, "products", view{Title: "console.products.title", Data: productsData{rows, cur}})
}

type productData struct {
	Product  domain.Product
	Currency domain.Currency
	Gate     domain.GateLevels
	GateOK   bool
}

func productID(c *fiber.Ctx) (domain.ProductID, error) {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, domain.ErrProductNotFound
	}
	return domain.ProductID(id), nil
}

// product shows one product with its gate's numbers (stock left, sold).
func (k *console) product(c *fiber.Ctx) error {
	return k.productPage(c, fiber.StatusOK, "", "")
}

func (k *console) productPage(c *fiber.Ctx, status int, errMsg, notice string) error {
	id, err := productID(c)
	if err != nil {
		return k.fail(c, err)
	}
	p, err := k.catalogue.Product(c.UserContext(), id)
	if err != nil {
		return k.fail(c, err)
	}
	d := productData{Product: p, Currency: k.sales.Currency()}
	levels, err := k.catalogue.StockLevels(c.UserContext(), id)
	if err != nil {
		return k.fail(c, err)
	}
	d.Gate, d.GateOK = levels[id]
	return k.render(c, status, "product", view{Title: p.Name(), Error: errMsg, Notice: notice, Data: d})
}

// freeze takes a product off sale with a reason; the product page answers with the outcome.
// The console asks for the reason (the API defaults it): a person freezing from a browser can
// say why, and the next operator reads it on the product page.
func (k *console) freeze(c *fiber.Ctx) error {
	reason := strings.TrimSpace(formValue(c, "reason"))
	id, err := productID(c)
	if err == nil && reason == "" {
		err = invalid("reason", "console.err.freeze_reason")
	}
	if err == nil {
		err = k.catalogue.FreezeProduct(c.UserContext(), id, reason)
	}
	k.record(c, "product.freeze", map[string]string{"reason": reason}, err)
	return k.afterProductWrite(c, err, "console.product.frozen_notice")
}

func (k *console) unfreeze(c *fiber.Ctx) error {
	id, err := productID(c)
	if err == nil {
		err = k.catalogue.UnfreezeProduct(c.UserContext(), id)
	}
	k.record(c, "product.unfreeze", nil, err)
	return k.afterProductWrite(c, err, "console.product.unfrozen_notice")
}

// afterProductWrite shows the product page with the write's outcome: its error (with the
// status the API would answer) or the notice.
func (k *console) afterProductWrite(c *fiber.Ctx, err error, notice string) error {
	if err != nil {
		status, msg := k.explain(c, err)
		if status == fiber.StatusNotFound || status >= 500 {
			return k.fail(c, err)
		}
		return k.productPage(c, status, msg, "")
	}
	return k.productPage(c, fiber.StatusOK, "", notice)
}

type orderData struct {
	Order    domain.Order
	Currency domain.Currency
	Payments []domain.Payment
	Action   string // on a confirmation page: "refund" or "fulfil"
	// Refused is why a fulfil cannot be done now (the order's refund is under way, or it is not
	// UNFULFILLED): the confirmation page says so and offers no button, the order's page (of an
	// UNFULFILLED order) shows it instead of the link.
	Refused string
	// On the order's page: its flow rows, callback log and delivery messages (orderHistory).
	Flow       []domain.FlowEntry
	Notices    []domain.NotificationRecord
	Deliveries []domain.OutboxRecord
	// GivenUp holds the ids of the order's e-mails the mail relay gave up (Sales.MailGivenUp).
	GivenUp map[int64]bool
	// On the order's page (orderHistory): the product's name, the order's manual payment
	// confirmations, whether one may be made now, and whether a refund applies (the link is
	// shown only then).
	ProductName string
	Manual      []domain.ManualPayment
	CanConfirm  bool
	CanRefund   bool
}

// loadOrder reads an order for a page, never with its codes: the console shows no code to
// anyone (reading them is a reveal, which voids them on a refund; the API serves them).
func (k *console) loadOrder(c *fiber.Ctx) (orderData, error) {
	no, err := domain.ParseOrderNo(c.Params("order_no"))
	if err != nil {
		return orderData{}, domain.ErrOrderNotFound
	}
	v, err := k.sales.AdminOrder(c.UserContext(), no)
	if err != nil {
		return orderData{}, err
	}
	pays, err := k.payments.OrderPayments(c.UserContext(), no)
	if err != nil {
		return orderData{}, err
	}
	return orderData{Order: v.Order, Currency: k.sales.Currency(), Payments: pays}, nil
}

func (k *console) order(c *fiber.Ctx) error { return k.orderPage(c, fiber.StatusOK, "", "") }

func (k *console) orderPage(c *fiber.Ctx, status int, errMsg, notice string) error {
	d, err := k.loadOrder(c)
	if err == nil {
		err = k.orderHistory(c, &d)
	}
	if err == nil && d.Order.Status() == domain.StatusUnfulfilled {
		err = k.refusedFulfil(c, &d)
	}
	if err != nil {
		return k.fail(c, err)
	}
	return k.render(c, status, "order", view{Title: k.tr(c, "console.order.title", "No", string(d.Order.No())), Error: errMsg, Notice: notice, Data: d})
}

// confirm is the confirmation page of a refund or a fulfil: a GET changes nothing, its form's
// POST does the thing.
func (k *console) confirm(c *fiber.Ctx, action string) error {
	d, err := k.loadOrder(c)
	if err != nil {
		return k.fail(c, err)
	}
	d.Action = action
	if action == "fulfil" {
		if err := k.refusedFulfil(c, &d); err != nil {
			return k.fail(c, err)
		}
	}
	return k.render(c, fiber.StatusOK, "confirm", view{Title: k.tr(c, "console.confirm.title_"+action, "No", string(d.Order.No())), Data: d})
}

// refusedFulfil sets d.Refused to why the order cannot be fulfilled now, in the API's words;
// it answers only an error reading the order's payments.
func (k *console) refusedFulfil(c *fiber.Ctx, d *orderData) error {
	err := k.sales.FulfilRefusal(c.UserContext(), d.Order)
	if err == nil {
		return nil
	}
	status, msg := k.explain(c, err)
	if status >= 500 {
		return err
	}
	d.Refused = msg
	return nil
}

func (k *console) confirmRefund(c *fiber.Ctx) error { return k.refundConfirmation(c) }
func (k *console) confirmFulfil(c *fiber.Ctx) error { return k.confirm(c, "fulfil") }

// refund refunds an order (admin) through the refund use case: codes voided or recycled as
// chosen, the money returned at the provider when it was paid there.
func (k *console) refund(c *fiber.Ctx) error {
	params := map[string]string{"reason": formValue(c, "reason"), "void": formValue(c, "void"), "recycle": formValue(c, "recycle")}
	no, err := domain.ParseOrderNo(c.Params("order_no"))
	if err != nil {
		err = domain.ErrOrderNotFound
	}
	var res application.RefundResult
	if err == nil {
		res, err = k.payments.RefundOrder(c.UserContext(), application.Refund{OrderNo: no, Reason: params["reason"],
			Void: params["void"] == "on", Recycle: params["recycle"] == "on"})
	}
	k.record(c, "order.refund", params, err)
	return k.afterOrderWrite(c, err, k.refundNotice(c, res))
}

// refundNotice says what a refund did: where the codes went and where the money stands, so
// the operator knows whether anything is left to do by hand.
func (k *console) refundNotice(c *fiber.Ctx, r application.RefundResult) string {
	if r.Money.Status == domain.PaymentRefunding {
		return k.tr(c, "console.refund.under_way", "Provider", r.Money.Provider, "RefundNo", r.Money.RefundNo,
			"Status", k.text(k.lang(c), "console.order_status."+r.Order.Status().String()))
	}
	msg := k.tr(c, "console.refund.done", "Voided", r.Voided, "Recycled", r.Recycled)
	switch {
	case r.Money.Provider == "":
		return msg + k.tr(c, "console.refund.storefront")
	case r.Money.ByHand:
		return msg + k.tr(c, "console.refund.by_hand", "Provider", r.Money.Provider)
	}
	return msg + k.tr(c, "console.refund.money", "Provider", r.Money.Provider,
		"Status", k.text(k.lang(c), "console.payment_status."+r.Money.Status.String()))
}

// fulfil retries an UNFULFILLED order (operator) through the fulfil use case, once stock is
// there again.
func (k *console) fulfil(c *fiber.Ctx) error {
	no, err := domain.ParseOrderNo(c.Params("order_no"))
	if err != nil {
		err = domain.ErrOrderNotFound
	} else {
		_, err = k.sales.FulfilOrder(c.UserContext(), no)
	}
	k.record(c, "order.fulfil", nil, err)
	return k.afterOrderWrite(c, err, "console.order.fulfilled")
}

// resendMail queues a paid guest order's e-mail again: the same e-mail, through the outbox.
func (k *console) resendMail(c *fiber.Ctx) error {
	no, err := domain.ParseOrderNo(c.Params("order_no"))
	if err != nil {
		err = domain.ErrOrderNotFound
	} else {
		err = k.sales.ResendOrderMail(c.UserContext(), no, identityOf(c))
	}
	k.record(c, application.ActionMailResent, nil, err)
	return k.afterOrderWrite(c, err, "console.order.mail_queued")
}

func (k *console) afterOrderWrite(c *fiber.Ctx, err error, notice string) error {
	if err != nil {
		status, msg := k.explain(c, err)
		if status == fiber.StatusNotFound || status >= 500 {
			return k.fail(c, err)
		}
		return k.orderPage(c, status, msg, "")
	}
	return k.orderPage(c, fiber.StatusOK, "", notice)
}

// auditPageSize is one page of the audit log in the console.
const auditPageSize = 50

type auditData struct {
	Entries      []domain.AuditEntry
	Operator     string
	Action       string
	From, To     string
	NextBeforeID int64
}

// audit lists the audit log, newest first, filtered by operator, action and a time range (in
// the operator's zone, as the page shows times), paged by before_id.
func (k *console) audit(c *fiber.Ctx) error {
	d := auditData{Operator: c.Query("operator"), Action: c.Query("action"), From: c.Query("from"), To: c.Query("to")}
	f := domain.AuditFilter{Operator: domain.OperatorName(d.Operator), Action: d.Action, Limit: auditPageSize}
	var err error
	loc := k.zone(c)
	if f.From, err = formTime(d.From, "from", loc); err == nil {
		f.To, err = formTime(d.To, "to", loc)
	}
	if err == nil && c.Query("before_id") != "" {
		if f.BeforeID, err = strconv.ParseInt(c.Query("before_id"), 10, 64); err != nil || f.BeforeID < 1 {
			err = invalid("before_id", "console.err.positive_id")
		}
	}
	if err != nil {
		_, msg := k.explain(c, err)
		return k.render(c, fiber.StatusBadRequest, "audit", view{Title: "console.nav.audit", Error: msg, Data: d})
	}
	if d.Entries, err = k.operators.AuditLog(c.UserContext(), f); err != nil {
		return k.fail(c, err)
	}
	if n := len(d.Entries); n == auditPageSize {
		d.NextBeforeID = d.Entries[n-1].ID
	}
	return k.render(c, fiber.StatusOK, "audit", view{Title: "console.nav.audit", Data: d})
}

// formTimeLayout is an HTML datetime-local input's value; the console reads it in the
// operator's zone.
const formTimeLayout = "2006-01-02T15:04"

// formTime reads an optional time from a form (datetime-local, with or without seconds) as a
// time in loc, the zone the page shows times in. A wall time that a clock change skips is
// read as time.Date reads it (moved forward by the gap); a repeated one as its first instant.
func formTime(s, field string, loc *time.Location) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{formTimeLayout, formTimeLayout + ":05"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, invalid(field, "console.err.date_time", "Zone", loc.String())
}
