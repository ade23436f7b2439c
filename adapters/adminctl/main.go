package adminctl

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

const usage = `cardshopctl runs cardshop's admin API from a shell: products, codes, orders, operators,
the audit log and alerts. Every command reads the admin token (an operator's or the shared
one) from CARDSHOP_ADMIN_TOKEN and talks to the service at -url (http://127.0.0.1:8080).

Usage: cardshopctl <command> [flags]

Commands:
  import-codes    stream a file of codes into a product's pool
  codes-void      take a file's codes out of a frozen product's pool for good
  reconcile       print a product's reconciliation, optionally repairing the gate
  refund          refund an order: its money through its payment provider, then its codes
  product-create  create a product: name, prices, sale window, limits
  product-update  change the fields of a product given as flags, and only those
  product-show    print a product
  whoami          print who CARDSHOP_ADMIN_TOKEN is: an operator's name and role
  operator-add    add an operator with a role; prints its token, shown only once
  operator-list   list the operators and their roles
  operator-role   change an operator's role
  operator-rotate give an operator a new token, ending the old one
  operator-remove remove an operator, ending its token
  audit           print the audit log of writes, newest first, with filters
  orders          search orders by buyer, product, status and time, newest first
  alerts          print the open alerts (-all: every alert), newest first
  alert-ack       acknowledge an open alert, with an optional note
  confirm-payment mark an order paid by hand (补单), the provider asked first
  operator-disable  disable an operator: its token is refused, its sessions end
  operator-enable   enable a disabled operator again, with its current token

Run "cardshopctl <command> -h" for a command's flags. The service itself, its schema, its
secrets and the test payment callback are the cardshop binary's: "cardshop help".
`

// commands are cardshopctl's commands by name.
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"import-codes":     importCodes,
	"codes-void":       codesVoid,
	"reconcile":        reconcile,
	"refund":           refund,
	"product-create":   productCreate,
	"product-update":   productUpdate,
	"product-show":     productShow,
	"whoami":           whoami,
	"operator-add":     operatorAdd,
	"operator-list":    operatorList,
	"operator-role":    operatorRole,
	"operator-rotate":  operatorRotate,
	"operator-remove":  operatorRemove,
	"audit":            audit,
	"orders":           orders,
	"alerts":           alerts,
	"alert-ack":        alertAck,
	"confirm-payment":  confirmPayment,
	"operator-disable": operatorDisable,
	"operator-enable":  operatorEnable,
}

// Main runs cardshopctl's command line and returns the process exit code: 0 on success (and
// for -h), 2 for a command line that cannot run as given, 1 for any other failure.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	run, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	err := run(args[1:], stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var bad usageError
	if errors.As(err, &bad) {
		fmt.Fprintln(stderr, "cardshopctl:", err)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "cardshopctl:", err)
		return 1
	}
	return 0
}
