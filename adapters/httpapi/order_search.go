package httpapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// defaultOrderPage is a page of GET /admin/orders without a limit.
const defaultOrderPage = 50

// searchOrders answers GET /admin/orders?buyer_id=&no_prefix=&email=&provider_ref=&product_id=&status=&from=&to=&cursor=&limit=:
// the orders the filters select (all of them must match), newest first, never with codes;
// next_cursor pages on ("" when this page is not full, so the last).
func (s *Server) searchOrders(c *fiber.Ctx) error {
	f, err := orderFilter(c)
	if err != nil {
		return err
	}
	orders, err := s.sales.SearchOrders(c.UserContext(), f)
	if err != nil {
		return err
	}
	out := struct {
		Orders     []orderResponse `json:"orders"`
		NextCursor string          `json:"next_cursor"`
	}{Orders: make([]orderResponse, len(orders))}
	for i, o := range orders {
		out.Orders[i] = s.orderResponse(o, nil, true)
	}
	if n := len(orders); n > 0 && n == f.Limit {
		out.NextCursor = domain.CursorOf(orders[n-1]).String()
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(out)
}

// orderFilter reads the search's query. status takes one or several statuses, comma-separated
// or repeated; from and to are RFC 3339 times.
func orderFilter(c *fiber.Ctx) (domain.OrderFilter, error) {
	f := domain.OrderFilter{Buyer: domain.BuyerID(c.Query("buyer_id")), NoPrefix: c.Query("no_prefix"),
		ProviderRef: c.Query("provider_ref"), Limit: defaultOrderPage}
	var err error
	if q := c.Query("email"); q != "" {
		if f.Email, err = domain.ParseEmail(q); err != nil {
			return f, err
		}
	}
	if q := c.Query("product_id"); q != "" {
		id, err := strconv.ParseInt(q, 10, 64)
		if err != nil || id < 1 {
			return f, domain.Invalid("product_id", "must be a positive integer")
		}
		f.Product = domain.ProductID(id)
	}
	for _, v := range c.Context().QueryArgs().PeekMulti("status") {
		for _, name := range strings.Split(string(v), ",") {
			if f.Statuses, err = appendStatus(f.Statuses, name); err != nil {
				return f, err
			}
		}
	}
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
	if f.After, err = domain.ParseOrderCursor(c.Query("cursor")); err != nil {
		return f, err
	}
	if q := c.Query("limit"); q != "" {
		if f.Limit, err = strconv.Atoi(q); err != nil || f.Limit < 1 || f.Limit > domain.MaxOrderPage {
			return f, domain.Invalid("limit", "must be from 1 to "+strconv.Itoa(domain.MaxOrderPage))
		}
	}
	return f, f.Check()
}

// appendStatus adds the named status (any case) to ss, refusing an unknown name or a repeat.
func appendStatus(ss []domain.OrderStatus, name string) ([]domain.OrderStatus, error) {
	st, err := domain.ParseOrderStatus(strings.ToUpper(strings.TrimSpace(name)))
	if err != nil {
		return ss, domain.Invalid("status", "must be PENDING, PAID, CLOSED, FAILED, REFUNDED or UNFULFILLED, each once")
	}
	for _, have := range ss {
		if have == st {
			return ss, domain.Invalid("status", "names "+st.String()+" twice")
		}
	}
	return append(ss, st), nil
}
