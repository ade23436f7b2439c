// Package application holds cardshop's use cases, one file each: placing an order, the
// payment callback, closing expired orders, the sweeper and its return of orphan reservations,
// refunds, reading an order, products and code imports, reconciliation and the outbox relay.
//
// It orchestrates the domain's ports and may import only the domain and the standard library:
// it knows no SQL, Lua or HTTP.
package application
