package httpapi

import (
	"bufio"
	"context"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/domain"
)

// exportOrders answers POST /admin/orders/export?from=&to=&product_id=&status=&provider= with
// the orders as CSV (application.Reports.ExportOrders), streamed: each page of orders is
// written as it is read. A query that does not parse is a 400 and nothing is read.
func (s *Server) exportOrders(c *fiber.Ctx) error {
	var f domain.ExportFilter
	var err error
	if f.From, err = queryTime(c, "from"); err != nil {
		return err
	}
	if f.To, err = queryTime(c, "to"); err != nil {
		return err
	}
	if v := c.Query("product_id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 1 {
			return domain.Invalid("product_id", "must be a positive integer")
		}
		f.Product = domain.ProductID(id)
	}
	if v := c.Query("status"); v != "" {
		if f.Status, err = domain.ParseOrderStatus(v); err != nil {
			return domain.Invalid("status", "unknown order status")
		}
	}
	if v := c.Query("provider"); v != "" {
		if f.Provider, err = domain.ParseProvider(v); err != nil {
			return err
		}
	}
	f.Limit = 1 // checked here with the export's own page size set by the export
	if err := f.Check(); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="orders-`+s.clock.Now().UTC().Format("20060102-150405")+`.csv"`)
	ctx, log, reports := context.WithoutCancel(c.UserContext()), s.log, s.reports
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		n, err := reports.ExportOrders(ctx, f, time.UTC, w)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			// The status is sent already: the file ends early, and the log says why.
			log.ErrorContext(ctx, "export cut short", "rows", n, "err", err)
		}
	})
	return nil
}

// queryTime reads an optional RFC 3339 time from the query.
func queryTime(c *fiber.Ctx, name string) (time.Time, error) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, domain.Invalid(name, "must be an RFC 3339 time")
	}
	return t, nil
}
