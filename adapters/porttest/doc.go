// Package porttest holds the contract suites of the driven ports: RunStockGate, RunLedger,
// RunDelayQueue and RunPaymentGateway check that an adapter behaves as the port documentation
// in package domain says. Each adapter package runs them from its tests, the memory adapters in
// every `go test`, the Redis, MySQL and RabbitMQ adapters whenever the service is reachable,
// and each payment provider against its simulator (adapters/lab/paysim).
//
// Real adapters keep their state across tests and runs, so the suites never assume an empty
// store: every case works on fresh random product ids, order numbers, buyers and keys, and
// asserts only about what it wrote itself (or about deltas of global counts). Cases that
// depend on expiry are mostly left to each adapter's own tests, because a real gate measures
// them with its own clock; the few in RunStockGate (a buyer's budget window, a claim expiring
// under its hold) use windows of about a second and let them pass as WithElapse says: a fake
// clock advances, a real gate sleeps.
//
// It holds contract suites only: the load check's tools (the TCP fault proxy, a process's CPU
// time) are in adapters/lab.
//
// It imports only the domain package and the standard library (including testing).
package porttest
