package application

import (
	"context"
	"fmt"

	"cardshop/domain"
)

// SearchOrders lists the orders f selects for an operator, newest first, without their codes
// (OrderRepo.Search: f.Limit from 1 to domain.MaxOrderPage, f.After pages on).
//
// Errors: ErrInvalidInput (a filter that fails f.Check), ErrUnavailable.
func (s *Sales) SearchOrders(ctx context.Context, f domain.OrderFilter) ([]domain.Order, error) {
	found, err := s.ledger.Orders().Search(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("search orders: %w", err)
	}
	return found, nil
}

// OrderFlow lists the order's stock flow rows (reserve, pay, restores, …), oldest first.
func (s *Sales) OrderFlow(ctx context.Context, no domain.OrderNo) ([]domain.FlowEntry, error) {
	es, err := s.ledger.Flows().Entries(ctx, string(no))
	if err != nil {
		return nil, fmt.Errorf("load flow of order %s: %w", no, err)
	}
	return es, nil
}

// OrderDeliveries lists the order's delivery messages in the outbox, sent or pending, in the
// order they were recorded: its order.delivered event to the broker (domain.TopicDelivered),
// when a webhook is configured to the storefront's webhook (domain.TopicWebhook), and a guest
// order's e-mails to its buyer (domain.TopicOrderMail, one more per resend), each with its
// attempts and next retry. A message carries the order's numbers, never a code.
func (s *Sales) OrderDeliveries(ctx context.Context, no domain.OrderNo) ([]domain.OutboxRecord, error) {
	rs, err := s.ledger.Outbox().ByKey(ctx, string(no), domain.TopicDelivered, domain.TopicWebhook, domain.TopicOrderMail)
	if err != nil {
		return nil, fmt.Errorf("load deliveries of order %s: %w", no, err)
	}
	return rs, nil
}
