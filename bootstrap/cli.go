package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

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

Run "cardshop <command> -h" for a command's flags.
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
		return err
	}
	app.Run() // blocks until a signal, then stops every hook in reverse order
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
	if *order == "" {
		fs.Usage()
		return errors.New("-order is required")
	}
	signer, err := paysig.New(os.Getenv("CARDSHOP_PAYMENT_SECRET"), 0)
	if err != nil {
		return fmt.Errorf("CARDSHOP_PAYMENT_SECRET: %w", err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if *amount < 0 {
		a, err := orderAmount(client, *url, *order, os.Getenv("CARDSHOP_ADMIN_TOKEN"))
		if err != nil {
			return err
		}
		*amount = a
	}
	if *ref == "" {
		*ref = fmt.Sprintf("cli-%d", time.Now().UnixNano())
	}
	body, ts, sig, err := signer.SignedBody(paysig.Notice{OrderNo: *order, Status: *status, Amount: *amount, PaymentRef: *ref}, time.Now())
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(*url, "/")+"/api/payments/callback", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(paysig.HeaderTimestamp, ts)
	req.Header.Set(paysig.HeaderSignature, sig)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Fprintf(stdout, "%d %s\n", resp.StatusCode, bytes.TrimSpace(out))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("callback answered %d", resp.StatusCode)
	}
	return nil
}

func orderAmount(client *http.Client, base, order, adminToken string) (int64, error) {
	if adminToken == "" {
		return 0, errors.New("give -amount, or set CARDSHOP_ADMIN_TOKEN to read the order's amount")
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+"/admin/orders/"+order, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading order %s answered %d", order, resp.StatusCode)
	}
	var o struct {
		Amount int64 `json:"amount"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return 0, fmt.Errorf("reading order %s: %w", order, err)
	}
	return o.Amount, nil
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
		def = envVars["CARDSHOP_MYSQL_DSN"].def
	}
	dsn := fs.String("dsn", def, "MySQL DSN (default: CARDSHOP_MYSQL_DSN)")
	if err := fs.Parse(args); err != nil {
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
