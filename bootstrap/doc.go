// Package bootstrap wires cardshop together with go.uber.org/fx: configuration from the
// environment, the adapter set chosen by one setting (CARDSHOP_ADAPTERS), the background
// workers (sweeper, outbox relay, delay-queue consumer), the HTTP server and graceful
// shutdown, and the service's command line (serve, migrate, secrets, token, pay). The
// operators' commands are cardshopctl's (adapters/adminctl).
//
// It is the only package that imports every other one.
package bootstrap
