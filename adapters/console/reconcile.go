package console

import (
	"sort"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// reconcileData is a product's reconciliation as the console shows it: the use case's report
// (every check with its two sides), the gate's levels and the card pool's counts.
type reconcileData struct {
	Product domain.Product
	Report  application.Reconciliation
	Cards   []cardCount
	Confirm bool // the repair's confirmation page
}

// checkKeys are the message keys (console.check.<key>) of the reconciliation's checks
// (application.Reconcile names them): a page shows each in the operator's language, and a
// check without a key by its own name.
var checkKeys = map[string]string{
	"codes SOLD = qty of PAID orders":            "sold_paid",
	"codes SOLD + sellable = imported - voided":  "sold_sellable",
	"gate stock + gate sold = imported - voided": "gate_total",
	"gate sold = qty of PENDING and PAID orders": "gate_sold",
	"gate knows the product":                     "gate_known",
	"flow: imported":                             "flow_imported",
	"flow: voided":                               "flow_voided",
	"flow: sold":                                 "flow_sold",
	"flow: sellable":                             "flow_sellable",
	"flow: held by PENDING and PAID":             "flow_held",
	"flow: pending":                              "flow_pending",
	"flow: gate stock":                           "flow_gate_stock",
	"gate holding counts = qty of the buyers' orders (buyer_limit)": "holdings",
	"buyers whose gate holding count differs from their orders":     "holdings_differ",
}

type cardCount struct {
	Status string
	Count  int64
}

func (k *console) loadReconcile(c *fiber.Ctx, repair bool) (reconcileData, error) {
	id, err := productID(c)
	if err != nil {
		return reconcileData{}, err
	}
	p, err := k.catalogue.Product(c.UserContext(), id)
	if err != nil {
		return reconcileData{}, err
	}
	rep, err := k.catalogue.Reconcile(c.UserContext(), id, repair)
	if err != nil {
		return reconcileData{}, err
	}
	d := reconcileData{Product: p, Report: rep}
	for s, n := range rep.Cards {
		d.Cards = append(d.Cards, cardCount{s, n})
	}
	sort.Slice(d.Cards, func(i, j int) bool { return d.Cards[i].Status < d.Cards[j].Status })
	return d, nil
}

// reconcile shows the reconciliation of a product without repair: a read, changing nothing.
func (k *console) reconcile(c *fiber.Ctx) error {
	d, err := k.loadReconcile(c, false)
	if err != nil {
		return k.fail(c, err)
	}
	return k.render(c, fiber.StatusOK, "reconcile", view{Title: k.tr(c, "console.reconcile.title", "Name", d.Product.Name()), Data: d})
}

// confirmRepair is the repair's confirmation page (admin): the current report and the form
// whose POST repairs.
func (k *console) confirmRepair(c *fiber.Ctx) error {
	d, err := k.loadReconcile(c, false)
	if err != nil {
		return k.fail(c, err)
	}
	d.Confirm = true
	return k.render(c, fiber.StatusOK, "reconcile", view{Title: k.tr(c, "console.reconcile.confirm_title", "Name", d.Product.Name()), Data: d})
}

// repair rebuilds the product's gate from the ledger (admin), as the API's POST
// …/reconcile?repair=true does, recorded as product.repair with the same parameters, and
// shows the repaired state's report.
func (k *console) repair(c *fiber.Ctx) error {
	d, err := k.loadReconcile(c, true)
	k.record(c, "product.repair", map[string]string{"repair": "true"}, err)
	if err != nil {
		status, msg := k.explain(c, err)
		if status == fiber.StatusNotFound || status >= 500 {
			return k.fail(c, err)
		}
		return k.errorPage(c, status, msg)
	}
	notice := k.tr(c, "console.reconcile.repaired")
	if !d.Report.OK() {
		notice = k.tr(c, "console.reconcile.repaired_differ")
	}
	return k.render(c, fiber.StatusOK, "reconcile", view{Title: k.tr(c, "console.reconcile.title", "Name", d.Product.Name()), Notice: notice, Data: d})
}
