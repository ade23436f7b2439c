package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/httpapi"
	"cardshop/adapters/metrics"
)

// specFile is the description as the package embeds it.
const specFile = "openapi.json"

// apiSpec is openapi.json loaded, validated and routed, for checking answers against it.
type apiSpec struct {
	doc    *openapi3.T
	router routers.Router
}

// loadedSpec loads openapi.json once for every test.
var loadedSpec = sync.OnceValues(func() (*apiSpec, error) {
	// The dev provider's pages are HTML: checked as a string body.
	openapi3filter.RegisterBodyDecoder(fiber.MIMETextHTML, openapi3filter.FileBodyDecoder)
	b, err := os.ReadFile(specFile)
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	return &apiSpec{doc: doc, router: router}, nil
})

func mustSpec(t testing.TB) *apiSpec {
	t.Helper()
	s, err := loadedSpec()
	if err != nil {
		t.Fatalf("%s: %v", specFile, err)
	}
	return s
}

// undescribedAnswers are the only answers to a method and path the description does not name:
// the router's own refusals (and, under /admin, the admin token check, which runs first).
var undescribedAnswers = map[int]string{404: "route_not_found", 405: "method_not_allowed", 401: "unauthorized"}

// check validates one answer to method target (a path or a URL) against the description: the
// status must be described for the operation, and the headers and body must match it. An
// answer to an undescribed method and path must be the router's refusal as an Error body.
func (s *apiSpec) check(method, target string, status int, header http.Header, body []byte) error {
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		return err
	}
	if header.Get(fiber.HeaderXRequestID) == "" && transportStatuses[status] {
		return s.checkBody(req, "TransportError", header, body)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	if method == http.MethodHead {
		// Fiber answers HEAD on every GET route as the GET without its body; ValidateResponse
		// skips HEAD altogether, so check it as the GET's status and headers.
		req.Method, opts.ExcludeResponseBody = http.MethodGet, true
	}
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		return s.checkUndescribed(req, status, header, body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                opts,
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

func (s *apiSpec) checkUndescribed(req *http.Request, status int, header http.Header, body []byte) error {
	code, ok := undescribedAnswers[status]
	if !ok || status == 401 && !strings.HasPrefix(req.URL.Path, "/admin/") {
		return fmt.Errorf("%s %s is not described, yet it answered %d", req.Method, req.URL.Path, status)
	}
	if header.Get(fiber.HeaderXRequestID) == "" {
		return fmt.Errorf("undescribed %s %s: no X-Request-ID", req.Method, req.URL.Path)
	}
	if err := s.checkBody(req, "Error", header, body); err != nil {
		return err
	}
	var e struct{ Code string }
	if _ = json.Unmarshal(body, &e); e.Code != code {
		return fmt.Errorf("undescribed %s %s answered %d %q, want code %q", req.Method, req.URL.Path, status, e.Code, code)
	}
	return nil
}

// transportStatuses are the statuses of the transport's refusals (see TransportError).
var transportStatuses = map[int]bool{400: true, 408: true, 413: true, 431: true}

// checkBody checks that an answer is JSON matching the named schema of the description.
func (s *apiSpec) checkBody(req *http.Request, schema string, header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); ct != fiber.MIMEApplicationJSON {
		return fmt.Errorf("%s %s: Content-Type %q", req.Method, req.URL.Path, ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	if err := s.doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("%s %s: not a %s body: %v", req.Method, req.URL.Path, schema, err)
	}
	return nil
}

// checkSpec fails t when an answer does not match openapi.json. The harness calls it for every
// request it sends, so every test checks the description against what the server says.
func checkSpec(t testing.TB, method, target string, status int, header http.Header, body []byte) {
	t.Helper()
	s, err := loadedSpec()
	if err != nil {
		t.Errorf("%s: %v", specFile, err)
		return
	}
	if err := s.check(method, target, status, header, body); err != nil {
		t.Errorf("%s %s answered %d, which %s does not allow: %v\nbody: %.600s", method, target, status, specFile, err, body)
	}
}

func TestOpenAPISpecIsValid(t *testing.T) {
	s := mustSpec(t)
	if s.doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi %q, want 3.0.3", s.doc.OpenAPI)
	}
	ids := map[string]string{}
	for path, item := range s.doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.OperationID == "" || op.Summary == "" {
				t.Errorf("%s: no operationId or summary", where)
			}
			if other, dup := ids[op.OperationID]; dup {
				t.Errorf("%s and %s share operationId %q", where, other, op.OperationID)
			}
			ids[op.OperationID] = where
			if op.Security == nil {
				t.Errorf("%s: no security requirement (say [] for none)", where)
			}
			if op.Responses.Status(500) == nil {
				t.Errorf("%s: no 500 (a recovered panic answers internal_error anywhere)", where)
			}
			for status, r := range op.Responses.Map() {
				if _, ok := r.Value.Headers[fiber.HeaderXRequestID]; !ok {
					t.Errorf("%s %s: no X-Request-ID header", where, status)
				}
			}
		}
	}
}

