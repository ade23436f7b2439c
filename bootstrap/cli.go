package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"cardshop/adapters/adminclient"
	"cardshop/adapters/authtoken"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/paysig"
	"cardshop/domain"
)

const usage = `cardshop sells pre-generated card codes.

Usage: cardshop <command> [flags]

Commands:
  serve   run the HTTP service (configuration from CARDSHOP_* environment variables)
  migrate apply the MySQL schema (CARDSHOP_MYSQL_DSN)
  pay     send a signed payment callback for an order, as a payment provider would
  token   issue a buyer token
  secrets print fresh random values for every secret cardshop needs, as an env file
  version print the release, the source commit and the Go release it was built from
  healthcheck  exit 0 when the service's /readyz answers 200 (a container's health check)

Run "cardshop <command> -h" for a command's flags. The operators' commands (products, codes,
reconcile, refunds, orders, operators, audit, alerts) are cardshopctl's: "cardshopctl help".
`

// Main runs the command line and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"serve"}
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(args[1:], stderr)
	case "migrate":
		err = migrate(args[1:], stdout, stderr)
	case "pay":
		err = pay(args[1:], stdout, stderr)
	case "token":
		err = token(args[1:], stdout, stderr)
	case "secrets":
		err = secretsCmd(args[1:], stdout, stderr)
	case "healthcheck":
		err = healthcheck(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, ReadBuildInfo())
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "cardshop:", err)
		return 1
	}
	return 0
}

func serve(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: cardshop serve\n\nRuns the service until SIGINT/SIGTERM. Settings: %s\n", strings.Join(EnvNames(), ", "))
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := LoadConfig(os.Environ())
	if err != nil {
		return err
	}
	app := fx.New(Module(cfg), fx.WithLogger(func() fxevent.Logger { return fxevent.NopLogger }))
	if err := app.Err(); err != nil {
		return wiringError(err)
	}
	// Not app.Run: it exits 1 without a word when a start hook fails (the listen address taken),
	// as the fx logger is silenced.
	start, cancel := context.WithTimeout(context.Background(), app.StartTimeout())
	defer cancel()
	if err := app.Start(start); err != nil {
		return fmt.Errorf("start: %w", wiringError(err))
	}
	sig := <-app.Wait() // until a signal, then every hook stops in reverse order
	stop, cancelStop := context.WithTimeout(context.Background(), app.StopTimeout())
	defer cancelStop()
	if err := app.Stop(stop); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if sig.ExitCode != 0 {
		return fmt.Errorf("stopped with exit code %d", sig.ExitCode)
	}
	return nil
}

// pay signs and sends a callback, reading CARDSHOP_PAYMENT_SECRET. Without -amount it asks
// the admin API for the order's amount (needs CARDSHOP_ADMIN_TOKEN).
func pay(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	order := fs.String("order", "", "order number (required)")
	amount := fs.Int64("amount", -1, "paid amount in minor units (default: the order's amount, read with the admin token)")
	status := fs.String("status", "paid", `"paid" or "failed"`)
	ref := fs.String("ref", "", "provider payment reference (default: generated)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArguments(fs); err != nil {
		return err
	}
	if *order == "" {
		fs.Usage()
		return errors.New("-order is required")
	}
	signer, err := paysig.New(os.Getenv("CARDSHOP_PAYMENT_SECRET"), 0)
	if err != nil {
		return fmt.Errorf("CARDSHOP_PAYMENT_SECRET: %w", err)
	}
	adminToken := os.Getenv("CARDSHOP_ADMIN_TOKEN")
	client := adminclient.New(*url, adminToken)
	if *amount < 0 {
		if adminToken == "" {
			return errors.New("give -amount, or set CARDSHOP_ADMIN_TOKEN to read the order's amount")
		}
		a, err := client.OrderAmount(context.Background(), *order)
		if err != nil {
			return err
		}
		*amount = a
	}
	if *ref == "" {
		*ref = fmt.Sprintf("cli-%d", time.Now().UnixNano())
	}
	answered, answer, err := client.Pay(context.Background(), signer,
		paysig.Notice{OrderNo: *order, Status: *status, Amount: *amount, PaymentRef: *ref}, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d %s\n", answered, bytes.TrimSpace(answer))
	if answered != http.StatusOK {
		return fmt.Errorf("callback answered %d", answered)
	}
	return nil
}

// token issues a buyer token offline with CARDSHOP_TOKEN_SECRET.
func token(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	buyer := fs.String("buyer", "", "buyer id (required)")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArguments(fs); err != nil {
		return err
	}
	issuer, err := authtoken.New(os.Getenv("CARDSHOP_TOKEN_SECRET"))
	if err != nil {
		return fmt.Errorf("CARDSHOP_TOKEN_SECRET: %w", err)
	}
	tok, _, err := issuer.Issue(domain.BuyerID(*buyer), time.Now(), *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// migrate applies the embedded schema to CARDSHOP_MYSQL_DSN (or -dsn) and lists what it did.
func migrate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("CARDSHOP_MYSQL_DSN")
	if def == "" {
		def, _ = EnvDefault("CARDSHOP_MYSQL_DSN")
	}
	dsn := fs.String("dsn", def, "MySQL DSN (default: CARDSHOP_MYSQL_DSN)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArguments(fs); err != nil { // "migrate DSN" must not migrate the default database
		return err
	}
	db, err := mysqlstore.Open(*dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	applied, err := mysqlstore.Migrate(ctx, db)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "schema up to date")
	}
	for _, v := range applied {
		fmt.Fprintln(stdout, "applied", v)
	}
	return nil
}

// noArguments refuses what is left after the flags: the flag package stops at the first
// argument that is not a flag, so "migrate DSN" or "pay N -amount 5" would otherwise run with
// the defaults of everything after it.
func noArguments(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	fs.Usage()
	return fmt.Errorf("%s: unexpected argument %q (every value is given with a flag)", fs.Name(), fs.Arg(0))
}

// wiringError is a failed start's root cause: the constructor's own error, without the
// dependency chain fx and dig wrap around it ("could not build arguments for function …").
func wiringError(err error) error {
	return dig.RootCause(err)
}
