package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/paysig"
	"cardshop/adapters/webhook"
	"cardshop/domain"
)

const secret = "webhook-secret-0123456789"

var at = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func notification() domain.Notification {
	return domain.Notification{ID: "delivered:0123", Type: "order.delivered", At: at, Attempt: 3,
		Data: []byte(`{"event_id":"delivered:0123","order_no":"0123","qty":2}`)}
}

func newClient(t testing.TB, url string, hc *http.Client, timeout time.Duration) *webhook.Client {
	t.Helper()
	c, err := webhook.New(webhook.Config{URL: url, Secret: secret, HTTPClient: hc, Timeout: timeout})
	if err != nil {
		t.Fatalf("New(%s): %v", url, err)
	}
	return c
}

// The receiver gets a signed JSON POST over TLS that it can check with the shared secret,
// with the event's id, type and attempt in headers and the event in the body.
func TestNotifyPostsASignedEvent(t *testing.T) {
	verifier, err := paysig.New(secret, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Pointer[webhook.Event]
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/hooks/cardshop" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "wrong request "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		if err := verifier.Check(r.Header.Get(paysig.HeaderTimestamp), r.Header.Get(paysig.HeaderSignature), body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if r.Header.Get(webhook.HeaderEventID) != "delivered:0123" || r.Header.Get(webhook.HeaderEventType) != "order.delivered" ||
			r.Header.Get(webhook.HeaderAttempt) != "3" {
			http.Error(w, "wrong event headers", http.StatusBadRequest)
			return
		}
		var e webhook.Event
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got.Store(&e)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	c := newClient(t, srv.URL+"/hooks/cardshop", srv.Client(), 0)
	if err := c.Notify(t.Context(), notification()); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	e := got.Load()
	if e == nil {
		t.Fatal("the receiver accepted nothing")
	}
	if e.ID != "delivered:0123" || e.Type != "order.delivered" || !e.CreatedAt.Equal(at) ||
		string(e.Data) != string(notification().Data) {
		t.Fatalf("event = %+v (data %s), want the notification", e, e.Data)
	}
}

// A forged or stale signature is what the receiver's check refuses: the signature covers the
// body and the timestamp.
func TestSignatureCoversBodyAndTime(t *testing.T) {
	verifier, _ := paysig.New(secret, time.Minute)
	other, _ := paysig.New("another-secret-0123456789", time.Minute)
	var checks []error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, sig := r.Header.Get(paysig.HeaderTimestamp), r.Header.Get(paysig.HeaderSignature)
		checks = append(checks,
			verifier.Check(ts, sig, body, time.Now()),
			verifier.Check(ts, sig, append(body, ' '), time.Now()),
			verifier.Check(ts, sig, body, time.Now().Add(2*time.Minute)),
			other.Check(ts, sig, body, time.Now()))
	}))
	defer srv.Close()
	if err := newClient(t, srv.URL, nil, 0).Notify(t.Context(), notification()); err != nil {
		t.Fatal(err)
	}
	if len(checks) != 4 || checks[0] != nil {
		t.Fatalf("checks = %v, want the genuine request accepted", checks)
	}
	for i, what := range []string{"", "a changed body", "a stale timestamp", "another secret"} {
		if i > 0 && !errors.Is(checks[i], domain.ErrBadSignature) {
			t.Errorf("%s: check = %v, want ErrBadSignature", what, checks[i])
		}
	}
}

// Anything but a 2xx is a failure to retry: an error status (quoted), a redirect (not
// followed), a receiver slower than the timeout, a closed port, a cancelled context.
func TestNotifyFailures(t *testing.T) {
	var redirected atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/down", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance until 13:00", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/gone", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no such hook", http.StatusNotFound) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) })
	mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { redirected.Add(1) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()

	tests := []struct {
		name, url string
		ctx       context.Context
		want      string
	}{
		{"503", srv.URL + "/down", t.Context(), "503 Service Unavailable: \"maintenance until 13:00\""},
		{"404", srv.URL + "/gone", t.Context(), "404 Not Found"},
		{"redirect", srv.URL + "/moved", t.Context(), "302 Found"},
		{"timeout", srv.URL + "/slow", t.Context(), "Timeout"},
		{"closed port", closedURL, t.Context(), "connection refused"},
		{"cancelled", srv.URL + "/down", cancelled, "context canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := newClient(t, tc.url, nil, 200*time.Millisecond).Notify(tc.ctx, notification())
			if !errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Notify = %v, want ErrUnavailable mentioning %q", err, tc.want)
			}
		})
	}
	if redirected.Load() != 0 {
		t.Fatal("a redirect was followed")
	}
}

func TestNewChecksItsConfig(t *testing.T) {
	for _, u := range []string{"https://shop.example/hooks", "http://127.0.0.1:9000/h", "http://localhost/h", "http://[::1]:80/h"} {
		if _, err := webhook.New(webhook.Config{URL: u, Secret: secret}); err != nil {
			t.Errorf("New(%s) = %v, want accepted", u, err)
		}
	}
	for _, u := range []string{"", "shop.example/hooks", "/hooks", "http://shop.example/hooks", "http://10.0.0.1/h",
		"ftp://shop.example/h", "https://user:pw@shop.example/h", "https://shop.example/h#frag"} {
		if _, err := webhook.New(webhook.Config{URL: u, Secret: secret}); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	if _, err := webhook.New(webhook.Config{URL: "https://shop.example/h", Secret: "short"}); err == nil {
		t.Error("New accepted a short secret")
	}
	if _, err := webhook.New(webhook.Config{URL: "https://shop.example/h", Secret: secret, Timeout: -time.Second}); err == nil {
		t.Error("New accepted a negative timeout")
	}
}
