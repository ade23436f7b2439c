// Package httpapi is the driving HTTP adapter (Fiber v2): routes, request and response types,
// buyer and admin authentication, and the error handler that answers with the error table of
// adapters/webkit (shared with the console); also the probes (/healthz, /readyz), through the Metrics
// interface it defines, request metrics and /metrics (so it needs no Prometheus import), and
// the OpenAPI description of every route (openapi.json) at /openapi.json and, as a page, /docs.
//
// It may import the domain, the application, paysig/authtoken/strictjson/webkit and Fiber;
// handlers parse input, call one use case and return its error unchanged.
package httpapi
