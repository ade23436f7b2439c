// Command cardshop is the service's one binary; see "cardshop help".
package main

import (
	"os"

	"cardshop/bootstrap"
)

func main() { os.Exit(bootstrap.Main(os.Args[1:], os.Stdout, os.Stderr)) }
