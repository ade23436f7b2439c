package application

import (
	"context"
	"fmt"

	"cardshop/domain"
)

// OrderView is an order with the codes sold to it (empty unless PAID).
type OrderView struct {
	Order domain.Order
	Cards []domain.Card
}

// BuyerOrder returns the buyer's own order with its codes once PAID. Another buyer's order
// answers ErrOrderNotFound, exactly like a missing one, so numbers cannot be probed.
//
// Errors: ErrOrderNotFound, ErrUnavailable.
func (s *Shop) BuyerOrder(ctx context.Context, buyer domain.BuyerID, no domain.OrderNo) (OrderView, error) {
	o, err := s.ledger.Orders().Order(ctx, no)
	if err != nil {
		return OrderView{}, fmt.Errorf("load order: %w", err)
	}
	if o.Buyer() != buyer {
		return OrderView{}, domain.ErrOrderNotFound
	}
	return s.view(ctx, o)
}

// AdminOrder returns any order with its codes, for operators.
//
// Errors: ErrOrderNotFound, ErrUnavailable.
func (s *Shop) AdminOrder(ctx context.Context, no domain.OrderNo) (OrderView, error) {
	o, err := s.ledger.Orders().Order(ctx, no)
	if err != nil {
		return OrderView{}, fmt.Errorf("load order: %w", err)
	}
	return s.view(ctx, o)
}

func (s *Shop) view(ctx context.Context, o domain.Order) (OrderView, error) {
	v := OrderView{Order: o}
	if o.Status() != domain.StatusPaid {
		return v, nil
	}
	cards, err := s.ledger.Cards().Cards(ctx, o.No())
	if err != nil {
		return OrderView{}, fmt.Errorf("load codes: %w", err)
	}
	v.Cards = cards
	return v, nil
}
