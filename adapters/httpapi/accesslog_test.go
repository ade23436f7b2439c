package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"cardshop/adapters/httpapi"
)

// TestAccessLogLeavesTheQueryOut: with the access log on, every request answered is one line
// (method, path, status, request id), an error's status included, and no query string is
// written: a ?key= (the shop's order access secret) or a signed link's sig never reaches the
// log. Off, there is no such line.
func TestAccessLogLeavesTheQueryOut(t *testing.T) {
	h := newHarness(t, func(c *httpapi.Config) { c.AccessLog = true })
	h.do("GET", "/healthz?key=SECRET-ACCESS-KEY-1", nil)
	h.do("GET", "/api/orders/2503011200007479898526386796?key=SECRET-ACCESS-KEY-2&sig=abc", nil) // no token: 401
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "access" {
			lines = append(lines, m)
		}
	}
	if strings.Contains(h.logs.String(), "SECRET-ACCESS-KEY") || strings.Contains(h.logs.String(), "key=") {
		t.Fatalf("the log holds a query string:\n%s", h.logs.String())
	}
	if len(lines) != 2 {
		t.Fatalf("%d access lines, want 2:\n%s", len(lines), h.logs.String())
	}
	want := []struct {
		path   string
		status float64
	}{{"/healthz", 200}, {"/api/orders/2503011200007479898526386796", 401}}
	for i, w := range want {
		l := lines[i]
		if l["method"] != "GET" || l["path"] != w.path || l["status"] != w.status || l["request_id"] == nil || l["request_id"] == "" {
			t.Errorf("access line %d: %v, want GET %s %v with a request id", i, l, w.path, w.status)
		}
	}

	off := newHarness(t)
	off.do("GET", "/healthz", nil)
	if strings.Contains(off.logs.String(), `"msg":"access"`) {
		t.Fatalf("an access line without the setting:\n%s", off.logs.String())
	}
}
