package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"cardshop/domain"
)

type paymentRepo struct{ s *store }

type paymentRow struct {
	OrderNo     string    `bun:"order_no"`
	Provider    string    `bun:"provider"`
	ProviderRef string    `bun:"provider_ref"`
	Amount      int64     `bun:"amount"`
	Currency    string    `bun:"currency"`
	Status      string    `bun:"status"`
	PayURL      string    `bun:"pay_url"`
	QRCode      string    `bun:"qr_code"`
	RefundNo    string    `bun:"refund_no"`
	RefundRef   string    `bun:"refund_ref"`
	RefundWhy   string    `bun:"refund_reason"`
	RefundVoid  bool      `bun:"refund_void"`
	Recycle     bool      `bun:"refund_recycle"`
	RefundNote  string    `bun:"refund_note"`
	CreatedAt   time.Time `bun:"created_at"`
	UpdatedAt   time.Time `bun:"updated_at"`
}

const paymentColumns = "order_no, provider, provider_ref, amount, currency, status, pay_url, qr_code, " +
	"refund_no, refund_ref, refund_reason, refund_void, refund_recycle, refund_note, created_at, updated_at"

func (r paymentRow) payment() (domain.Payment, error) {
	st, err := domain.ParsePaymentStatus(r.Status)
	if err != nil {
		return domain.Payment{}, fmt.Errorf("payment of %s at %s: %w", r.OrderNo, r.Provider, err)
	}
	cur, err := domain.ParseCurrency(r.Currency)
	if err != nil {
		return domain.Payment{}, fmt.Errorf("payment of %s at %s: %w", r.OrderNo, r.Provider, err)
	}
	return domain.Payment{OrderNo: domain.OrderNo(r.OrderNo), Provider: domain.Provider(r.Provider),
		ProviderRef: r.ProviderRef, Amount: domain.Money(r.Amount), Currency: cur, Status: st, PayURL: r.PayURL,
		QRCode: r.QRCode, RefundNo: r.RefundNo, RefundRef: r.RefundRef, RefundReason: r.RefundWhy,
		RefundVoid: r.RefundVoid, RefundRecycle: r.Recycle, RefundNote: r.RefundNote, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, nil
}

// updatedAt is the time a write stores as updated_at: a zero UpdatedAt is the creation time.
func updatedAt(p domain.Payment) time.Time {
	if p.UpdatedAt.IsZero() {
		return p.CreatedAt.UTC()
	}
	return p.UpdatedAt.UTC()
}

// Create is one INSERT; the primary key (order_no, provider) refuses a second payment of the
// order at the provider, whoever races to write it.
func (r paymentRepo) Create(ctx context.Context, p domain.Payment) error {
	if err := p.Check(); err != nil {
		return err
	}
	op := fmt.Sprintf("create payment of %s at %s", p.OrderNo, p.Provider)
	_, err := r.s.exec(ctx, op, "INSERT INTO payments ("+paymentColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		string(p.OrderNo), string(p.Provider), p.ProviderRef, int64(p.Amount), p.Currency.Code, p.Status.String(),
		p.PayURL, p.QRCode, p.RefundNo, clip(p.RefundRef, widthRef), clip(p.RefundReason, widthResult),
		p.RefundVoid, p.RefundRecycle, p.RefundNote, p.CreatedAt.UTC(), updatedAt(p))
	if _, dup := duplicateKey(err); dup {
		return fmt.Errorf("%s: %w", op, domain.ErrPaymentExists)
	}
	return err
}

func (r paymentRepo) Payment(ctx context.Context, no domain.OrderNo, provider domain.Provider) (domain.Payment, error) {
	op := fmt.Sprintf("payment of %s at %s", no, provider)
	var row paymentRow
	err := r.s.get(ctx, op, &row, "SELECT "+paymentColumns+" FROM payments WHERE order_no = ? AND provider = ?",
		string(no), string(provider))
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Payment{}, fmt.Errorf("%s: %w", op, domain.ErrPaymentNotFound)
	}
	if err != nil {
		return domain.Payment{}, err
	}
	return row.payment()
}

