// Package adminclient is a client of cardshop's own HTTP API for the command line: the
// admin endpoints (create, change and read a product, read an order, stream a file of codes
// into a product's pool, reconcile a product, refund an order) called with the admin token, and the payment callback, signed as
// a payment provider signs it.
//
// It speaks the API as openapi.json describes it and returns what the service answered;
// reading flags and the environment and printing belong to the command lines (adminctl for
// the operators' commands, bootstrap for the payment callback).
//
// It imports paysig (to sign callbacks) and the standard library only.
package adminclient
