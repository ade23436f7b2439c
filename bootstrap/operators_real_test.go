package bootstrap_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/paysig"
	"cardshop/adapters/porttest"
	"cardshop/application"
	"cardshop/domain"
)

// TestRealLastAdminRulesUnderConcurrency: on MariaDB, on a database of the test's own (so the
// admins are the only ones), admins demote, disable and remove one another from many
// goroutines at once through application.Admin; exactly one enabled admin is left.
func TestRealLastAdminRulesUnderConcurrency(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shop := realShop(t, ctx)
	admin := shop.Admin
	const n = 12
	for i := range n {
		if _, _, err := admin.CreateOperator(ctx, fmt.Sprintf("adm-%d", i), "admin"); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := fmt.Sprintf("adm-%d", i)
				var err error
				switch (i + round) % 3 {
				case 0:
					_, err = admin.SetOperatorRole(ctx, who, "operator")
				case 1:
					_, err = admin.DisableOperator(ctx, who)
				default:
					err = admin.RemoveOperator(ctx, who)
				}
				if err != nil && !errors.Is(err, domain.ErrLastAdmin) && !errors.Is(err, domain.ErrOperatorNotFound) {
					t.Errorf("%s: %v", who, err)
				}
			}()
		}
		wg.Wait()
		ops, err := admin.Operators(ctx)
		if err != nil {
			t.Fatal(err)
		}
		enabled := 0
		for _, o := range ops {
			if o.Role == domain.RoleAdmin && !o.Disabled() {
				enabled++
			}
		}
		if enabled != 1 {
			t.Fatalf("round %d: %d enabled admins left, want 1", round, enabled)
		}
		// Make them all admins again (the removed ones anew) for the next round.
		for i := range n {
			who := fmt.Sprintf("adm-%d", i)
			if _, err := admin.EnableOperator(ctx, who); errors.Is(err, domain.ErrOperatorNotFound) {
				_, _, err = admin.CreateOperator(ctx, who, "admin")
				if err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if _, err := admin.SetOperatorRole(ctx, who, "admin"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// realShop is the use cases on MariaDB (a database of the test's own, dropped at the end) with
// the memory adapters for everything else.
func realShop(t *testing.T, ctx context.Context) *application.App {
	t.Helper()
	name := fmt.Sprintf("cardshop_test_support_%016x", rand.Uint64())
	dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, name)
	porttest.RequireService(t, "MariaDB", err)
	t.Cleanup(func() { dropDatabase(t, name) })
	db, err := mysqlstore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := mysqlstore.Migrate(ctx, db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	keyring, err := mysqlstore.NewKeyring(mysqlstore.GenerateKeyring())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	clock := &memory.SystemClock{}
	signer, err := paysig.New("a test secret of enough length for paysig", paysig.DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	queue := memory.NewDelayQueue(clock)
	t.Cleanup(queue.Close)
	shop, err := application.New(application.DefaultConfig(), application.Deps{Ledger: mysqlstore.New(db, keyring),
		Gate: memory.NewGate(clock), Queue: queue, Publisher: memory.NewPublisher(), Verifier: signer,
		Alerter: memory.NewAlerts(quiet), Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return shop
}

// TestRealManualConfirmationReferenceRace: on MariaDB, admins confirm many orders with one
// reference at once; exactly one order is paid, the others are refused (reference_used) and
// stay PENDING, and the stock adds up.
func TestRealManualConfirmationReferenceRace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shop := realShop(t, ctx)
	p, err := shop.Catalogue.CreateProduct(ctx, application.NewProduct{Name: "race", Price: 500, MaxPerOrder: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var codes strings.Builder
	for i := range n {
		fmt.Fprintf(&codes, "RACE-%d-%016x\n", i, rand.Uint64())
	}
	if _, err := shop.Catalogue.ImportCodes(ctx, p.ID(), strings.NewReader(codes.String())); err != nil {
		t.Fatal(err)
	}
	if _, err := shop.Relay.RelayOutbox(ctx); err != nil {
		t.Fatal(err)
	}
	nos := make([]domain.OrderNo, n)
	for i := range nos {
		o, err := shop.Sales.PlaceOrder(ctx, application.PlaceOrder{Buyer: domain.BuyerID(fmt.Sprintf("racer-%d", i)),
			Product: p.ID(), Qty: 1, IdempotencyKey: fmt.Sprintf("race-key-%04d", i)})
		if err != nil {
			t.Fatal(err)
		}
		nos[i] = o.Order.No()
	}
	boss := application.Identity{Name: "boss", Role: domain.RoleAdmin}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		won, used int
	)
	for _, no := range nos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := shop.Payments.ConfirmPaymentManually(ctx, application.ManualPaymentRequest{By: boss, OrderNo: no,
				Provider: "bank", Reference: "ONE-TRANSFER", Override: "seen on the statement"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, domain.ErrReferenceUsed):
				used++
			default:
				t.Errorf("confirm %s: %v", no, err)
			}
		}()
	}
	wg.Wait()
	if won != 1 || used != n-1 {
		t.Fatalf("won %d, refused %d of %d", won, used, n)
	}
	paid := 0
	for _, no := range nos {
		v, err := shop.Sales.AdminOrder(ctx, no)
		if err != nil {
			t.Fatal(err)
		}
		switch v.Order.Status() {
		case domain.StatusPaid:
			paid++
		case domain.StatusPending:
		default:
			t.Fatalf("order %s is %s", no, v.Order.Status())
		}
	}
	if paid != 1 {
		t.Fatalf("%d orders paid, want 1", paid)
	}
}
