// Package adminctl is cardshopctl's command line: one command per admin task (products,
// codes, reconcile, refunds, orders, operators, the audit log, alerts), each parsing its flags,
// calling the admin API through adminclient and printing the answer for a person. It runs in
// the operator's shell, not in the service: the service's binary (bootstrap) does not link it.
//
// It may import the domain, the application (for shared limits) and adminclient.
package adminctl
