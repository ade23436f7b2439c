package mysqlstore_test

import (
	"testing"

	"cardshop/adapters/porttest"
)

// TestSalesReportContractMariaDB runs the sales report's contract on one shared database: the
// same cases, the same sums, as the memory ledger.
func TestSalesReportContractMariaDB(t *testing.T) {
	l := newLedger(t)
	porttest.RunSalesReport(t, func(*testing.T) porttest.SalesLedger { return l })
}
