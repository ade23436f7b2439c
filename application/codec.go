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

// DecodeDelivery parses an order.delivered (or webhook) outbox payload.
func DecodeDelivery(b []byte) (domain.DeliveryEvent, error) {
	var e domain.DeliveryEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("decode delivery event: %w", err)
	}
	return e, nil
}
