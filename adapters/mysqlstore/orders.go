package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"cardshop/domain"
)

type orderRepo struct{ s *store }

type orderRow struct {
	OrderNo    string    `bun:"order_no"`
	BuyerID    string    `bun:"buyer_id"`
	ProductID  int64     `bun:"product_id"`
	Qty        int       `bun:"qty"`
	UnitPrice  int64     `bun:"unit_price"`
	Amount     int64     `bun:"amount"`
	IdemKey    string    `bun:"idem_key"` // NULL reads as ""
	Status     string    `bun:"status"`
	Reason     string    `bun:"reason"`
	PaymentRef string    `bun:"payment_ref"`
	CreatedAt  time.Time `bun:"created_at"`
	ExpiresAt  time.Time `bun:"expires_at"`
	PaidAt     time.Time `bun:"paid_at"` // NULL reads as the zero time
	EndedAt    time.Time `bun:"ended_at"`
	UpdatedAt  time.Time `bun:"updated_at"`
	RevealedAt time.Time `bun:"revealed_at"` // NULL reads as the zero time
	// A guest order's address, language and secret's hash; NULL (empty) for an API order.
	BuyerEmail string `bun:"buyer_email"`
	BuyerLang  string `bun:"buyer_lang"`
	AccessHash []byte `bun:"access_hash"`
	Coupon     string `bun:"coupon"`
	Discount   int64  `bun:"discount"`
}

const orderColumns = "order_no, buyer_id, product_id, qty, unit_price, amount, idem_key, status, reason, " +
	"payment_ref, created_at, expires_at, paid_at, ended_at, updated_at, revealed_at, buyer_email, buyer_lang, access_hash, coupon, discount"

func (r orderRow) order() (domain.Order, error) {
	st, err := domain.ParseOrderStatus(r.Status)
	if err != nil {
		return domain.Order{}, fmt.Errorf("order %s: %w", r.OrderNo, err)
	}
	var hash domain.AccessHash
	if len(r.AccessHash) > 0 && copy(hash[:], r.AccessHash) != len(hash) {
		return domain.Order{}, fmt.Errorf("order %s: an access hash of %d bytes", r.OrderNo, len(r.AccessHash))
	}
	return domain.RehydrateOrder(domain.OrderRecord{No: domain.OrderNo(r.OrderNo), Buyer: domain.BuyerID(r.BuyerID),
		Product: domain.ProductID(r.ProductID), Qty: r.Qty, UnitPrice: domain.Money(r.UnitPrice),
		Amount: domain.Money(r.Amount), IdemKey: domain.IdempotencyKey(r.IdemKey), Status: st, Reason: r.Reason,
		PaymentRef: r.PaymentRef, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, PaidAt: r.PaidAt,
		EndedAt: r.EndedAt, UpdatedAt: r.UpdatedAt, RevealedAt: r.RevealedAt,
		Email: domain.Email(r.BuyerEmail), Lang: r.BuyerLang, AccessHash: hash,
		Coupon: domain.CouponCode(r.Coupon), Discount: domain.Money(r.Discount)}), nil
}

func (r orderRepo) Insert(ctx context.Context, o domain.Order) error {
	return insertOrders(ctx, r.s, fmt.Sprintf("insert order %s", o.No()), []domain.Order{o})
}

// insertOrders stores orders with one multi-row INSERT: all of them, or none when one is
// refused. A taken number is ErrDuplicateOrder and a taken buyer key
// ErrDuplicateIdempotencyKey, as the key the server names tells (with several rows, not
// which row).
func insertOrders(ctx context.Context, s *store, op string, orders []domain.Order) error {
	v := sqlValues{b: make([]byte, 0, 96+320*len(orders)), d: s.db.Dialect()}
	v.raw("INSERT INTO orders (" + orderColumns + ") VALUES ")
	for _, o := range orders {
		if o.No() == "" {
			return domain.Invalid("order_no", "required")
		}
		rec := o.Record()
		v.row()
		v.str(string(rec.No))
		v.str(string(rec.Buyer))
		v.int(int64(rec.Product))
		v.int(int64(rec.Qty))
		v.int(int64(rec.UnitPrice))
		v.int(int64(rec.Amount))
		v.nullStr(string(rec.IdemKey))
		v.str(rec.Status.String())
		v.str(rec.Reason)
		v.str(rec.PaymentRef)
		v.time(rec.CreatedAt)
		v.time(rec.ExpiresAt)
		v.nullTime(rec.PaidAt)
		v.nullTime(rec.EndedAt)
		v.time(rec.UpdatedAt)
		v.nullTime(rec.RevealedAt)
		v.nullStr(string(rec.Email))
		v.nullStr(rec.Lang)
		v.nullBytes(rec.AccessHash)
		v.str(string(rec.Coupon))
		v.int(int64(rec.Discount))
		v.end()
	}
	_, err := s.exec(ctx, op, string(v.b))
	if key, dup := duplicateKey(err); dup {
		// Told apart by the key the server names: the number is the primary key.
		if key == "uk_buyer_idem" {
			return fmt.Errorf("%s: %w", op, domain.ErrDuplicateIdempotencyKey)
		}
		return fmt.Errorf("%s: %w", op, domain.ErrDuplicateOrder)
	}
	return err
}