// OfOrder reads the primary key's range of the order; provider breaks ties of creation time.
func (r paymentRepo) OfOrder(ctx context.Context, no domain.OrderNo) ([]domain.Payment, error) {
	var rows []paymentRow
	if err := r.s.get(ctx, fmt.Sprintf("payments of %s", no), &rows, "SELECT "+paymentColumns+
		" FROM payments WHERE order_no = ? ORDER BY created_at, provider", string(no)); err != nil {
		return nil, err
	}
	out := make([]domain.Payment, 0, len(rows))
	for _, row := range rows {
		p, err := row.payment()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Transition is one conditional UPDATE of the row; of racing transitions from the same status
// the row lock lets exactly one match. It writes the status, the provider's reference, pay_url,
// qr_code, the refund's columns and updated_at; amount and currency are part of the condition, because a transition
// may not change them, and created_at is never written. Only when nothing changed does it
// read the row, to tell an unknown payment, a lost race and a change of amount apart.
func (r paymentRepo) Transition(ctx context.Context, p domain.Payment, from domain.PaymentStatus) (bool, error) {
	if err := p.Check(); err != nil {
		return false, err
	}
	op := fmt.Sprintf("transition payment of %s at %s from %s to %s", p.OrderNo, p.Provider, from, p.Status)
	n, err := r.s.execN(ctx, op, "UPDATE payments SET status = ?, provider_ref = ?, pay_url = ?, qr_code = ?, "+
		"refund_no = ?, refund_ref = ?, refund_reason = ?, refund_void = ?, refund_recycle = ?, refund_note = ?, updated_at = ? "+
		"WHERE order_no = ? AND provider = ? AND status = ? AND amount = ? AND currency = ?",
		p.Status.String(), p.ProviderRef, p.PayURL, p.QRCode, p.RefundNo, clip(p.RefundRef, widthRef),
		clip(p.RefundReason, widthResult), p.RefundVoid, p.RefundRecycle, p.RefundNote, updatedAt(p),
		string(p.OrderNo), string(p.Provider), from.String(), int64(p.Amount), p.Currency.Code)
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	stored, err := r.Payment(ctx, p.OrderNo, p.Provider)
	if err != nil {
		return false, err
	}
	if stored.Status != from {
		return false, nil
	}
	if stored.Amount != p.Amount || stored.Currency != p.Currency {
		return false, domain.Invalid("payment", "a transition cannot change the amount or the currency")
	}
	// The row matched but already held exactly these values (MySQL counts changed rows).
	return true, nil
}

type notificationLog struct{ s *store }

// The widths of payment_notifications' text columns, in characters.
const (
	widthProvider = 32
	widthMethod   = 16
	widthRemote   = 64
	widthResult   = 255
	widthOrderNo  = 64
	widthEventID  = 255
	widthRef      = 255
	widthOutcome  = 16
	widthCurrency = 8
)

// clip makes outside text storable in a utf8mb4 column of width characters: invalid UTF-8
// becomes U+FFFD (strict mode refuses it) and the rest is cut to width. A notification is
// recorded whatever its texts hold: the log is where an operator looks for the odd ones.
func clip(s string, width int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	n := 0
	for i := range s {
		if n == width {
			return s[:i]
		}
		n++
	}
	return s
}

// noticeColumns are payment_notifications' columns, in the order of notificationRow.
const noticeColumns = "provider, received_at, method, remote, verified, accepted, result, order_no, event_id, " +
	"provider_ref, outcome, amount, currency, body_bytes, count, refused_window"

// noticeValues are rec's values for noticeColumns, each text clipped to its column.
func noticeValues(rec domain.NotificationRecord) []any {
	at := rec.At.UTC()
	if rec.At.IsZero() {
		at = time.Now().UTC()
	}
	var window sql.NullTime
	if !rec.RefusedWindow.IsZero() {
		window = sql.NullTime{Time: rec.RefusedWindow.UTC(), Valid: true}
	}
	return []any{clip(string(rec.Provider), widthProvider), at, clip(rec.Method, widthMethod), clip(rec.Remote, widthRemote),
		rec.Verified, rec.Accepted, clip(rec.Result, widthResult), clip(string(rec.OrderNo), widthOrderNo),
		clip(rec.EventID, widthEventID), clip(rec.ProviderRef, widthRef), clip(rec.Outcome, widthOutcome),
		int64(rec.Amount), clip(rec.Currency, widthCurrency), min(max(rec.BodyBytes, 0), math.MaxInt32),
		max(rec.Count, 1), window}
}

// Record stores a zero rec.At as the time of the insert.
func (l notificationLog) Record(ctx context.Context, rec domain.NotificationRecord) error {
	rec.RefusedWindow = time.Time{}
	_, err := l.s.exec(ctx, fmt.Sprintf("record %s notification", clip(string(rec.Provider), widthProvider)),
		"INSERT INTO payment_notifications ("+noticeColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		noticeValues(rec)...)
	return err
}

// RecordRefused is one INSERT … ON DUPLICATE KEY UPDATE on uk_refused (provider, remote,
// refused_window): concurrent calls for one aggregate, from any instance, add to one row. The
// assignments run left to right, so those that compare with received_at come before it.
func (l notificationLog) RecordRefused(ctx context.Context, rec domain.NotificationRecord) error {
	if rec.RefusedWindow.IsZero() || rec.Count < 1 || rec.Verified {
		return domain.Invalid("notification", "a refused aggregate needs a window, a count of at least 1 and no verification")
	}
	_, err := l.s.exec(ctx, fmt.Sprintf("record refused %s notifications", clip(string(rec.Provider), widthProvider)),
		"INSERT INTO payment_notifications ("+noticeColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "+
			"ON DUPLICATE KEY UPDATE count = count + VALUES(count), method = VALUES(method), result = VALUES(result), "+
			"body_bytes = VALUES(body_bytes), received_at = GREATEST(received_at, VALUES(received_at))",
		noticeValues(rec)...)
	return err
}

type notificationRow struct {
	ID            int64        `bun:"id"`
	Provider      string       `bun:"provider"`
	ReceivedAt    time.Time    `bun:"received_at"`
	Method        string       `bun:"method"`
	Remote        string       `bun:"remote"`
	Verified      bool         `bun:"verified"`
	Accepted      bool         `bun:"accepted"`
	Result        string       `bun:"result"`
	OrderNo       string       `bun:"order_no"`
	EventID       string       `bun:"event_id"`
	ProviderRef   string       `bun:"provider_ref"`
	Outcome       string       `bun:"outcome"`
	Amount        int64        `bun:"amount"`
	Currency      string       `bun:"currency"`
	BodyBytes     int          `bun:"body_bytes"`
	Count         int64        `bun:"count"`
	RefusedWindow sql.NullTime `bun:"refused_window"`
}

// Recent walks the primary key backwards, idx_verified_id's range of verified (or refused)
// rows backwards, or idx_order's range of one order backwards.
func (l notificationLog) Recent(ctx context.Context, q domain.NotificationQuery) ([]domain.NotificationRecord, error) {
	if q.Limit < 1 {
		return nil, nil
	}
	var where []string
	var args []any
	if q.OrderNo != "" {
		where, args = append(where, "order_no = ?"), append(args, string(q.OrderNo))
	}
	if q.Verified != nil {
		where, args = append(where, "verified = ?"), append(args, *q.Verified)
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	var rows []notificationRow
	if err := l.s.get(ctx, "recent payment notifications", &rows, "SELECT id, "+noticeColumns+
		" FROM payment_notifications"+cond+" ORDER BY id DESC LIMIT ?", append(args, q.Limit)...); err != nil {
		return nil, err
	}
	out := make([]domain.NotificationRecord, len(rows))
	for i, r := range rows {
		out[i] = domain.NotificationRecord{ID: r.ID, Provider: domain.Provider(r.Provider), At: r.ReceivedAt,
			Method: r.Method, Remote: r.Remote, Verified: r.Verified, Accepted: r.Accepted, Result: r.Result,
			OrderNo: domain.OrderNo(r.OrderNo), EventID: r.EventID, ProviderRef: r.ProviderRef, Outcome: r.Outcome,
			Amount: domain.Money(r.Amount), Currency: r.Currency, BodyBytes: r.BodyBytes, Count: r.Count}
		if r.RefusedWindow.Valid {
			out[i].RefusedWindow = r.RefusedWindow.Time
		}
	}
	return out, nil
}

// Prune deletes refused aggregates, then verified rows, each one range of idx_verified_received
// with a LIMIT: one statement never holds more than limit rows' locks.
func (l notificationLog) Prune(ctx context.Context, verifiedBefore, refusedBefore time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, nil
	}
	refused, err := l.s.execN(ctx, "prune refused payment notifications",
		"DELETE FROM payment_notifications WHERE verified = FALSE AND received_at < ? ORDER BY received_at LIMIT ?",
		refusedBefore.UTC(), limit)
	if err != nil {
		return 0, err
	}
	n := int(refused)
	if n == limit {
		return n, nil
	}
	verified, err := l.s.execN(ctx, "prune verified payment notifications",
		"DELETE FROM payment_notifications WHERE verified = TRUE AND received_at < ? ORDER BY received_at LIMIT ?",
		verifiedBefore.UTC(), limit-n)
	return n + int(verified), err
}

type manualRow struct {
	Provider  string    `bun:"provider"`
	Reference string    `bun:"reference"`
	OrderNo   string    `bun:"order_no"`
	Operator  string    `bun:"operator"`
	Note      string    `bun:"note"`
	Queried   string    `bun:"queried"`
	Override  string    `bun:"override"`
	At        time.Time `bun:"confirmed_at"`
}

const manualColumns = "provider, reference, order_no, operator, note, queried, override, confirmed_at"

func (r manualRow) manual() domain.ManualPayment {
	return domain.ManualPayment{OrderNo: domain.OrderNo(r.OrderNo), Provider: domain.Provider(r.Provider),
		Reference: r.Reference, Operator: domain.OperatorName(r.Operator), Note: r.Note, Queried: r.Queried,
		Override: r.Override, At: r.At}
}

// ClaimManual refuses a reference another order's payment at the provider has (idx_provider_ref),
// then INSERTs: the primary key (provider, reference) lets one claim of a reference in, whoever
// races to write it; the loser reads the row that won to tell a retry of the same order from
// another order's claim.
func (r paymentRepo) ClaimManual(ctx context.Context, m domain.ManualPayment) (bool, error) {
	if m.OrderNo == "" || m.Provider == "" || m.Reference == "" || m.At.IsZero() {
		return false, domain.Invalid("manual_payment", "order, provider, reference and time required")
	}
	op := fmt.Sprintf("claim reference %s at %s for %s", m.Reference, m.Provider, m.OrderNo)
	used := fmt.Errorf("%s: %w", op, domain.ErrReferenceUsed)
	var others int
	if err := r.s.get(ctx, op, &others, "SELECT COUNT(*) FROM payments WHERE provider = ? AND provider_ref = ? AND order_no <> ?",
		string(m.Provider), m.Reference, string(m.OrderNo)); err != nil {
		return false, err
	}
	if others > 0 {
		return false, used
	}
	_, err := r.s.exec(ctx, op, "INSERT INTO manual_payments ("+manualColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		string(m.Provider), m.Reference, string(m.OrderNo), string(m.Operator), clip(m.Note, widthResult),
		clip(m.Queried, widthResult), clip(m.Override, widthResult), m.At.UTC())
	if _, dup := duplicateKey(err); dup {
		var holder string
		if err := r.s.get(ctx, op, &holder, "SELECT order_no FROM manual_payments WHERE provider = ? AND reference = ?",
			string(m.Provider), m.Reference); err != nil {
			return false, err
		}
		if holder != string(m.OrderNo) {
			return false, used
		}
		return false, nil
	}
	return err == nil, err
}

func (r paymentRepo) ManualOf(ctx context.Context, no domain.OrderNo) ([]domain.ManualPayment, error) {
	var rows []manualRow
	if err := r.s.get(ctx, fmt.Sprintf("manual confirmations of %s", no), &rows,
		"SELECT "+manualColumns+" FROM manual_payments WHERE order_no = ? ORDER BY confirmed_at, reference", string(no)); err != nil {
		return nil, err
	}
	out := make([]domain.ManualPayment, 0, len(rows))
	for _, row := range rows {
		out = append(out, row.manual())
	}
	return out, nil
}
