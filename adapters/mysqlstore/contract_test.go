package mysqlstore_test

import (
	"fmt"
	"testing"
	"time"

	"cardshop/adapters/mysqlstore"

	"cardshop/adapters/porttest"
	"cardshop/domain"
)

// TestContractMariaDB runs the ledger contract twice on the same database: the second run
// proves that the adapter (and the suite) never assume an empty store.
func TestContractMariaDB(t *testing.T) {
	l := newLedger(t)
	for run := 1; run <= 2; run++ {
		t.Run(fmt.Sprintf("run%d", run), func(t *testing.T) {
			porttest.RunLedger(t, func(*testing.T) domain.Ledger { return l })
		})
	}
}

// TestContractMariaDBBatching runs the ledger contract on the group-committing ledger: every
// transaction that only places orders goes through batches, every other one through the
// Ledger's own Atomically.
func TestContractMariaDBBatching(t *testing.T) {
	l := mysqlstore.NewBatching(newLedger(t), mysqlstore.BatchConfig{Max: 16, Wait: time.Millisecond, Lanes: 2})
	porttest.RunLedger(t, func(*testing.T) domain.Ledger { return l })
}