func (r orderRepo) one(ctx context.Context, op, where string, args ...any) (domain.Order, error) {
	var row orderRow
	err := r.s.get(ctx, op, &row, "SELECT "+orderColumns+" FROM orders WHERE "+where, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Order{}, fmt.Errorf("%s: %w", op, domain.ErrOrderNotFound)
	}
	if err != nil {
		return domain.Order{}, err
	}
	return row.order()
}

func (r orderRepo) Order(ctx context.Context, no domain.OrderNo) (domain.Order, error) {
	return r.one(ctx, fmt.Sprintf("order %s", no), "order_no = ?", string(no))
}

func (r orderRepo) OrderByKey(ctx context.Context, buyer domain.BuyerID, key domain.IdempotencyKey) (domain.Order, error) {
	op := fmt.Sprintf("order of buyer %s by key", buyer)
	if key == "" {
		return domain.Order{}, fmt.Errorf("%s: %w", op, domain.ErrOrderNotFound)
	}
	return r.one(ctx, op, "buyer_id = ? AND idem_key = ?", string(buyer), string(key))
}

// Transition is one conditional UPDATE; of racing transitions from the same status the row
// lock lets exactly one match. The order's identity (buyer, product, qty, key) is part of the
// condition, because a transition may not change it, and so is whether revealed_at is set,
// which it never writes: a reveal committed after o was read makes it lose. Only when nothing
// changed does it read the row, to tell an unknown order, a lost race and a change of
// identity apart.
func (r orderRepo) Transition(ctx context.Context, o domain.Order, from domain.OrderStatus) (bool, error) {
	rec := o.Record()
	op := fmt.Sprintf("transition order %s from %s to %s", rec.No, from, rec.Status)
	revealed := "revealed_at IS NULL"
	if o.Revealed() {
		revealed = "revealed_at IS NOT NULL"
	}
	// FORCE INDEX: with the identity in the condition the optimizer may walk
	// idx_product_status instead, locking a secondary-index record before the row, in another
	// order than every other statement on orders takes its locks.
	n, err := r.s.execN(ctx, op, "UPDATE orders FORCE INDEX (PRIMARY) SET status = ?, reason = ?, payment_ref = ?, paid_at = ?, ended_at = ?, updated_at = ? "+
		"WHERE order_no = ? AND status = ? AND buyer_id = ? AND product_id = ? AND qty = ? AND idem_key <=> ? AND "+revealed,
		rec.Status.String(), rec.Reason, rec.PaymentRef, nullTime(rec.PaidAt), nullTime(rec.EndedAt), rec.UpdatedAt.UTC(),
		string(rec.No), from.String(), string(rec.Buyer), int64(rec.Product), rec.Qty, nullString(string(rec.IdemKey)))
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	stored, err := r.Order(ctx, rec.No)
	if err != nil {
		return false, err
	}
	if stored.Status() != from || stored.Revealed() != o.Revealed() {
		return false, nil
	}
	if stored.Buyer() != o.Buyer() || stored.Product() != o.Product() || stored.Qty() != o.Qty() ||
		stored.IdempotencyKey() != o.IdempotencyKey() {
		return false, domain.Invalid("order", "a transition cannot change buyer, product, qty or key")
	}
	// The row matched but already held exactly these values (MySQL counts changed rows).
	return true, nil
}

// MarkRevealed is one conditional UPDATE of the row: of racing reveals one sets the time, and
// a refund's Transition (which holds the row lock until its commit) makes it match nothing.
// Only when nothing changed does it read the row, to tell an unknown order apart.
func (r orderRepo) MarkRevealed(ctx context.Context, no domain.OrderNo, at time.Time) (bool, error) {
	op := fmt.Sprintf("mark order %s revealed", no)
	n, err := r.s.execN(ctx, op, "UPDATE orders SET revealed_at = ? WHERE order_no = ? AND status = 'PAID' AND revealed_at IS NULL",
		at.UTC(), string(no))
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	if _, err := r.Order(ctx, no); err != nil {
		return false, err
	}
	return false, nil
}

