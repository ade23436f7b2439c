// Package domain is the heart of cardshop: products, card codes, orders and their state
// machine, the stock-flow ledger rules, money, errors and the ports (interfaces) the
// application needs from the outside world.
//
// It imports the standard library only; a test enforces that. Nothing here performs I/O or
// reads the wall clock: time comes in as a value.
package domain
