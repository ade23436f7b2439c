// Command cardshopctl is the operators' command line for a running cardshop: it calls the
// admin API; see "cardshopctl help". The service itself is cmd/cardshop.
package main

import (
	"os"

	"cardshop/adapters/adminctl"
)

func main() { os.Exit(adminctl.Main(os.Args[1:], os.Stdout, os.Stderr)) }
