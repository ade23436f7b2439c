package console

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// orderPageSize is one page of the order search in the console.
const orderPageSize = 50

// maxOrderTrail bounds how many newer pages' cursors a search's links carry back.
const maxOrderTrail = 50

// ordersData is the order search page: the form as sent (so it shows what was asked), the
// products to choose from, the page of orders and the links' cursors.
type ordersData struct {
	Buyer       string
	Email       string
	Ref         string
	NoPrefix    string
	Product     string
	Statuses    map[string]bool
	From, To    string
	Products    []domain.Product
	AllStatuses []domain.OrderStatus
	Orders      []domain.Order
	Currency    domain.Currency
	Searched    bool
	// Older is the query of the next (older) page, Newer of the previous one; "" when none.
	Older, Newer string
}

// orderLookup is the order search. An order number typed in goes straight to its page;
// otherwise the orders the filters select (buyer, product, statuses, a creation window read
// in the operator's zone) are listed newest first, a page at a time. The Older link carries the page's
// cursor, and a trail of the cursors of the newer pages so that Newer can go back one page.
func (k *console) orderLookup(c *fiber.Ctx) error {
	d := k.ordersForm(c)
	if q := strings.TrimSpace(c.Query("no")); q != "" {
		no, err := domain.ParseOrderNo(q)
		if err != nil {
			return k.ordersPage(c, fiber.StatusBadRequest, "console.support.orders.bad_no", d)
		}
		// A whole number goes to its order; anything shorter is the start of numbers.
		if _, err := k.sales.AdminOrder(c.UserContext(), no); err == nil {
			return c.Redirect("/console/orders/"+string(no), fiber.StatusSeeOther)
		} else if !errors.Is(err, domain.ErrOrderNotFound) {
			return k.fail(c, err)
		}
		d.NoPrefix = q
	}
	f, trail, err := orderSearch(c, d, k.zone(c))
	if err != nil {
		_, msg := k.explain(c, err)
		return k.ordersPage(c, fiber.StatusBadRequest, msg, d)
	}
	if d.Orders, err = k.sales.SearchOrders(c.UserContext(), f); err != nil {
		return k.fail(c, err)
	}
	d.Searched = true
	base := d.query()
	if n := len(d.Orders); n == f.Limit {
		next := append(append([]string(nil), trail...), f.After.String())
		if len(next) > maxOrderTrail {
			next = next[len(next)-maxOrderTrail:]
		}
		d.Older = withCursor(base, domain.CursorOf(d.Orders[n-1]).String(), next)
	}
	if !f.After.IsZero() {
		newer := ""
		if len(trail) > 0 {
			newer, trail = trail[len(trail)-1], trail[:len(trail)-1]
		}
		d.Newer = withCursor(base, newer, trail)
	}
	return k.ordersPage(c, fiber.StatusOK, "", d)
}

// ordersForm is the search form as the request sent it.
func (k *console) ordersForm(c *fiber.Ctx) ordersData {
	d := ordersData{Buyer: strings.TrimSpace(c.Query("buyer")), Email: strings.TrimSpace(c.Query("email")),
		Ref: strings.TrimSpace(c.Query("ref")), NoPrefix: strings.TrimSpace(c.Query("prefix")), Product: c.Query("product"), From: c.Query("from"),
		To: c.Query("to"), Statuses: map[string]bool{}, AllStatuses: domain.AllOrderStatuses, Currency: k.sales.Currency()}
	for _, s := range c.Context().QueryArgs().PeekMulti("status") {
		d.Statuses[string(s)] = true
	}
	return d
}

