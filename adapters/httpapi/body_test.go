package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestUnreadBodiesDoNotBecomeRequests sends, on one raw connection, requests whose bodies the
// handler never reads, each carrying a second request inside. Exactly one answer may come back
// per request sent: the rest of a body is never parsed as a request of its own.
func TestUnreadBodiesDoNotBecomeRequests(t *testing.T) {
	h := newHarness(t)
	base := serve(t, h)
	addr := strings.TrimPrefix(base, "http://")
	inner := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tt := range []struct {
		name string
		head string
		pad  int
	}{
		{"401 with a short body", "POST /api/order HTTP/1.1\r\nHost: x\r\n", 0},
		// fasthttp prefetches the first 8 KiB of a streamed body: what follows is exactly where a
		// smuggled request would start.
		{"401 with the request right after the prefetch", "POST /api/order HTTP/1.1\r\nHost: x\r\n", 8 << 10},
		{"401 with a body longer than the drain", "POST /admin/products HTTP/1.1\r\nHost: x\r\n", 100 << 10},
		{"GET with a body", "GET /healthz HTTP/1.1\r\nHost: x\r\n", 10},
		{"413 declared too large", "POST /api/payments/callback HTTP/1.1\r\nHost: x\r\n", 70 << 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			payload := strings.Repeat(" ", tt.pad) + inner
			fmt.Fprintf(conn, "%sContent-Length: %d\r\n\r\n%s", tt.head, len(payload), payload)
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			br := bufio.NewReader(conn)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			// Nothing more may come: a second answer would be the smuggled request's.
			_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if res2, err := http.ReadResponse(br, nil); err == nil {
				b, _ := io.ReadAll(res2.Body)
				t.Fatalf("first %d, then a second answer %d %s: the body was parsed as a request", res.StatusCode, res2.StatusCode, b)
			}
		})
	}

	// A keep-alive connection whose short unread body was drained still serves the next request.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(conn, "POST /api/order HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	var statuses []int
	for i := 0; i < 2; i++ {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		var body map[string]any
		_ = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		statuses = append(statuses, res.StatusCode)
	}
	if fmt.Sprint(statuses) != "[401 200]" {
		t.Fatalf("pipelined answers %v", statuses)
	}
}
