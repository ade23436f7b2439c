package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A backend that holds its first request past the try timeout: the load balancer sends the
// request again, same key and body, to the other backend, answers with that one's reply, and
// still records the late answer of the first.
func TestRetryingLBSendsAGivenUpTryToTheOtherInstanceAndRecordsItsLateAnswer(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string][]string{}
	backend := func(name string, hold time.Duration, orderNo string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies[name] = append(bodies[name], r.Header.Get("Idempotency-Key")+" "+string(b))
			mu.Unlock()
			time.Sleep(hold)
			w.Header().Set("X-Backend", name)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"order_no":%q}`, orderNo)
		}))
	}
	slow := backend("slow", lbTryTimeout+300*time.Millisecond, "O-1")
	defer slow.Close()
	fast := backend("fast", 0, "O-2") // names another order: the tally must see the conflict
	defer fast.Close()
	lb, err := startRetryingLB(slow.URL, fast.URL)
	if err != nil {
		t.Fatal(err)
	}
	lb.next.Store(1) // the first request goes to backend (1+1)%2 = 0, the slow one

	req, _ := http.NewRequest("POST", lb.url+"/api/order", strings.NewReader(`{"qty":1}`))
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("X-Backend") != "fast" || !strings.Contains(string(b), "O-2") {
		t.Fatalf("answer %d from %q: %s; want the fast backend's 201", resp.StatusCode, resp.Header.Get("X-Backend"), b)
	}
	lb.close() // waits for the slow try's late answer
	mu.Lock()
	if len(bodies["slow"]) != 1 || len(bodies["fast"]) != 1 || bodies["slow"][0] != bodies["fast"][0] {
		t.Errorf("tries: %v; want one each, same key and body", bodies)
	}
	mu.Unlock()
	tl := lb.tally()
	if lb.retried.Load() != 1 || tl.keys != 1 || tl.twice != 1 || tl.late != 1 {
		t.Errorf("retried %d, tally %+v; want 1 retry, 1 key answered twice, 1 late answer", lb.retried.Load(), tl)
	}
	if len(tl.conflicting) != 1 || len(tl.orders) != 2 {
		t.Errorf("conflicting %v, orders %v: two answers naming two orders must be a conflict", tl.conflicting, tl.orders)
	}
}

// A refused connection is retried on the other instance at once; when neither answers, the
// client gets 502 and the failure is counted.
func TestRetryingLBRetriesARefusedConnectionAndAnswers502WhenBothFail(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"order_no":"O-9"}`)
	}))
	defer ok.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	lb, err := startRetryingLB(deadURL, ok.URL)
	if err != nil {
		t.Fatal(err)
	}
	lb.next.Store(1)
	post := func() int {
		req, _ := http.NewRequest("POST", lb.url+"/api/order", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "k2")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	start := time.Now()
	if got := post(); got != 200 {
		t.Errorf("status %d, want the live instance's 200", got)
	}
	if waited := time.Since(start); waited >= lbTryTimeout {
		t.Errorf("a refused connection waited %s for the try timeout", waited)
	}
	lb.setBackend(1, deadURL)
	if got := post(); got != http.StatusBadGateway || lb.failed.Load() != 1 {
		t.Errorf("status %d, failed %d; want 502 and 1 when neither instance answers", got, lb.failed.Load())
	}
	lb.close()
	if tl := lb.tally(); tl.keys != 1 || len(tl.conflicting) != 0 || len(tl.orders) != 1 {
		t.Errorf("tally %+v; want one key, one order, no conflict", tl)
	}
}

func TestPayShareOfIsNearTheShare(t *testing.T) {
	n := 0
	for i := range 10000 {
		if payShareOf(fmt.Sprintf("ORD-%d", i), 0.8) {
			n++
		}
	}
	if n < 7700 || n > 8300 {
		t.Errorf("%d of 10,000 orders paid at a share of 0.8", n)
	}
	if payShareOf("x", 0) || !payShareOf("x", 1) {
		t.Error("share 0 must pay none and share 1 all")
	}
}