// orderSearch reads the filter, the cursor and the trail of newer pages' cursors from the
// query; every error is a ValidationError naming the field.
func orderSearch(c *fiber.Ctx, d ordersData, loc *time.Location) (domain.OrderFilter, []string, error) {
	f := domain.OrderFilter{Buyer: domain.BuyerID(d.Buyer), NoPrefix: d.NoPrefix, ProviderRef: d.Ref, Limit: orderPageSize}
	var err error
	if d.Email != "" {
		if f.Email, err = domain.ParseEmail(d.Email); err != nil {
			return f, nil, err
		}
	}
	if d.Product != "" {
		id, err := strconv.ParseInt(d.Product, 10, 64)
		if err != nil || id < 1 {
			return f, nil, domain.Invalid("product", "choose a product from the list")
		}
		f.Product = domain.ProductID(id)
	}
	for _, st := range domain.AllOrderStatuses {
		if d.Statuses[st.String()] {
			f.Statuses = append(f.Statuses, st)
		}
	}
	if len(f.Statuses) != len(d.Statuses) {
		return f, nil, domain.Invalid("status", "choose statuses from the list")
	}
	if f.From, err = formTime(d.From, "from", loc); err != nil {
		return f, nil, err
	}
	if f.To, err = formTime(d.To, "to", loc); err != nil {
		return f, nil, err
	}
	if f.After, err = domain.ParseOrderCursor(c.Query("cursor")); err != nil {
		return f, nil, err
	}
	var trail []string
	if t := c.Query("trail"); t != "" || !f.After.IsZero() {
		trail = strings.Split(t, ",")
		for _, s := range trail {
			if _, err := domain.ParseOrderCursor(s); err != nil {
				return f, nil, err
			}
		}
	}
	return f, trail, f.Check()
}

// query is the search's filters as a query string, for the paging links.
func (d ordersData) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"buyer": d.Buyer, "email": d.Email, "ref": d.Ref, "prefix": d.NoPrefix,
		"product": d.Product, "from": d.From, "to": d.To} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for _, st := range domain.AllOrderStatuses {
		if d.Statuses[st.String()] {
			q.Add("status", st.String())
		}
	}
	return q
}

// withCursor is the search's link to the page after cursor ("": the first), carrying trail.
func withCursor(base url.Values, cursor string, trail []string) string {
	q := url.Values{}
	for k, v := range base {
		q[k] = v
	}
	if cursor != "" {
		q.Set("cursor", cursor)
		q.Set("trail", strings.Join(trail, ","))
	}
	return "/console/orders?" + q.Encode()
}

// ordersPage renders the search with the products to choose from.
func (k *console) ordersPage(c *fiber.Ctx, status int, errMsg string, d ordersData) error {
	ps, err := k.catalogue.Products(c.UserContext())
	if err != nil {
		return k.fail(c, err)
	}
	d.Products = ps
	return k.render(c, status, "orders", view{Title: "console.support.orders.title", Error: errMsg, Data: d})
}

// notificationsShown is how many of an order's provider notifications its page shows.
const notificationsShown = 50

// orderHistory adds to d what an order's page shows beyond the order and its payments: its
// flow rows, the provider notifications about it, and its delivery messages (to the broker
// and to the storefront's webhook), none of which holds a code.
func (k *console) orderHistory(c *fiber.Ctx, d *orderData) error {
	ctx, no := c.UserContext(), d.Order.No()
	var err error
	if d.Flow, err = k.sales.OrderFlow(ctx, no); err != nil {
		return err
	}
	if d.Notices, err = k.payments.Notifications(ctx, domain.NotificationQuery{OrderNo: no, Limit: notificationsShown}); err != nil {
		return err
	}
	if d.Deliveries, err = k.sales.OrderDeliveries(ctx, no); err != nil {
		return err
	}
	if p, err := k.catalogue.Product(ctx, d.Order.Product()); err == nil {
		d.ProductName = p.Name()
	} else if !errors.Is(err, domain.ErrProductNotFound) {
		return err
	}
	if d.Manual, err = k.payments.ManualPayments(ctx, no); err != nil {
		return err
	}
	d.CanConfirm = application.ManualPaymentApplies(d.Order)
	d.CanRefund = application.RefundApplies(d.Order)
	d.GivenUp = map[int64]bool{}
	for _, r := range d.Deliveries {
		if k.sales.MailGivenUp(r) {
			d.GivenUp[r.ID] = true
		}
	}
	return nil
}