// fiberPathParam is a Fiber path parameter, written {name} in OpenAPI.
var fiberPathParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// Every route the app has is described with the same method, and every described operation is
// a route.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	s := mustSpec(t)
	h := newHarness(t, withMetrics(metrics.New())) // /metrics exists only with metrics
	routes := map[string]bool{}
	for _, r := range h.app.GetRoutes(true) { // true: without Use middleware
		if r.Method == fiber.MethodHead { // Fiber adds a HEAD to every GET
			continue
		}
		if strings.ContainsAny(r.Path, "*?+") {
			t.Errorf("%s %s: wildcard or optional parameters have no OpenAPI form", r.Method, r.Path)
		}
		routes[r.Method+" "+fiberPathParam.ReplaceAllString(r.Path, "{$1}")] = true
	}
	described := map[string]bool{}
	for path, item := range s.doc.Paths.Map() {
		for method := range item.Operations() {
			described[method+" "+path] = true
		}
	}
	for _, r := range slices.Sorted(maps.Keys(routes)) {
		if !described[r] {
			t.Errorf("route %s is not in %s", r, specFile)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(described)) {
		if !routes[d] {
			t.Errorf("%s describes %s, which the app has no route for", specFile, d)
		}
	}
	if !routes["POST /api/order"] || !routes["GET /admin/products/{id}"] {
		t.Fatalf("the routes as read miss known ones: %v", routes)
	}
}

// errorCodes returns the codes an error response allows: its Error schema's code enum.
func errorCodes(t *testing.T, where string, r *openapi3.Response) []string {
	t.Helper()
	mt := r.Content.Get(fiber.MIMEApplicationJSON)
	if mt == nil && r.Content.Get(fiber.MIMETextHTML) != nil {
		return nil // a page for a person (the dev provider's pay page): its error is a page too
	}
	if mt == nil || mt.Schema == nil {
		t.Errorf("%s: no JSON body", where)
		return nil
	}
	sch := mt.Schema.Value
	if len(sch.AllOf) != 2 || sch.AllOf[0].Ref != "#/components/schemas/Error" {
		return nil // not an Error body (readyz's 503)
	}
	code := sch.AllOf[1].Value.Properties["code"]
	if code == nil || len(code.Value.Enum) == 0 {
		t.Errorf("%s: the Error body lists no codes", where)
		return nil
	}
	out := make([]string, 0, len(code.Value.Enum))
	for _, c := range code.Value.Enum {
		out = append(out, c.(string))
	}
	return out
}

// The description's error codes are exactly the error table's (adapters/webkit), each under the status it gives
// it, and every code can be met on some operation.
func TestOpenAPIErrorCodesMatchErrorTable(t *testing.T) {
	s := mustSpec(t)
	table := httpapi.ErrorStatuses()
	enum := map[string]bool{}
	for _, c := range s.doc.Components.Schemas["ErrorCode"].Value.Enum {
		enum[c.(string)] = true
	}
	for code := range table {
		if !enum[code] {
			t.Errorf("ErrorCode has no %q", code)
		}
	}
	for code := range enum {
		if _, ok := table[code]; !ok {
			t.Errorf("ErrorCode lists %q, which the error table never answers", code)
		}
	}
	met := map[string]bool{}
	for path, item := range s.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, r := range op.Responses.Map() {
				where := fmt.Sprintf("%s %s %s", method, path, status)
				if status[0] != '4' && status[0] != '5' {
					continue
				}
				for _, code := range errorCodes(t, where, r.Value) {
					if fmt.Sprint(table[code]) != status {
						t.Errorf("%s lists %q, which the error table answers with %d", where, code, table[code])
					}
					met[code] = true
				}
			}
		}
	}
	// Only the router's refusals belong to no operation.
	for code := range table {
		if !met[code] && code != "method_not_allowed" && code != "bad_request" {
			t.Errorf("no operation lists %q", code)
		}
	}
}

