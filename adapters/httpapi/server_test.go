package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
	"cardshop/adapters/paysig"
)

// serve runs the harness's app on a loopback listener until the test ends.
func serve(t *testing.T, h *harness) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.app.Listener(ln) }()
	t.Cleanup(func() {
		if err := h.app.ShutdownWithTimeout(5 * time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("listener: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// send sends one request to a real server and checks the answer against openapi.json.
func send(t *testing.T, c *http.Client, method, url string, body io.Reader, hdr ...string) resp {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkSpec(t, method, url, res.StatusCode, res.Header, b)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func TestRealServer(t *testing.T) {
	h := newHarness(t)
	base := serve(t, h)
	c := &http.Client{Timeout: 60 * time.Second}
	admin := []string{"Authorization", bearer(adminToken)}

	wantStatus(t, send(t, c, "POST", base+"/admin/products", strings.NewReader(`{"id":1,"name":"x","price":100,"max_per_order":5}`), admin...), 201)

	// 200,000 codes streamed chunked (no Content-Length), written while the server reads.
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriter(pw)
		for i := 0; i < 200_000; i++ {
			fmt.Fprintf(bw, "STREAM-%07d\n", i)
		}
		pw.CloseWithError(bw.Flush())
	}()
	r := send(t, c, "POST", base+"/admin/products/1/codes", pr, append(admin, "Content-Type", "text/plain")...)
	wantStatus(t, r, 200)
	var rep importJSON
	r.decode(t, &rep)
	if rep.Added != 200_000 || rep.Duplicates != 0 || rep.Invalid != 0 {
		t.Fatalf("streamed import %+v", rep)
	}
	// The same with a Content-Length.
	r = send(t, c, "POST", base+"/admin/products/1/codes", strings.NewReader(strings.Join(codes("LEN", 1000), "\n")), admin...)
	wantStatus(t, r, 200)
	r.decode(t, &rep)
	if rep.Added != 1000 {
		t.Fatalf("import with a length %+v", rep)
	}

	// A normal order, read back, paid, read with its codes.
	tok := h.token("alice")
	buyer := []string{"Authorization", bearer(tok), "Content-Type", "application/json"}
	r = send(t, c, "POST", base+"/api/order", strings.NewReader(`{"product_id":1,"qty":2}`), append(buyer, httpapi.HeaderIdempotencyKey, "key-00000001")...)
	wantStatus(t, r, 201)
	var o orderJSON
	r.decode(t, &o)
	body, ts, sig, _ := h.signer.SignedBody(paysig.Notice{OrderNo: o.OrderNo, Status: "paid", Amount: o.Amount, PaymentRef: "r"}, h.clock.Now())
	wantStatus(t, send(t, c, "POST", base+"/api/payments/callback", bytes.NewReader(body), paysig.HeaderTimestamp, ts, paysig.HeaderSignature, sig), 200)
	r = send(t, c, "GET", base+"/api/orders/"+o.OrderNo, nil, buyer...)
	wantStatus(t, r, 200)
	o = orderJSON{}
	r.decode(t, &o)
	if o.Status != "PAID" || len(o.Codes) != 2 {
		t.Fatalf("order read back %+v", o)
	}

	before := h.levels(1)
	// A 1 MiB Idempotency-Key: refused by the server before any handler.
	// The server answers 431 and closes while the client is still writing the header, so the
	// client may see the 431 or a reset connection; both are a refusal.
	req, _ := http.NewRequest("POST", base+"/api/order", strings.NewReader(`{"product_id":1,"qty":1}`))
	req.Header.Set("Authorization", bearer(tok))
	req.Header.Set(httpapi.HeaderIdempotencyKey, strings.Repeat("k", 1<<20))
	if res, err := c.Do(req); err == nil {
		res.Body.Close()
		if res.StatusCode < 400 || res.StatusCode >= 500 {
			t.Fatalf("1 MiB key answered %d", res.StatusCode)
		}
	}
	// A header over the server's 4 KiB read buffer but small enough to be written whole: the
	// server's own 431, still in the JSON error shape. (No handler ran, so there is no
	// request id.)
	r = send(t, c, "POST", base+"/api/order", strings.NewReader(`{"product_id":1,"qty":1}`), append(buyer, httpapi.HeaderIdempotencyKey, strings.Repeat("k", 5<<10))...)
	var e errorJSON
	r.decode(t, &e)
	if r.status != http.StatusRequestHeaderFieldsTooLarge || e.Code != "bad_request" || e.Message == "" {
		t.Fatalf("5 KiB key: %s", r)
	}
	// A chunked order body over 64 KiB. It stays within the 64 KiB the server drains after a
	// refusal: a longer one is refused the same way, but the server then closes with the rest
	// unread and the TCP reset can reach the client while it is still writing, before it reads
	// the 413 (TestUnreadBodiesDoNotBecomeRequests covers that case on a raw connection).
	big := io.MultiReader(strings.NewReader(`{"product_id":1,"qty":1,"pad":"`), strings.NewReader(strings.Repeat("x", 100<<10)), strings.NewReader(`"}`))
	wantError(t, send(t, c, "POST", base+"/api/order", big, append(buyer, httpapi.HeaderIdempotencyKey, "key-00000002")...), 413, "body_too_large")
	if got := h.levels(1); got != before {
		t.Fatalf("refused requests reserved stock: %+v, was %+v", got, before)
	}
	// The connections the refusals used (or new ones) still serve.
	wantStatus(t, send(t, c, "GET", base+"/healthz", nil), 200)
}
