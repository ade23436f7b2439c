package console

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// exportsData is the export page: the form's choices and the values it was sent with.
type exportsData struct {
	Products []domain.Product
	Statuses []domain.OrderStatus
	Form     exportForm
	Columns  []string
	// CanExport is false for a role that may not export (the form is not shown).
	CanExport bool
}

// exportForm is the export form as sent: local dates (YYYY-MM-DD) in the operator's zone, both
// included, and the optional product, status and provider.
type exportForm struct {
	From, To, Product, Status, Provider string
}

const formDateLayout = "2006-01-02"

// filter reads the form as an export filter in loc: From at the first day's local midnight, To
// at the midnight after the last day (the last day is included). Every bad field is a
// ValidationError.
func (f exportForm) filter(loc *time.Location) (domain.ExportFilter, error) {
	var out domain.ExportFilter
	day := func(s, field string) (time.Time, error) {
		if s == "" {
			return time.Time{}, nil
		}
		t, err := time.ParseInLocation(formDateLayout, s, loc)
		if err != nil {
			return time.Time{}, domain.Invalid(field, "must be a date, YYYY-MM-DD")
		}
		return t, nil
	}
	var err error
	if out.From, err = day(f.From, "from"); err != nil {
		return out, err
	}
	to, err := day(f.To, "to")
	if err != nil {
		return out, err
	}
	if !to.IsZero() {
		y, m, d := to.Date()
		out.To = time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
	if f.Product != "" {
		id, err := strconv.ParseInt(f.Product, 10, 64)
		if err != nil || id < 1 {
			return out, domain.Invalid("product_id", "must be a positive integer")
		}
		out.Product = domain.ProductID(id)
	}
	if f.Status != "" {
		if out.Status, err = domain.ParseOrderStatus(f.Status); err != nil {
			return out, domain.Invalid("status", "unknown order status")
		}
	}
	if f.Provider != "" {
		if out.Provider, err = domain.ParseProvider(f.Provider); err != nil {
			return out, err
		}
	}
	out.Limit = application.ExportPageSize
	return out, out.Check()
}

func (k *console) exportsPage(c *fiber.Ctx) error {
	return k.renderExports(c, fiber.StatusOK, exportForm{}, "")
}

func (k *console) renderExports(c *fiber.Ctx, status int, f exportForm, errMsg string) error {
	ps, err := k.catalogue.Products(c.UserContext())
	if err != nil {
		return k.fail(c, err)
	}
	d := exportsData{Products: ps, Statuses: domain.AllOrderStatuses, Form: f, Columns: application.ExportColumns,
		CanExport: identityOf(c).Role.Allows(roleOf(application.ActionOrdersExport))}
	return k.render(c, status, "exports", view{Title: "console.money.export_title", Error: errMsg, Data: d})
}

// exportOrders answers the orders the form selects as a CSV attachment (application.Reports.
// ExportOrders: a BOM, oldest first, no code, formulas defused), streamed: the rows are written
// page by page as the ledger yields them, so the answer's size never sits in memory. The export
// is recorded in the audit log with its filter before the first row is sent; a form that does
// not parse is refused (and recorded) and nothing is sent.
func (k *console) exportOrders(c *fiber.Ctx) error {
	f := exportForm{From: formValue(c, "from"), To: formValue(c, "to"), Product: formValue(c, "product_id"),
		Status: formValue(c, "status"), Provider: formValue(c, "provider")}
	params := map[string]string{"from": f.From, "to": f.To, "product_id": f.Product, "status": f.Status, "provider": f.Provider}
	loc := k.zone(c)
	filter, err := f.filter(loc)
	if err != nil {
		k.record(c, application.ActionOrdersExport, params, err)
		var ve *domain.ValidationError
		msg := "console.money.export_bad_form"
		if errors.As(err, &ve) {
			msg = ve.Error()
		}
		return k.renderExports(c, fiber.StatusBadRequest, f, msg)
	}
	k.record(c, application.ActionOrdersExport, params, nil)
	name := "orders-" + k.clock.Now().In(loc).Format("20060102-150405") + ".csv"
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	ctx := context.WithoutCancel(c.UserContext())
	log := k.log
	reports := k.reports
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		n, err := reports.ExportOrders(ctx, filter, loc, w)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			// The status is sent already: the file ends early, and the log says why.
			log.ErrorContext(ctx, "console: export cut short", "rows", n, "err", err)
		}
	})
	return nil
}
