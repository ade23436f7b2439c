package bootstrap

import (
	"context"
	"errors"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/domain"
)

// The gate readiness check fails while a catalogue product has no gate counters, and asks
// about no more products than its cap.
func TestGatesInitialised(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ledger := memory.NewLedger()
	gate := memory.NewGate(memory.NewFakeClock(at))
	for id := domain.ProductID(1); id <= 3; id++ {
		p, err := domain.NewProduct(id, "p", 100, 1, at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ledger.Products().Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if id < 3 {
			if err := gate.Rebuild(ctx, id, domain.GateLevels{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := gatesInitialised(ledger.Products(), gate, 1000)(ctx); !errors.Is(err, errGateMissing) {
		t.Fatalf("product 3 without a gate: %v", err)
	}
	if err := gatesInitialised(ledger.Products(), gate, 2)(ctx); err != nil {
		t.Fatalf("capped at the two initialised products: %v", err)
	}
	if err := gate.Rebuild(ctx, 3, domain.GateLevels{}); err != nil {
		t.Fatal(err)
	}
	if err := gatesInitialised(ledger.Products(), gate, 1000)(ctx); err != nil {
		t.Fatalf("every gate initialised: %v", err)
	}
}
