package application

import (
	"context"
	"time"

	"cardshop/domain"
)

// rebuildGateLater answers a gate that has lost a product (Redis restarted or was flushed:
// it keeps nothing on disk). Orders for the product are refused meanwhile (ErrGateNotReady,
// never "unlimited"); once per product at a time, after RebuildDelay lets the requests that
// reserved before the loss finish writing their orders, the gate is rebuilt from the ledger
// exactly as Reconcile with repair does (outbox drained first). An operator can do the same at
// once with POST /admin/products/{id}/reconcile?repair=true.
func (s *Shop) rebuildGateLater(p domain.ProductID) {
	if _, busy := s.rebuilding.LoadOrStore(p, true); busy {
		return
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer s.rebuilding.Delete(p)
		time.Sleep(s.cfg.RebuildDelay)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, ok, err := s.gate.Levels(ctx, p); err != nil || ok {
			return // unreachable (a later request tries again) or rebuilt meanwhile
		}
		rep, err := s.Reconcile(ctx, p, true)
		if err != nil {
			s.log.ErrorContext(ctx, "automatic gate rebuild failed", "product", p, "err", err)
			return
		}
		s.alerts.Alert(ctx, domain.Alert{Kind: "gate_rebuilt", Product: p,
			Message: "the gate had lost this product (Redis restart or flush) and was rebuilt from the ledger"})
		if !rep.OK() {
			s.log.WarnContext(ctx, "gate rebuilt, reconciliation still reports differences", "product", p, "differences", rep.Differences)
		}
	}()
}

// WaitBackground waits for background work started by use cases (automatic gate rebuilds).
func (s *Shop) WaitBackground() { s.background.Wait() }
