package bootstrap

import (
	"slices"
	"testing"

	"cardshop/adapters/metrics"
	"cardshop/adapters/mysqlstore"
)

// CARDSHOP_LEDGER_BATCH picks the ledger port: the group-committing ledger when on, the
// plain one when off.
func TestLedgerBatchSettingPicksTheLedger(t *testing.T) {
	db, err := mysqlstore.Open("root@tcp(127.0.0.1:1)/none?parseTime=true") // never connected
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	keyring, err := mysqlstore.NewKeyring(mysqlstore.GenerateKeyring())
	if err != nil {
		t.Fatal(err)
	}
	l := mysqlstore.New(db, keyring)
	m := metrics.New()
	if got := newLedger(Config{LedgerBatch: false, MySQLConns: 64}, l, m); got != l {
		t.Errorf("batching off: the ledger is %T, want the plain *mysqlstore.Ledger", got)
	}
	on := Config{LedgerBatch: true, LedgerBatchMax: 128, MySQLConns: 2}
	if _, ok := newLedger(on, l, m).(*mysqlstore.BatchingLedger); !ok {
		t.Error("batching on: the ledger is not a *mysqlstore.BatchingLedger")
	}
}

// CARDSHOP_LEDGER_BATCH_LANES sets the lanes, up to a quarter of the connection pool.
func TestBatchLanesAreBoundedByThePool(t *testing.T) {
	for _, c := range []struct{ lanes, conns, want int }{{2, 64, 2}, {16, 64, 16}, {16, 48, 12}, {4, 8, 2}, {3, 2, 1}} {
		if got := batchLanes(Config{LedgerBatchLanes: c.lanes, MySQLConns: c.conns}); got != c.want {
			t.Errorf("%d lanes, %d connections: %d lanes, want %d", c.lanes, c.conns, got, c.want)
		}
	}
}

// The metrics' fallback reasons, exported at 0 from the start, are the ones the ledger gives.
func TestBatchFallbackReasonsAreTheLedgers(t *testing.T) {
	want := []string{mysqlstore.FallbackDuplicateKey, mysqlstore.FallbackUnavailable, mysqlstore.FallbackError}
	if !slices.Equal(metrics.BatchFallbackReasons, want) {
		t.Errorf("metrics.BatchFallbackReasons = %v, the ledger's reasons are %v", metrics.BatchFallbackReasons, want)
	}
}
