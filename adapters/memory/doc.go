// Package memory implements every driven port of cardshop in process memory: the stock gate,
// the ledger (products, card pool, orders, stock flow, outbox) with transactions, the delay
// queue, the event publisher, the alerter and the clock.
//
// It is a complete, fast and correct stand-in for Redis, MySQL and RabbitMQ, used by the
// use-case tests and by the service when it is configured to run without infrastructure.
// Every type is safe for concurrent use and stores copies of the values it is given, never the
// caller's slices or maps. It imports only the domain package and the standard library.
package memory
