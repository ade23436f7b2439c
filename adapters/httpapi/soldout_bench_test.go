package httpapi_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/valyala/fasthttp"

	"cardshop/adapters/httpapi"
	"cardshop/adapters/metrics"
	"cardshop/domain"
)

// BenchmarkSoldOutAnswer measures the whole sold-out answer of POST /api/order through the
// app's fasthttp handler (no network): the middleware the service runs (metrics, request id,
// body, the buyer token), the JSON body, the use case on the memory gate and the 409 answer.
// The app logs at warn and counts metrics, as `cardshop serve` does; each request has its own
// idempotency key and one of 64 buyers' tokens, as the load check's wrk script sends.
func BenchmarkSoldOutAnswer(b *testing.B) {
	h := newHarness(b)
	h.createProduct(1, 1000, 5)
	hc := httpapi.DefaultConfig(adminToken)
	hc.Metrics = metrics.New()
	log := slog.New(httpapi.LogHandler(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	handler := httpapi.New(hc, services(h.shop), h.tokens, h.clock, log).Handler()
	tokens := make([]string, 64)
	for i := range tokens {
		tokens[i] = "Bearer " + h.token(domain.BuyerID(fmt.Sprintf("bench-buyer-%02d", i)))
	}
	body := []byte(`{"product_id":1,"qty":1}`)
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.ResetUserValues() // the locals (the body reader, the buyer) are per request
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/api/order")
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.Header.Set("Authorization", tokens[i%len(tokens)])
		ctx.Request.Header.Set(httpapi.HeaderIdempotencyKey, fmt.Sprintf("bench-key-%012d", i))
		ctx.Request.SetBody(body)
		handler(&ctx)
		if code := ctx.Response.StatusCode(); code != 409 {
			b.Fatalf("status %d: %s", code, ctx.Response.Body())
		}
		i++
	}
}
