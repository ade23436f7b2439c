// Package bootstrap wires cardshop together with go.uber.org/fx: configuration from the
// environment, the adapter set chosen by one setting (CARDSHOP_ADAPTERS), the background
// workers (sweeper, outbox relay, delay-queue consumer), the HTTP server and graceful
// shutdown, and the command line: its commands read flags and the environment, call the
// service through adapters/adminclient and print the answers.
//
// It is the only package that imports every other one.
package bootstrap
