package domain

import (
	"fmt"
	"time"
)

// FlowType is the reason of one stock-flow row. The numbers are stored
// (stock_flow.change_type): never renumber one.
type FlowType int

// The flow types.
const (
	FlowReserve        FlowType = 1  // gate reservation for a new order (+sold, -stock)
	FlowPay            FlowType = 2  // codes taken from the pool for a paid order
	FlowTimeoutRestore FlowType = 3  // unpaid order closed, reservation returned
	FlowRefundRestore  FlowType = 4  // refunded order's codes recycled into the pool
	FlowFailedRestore  FlowType = 5  // payment failed, reservation returned
	FlowStockIn        FlowType = 6  // codes imported
	FlowAdjust         FlowType = 7  // manual adjustment (signed)
	FlowLateReserve    FlowType = 8  // reservation taken again for a payment after close/fail
	FlowRefundVoid     FlowType = 9  // refunded order's codes voided (revealed, never resold)
	FlowUnfulfilled    FlowType = 10 // paid but the pool was short: reservation returned
	FlowVoid           FlowType = 11 // sellable codes voided by an operator (a leaked batch), never sold
)

var flowNames = map[FlowType]string{
	FlowReserve: "reserve", FlowPay: "pay", FlowTimeoutRestore: "timeout-restore",
	FlowRefundRestore: "refund-restore", FlowFailedRestore: "payment-failed-restore",
	FlowStockIn: "stock-in", FlowAdjust: "adjust", FlowLateReserve: "late-reserve",
	FlowRefundVoid: "refund-void", FlowUnfulfilled: "unfulfilled-restore",
	FlowVoid: "void",
}

// String names the flow type.
func (t FlowType) String() string {
	if n, ok := flowNames[t]; ok {
		return n
	}
	return fmt.Sprintf("FlowType(%d)", int(t))
}

// Valid reports whether t is a known flow type.
func (t FlowType) Valid() bool { _, ok := flowNames[t]; return ok }

// FlowEntry is one append-only row of the stock flow. Ref is the order number for order
// changes and the import batch id for stock-in; (Ref, Type) is unique.
type FlowEntry struct {
	ID        int64
	ProductID ProductID
	Ref       string
	Type      FlowType
	Qty       int64
	At        time.Time
}

// MaxFlowIntervals bounds FlowLog.PerInterval's n.
const MaxFlowIntervals = 10000

// CheckFlowIntervals checks FlowLog.PerInterval's step and n.
func CheckFlowIntervals(step time.Duration, n int) error {
	if step <= 0 {
		return Invalid("step", "must be positive")
	}
	if n <= 0 || n > MaxFlowIntervals {
		return Invalid("n", fmt.Sprintf("must be 1 to %d", MaxFlowIntervals))
	}
	return nil
}

// FlowTotals sums a product's flow rows by type.
type FlowTotals map[FlowType]int64

// Derived is what the flow says a product's numbers must be.
type Derived struct {
	Imported int64 // codes brought into the pool, net of manual adjustments
	Voided   int64 // codes taken out of the pool for good
	Sold     int64 // codes SOLD now
	Sellable int64 // codes UNSOLD or RECYCLED now
	Held     int64 // units the gate holds for PENDING and PAID orders (gate sold)
	Pending  int64 // units reserved by PENDING orders
	GateFree int64 // reservable units (gate stock)
}

// Derive recomputes a product's numbers from its flow totals alone.
func (t FlowTotals) Derive() Derived {
	var d Derived
	d.Imported = t[FlowStockIn] + t[FlowAdjust]
	d.Voided = t[FlowRefundVoid] + t[FlowVoid]
	d.Sold = t[FlowPay] - t[FlowRefundRestore] - t[FlowRefundVoid]
	d.Sellable = d.Imported - d.Voided - d.Sold
	reserved := t[FlowReserve] + t[FlowLateReserve]
	d.Held = reserved - t[FlowTimeoutRestore] - t[FlowFailedRestore] - t[FlowUnfulfilled] -
		t[FlowRefundRestore] - t[FlowRefundVoid]
	d.Pending = d.Held - d.Sold
	d.GateFree = d.Imported - d.Voided - d.Held
	return d
}
