package bootstrap_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/adapters/porttest"
	"cardshop/domain"
)

const stockPrefix = "cardshop-stock-e2e"

// Two instances on one MariaDB, Redis and RabbitMQ, each watching the stock every 20 ms, sell a
// product with a low-stock threshold out: its creation and first import make no event, and the
// crossing normal → sold out (one order takes every unit between two samples) is recorded
// once, as product.low_stock then product.sold_out, in
// the outbox of both the broker and the webhook; the relays carry each event to RabbitMQ's
// stock queue (routing key = the event type; at least once) and to the storefront (once).
func TestStockEventsOnRealAdaptersOncePerCrossing(t *testing.T) {
	s := newStorefront(t, 0)
	cfg, _, db := realConfigIn(t, time.Minute, "cardshop_test_stock_events")
	withWebhook(s)(&cfg)
	cfg.AMQPPrefix, cfg.StockEventsInterval = stockPrefix, 20*time.Millisecond
	cfg.MySQLConns = 8 // two instances, on a MariaDB that a load check may be using too
	var logs lockedBuffer
	a := runService(t, cfg, &logs)
	cfg.HTTPAddr = freeAddr(t)
	b := runService(t, cfg, &logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the instances' logs:\n%s", logs.String())
		}
	})
	broker := stockQueue(t)

	pid := porttest.NewProductID()
	a.want(201, "POST", "/admin/products", adminToken,
		fmt.Sprintf(`{"id":%d,"name":"Watched","price":100,"max_per_order":10,"low_stock_threshold":3}`, pid), nil)
	codes := make([]string, 10)
	for i := range codes {
		codes[i] = fmt.Sprintf("WATCH-%d-%02d", pid, i)
	}
	a.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, strings.Join(codes, "\n"), nil)
	waitStockState(t, db, pid, domain.StockStateNormal)
	// A change through b makes b read the products at its next sample (a sees its own at once):
	// from then on both instances watch the product, and both see the crossing below.
	b.want(200, "PATCH", fmt.Sprintf("/admin/products/%d", pid), adminToken, `{"low_stock_threshold":3}`, nil)
	time.Sleep(100 * time.Millisecond)

	var tok struct {
		Token string `json:"token"`
	}
	b.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"stock-watcher"}`, &tok)
	b.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":10}`, pid), nil, "Idempotency-Key", fmt.Sprintf("stock-watch-%d", pid))
	waitStockState(t, db, pid, domain.StockStateSoldOut)
	time.Sleep(200 * time.Millisecond) // ten more samples on each instance: no more events

	want := []string{domain.EventLowStock, domain.EventSoldOut}
	for _, topic := range []string{domain.TopicProductStock, domain.TopicWebhookStock} {
		if got := outboxStockTypes(t, db, topic, pid); !slices.Equal(got, want) {
			t.Fatalf("%s rows of product %d: %v, want %v (once per crossing over two instances)", topic, pid, got, want)
		}
	}

	// The storefront gets each event once.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, events, bad := s.snapshot()
		if len(bad) > 0 {
			t.Fatalf("the storefront refused cardshop's requests: %v", bad)
		}
		got := map[string]int{}
		for _, e := range events {
			var d domain.StockEvent
			if err := json.Unmarshal(e.Data, &d); err == nil && d.Product == pid {
				got[e.Type]++
				if d.Type != e.Type || d.EventID != e.ID || d.Threshold != 3 {
					t.Fatalf("webhook event %+v with data %+v", e, d)
				}
			}
		}
		if got[domain.EventLowStock] == 1 && got[domain.EventSoldOut] == 1 && len(got) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("storefront events of product %d after 20s: %v, want one low_stock and one sold_out", pid, got)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// RabbitMQ's stock queue holds each event, routed by its type. Both instances relay the
	// broker's rows without claiming them, so an event may come twice (at least once, as
	// order.delivered): always with the same event_id, the receivers' de-duplication key.
	ids := map[string]map[string]bool{} // type -> event ids
	take := func() bool {
		d, ok, err := broker.Get(stockPrefix+".stock", true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return false
		}
		var e domain.StockEvent
		if err := json.Unmarshal(d.Body, &e); err != nil {
			t.Fatal(err)
		}
		if e.Product != pid {
			return true
		}
		if d.CorrelationId != strconv.FormatInt(int64(pid), 10) || d.RoutingKey != e.Type || d.Type != e.Type {
			t.Fatalf("stock message %+v: correlation %q, routing key %q, type %q", e, d.CorrelationId, d.RoutingKey, d.Type)
		}
		if ids[e.Type] == nil {
			ids[e.Type] = map[string]bool{}
		}
		ids[e.Type][e.EventID] = true
		return true
	}
	deadline = time.Now().Add(20 * time.Second)
	for len(ids[domain.EventLowStock]) < 1 || len(ids[domain.EventSoldOut]) < 1 {
		if !take() {
			if time.Now().After(deadline) {
				t.Fatalf("stock queue after 20s: %v, want low_stock and sold_out of product %d", ids, pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(300 * time.Millisecond) // a copy would be relayed by now
	for take() {
	}
	if len(ids) != 2 || len(ids[domain.EventLowStock]) != 1 || len(ids[domain.EventSoldOut]) != 1 {
		t.Fatalf("stock queue event ids of product %d: %v, want one low_stock and one sold_out", pid, ids)
	}
}

// stockQueue is a channel to RabbitMQ on which the stock queue of stockPrefix is empty.
func stockQueue(t *testing.T) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(porttest.AMQPURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueuePurge(stockPrefix+".stock", false); err != nil {
		t.Fatal(err)
	}
	return ch
}

// waitStockState waits until the product's stored stock state is want.
func waitStockState(t *testing.T, db *sql.DB, pid domain.ProductID, want domain.StockState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got string
	for ctx.Err() == nil {
		if err := db.QueryRowContext(ctx, "SELECT stock_state FROM products WHERE id = ?", int64(pid)).Scan(&got); err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		if domain.StockState(got) == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("stock state of product %d: %q after 20s, want %q", pid, got, want)
}

// outboxStockTypes lists the event types of the product's outbox rows of topic.
func outboxStockTypes(t *testing.T, db *sql.DB, topic string, pid domain.ProductID) []string {
	t.Helper()
	rows, err := db.Query("SELECT payload FROM outbox WHERE topic = ? AND msg_key = ? ORDER BY id",
		topic, strconv.FormatInt(int64(pid), 10))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var types []string
	for rows.Next() {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			t.Fatal(err)
		}
		var e domain.StockEvent
		if err := json.Unmarshal(payload, &e); err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return types
}
