package bootstrap_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
	name := fmt.Sprintf("cardshop_test_admins_%016x", rand.Uint64())
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
