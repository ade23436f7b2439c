package application

import (
	"encoding/json"
	"fmt"

	"cardshop/domain"
)

// The outbox payloads are JSON so that an operator can read them in the table.

func encodeGateChange(c domain.GateChange) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode gate change: %w", err)
	}
	return b, nil
}

// DecodeGateChange parses a gate.change outbox payload.
func DecodeGateChange(b []byte) (domain.GateChange, error) {
	var c domain.GateChange
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("decode gate change: %w", err)
	}
	return c, nil
}

func encodeDelivery(e domain.DeliveryEvent) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode delivery event: %w", err)
	}
	return b, nil
}

func encodeStockEvent(e domain.StockEvent) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode stock event: %w", err)
	}
	return b, nil
}

// DecodeStockEvent parses a product.stock (or webhook) outbox payload: a StockEvent of one of
// the three stock event types.
func DecodeStockEvent(b []byte) (domain.StockEvent, error) {
	var e domain.StockEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("decode stock event: %w", err)
	}
	if !isStockEvent(e.Type) || e.EventID == "" {
		return e, fmt.Errorf("decode stock event: type %q, event id %q: want a stock event with an id", e.Type, e.EventID)
	}
	return e, nil
}

func isStockEvent(t string) bool {
	return t == domain.EventLowStock || t == domain.EventSoldOut || t == domain.EventRestocked
}

// webhookEvent is what the webhook relay needs of any webhook payload. A DeliveryEvent names
// no type: an empty one is order.delivered.
type webhookEvent struct {
	EventID string `json:"event_id"`
	Type    string `json:"type"`
}

// decodeWebhookEvent returns a webhook payload's event id and notification type.
func decodeWebhookEvent(b []byte) (id, typ string, _ error) {
	var e webhookEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return "", "", fmt.Errorf("decode webhook event: %w", err)
	}
	switch {
	case e.Type == "":
		e.Type = domain.TopicDelivered
	case !isStockEvent(e.Type):
		return "", "", fmt.Errorf("decode webhook event: unknown type %q", e.Type)
	}
	return e.EventID, e.Type, nil
}