// manualData is the manual confirmation's page: the order, the form as sent, the providers
// configured here (suggested, not imposed: money may arrive through a provider cardshop does
// not drive), and whether the provider's refusal may be overridden (an admin's).
type manualData struct {
	orderData
	Provider, Reference, Note, Override string
	Providers                           []domain.Provider
	CanOverride                         bool
	// Unconfirmed is set after the provider did not confirm the payment: the page then asks
	// an admin for the override's reason.
	Unconfirmed bool
}

// manualPaymentForm shows the manual confirmation's form (补单), or why the order cannot take one.
func (k *console) manualPaymentForm(c *fiber.Ctx) error {
	return k.manualPaymentPage(c, fiber.StatusOK, "", manualData{})
}

func (k *console) manualPaymentPage(c *fiber.Ctx, status int, errMsg string, m manualData) error {
	d, err := k.loadOrder(c)
	if err != nil {
		return k.fail(c, err)
	}
	m.orderData = d
	m.CanConfirm = application.ManualPaymentApplies(d.Order)
	m.Providers = k.payments.Providers()
	m.CanOverride = identityOf(c).Role.Allows(domain.RoleAdmin)
	return k.render(c, status, "manualpay", view{Title: "console.support.manual.title", Error: errMsg, Data: m})
}

// confirmPayment marks the order paid by hand through the use case (ConfirmPaymentManually):
// the provider is asked first; an admin may override its refusal with a reason.
func (k *console) confirmPayment(c *fiber.Ctx) error {
	m := manualData{Provider: formValue(c, "provider"), Reference: formValue(c, "reference"),
		Note: formValue(c, "note"), Override: formValue(c, "override")}
	params := map[string]string{"provider": m.Provider, "reference": m.Reference, "note": m.Note, "override": m.Override}
	no, err := domain.ParseOrderNo(c.Params("order_no"))
	if err != nil {
		err = domain.ErrOrderNotFound
	}
	var res application.ManualPaymentResult
	if err == nil {
		res, err = k.payments.ConfirmPaymentManually(c.UserContext(), application.ManualPaymentRequest{By: identityOf(c),
			OrderNo: no, Provider: m.Provider, Reference: m.Reference, Note: m.Note, Override: m.Override})
	}
	k.record(c, "order.confirm_payment", params, err)
	if err != nil {
		status, msg := k.supportError(c, err)
		if status == fiber.StatusNotFound || status >= 500 {
			return k.fail(c, err)
		}
		m.Unconfirmed = errors.Is(err, domain.ErrProviderUnpaid)
		return k.manualPaymentPage(c, status, msg, m)
	}
	notice := "console.support.manual.done_paid"
	if res.Order.Status() != domain.StatusPaid {
		notice = "console.support.manual.done_unfulfilled"
	}
	return k.orderPage(c, fiber.StatusOK, "", notice)
}

// refundData is the refund's confirmation page: the order, and what the refund would do with
// its codes and its money (application.PreviewRefund).
type refundData struct {
	orderData
	Preview application.RefundPreview
}

// refundConfirmation shows, before an admin refunds an order, how many codes would be voided or
// recycled under each choice and what the provider would be asked to return.
func (k *console) refundConfirmation(c *fiber.Ctx) error {
	d, err := k.loadOrder(c)
	if err != nil {
		return k.fail(c, err)
	}
	pv, err := k.payments.PreviewRefund(c.UserContext(), d.Order.No())
	if err != nil {
		return k.fail(c, err)
	}
	return k.render(c, fiber.StatusOK, "refundconfirm", view{Title: k.tr(c, "console.confirm.title_refund", "No", string(d.Order.No())),
		Data: refundData{orderData: d, Preview: pv}})
}
