// Package metrics is cardshop's Prometheus instrumentation: one registry per service
// instance (never the global default, so tests and embedders never collide), served by
// Handler at GET /metrics.
//
// It measures what operators page on: orders and payment callbacks by outcome, HTTP latency
// by route, the time each gate operation and each ledger transaction takes, the ledger's
// transaction retries, the sizes, waits and fallbacks of its group-committed order writes,
// the gate's sold-out leases, the payment notifications refused before verification, the outbox backlog and the in-memory delay queue, the differences reconciliation finds,
// and the Go runtime and process.
//
// Labels take values from small fixed sets only (an outcome, a Fiber route pattern, a method,
// a status class, a gate operation, a retry or fallback reason, an enabled payment provider). They never carry an order
// number, a buyer id, a code, a product id or anything else that grows without bound: each
// distinct label value is a time series kept forever by Prometheus.
//
// It may import domain and the Prometheus client; it knows nothing of HTTP frameworks, SQL or
// Redis (bootstrap hands it functions to read).
package metrics
