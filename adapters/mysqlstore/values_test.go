package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"cardshop/domain"
)

// captureDB is a bun.IDB that keeps the statement it is asked to run instead of running it.
type captureDB struct {
	bun.IDB
	query string
	args  []any
}

func (c *captureDB) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	c.query, c.args = query, args
	return nil, nil
}

// The batch INSERTs built with sqlValues are the statements bun formats from placeholders
// with the same arguments (the form they had before), byte for byte, for rows with quotes,
// backslashes, NUL bytes, non-ASCII text, NULLs and times in other zones.
func TestSQLValuesFormatAsBunDoes(t *testing.T) {
	db, err := Open("root@tcp(127.0.0.1:1)/none?parseTime=true") // never connected
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	texts := []string{"", "plain", "it's", `back\slash`, "nul\x00byte", "ünï©ødé 文字", "?", "'; DROP TABLE orders; --", `\'`}
	zone := time.FixedZone("X", 5*3600+30*60)
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return texts[rng.IntN(len(texts))] }
	at := func() time.Time {
		if rng.IntN(4) == 0 {
			return time.Time{}
		}
		return time.Unix(1_700_000_000+rng.Int64N(1e8), rng.Int64N(1e9)).In(zone)
	}
	for round := range 200 {
		n := 1 + rng.IntN(5)
		var recs []domain.OrderRecord
		var flows []domain.FlowEntry
		var placeholders []string
		var args []any
		var flowArgs []any
		for range n {
			rec := domain.OrderRecord{No: domain.OrderNo(fmt.Sprint(rng.Int64())), Buyer: domain.BuyerID(pick()),
				Product: domain.ProductID(rng.Int64N(1e12) - 5), Qty: rng.IntN(10), UnitPrice: domain.Money(rng.Int64()),
				Amount: domain.Money(-rng.Int64N(100)), IdemKey: domain.IdempotencyKey(pick()), Status: domain.StatusPending,
				Reason: pick(), PaymentRef: pick(), CreatedAt: at(), ExpiresAt: at(), PaidAt: at(), EndedAt: at(),
				UpdatedAt: at(), RevealedAt: at()}
			var hash []byte // a guest order's hash; NULL for an API order's
			if rng.IntN(2) == 0 {
				rec.Email, rec.Lang = domain.Email(pick()), pick()
				for i := range rec.AccessHash {
					rec.AccessHash[i] = byte(rng.IntN(256))
				}
				hash = rec.AccessHash[:]
			}
			recs = append(recs, rec)
			placeholders = append(placeholders, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, string(rec.No), string(rec.Buyer), int64(rec.Product), rec.Qty, int64(rec.UnitPrice), int64(rec.Amount),
				nullString(string(rec.IdemKey)), rec.Status.String(), rec.Reason, rec.PaymentRef,
				rec.CreatedAt.UTC(), rec.ExpiresAt.UTC(), nullTime(rec.PaidAt), nullTime(rec.EndedAt), rec.UpdatedAt.UTC(),
				nullTime(rec.RevealedAt), nullString(string(rec.Email)), nullString(rec.Lang), hash, string(rec.Coupon), int64(rec.Discount))
			f := domain.FlowEntry{ProductID: rec.Product, Ref: pick() + "x", Type: domain.FlowReserve, Qty: rng.Int64N(1e6), At: at()}
			flows = append(flows, f)
			flowArgs = append(flowArgs, int64(f.ProductID), f.Ref, int(f.Type), f.Qty, f.At.UTC())
		}
		capture := &captureDB{IDB: db}
		s := &store{db: capture}
		orders := make([]domain.Order, n)
		for i, rec := range recs {
			orders[i] = domain.RehydrateOrder(rec)
		}
		if err := insertOrders(t.Context(), s, "test", orders); err != nil {
			t.Fatal(err)
		}
		want := db.QueryGen().FormatQuery("INSERT INTO orders ("+orderColumns+") VALUES "+strings.Join(placeholders, ", "), args...)
		if capture.query != want || capture.args != nil {
			t.Fatalf("round %d, orders:\n got %s (args %v)\nwant %s", round, capture.query, capture.args, want)
		}
		if err := appendFlows(t.Context(), s, "test", flows); err != nil {
			t.Fatal(err)
		}
		values := strings.Repeat("(?, ?, ?, ?, ?), ", n)
		want = db.QueryGen().FormatQuery("INSERT INTO stock_flow (product_id, order_no, change_type, qty, created_at) VALUES "+
			values[:len(values)-2], flowArgs...)
		if capture.query != want || capture.args != nil {
			t.Fatalf("round %d, flows:\n got %s (args %v)\nwant %s", round, capture.query, capture.args, want)
		}
	}
}
