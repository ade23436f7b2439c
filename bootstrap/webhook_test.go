package bootstrap_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/paysig"
	"cardshop/adapters/webhook"
	"cardshop/bootstrap"
	"cardshop/domain"
)

const webhookSecret = "webhook-secret-0123456789-abcdefgh"

// storefront is a storefront's webhook endpoint: it answers 503 to the first refuse requests,
// then checks each request's signature and keeps the event.
type storefront struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	refuse int
	tries  []string // X-Cardshop-Attempt of every request
	events []webhook.Event
	bad    []string // requests whose signature or body did not check
}

func newStorefront(t *testing.T, refuse int) *storefront {
	s := &storefront{t: t, refuse: refuse}
	verifier, err := paysig.New(webhookSecret, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tries = append(s.tries, r.Header.Get(webhook.HeaderAttempt))
		if len(s.tries) <= s.refuse {
			http.Error(w, "storefront deploying", http.StatusServiceUnavailable)
			return
		}
		if err := verifier.Check(r.Header.Get(paysig.HeaderTimestamp), r.Header.Get(paysig.HeaderSignature), body, time.Now()); err != nil {
			s.bad = append(s.bad, err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var e webhook.Event
		if err := json.Unmarshal(body, &e); err != nil || e.ID != r.Header.Get(webhook.HeaderEventID) {
			s.bad = append(s.bad, fmt.Sprintf("body %s: %v", body, err))
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		s.events = append(s.events, e)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *storefront) snapshot() (tries []string, events []webhook.Event, bad []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tries...), append([]webhook.Event(nil), s.events...), append([]string(nil), s.bad...)
}

// withWebhook points the service at the storefront and relays often.
func withWebhook(s *storefront) func(*bootstrap.Config) {
	return func(c *bootstrap.Config) {
		c.WebhookURL, c.WebhookSecret, c.WebhookTimeout = s.srv.URL+"/hooks/cardshop", webhookSecret, 2*time.Second
		c.RelayInterval = 100 * time.Millisecond
	}
}

// withoutStockWatch turns the stock watch off, for tests that count every request the
// storefront gets (the shared test database holds other tests' products, whose stock may have
// crossed since; the stock events have tests of their own).
func withoutStockWatch(c *bootstrap.Config) { c.StockEventsInterval = 0 }

// sellAndWatchWebhook sells one order through the API and the `pay` command, then waits for
// the storefront to accept its delivery event: refused twice (503), accepted on the third
// attempt after the backoff, signed, with the order in its data, and counted in /metrics.
func sellAndWatchWebhook(t *testing.T, c client, s *storefront, pid domain.ProductID) {
	c.want(201, "POST", "/admin/products", adminToken, fmt.Sprintf(`{"id":%d,"name":"Hooked","price":700,"max_per_order":2}`, pid), nil)
	c.want(200, "POST", fmt.Sprintf("/admin/products/%d/codes", pid), adminToken, fmt.Sprintf("HOOK-%d-1\nHOOK-%d-2", pid, pid), nil)
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", adminToken, `{"buyer_id":"hooked-buyer"}`, &tok)
	var order orderBody
	c.want(201, "POST", "/api/order", tok.Token, fmt.Sprintf(`{"product_id":%d,"qty":2}`, pid), &order, "Idempotency-Key", fmt.Sprintf("webhook-%d", pid))
	t.Setenv("CARDSHOP_PAYMENT_SECRET", paymentSecret)
	var out, errOut strings.Builder
	if code := bootstrap.Main([]string{"pay", "-url", c.base, "-order", order.OrderNo, "-amount", "1400"}, &out, &errOut); code != 0 {
		t.Fatalf("pay exited %d: %s %s", code, out.String(), errOut.String())
	}

	deadline := time.Now().Add(20 * time.Second)
	var events []webhook.Event
	for {
		var tries, bad []string
		tries, events, bad = s.snapshot()
		if len(bad) > 0 {
			t.Fatalf("the storefront refused cardshop's requests: %v", bad)
		}
		if len(events) > 0 {
			if strings.Join(tries, ",") != "1,2,3" {
				t.Fatalf("attempt headers %v, want 1,2,3: refused twice, then accepted", tries)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event accepted after 20s; attempts so far %v", tries)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var data domain.DeliveryEvent
	if err := json.Unmarshal(events[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	if events[0].ID != "delivered:"+order.OrderNo || events[0].Type != "order.delivered" ||
		string(data.OrderNo) != order.OrderNo || data.Product != pid || data.Qty != 2 || data.Amount != 1400 || data.Buyer != "hooked-buyer" {
		t.Fatalf("event %+v with data %+v, want order %s of product %d", events[0], data, order.OrderNo, pid)
	}
	// The event carries no codes: the storefront reads them with the buyer's token.
	if strings.Contains(string(events[0].Data), "HOOK-") {
		t.Fatalf("the webhook event carries codes: %s", events[0].Data)
	}

	// Nothing more comes: the accepted event is not sent again.
	time.Sleep(500 * time.Millisecond)
	if tries, events, _ := s.snapshot(); len(tries) != 3 || len(events) != 1 {
		t.Fatalf("after delivery: %d requests, %d events; want 3 and 1", len(tries), len(events))
	}
	status, body := c.do("GET", "/metrics", "", "")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{
		`cardshop_webhook_deliveries_total{outcome="delivered"} 1`,
		`cardshop_webhook_deliveries_total{outcome="failed"} 2`,
		"cardshop_webhook_backlog 0",
		"cardshop_webhook_duration_seconds_count 3",
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestWebhookDeliveredAndRetriedOnMemory(t *testing.T) {
	s := newStorefront(t, 2)
	sellAndWatchWebhook(t, startService(t, withWebhook(s), withoutStockWatch), s, 77)
}

func TestWebhookDeliveredAndRetriedOnRealAdapters(t *testing.T) {
	s := newStorefront(t, 2)
	c, _, _ := realService(t, time.Minute, withWebhook(s), withoutStockWatch)
	sellAndWatchWebhook(t, c, s, domain.ProductID(time.Now().UnixNano()%1_000_000_000+1))
}
