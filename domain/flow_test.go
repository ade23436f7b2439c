package domain_test

import (
	"testing"

	"pgregory.net/rapid"

	"cardshop/domain"
)

func TestFlowTotalsDerive(t *testing.T) {
	tests := []struct {
		name   string
		totals domain.FlowTotals
		want   domain.Derived
	}{
		{"nothing", domain.FlowTotals{}, domain.Derived{}},
		{"import only", domain.FlowTotals{domain.FlowStockIn: 100},
			domain.Derived{Imported: 100, Sellable: 100, GateFree: 100}},
		{"one pending order", domain.FlowTotals{domain.FlowStockIn: 100, domain.FlowReserve: 10},
			domain.Derived{Imported: 100, Sellable: 100, Held: 10, Pending: 10, GateFree: 90}},
		{"paid, timed out, failed", domain.FlowTotals{domain.FlowStockIn: 100, domain.FlowReserve: 10,
			domain.FlowPay: 4, domain.FlowTimeoutRestore: 3, domain.FlowFailedRestore: 2},
			domain.Derived{Imported: 100, Sold: 4, Sellable: 96, Held: 5, Pending: 1, GateFree: 95}},
		{"refund restore and void", domain.FlowTotals{domain.FlowStockIn: 100, domain.FlowReserve: 10,
			domain.FlowPay: 4, domain.FlowTimeoutRestore: 3, domain.FlowFailedRestore: 2,
			domain.FlowRefundRestore: 1, domain.FlowRefundVoid: 2},
			domain.Derived{Imported: 100, Voided: 2, Sold: 1, Sellable: 97, Held: 2, Pending: 1, GateFree: 96}},
		{"late payment after a timeout", domain.FlowTotals{domain.FlowStockIn: 10, domain.FlowReserve: 2,
			domain.FlowTimeoutRestore: 2, domain.FlowLateReserve: 2, domain.FlowPay: 2},
			domain.Derived{Imported: 10, Sold: 2, Sellable: 8, Held: 2, GateFree: 8}},
		{"paid but unfulfilled", domain.FlowTotals{domain.FlowStockIn: 5, domain.FlowReserve: 3, domain.FlowUnfulfilled: 3},
			domain.Derived{Imported: 5, Sellable: 5, GateFree: 5}},
		{"codes voided from the pool leave sold and held alone", domain.FlowTotals{domain.FlowStockIn: 100,
			domain.FlowReserve: 10, domain.FlowPay: 4, domain.FlowVoid: 30},
			domain.Derived{Imported: 100, Voided: 30, Sold: 4, Sellable: 66, Held: 10, Pending: 6, GateFree: 60}},
		{"manual adjustments are signed", domain.FlowTotals{domain.FlowStockIn: 50, domain.FlowAdjust: -5},
			domain.Derived{Imported: 45, Sellable: 45, GateFree: 45}},
		{"everything", domain.FlowTotals{domain.FlowStockIn: 1000, domain.FlowAdjust: 7, domain.FlowReserve: 300,
			domain.FlowLateReserve: 20, domain.FlowPay: 200, domain.FlowTimeoutRestore: 60,
			domain.FlowFailedRestore: 15, domain.FlowUnfulfilled: 5, domain.FlowRefundRestore: 30, domain.FlowRefundVoid: 10},
			// sold 200-30-10=160; held 320-60-15-5-30-10=200; pending 40
			domain.Derived{Imported: 1007, Voided: 10, Sold: 160, Sellable: 837, Held: 200, Pending: 40, GateFree: 797}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.totals.Derive(); got != tt.want {
				t.Fatalf("Derive() =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func TestFlowTypes(t *testing.T) {
	// The numbers are stored in stock_flow.change_type: they must not move.
	seed := map[domain.FlowType]string{1: "reserve", 2: "pay", 3: "timeout-restore", 4: "refund-restore", 5: "payment-failed-restore", 11: "void"}
	for ft, name := range seed {
		if ft.String() != name || !ft.Valid() {
			t.Errorf("FlowType(%d) = %q", int(ft), ft.String())
		}
	}
	if domain.FlowType(0).Valid() || domain.FlowType(99).Valid() || domain.FlowType(99).String() != "FlowType(99)" {
		t.Error("unknown flow types")
	}
}

// ledgerModel tracks a product's real numbers while a random history of business events
// writes the flow rows the use cases write; Derive must recompute the real numbers from the
// flow alone.
type ledgerModel struct {
	flows                        domain.FlowTotals
	imported, voided             int64
	pending, paid, ended, unfulf []int64 // qty per order in each state (ended = CLOSED or FAILED)
}

func sum(qs []int64) (n int64) {
	for _, q := range qs {
		n += q
	}
	return n
}

func (m *ledgerModel) sold() int64     { return sum(m.paid) }
func (m *ledgerModel) held() int64     { return sum(m.pending) + sum(m.paid) }
func (m *ledgerModel) sellable() int64 { return m.imported - m.voided - m.sold() }
func (m *ledgerModel) gateFree() int64 { return m.imported - m.voided - m.held() }

func take(t *rapid.T, qs *[]int64, label string) (int64, bool) {
	if len(*qs) == 0 {
		return 0, false
	}
	i := rapid.IntRange(0, len(*qs)-1).Draw(t, label)
	q := (*qs)[i]
	*qs = append((*qs)[:i], (*qs)[i+1:]...)
	return q, true
}

func TestPropertyDeriveMatchesTheLedger(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &ledgerModel{flows: domain.FlowTotals{}}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(t, "event") {
			case 0: // import
				n := rapid.Int64Range(1, 50).Draw(t, "import")
				m.flows[domain.FlowStockIn] += n
				m.imported += n
			case 1: // manual adjustment, never below what is sold or voided
				n := rapid.Int64Range(-m.gateFree(), 10).Draw(t, "adjust")
				m.flows[domain.FlowAdjust] += n
				m.imported += n
			case 2: // reserve
				if q := rapid.Int64Range(1, 5).Draw(t, "qty"); q <= m.gateFree() {
					m.flows[domain.FlowReserve] += q
					m.pending = append(m.pending, q)
				}
			case 3: // pay a pending order
				if q, ok := take(t, &m.pending, "pay"); ok {
					m.flows[domain.FlowPay] += q
					m.paid = append(m.paid, q)
				}
			case 4: // pay, but the pool is short: reservation returned
				if q, ok := take(t, &m.pending, "short"); ok {
					m.flows[domain.FlowUnfulfilled] += q
					m.unfulf = append(m.unfulf, q)
				}
			case 5: // timeout or failed payment
				if q, ok := take(t, &m.pending, "end"); ok {
					if rapid.Bool().Draw(t, "timeout") {
						m.flows[domain.FlowTimeoutRestore] += q
					} else {
						m.flows[domain.FlowFailedRestore] += q
					}
					m.ended = append(m.ended, q)
				}
			case 6: // late payment of a CLOSED/FAILED order, or fulfilling an UNFULFILLED one
				from := &m.ended
				if rapid.Bool().Draw(t, "fulfil") {
					from = &m.unfulf
				}
				if len(*from) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(*from)-1).Draw(t, "late")
				q := (*from)[i]
				if q > m.gateFree() {
					if from == &m.ended { // no stock left: UNFULFILLED, no flow
						*from = append((*from)[:i], (*from)[i+1:]...)
						m.unfulf = append(m.unfulf, q)
					}
					continue
				}
				*from = append((*from)[:i], (*from)[i+1:]...)
				m.flows[domain.FlowLateReserve] += q
				m.flows[domain.FlowPay] += q
				m.paid = append(m.paid, q)
			case 7: // refund, codes recycled
				if q, ok := take(t, &m.paid, "refund"); ok {
					m.flows[domain.FlowRefundRestore] += q
				}
			case 8: // refund, codes voided
				if q, ok := take(t, &m.paid, "void"); ok {
					m.flows[domain.FlowRefundVoid] += q
					m.voided += q
				}
			case 9: // refund of an UNFULFILLED order: no codes, no flow
				take(t, &m.unfulf, "refund-unfulfilled")
			}

			d := m.flows.Derive()
			want := domain.Derived{Imported: m.imported, Voided: m.voided, Sold: m.sold(), Sellable: m.sellable(),
				Held: m.held(), Pending: sum(m.pending), GateFree: m.gateFree()}
			if d != want {
				t.Fatalf("Derive() = %+v\nledger   %+v\nflows %v", d, want, m.flows)
			}
			if d.Sold+d.Sellable != d.Imported-d.Voided || d.GateFree+d.Held != d.Imported-d.Voided || d.GateFree < 0 {
				t.Fatalf("conservation broken: %+v", d)
			}
		}
	})
}
