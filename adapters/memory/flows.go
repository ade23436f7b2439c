package memory

import (
	"context"
	"fmt"
	"time"

	"cardshop/domain"
)

type flowLog struct{ s *store }

func (f flowLog) Append(_ context.Context, e domain.FlowEntry) error {
	if !e.Type.Valid() {
		return domain.Invalid("type", fmt.Sprintf("unknown flow type %d", int(e.Type)))
	}
	if e.Ref == "" {
		return domain.Invalid("ref", "required")
	}
	release, err := f.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	d := f.s.data
	k := flowKey{ref: e.Ref, typ: e.Type}
	if _, dup := d.flowKeys[k]; dup {
		return fmt.Errorf("append %s flow of %s: %w", e.Type, e.Ref, domain.ErrDuplicateFlow)
	}
	d.lastFlow++
	e.ID = d.lastFlow
	put(f.s, d.flowKeys, k, struct{}{})
	put(f.s, d.flows, e.Ref, append(d.flows[e.Ref], e))
	putIn(f.s, d.flowTotals, e.ProductID, e.Type, d.flowTotals[e.ProductID][e.Type]+e.Qty)
	return nil
}

func (f flowLog) Totals(_ context.Context, p domain.ProductID) (domain.FlowTotals, error) {
	release, err := f.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make(domain.FlowTotals)
	for t, n := range f.s.data.flowTotals[p] {
		out[t] = n
	}
	return out, nil
}

func (f flowLog) Entries(_ context.Context, ref string) ([]domain.FlowEntry, error) {
	release, err := f.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	return append([]domain.FlowEntry(nil), f.s.data.flows[ref]...), nil
}

func (f flowLog) PerInterval(_ context.Context, p domain.ProductID, t domain.FlowType, from time.Time, step time.Duration, n int) ([]int64, error) {
	if err := domain.CheckFlowIntervals(step, n); err != nil {
		return nil, err
	}
	release, err := f.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]int64, n)
	for _, es := range f.s.data.flows {
		for _, e := range es {
			if e.ProductID != p || e.Type != t || e.At.Before(from) {
				continue
			}
			if i := int(e.At.Sub(from) / step); i < n {
				out[i]++
			}
		}
	}
	return out, nil
}
