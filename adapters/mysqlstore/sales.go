package mysqlstore

import (
	"context"
	"strconv"
	"strings"

	"cardshop/domain"
)

var _ domain.SalesReport = (*Ledger)(nil)

// confirmedProvider is the provider of an order's confirmed payment (domain.RevenueLine), ”
// when it has none: a look-up by the primary key's prefix (order_no) of payments.
const confirmedProvider = "COALESCE((SELECT MIN(p.provider) FROM payments p WHERE p.order_no = o.order_no " +
	"AND p.status IN ('PAID','REFUNDING','REFUNDED','REFUND_FAILED')), '')"

type revenueRow struct {
	Bucket   int    `bun:"bucket"`
	Product  int64  `bun:"product_id"`
	Provider string `bun:"provider"`
	Paid     int64  `bun:"paid"`
	Revenue  int64  `bun:"revenue"`
	Refunds  int64  `bun:"refunds"`
	Refunded int64  `bun:"refunded"`
}

// Revenue sums in one aggregate query: the orders paid in the range (idx_paid) and those
// refunded in it (idx_refunded), each placed in its bucket by a CASE over the edges, grouped by
// bucket, product and provider. No order is read into Go.
func (l *Ledger) Revenue(ctx context.Context, q domain.RevenueQuery) ([]domain.RevenueLine, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	first, last := q.Edges[0].UTC(), q.Edges[len(q.Edges)-1].UTC()
	bucket := func(col string) (string, []any) {
		if len(q.Edges) == 2 {
			return "0", nil // one bucket: a CASE needs a WHEN
		}
		var b strings.Builder
		var args []any
		b.WriteString("CASE")
		for i, e := range q.Edges[1 : len(q.Edges)-1] {
			b.WriteString(" WHEN " + col + " < ? THEN ")
			b.WriteString(strconv.Itoa(i))
			args = append(args, e.UTC())
		}
		b.WriteString(" ELSE " + strconv.Itoa(len(q.Edges)-2) + " END")
		return b.String(), args
	}
	paidCase, paidArgs := bucket("o.paid_at")
	endCase, endArgs := bucket("o.ended_at")
	query := "SELECT bucket, product_id, provider, SUM(paid) AS paid, SUM(revenue) AS revenue, " +
		"SUM(refunds) AS refunds, SUM(refunded) AS refunded FROM (" +
		"SELECT " + paidCase + " AS bucket, o.product_id, " + confirmedProvider + " AS provider, " +
		"1 AS paid, o.amount AS revenue, 0 AS refunds, 0 AS refunded " +
		"FROM orders o FORCE INDEX (idx_paid) WHERE o.paid_at >= ? AND o.paid_at < ? " +
		"UNION ALL " +
		"SELECT " + endCase + " AS bucket, o.product_id, " + confirmedProvider + " AS provider, " +
		"0, 0, 1, o.amount " +
		"FROM orders o FORCE INDEX (idx_refunded) WHERE o.status = 'REFUNDED' AND o.ended_at >= ? AND o.ended_at < ?" +
		") x GROUP BY bucket, product_id, provider"
	args := append(paidArgs, first, last)
	args = append(append(args, endArgs...), first, last)
	var rows []revenueRow
	if err := l.root.get(ctx, "revenue", &rows, query, args...); err != nil {
		return nil, err
	}
	out := make([]domain.RevenueLine, len(rows))
	for i, r := range rows {
		out[i] = domain.RevenueLine{Bucket: r.Bucket, Product: domain.ProductID(r.Product), Provider: domain.Provider(r.Provider),
			Paid: r.Paid, Revenue: domain.Money(r.Revenue), Refunds: r.Refunds, Refunded: domain.Money(r.Refunded)}
	}
	return out, nil
}

type exportRow struct {
	orderRow
	Provider    string `bun:"x_provider"`
	ProviderRef string `bun:"x_provider_ref"`
}

// exportColumns are orderColumns of the orders table o.
var exportColumns = "o." + strings.ReplaceAll(orderColumns, ", ", ", o.")

// ExportPage reads one page in (created_at, order_no) order after the cursor: a range of
// idx_created (or of idx_product_status with a product and a status), never an offset, so the
// thousandth page costs what the first does.
func (l *Ledger) ExportPage(ctx context.Context, f domain.ExportFilter) ([]domain.ExportRow, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	var conds []string
	var args []any
	add := func(cond string, a ...any) {
		conds = append(conds, cond)
		args = append(args, a...)
	}
	if f.Product != 0 {
		add("o.product_id = ?", int64(f.Product))
	}
	if f.Status != 0 {
		add("o.status = ?", f.Status.String())
	}
	if !f.From.IsZero() {
		add("o.created_at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		add("o.created_at < ?", f.To.UTC())
	}
	if !f.After.IsZero() {
		at := f.After.CreatedAt.UTC()
		add("o.created_at >= ? AND (o.created_at > ? OR o.order_no > ?)", at, at, string(f.After.No))
	}
	if f.Provider != "" {
		add("EXISTS (SELECT 1 FROM payments f WHERE f.order_no = o.order_no AND f.provider = ?)", string(f.Provider))
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	query := "SELECT " + exportColumns + ", COALESCE(c.provider, '') AS x_provider, COALESCE(c.provider_ref, '') AS x_provider_ref " +
		"FROM orders o LEFT JOIN payments c ON c.order_no = o.order_no AND c.provider = " + confirmedProvider +
		where + " ORDER BY o.created_at, o.order_no LIMIT ?"
	var rows []exportRow
	if err := l.root.get(ctx, "export orders", &rows, query, append(args, f.Limit)...); err != nil {
		return nil, err
	}
	out := make([]domain.ExportRow, len(rows))
	for i, r := range rows {
		o, err := r.order()
		if err != nil {
			return nil, err
		}
		out[i] = domain.ExportRow{Order: o, Provider: domain.Provider(r.Provider), ProviderRef: r.ProviderRef}
	}
	return out, nil
}
