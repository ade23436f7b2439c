package bootstrap

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

const healthUsage = `Usage: cardshop healthcheck [-url URL] [-timeout 3s]

Asks the service's readiness probe (GET /readyz) and exits 0 when it answers 200, 1 otherwise
(not ready, not reachable, too slow): the health check of a container image, which has no shell
or curl. -url defaults to http://<CARDSHOP_HTTP_ADDR>/readyz, with 127.0.0.1 for an address
that names no host.
`

// healthcheck asks /readyz (see healthUsage).
func healthcheck(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, healthUsage) }
	url := fs.String("url", "", "the readiness URL (default: from CARDSHOP_HTTP_ADDR)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArguments(fs); err != nil {
		return err
	}
	if *url == "" {
		addr := os.Getenv("CARDSHOP_HTTP_ADDR")
		if addr == "" {
			addr = "127.0.0.1:8080" // the setting's default
		}
		*url = LocalURL(addr) + "/readyz"
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not reachable: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return errors.New("not ready: " + resp.Status + " " + strings.TrimSpace(string(body)))
	}
	fmt.Fprintln(stdout, "ready")
	return nil
}
