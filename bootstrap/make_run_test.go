package bootstrap_test

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunPrintsWhereAndStopsQuietly runs what `make run` runs — scripts/with-mailpit.sh
// around the service's binary, with the Makefile's dev secrets — and checks the few plain
// lines it prints first (the shop's and the console's addresses following CARDSHOP_HTTP_ADDR,
// the dev login, the mail, that nothing is kept) and that a pay link follows the listen
// address, then interrupts the whole process group as a
// terminal's Ctrl-C does: the service stops gracefully and everything exits 0.
func TestMakeRunPrintsWhereAndStopsQuietly(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := filepath.Join(t.TempDir(), "cardshop")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/cardshop").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	cmd := exec.Command("bash", "../scripts/with-mailpit.sh", bin, "serve")
	cmd.Env = append(os.Environ(), "CARDSHOP_ADMIN_TOKEN=dev-admin-token-change-me",
		"CARDSHOP_PAYMENT_SECRET=dev-payment-secret-change-me", "CARDSHOP_TOKEN_SECRET=dev-token-secret-change-me",
		"CARDSHOP_DEMO=true", "CARDSHOP_DEV_PAYMENTS=true", "CARDSHOP_HTTP_ADDR="+addr,
		// An SMTP server of the caller's: the script starts no Mailpit (the test needs none).
		"CARDSHOP_SMTP_ADDR=127.0.0.1:1", "CARDSHOP_SMTP_FROM=shop@cardshop.localhost", "CARDSHOP_SMTP_TLS=none")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not come up:\n%s\n%s", out.String(), errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Without CARDSHOP_PUBLIC_URL, the dev provider's pay link follows CARDSHOP_HTTP_ADDR.
	c := client{t: t, base: "http://" + addr, http: &http.Client{Timeout: 10 * time.Second}}
	const dev = "dev-admin-token-change-me"
	c.want(201, "POST", "/admin/products", dev, `{"id":777001,"name":"Pay link","price":100,"max_per_order":2}`, nil)
	c.want(200, "POST", "/admin/products/777001/codes", dev, "PAYLINK-1\nPAYLINK-2", nil)
	var tok struct {
		Token string `json:"token"`
	}
	c.want(201, "POST", "/admin/tokens", dev, `{"buyer_id":"paylink"}`, &tok)
	var order struct {
		No string `json:"order_no"`
	}
	c.want(201, "POST", "/api/order", tok.Token, `{"product_id":777001,"qty":1}`, &order, "Idempotency-Key", "paylink-1")
	var pay struct {
		URL string `json:"pay_url"`
	}
	c.want(201, "POST", "/api/orders/"+order.No+"/payment", tok.Token, `{"provider":"dev"}`, &pay)
	if !strings.HasPrefix(pay.URL, "http://"+addr+"/dev/pay/") {
		t.Errorf("the pay link %q does not follow CARDSHOP_HTTP_ADDR %s", pay.URL, addr)
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after Ctrl-C: %v, want exit 0\n%s\n%s", err, out.String(), errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the service did not stop on SIGINT")
	}
	for _, want := range []string{"keep nothing after exit", "shop:       http://" + addr + "/",
		"console:    http://" + addr + "/console  (log in with dev-admin-token-change-me)", "mail:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("make run's lines lack %q:\n%s", want, out.String())
		}
	}
	if lines := strings.Count(strings.TrimSpace(out.String()), "\n") + 1; lines > 5 {
		t.Errorf("make run printed %d lines, want a few:\n%s", lines, out.String())
	}
	// Warnings and errors only: no info line (a JSON log line on stderr) unless asked for.
	if strings.Contains(errOut.String(), `"level":"INFO"`) {
		t.Errorf("info lines without CARDSHOP_ACCESS_LOG or CARDSHOP_LOG_LEVEL:\n%s", errOut.String())
	}
}