// Expired walks the (status, expires_at) index; order_no breaks ties, as it is the index's
// implicit last column.
func (r orderRepo) Expired(ctx context.Context, t time.Time, limit int) ([]domain.Order, error) {
	if limit <= 0 {
		return nil, nil
	}
	var rows []orderRow
	if err := r.s.get(ctx, "expired orders", &rows, "SELECT "+orderColumns+" FROM orders "+
		"WHERE status = 'PENDING' AND expires_at <= ? ORDER BY expires_at, order_no LIMIT ?", t.UTC(), limit); err != nil {
		return nil, err
	}
	out := make([]domain.Order, len(rows))
	for i, row := range rows {
		o, err := row.order()
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

func (r orderRepo) Totals(ctx context.Context, p domain.ProductID) (map[domain.OrderStatus]domain.StatusTotal, error) {
	var rows []struct {
		Status string `bun:"status"`
		Orders int64  `bun:"orders"`
		Qty    int64  `bun:"qty"`
	}
	op := fmt.Sprintf("order totals of product %d", p)
	if err := r.s.get(ctx, op, &rows, "SELECT status, COUNT(*) AS orders, COALESCE(SUM(qty), 0) AS qty "+
		"FROM orders WHERE product_id = ? GROUP BY status", int64(p)); err != nil {
		return nil, err
	}
	out := make(map[domain.OrderStatus]domain.StatusTotal, len(rows))
	for _, row := range rows {
		st, err := domain.ParseOrderStatus(row.Status)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out[st] = domain.StatusTotal{Orders: row.Orders, Qty: row.Qty}
	}
	return out, nil
}

// HeldByBuyer is one GROUP BY over the product's orders in the holding states (the
// idx_product_status index narrows it to them). A REFUNDED order counts only when its refund
// returned codes (a refund-restore or refund-void flow row: uk_ref_type finds it): one refunded
// while UNFULFILLED never held any.
func (r orderRepo) HeldByBuyer(ctx context.Context, p domain.ProductID, withRefunded bool) (map[domain.BuyerID]int64, error) {
	q := "SELECT buyer_id, SUM(qty) AS qty FROM orders o WHERE product_id = ? AND (status IN ('PENDING', 'PAID')"
	args := []any{int64(p)}
	if withRefunded {
		q += " OR status = 'REFUNDED' AND EXISTS (SELECT 1 FROM stock_flow f WHERE f.order_no = o.order_no AND f.change_type IN (?, ?))"
		args = append(args, int(domain.FlowRefundRestore), int(domain.FlowRefundVoid))
	}
	var rows []struct {
		Buyer string `bun:"buyer_id"`
		Qty   int64  `bun:"qty"`
	}
	if err := r.s.get(ctx, fmt.Sprintf("held by buyer of product %d", p), &rows, q+") GROUP BY buyer_id", args...); err != nil {
		return nil, err
	}
	out := make(map[domain.BuyerID]int64, len(rows))
	for _, row := range rows {
		if row.Qty > 0 {
			out[domain.BuyerID(row.Buyer)] = row.Qty
		}
	}
	return out, nil
}

// CouponUses is one GROUP BY over the product's orders with a coupon in the states whose use
// stands (as HeldByBuyer's with refunds), one row per coupon and buyer.
func (r orderRepo) CouponUses(ctx context.Context, p domain.ProductID) (domain.CouponCounts, error) {
	var rows []struct {
		Coupon string `bun:"coupon"`
		Buyer  string `bun:"buyer_id"`
		N      int64  `bun:"n"`
	}
	if err := r.s.get(ctx, fmt.Sprintf("coupon uses of product %d", p), &rows,
		"SELECT coupon, buyer_id, COUNT(*) AS n FROM orders o WHERE product_id = ? AND coupon <> '' AND "+
			"(status IN ('PENDING', 'PAID') OR status = 'REFUNDED' AND EXISTS "+
			"(SELECT 1 FROM stock_flow f WHERE f.order_no = o.order_no AND f.change_type IN (?, ?))) GROUP BY coupon, buyer_id",
		int64(p), int(domain.FlowRefundRestore), int(domain.FlowRefundVoid)); err != nil {
		return nil, err
	}
	out := domain.CouponCounts{}
	for _, row := range rows {
		c := out[domain.CouponCode(row.Coupon)]
		if c.Buyers == nil {
			c.Buyers = map[domain.BuyerID]int64{}
		}
		c.Uses += row.N
		c.Buyers[domain.BuyerID(row.Buyer)] += row.N
		out[domain.CouponCode(row.Coupon)] = c
	}
	return out, nil
}

// Existing is one primary-key lookup of every number: SELECT order_no … WHERE order_no IN (…).
func (r orderRepo) Existing(ctx context.Context, nos []domain.OrderNo) (map[domain.OrderNo]bool, error) {
	out := make(map[domain.OrderNo]bool, len(nos))
	if len(nos) == 0 {
		return out, nil
	}
	keys := make([]string, len(nos))
	for i, no := range nos {
		keys[i] = string(no)
		out[no] = false
	}
	var found []string
	if err := r.s.get(ctx, fmt.Sprintf("existing orders (%d asked)", len(nos)), &found,
		"SELECT order_no FROM orders WHERE order_no IN (?)", bun.List(keys)); err != nil {
		return nil, err
	}
	for _, no := range found {
		out[domain.OrderNo(no)] = true
	}
	return out, nil
}

// Search is one SELECT of a page: the keyset condition (created_at, order_no) < the cursor is
// written as created_at <= ? AND (created_at < ? OR order_no < ?) so that the optimizer sees a
// range on created_at. The indexes of 0012 make the common searches one index range walked
// backwards, with no sort: a buyer's orders (idx_buyer_created), a product's orders in one
// status (idx_product_status, which ends with created_at), and a time window alone
// (idx_created); InnoDB appends the primary key order_no to each, which breaks the ties. A
// product's orders in several statuses are read from idx_product_status and sorted.
func (r orderRepo) Search(ctx context.Context, f domain.OrderFilter) ([]domain.Order, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	var paidUnder []string // the orders f.ProviderRef names, looked up first (see below)
	if f.ProviderRef != "" {
		// Two index look-ups (payments.idx_ref, manual_payments.idx_reference) give the few
		// orders a reference names; the search then reads them by primary key. As a subquery
		// of the search, MariaDB would run it once per order of the walked index instead.
		if err := r.s.get(ctx, "orders of a provider reference", &paidUnder,
			"SELECT order_no FROM payments WHERE provider_ref = ? UNION SELECT order_no FROM manual_payments WHERE reference = ?",
			f.ProviderRef, f.ProviderRef); err != nil {
			return nil, err
		}
		if len(paidUnder) == 0 {
			return nil, nil
		}
	}
	where, args := orderSearchWhere(f, paidUnder)
	var rows []orderRow
	if err := r.s.get(ctx, "search orders", &rows, "SELECT "+orderColumns+" FROM orders"+where+
		" ORDER BY created_at DESC, order_no DESC LIMIT ?", append(args, f.Limit)...); err != nil {
		return nil, err
	}
	out := make([]domain.Order, len(rows))
	for i, row := range rows {
		o, err := row.order()
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

// orderSearchWhere is the WHERE clause of f's set fields and cursor (none: every order), and
// its arguments; paidUnder are the orders f.ProviderRef names (Search looks them up first).
func orderSearchWhere(f domain.OrderFilter, paidUnder []string) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, a ...any) {
		conds = append(conds, cond)
		args = append(args, a...)
	}
	if f.Buyer != "" {
		add("buyer_id = ?", string(f.Buyer))
	}
	if f.Product != 0 {
		add("product_id = ?", int64(f.Product))
	}
	if len(f.Statuses) > 0 {
		names := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			names[i] = s.String()
		}
		add("status IN (?)", bun.List(names))
	}
	if f.NoPrefix != "" {
		// A range of the primary key: LIKE with a constant prefix, its wildcards escaped.
		add(`order_no LIKE ? ESCAPE '\\'`, likePrefix(f.NoPrefix))
	}
	if f.Email != "" {
		add("buyer_email = ?", string(f.Email))
	}
	if f.ProviderRef != "" {
		add("order_no IN (?)", bun.List(paidUnder))
	}
	if !f.From.IsZero() {
		add("created_at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		add("created_at < ?", f.To.UTC())
	}
	if !f.After.IsZero() {
		at := f.After.CreatedAt.UTC()
		add("created_at <= ? AND (created_at < ? OR order_no < ?)", at, at, string(f.After.No))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// likePrefix is a LIKE pattern matching what starts with p: p's own %, _ and \ escaped.
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(p) + "%"
}
