package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"cardshop/adapters/authtoken"
	"cardshop/domain"
)

// instance is one running cardshop process.
type instance struct {
	name string
	addr string
	base string
	cmd  *exec.Cmd
	log  string
	// pprof is the address of its pprof endpoint (CARDSHOP_PPROF_ADDR), "" if none.
	pprof string
}

// startInstance starts `cardshop serve` on the real adapters with a free port; extraEnv
// (NAME=value) comes last, so it may override the harness's settings.
func (e *env) startInstance(ctx context.Context, name string, pprofAddr string, extraEnv ...string) (*instance, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	in := &instance{name: name, addr: addr, base: "http://" + addr, log: filepath.Join(e.dir, name+".log"), pprof: pprofAddr}
	logf, err := os.Create(in.log)
	if err != nil {
		return nil, err
	}
	in.cmd = exec.Command(e.binary, "serve")
	in.cmd.Stdout, in.cmd.Stderr = logf, logf
	// The rate limits as in production behind a load balancer: per buyer on, with a budget the
	// load never reaches (prodBuyerBudget), per IP off (all the load comes from one address).
	in.cmd.Env = append(filteredEnviron(),
		"CARDSHOP_ADAPTERS=real", "CARDSHOP_HTTP_ADDR="+addr, "CARDSHOP_MYSQL_DSN="+e.dsn,
		"CARDSHOP_REDIS_ADDRS="+e.o.redisAddr, "CARDSHOP_AMQP_URL="+e.o.amqpURL, "CARDSHOP_AMQP_PREFIX="+amqpPrefix,
		"CARDSHOP_MIGRATE=true", "CARDSHOP_ADMIN_TOKEN="+e.secrets.admin, "CARDSHOP_PAYMENT_SECRET="+e.secrets.payment,
		"CARDSHOP_TOKEN_SECRET="+e.secrets.token, "CARDSHOP_CODE_KEYS="+e.secrets.codeKeys,
		"CARDSHOP_CODE_HASH_KEY="+e.secrets.codeHash, "CARDSHOP_ORDER_TIMEOUT="+e.o.orderTimeout.String(),
		"CARDSHOP_SWEEP_INTERVAL=1s", "CARDSHOP_ORPHAN_AFTER=10s", "CARDSHOP_MYSQL_MAX_CONNS=48", "CARDSHOP_RELAY_INTERVAL=200ms", "CARDSHOP_LOG_LEVEL=warn",
		"CARDSHOP_PPROF_ADDR="+pprofAddr, "CARDSHOP_BUYER_CAP=1000000", "CARDSHOP_RATE_PER_IP=0", "CARDSHOP_RATE_PER_BUYER="+strconv.Itoa(prodBuyerBudget),
		"CARDSHOP_PUBLIC_URL="+in.base, "CARDSHOP_STOCK_EVENTS_INTERVAL="+stockWatchEvery.String())
	if e.o.chaos {
		// The rate limiter on, as in production (two Redis scripts before every order, under
		// the same faults), with budgets the load never reaches: all of it comes from one IP.
		in.cmd.Env = append(in.cmd.Env, "CARDSHOP_RATE_PER_IP="+strconv.Itoa(chaosRateBudget), "CARDSHOP_RATE_PER_BUYER="+strconv.Itoa(chaosRateBudget))
	}
	if e.o.setting != "" {
		in.cmd.Env = append(in.cmd.Env, e.o.setting)
	}
	if e.stripe != nil {
		in.cmd.Env = append(in.cmd.Env, e.stripe.environ()...)
	}
	in.cmd.Env = append(in.cmd.Env, extraEnv...)
	if err := in.cmd.Start(); err != nil {
		return nil, err
	}
	e.instances = append(e.instances, in)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(in.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return in, nil
			}
		}
		if time.Now().After(deadline) || in.cmd.ProcessState != nil {
			b, _ := os.ReadFile(in.log)
			return nil, fmt.Errorf("%s did not start: %v\n%s", name, err, b)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopInstance stops one instance and removes it from the harness's list, so that later
// scenarios never load it.
func (e *env) stopInstance(in *instance) {
	in.terminate()
	e.dropInstance(in)
}

// chaosRateBudget is the chaos mode's CARDSHOP_RATE_PER_IP and _PER_BUYER: the most the
// service takes, a million requests a minute.
const chaosRateBudget = 1_000_000

// filteredEnviron is the environment without CARDSHOP_* variables (the service refuses
// unknown ones, and the harness sets its own).
func filteredEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CARDSHOP_") {
			out = append(out, kv)
		}
	}
	return out
}

func (e *env) stopInstances() {
	for _, in := range e.instances {
		in.terminate()
	}
	e.instances = nil
}

// terminate stops the process with SIGTERM, and SIGKILL when it has not ended 20 s later.
func (in *instance) terminate() {
	if in.cmd == nil || in.cmd.Process == nil || in.cmd.ProcessState != nil {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = in.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = in.cmd.Process.Kill()
	}
}

// writeTokens issues n buyer tokens into a file the wrk script reads.
func (e *env) writeTokens(n int) error {
	issuer, err := authtoken.New(e.secrets.token)
	if err != nil {
		return err
	}
	var b strings.Builder
	e.buyerTokens = make(map[string]string, n)
	for i := 0; i < n; i++ {
		tok, _, err := issuer.Issue(domain.BuyerID(buyerID(i)), time.Now(), 24*time.Hour)
		if err != nil {
			return err
		}
		e.buyerTokens[buyerID(i)] = tok
		b.WriteString(tok)
		b.WriteByte('\n')
	}
	e.tokensFile = filepath.Join(e.dir, "tokens.txt")
	return os.WriteFile(e.tokensFile, []byte(b.String()), 0o600)
}

func buyerID(i int) string { return fmt.Sprintf("lc-buyer-%05d", i) }

// admin calls an admin endpoint and decodes nothing; it returns the status and body.
func (in *instance) admin(ctx context.Context, token, method, path string, body io.Reader) (int, []byte, error) {
	return request(ctx, http.DefaultClient, method, in.base+path, body, "Authorization", "Bearer "+token)
}

// request sends one request with the given header pairs (name, value, …) and returns the
// answer's status and body (up to 16 MiB: the service's own answers).
func request(ctx context.Context, client *http.Client, method, url string, body io.Reader, header ...string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// asBuyer sends a JSON request to the service as buyer (its token from tokensFile), with the
// extra header pairs, and returns the answer's status and body.
func (e *env) asBuyer(ctx context.Context, client *http.Client, buyer, method, url, body string, header ...string) (int, []byte, error) {
	tok, ok := e.buyerTokens[buyer]
	if !ok {
		return 0, nil, fmt.Errorf("no token of buyer %s", buyer)
	}
	return request(ctx, client, method, url, strings.NewReader(body),
		append([]string{"Authorization", "Bearer " + tok, "Content-Type", "application/json"}, header...)...)
}

func freeAddr() (string, error) {
	a, err := freeAddrs(1)
	if err != nil {
		return "", err
	}
	return a[0], nil
}

// freeAddrs returns n distinct free loopback addresses for servers about to be started. The
// ports are held until all n are picked: picked one at a time, a port closed before its server
// binds it may be handed out again (a chaos run once got one port for its Redis and MariaDB).
func freeAddrs(n int) ([]string, error) {
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run the load check inside the cardshop module")
	}
	return filepath.Dir(mod), nil
}

func runCmd(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return nil
}

func randomSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func machine() string {
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s", runtime.NumCPU(), cpu, runtime.Version())
}

// num formats a rate with thousands separators.
func num(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	n := len(s)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (n-i)%3 == 0 && s[0] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
