package memory_test

import (
	"testing"

	"cardshop/adapters/memory"
	"cardshop/adapters/porttest"
)

func TestSalesReportContract(t *testing.T) {
	porttest.RunSalesReport(t, func(*testing.T) porttest.SalesLedger { return memory.NewLedger() })
}