// The checker refuses answers that differ from the description, so that the harness's check
// on every request cannot pass by accident.
func TestOpenAPICheckCatchesDrift(t *testing.T) {
	s := mustSpec(t)
	hdr := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req-1"}}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
				continue
			}
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	order := `{"order_no":"250301120000123400000000001","product_id":1,"qty":2,"unit_price":500,"amount":1000,"currency":"CNY",` +
		`"status":"PENDING","created_at":"2025-03-01T12:00:00Z","expires_at":"2025-03-01T12:15:00Z"}`
	for _, tt := range []struct {
		name           string
		method, target string
		status         int
		header         http.Header
		body           string
		ok             bool
	}{
		{"health as described", "GET", "/healthz", 200, hdr(), `{"status":"ok"}`, true},
		{"an order as described", "POST", "/api/order", 201, hdr(), order, true},
		{"a replay as described", "POST", "/api/order", 200, hdr("Idempotent-Replayed", "true"), order, true},
		{"a sold-out order as described", "POST", "/api/order", 409, hdr(), `{"code":"sold_out","message":"sold out","request_id":"req-1"}`, true},
		{"a HEAD as described", "HEAD", "/healthz", 200, hdr(), ``, true},
		{"a transport refusal as described", "POST", "/api/order", 431, hdr("X-Request-Id", ""), `{"code":"bad_request","message":"the request is not valid"}`, true},
		{"an unknown path refused as described", "GET", "/nope", 404, hdr(), `{"code":"route_not_found","message":"no such endpoint","request_id":"req-1"}`, true},

		{"an extra field", "GET", "/healthz", 200, hdr(), `{"status":"ok","uptime":3}`, false},
		{"a value outside the enum", "GET", "/healthz", 200, hdr(), `{"status":"fine"}`, false},
		{"a status not described", "GET", "/healthz", 418, hdr(), `{"status":"ok"}`, false},
		{"no X-Request-ID", "GET", "/healthz", 200, hdr("X-Request-Id", ""), `{"status":"ok"}`, false},
		{"another Content-Type", "GET", "/healthz", 200, hdr("Content-Type", "text/plain"), `ok`, false},
		{"a required field missing", "POST", "/api/order", 201, hdr(), strings.Replace(order, `,"expires_at":"2025-03-01T12:15:00Z"`, "", 1), false},
		{"a wrong type", "POST", "/api/order", 201, hdr(), strings.Replace(order, `"qty":2`, `"qty":"2"`, 1), false},
		{"a malformed time", "POST", "/api/order", 201, hdr(), strings.Replace(order, "2025-03-01T12:15:00Z", "soon", 1), false},
		{"a buyer order showing its buyer", "GET", "/api/orders/250301120000123400000000001", 200, hdr("Cache-Control", "no-store"),
			strings.Replace(order, `{`, `{"buyer_id":"alice",`, 1), false},
		{"a replay without Idempotent-Replayed", "POST", "/api/order", 200, hdr(), order, false},
		{"an error code under another status", "POST", "/api/order", 409, hdr(), `{"code":"product_exists","message":"x","request_id":"req-1"}`, false},
		{"an error without request_id", "POST", "/api/order", 409, hdr(), `{"code":"sold_out","message":"sold out"}`, false},
		{"a 503 without Retry-After", "POST", "/api/order", 503, hdr(), `{"code":"service_unavailable","message":"x","request_id":"req-1"}`, false},
		{"a transport refusal with another code", "POST", "/api/order", 431, hdr("X-Request-Id", ""), `{"code":"sold_out","message":"x"}`, false},
		{"a routed refusal without X-Request-ID", "POST", "/api/order", 409, hdr("X-Request-Id", ""), `{"code":"sold_out","message":"sold out","request_id":"req-1"}`, false},
		{"a HEAD without X-Request-ID", "HEAD", "/healthz", 200, hdr("X-Request-Id", ""), ``, false},
		{"a HEAD with a status not described", "HEAD", "/healthz", 404, hdr(), ``, false},
		{"an unknown path answered", "GET", "/nope", 200, hdr(), `{"status":"ok"}`, false},
		{"an unknown path refused with another code", "GET", "/nope", 404, hdr(), `{"code":"order_not_found","message":"x","request_id":"req-1"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := s.check(tt.method, tt.target, tt.status, tt.header, []byte(tt.body))
			if tt.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tt.ok && err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// GET /openapi.json serves the embedded file as it is, with no token and no rate limit.
func TestOpenAPIServed(t *testing.T) {
	want, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	opt, _, lim := limited(httpapi.RateLimits{PerIP: 1, PerBuyer: 1, Window: time.Hour})
	h := newHarness(t, opt)
	for range 3 {
		r := h.do("GET", "/openapi.json", nil)
		wantStatus(t, r, 200)
		if ct := r.header.Get("Content-Type"); ct != fiber.MIMEApplicationJSON {
			t.Errorf("Content-Type %q", ct)
		}
		if !bytes.Equal(r.body, want) {
			t.Fatalf("GET /openapi.json is not %s (%d bytes, want %d)", specFile, len(r.body), len(want))
		}
		wantStatus(t, h.do("GET", "/docs", nil), 200)
	}
	if calls := lim.calls(); len(calls) != 0 {
		t.Fatalf("the description charged the limiter: %v", calls)
	}
}
