// Package mailpit runs a Mailpit (https://mailpit.axllent.org), a real SMTP server that keeps
// what it receives, for one test, and reads its inbox through Mailpit's HTTP API (v1).
//
// Start gives every test a Mailpit process of its own: free loopback ports for SMTP and HTTP,
// its own database in t.TempDir(), stopped at the test's cleanup; tests never share an inbox.
// StartProcess runs the same server outside a test (the load check's), stopped by the caller.
// The mailpit binary is found on PATH, in $(go env GOPATH)/bin or in $MAILPIT_BIN;
// `.ci/services.sh` installs it. When it is missing the test is skipped, and with CI=true it
// fails: a CI run cannot pass by skipping its mail tests.
package mailpit

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Options change how Start runs Mailpit.
type Options struct {
	// Chaos enables Mailpit's chaos triggers (SetChaos): the SMTP server refuses senders,
	// recipients or logins on demand.
	Chaos bool
	// AcceptAnyAuth makes the SMTP server offer AUTH and accept any user and password (without
	// Options.TLS also on an unencrypted connection).
	AcceptAnyAuth bool
	// TLS is "" (clear text), "starttls" (the server offers STARTTLS and requires it) or "tls"
	// (TLS from the first byte), with a certificate for 127.0.0.1 made for this server: trust
	// it through Server.RootCAs.
	TLS string
	// Dir holds its database (and the certificate with TLS). Empty: Start uses the test's
	// t.TempDir(), StartProcess a temporary directory of its own, removed when it stops.
	Dir string
}

// Server is one running Mailpit.
type Server struct {
	// SMTPAddr is the SMTP server's host:port (no TLS, no authentication unless asked for).
	SMTPAddr string
	// URL is the web inbox and its API's base, http://127.0.0.1:port.
	URL string
	// RootCAs holds the SMTP server's own certificate with Options.TLS; nil without.
	RootCAs *x509.CertPool
	http    *http.Client
}

// Binary finds the mailpit executable: $MAILPIT_BIN, PATH, then $(go env GOPATH)/bin.
func Binary() (string, error) {
	if p := os.Getenv("MAILPIT_BIN"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = string(bytes.TrimSpace(out))
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "mailpit")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("mailpit is not installed (run `make services`, or go install github.com/axllent/mailpit@v1.33.1)")
}

// Start runs a Mailpit for t, stopped when t ends. A missing binary skips t, or fails it
// with CI=true.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v; CI=true, so this fails instead of skipping", err)
		}
		t.Skipf("%v (set CI=true to fail instead)", err)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, stop, err := startRetrying(bin, opts)
	if err != nil {
		t.Fatalf("mailpit: %v", err)
	}
	t.Cleanup(stop)
	return s
}

// StartProcess runs a Mailpit outside a test (the load check's own): the same server as
// Start's, its data in opts.Dir (a fresh temporary directory, removed by stop, when empty).
// stop kills it; a missing binary is an error (Binary's), which the caller turns into a skip
// or a failure as it sees fit.
func StartProcess(opts Options) (*Server, func(), error) {
	bin, err := Binary()
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {}
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "mailpit-")
		if err != nil {
			return nil, nil, err
		}
		opts.Dir, cleanup = dir, func() { _ = os.RemoveAll(dir) }
	}
	s, stop, err := startRetrying(bin, opts)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("mailpit: %w", err)
	}
	return s, func() { stop(); cleanup() }, nil
}

// startRetrying starts Mailpit on fresh ports, trying a few times: a free port found by
// listening and closing can be taken by another process before Mailpit binds it.
func startRetrying(bin string, opts Options) (*Server, func(), error) {
	var lastErr error
	for range 3 {
		s, stop, err := start(bin, opts)
		if err == nil {
			return s, stop, nil
		}
		lastErr = err
	}
	return nil, nil, lastErr
}

// start runs one Mailpit on fresh ports, its data in opts.Dir, and waits until both its
// servers answer; stop kills it and waits for its end.
func start(bin string, opts Options) (*Server, func(), error) {
	smtpPort, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	httpPort, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	s := &Server{
		SMTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(smtpPort)),
		URL:      "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)),
		http:     &http.Client{Timeout: 10 * time.Second},
	}
	dir := opts.Dir
	// --max 0 keeps every message: Mailpit's default drops all but the newest 500, and a load
	// run's inbox holds more.
	args := []string{"--smtp", s.SMTPAddr, "--listen", s.URL[len("http://"):], "--max", "0",
		"--database", filepath.Join(dir, "mailpit.db"), "--disable-version-check", "--quiet"}
	if opts.Chaos {
		args = append(args, "--enable-chaos")
	}
	switch opts.TLS {
	case "":
	case "starttls", "tls":
		certFile, keyFile, pool, err := selfSigned(dir)
		if err != nil {
			return nil, nil, err
		}
		s.RootCAs = pool
		args = append(args, "--smtp-tls-cert", certFile, "--smtp-tls-key", keyFile)
		if opts.TLS == "tls" {
			args = append(args, "--smtp-require-tls")
		} else {
			args = append(args, "--smtp-require-starttls")
		}
	default:
		return nil, nil, fmt.Errorf("mailpit: Options.TLS %q: want \"\", \"starttls\" or \"tls\"", opts.TLS)
	}
	if opts.AcceptAnyAuth {
		args = append(args, "--smtp-auth-accept-any")
		if opts.TLS == "" {
			args = append(args, "--smtp-auth-allow-insecure")
		}
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", bin, err)
	}
	// done is closed when the process has ended, waitErr then says how.
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-done
	}
	if err := s.waitReady(done, &waitErr); err != nil {
		stop()
		return nil, nil, fmt.Errorf("%w; its output: %s", err, logs.String())
	}
	return s, stop, nil
}

// waitReady waits until the HTTP API answers ready and the SMTP port accepts connections.
func (s *Server) waitReady(done <-chan struct{}, waitErr *error) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("mailpit exited: %v", *waitErr)
		default:
		}
		if s.ready() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("mailpit did not answer within 20s")
}

// ready reports whether both servers answer.
func (s *Server) ready() bool {
	resp, err := s.http.Get(s.URL + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c, err := net.DialTimeout("tcp", s.SMTPAddr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and localhost, and its key, into
// dir, and returns their files and a pool that trusts the certificate.
func selfSigned(dir string) (certFile, keyFile string, pool *x509.CertPool, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "mailpit test server"},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:        true, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return "", "", nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return "", "", nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", nil, err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", nil, err
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool, nil
}

// freePort is a loopback TCP port nobody listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Address is a mail address as Mailpit reports it.
type Address struct {
	Name    string `json:"Name"`
	Address string `json:"Address"`
}

// Summary is one message of the inbox's list.
type Summary struct {
	ID        string    `json:"ID"` // Mailpit's own id, for Message
	MessageID string    `json:"MessageID"`
	From      Address   `json:"From"`
	To        []Address `json:"To"`
	Subject   string    `json:"Subject"`
	Created   time.Time `json:"Created"`
	Username  string    `json:"Username"` // the SMTP AUTH user it came with
}

// Message is one message in full: its headers, text and HTML bodies.
type Message struct {
	ID        string    `json:"ID"`
	MessageID string    `json:"MessageID"`
	From      Address   `json:"From"`
	To        []Address `json:"To"`
	Subject   string    `json:"Subject"`
	Date      time.Time `json:"Date"`
	Text      string    `json:"Text"`
	HTML      string    `json:"HTML"`
	Username  string    `json:"Username"`
	// Headers are the message's headers, decoded, by their canonical name.
	Headers map[string][]string `json:"-"`
}

// Messages lists every message in the inbox, newest first.
func (s *Server) Messages(ctx context.Context) ([]Summary, error) {
	var out []Summary
	for start := 0; ; {
		var page struct {
			MessagesCount int       `json:"messages_count"`
			Messages      []Summary `json:"messages"`
		}
		q := url.Values{"start": {strconv.Itoa(start)}, "limit": {"250"}}
		if err := s.do(ctx, http.MethodGet, "/api/v1/messages?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Messages...)
		start += len(page.Messages)
		if len(page.Messages) == 0 || start >= page.MessagesCount {
			return out, nil
		}
	}
}

// Message reads one message (by its Mailpit id) with its headers.
func (s *Server) Message(ctx context.Context, id string) (Message, error) {
	var m Message
	if err := s.do(ctx, http.MethodGet, "/api/v1/message/"+url.PathEscape(id), nil, &m); err != nil {
		return Message{}, err
	}
	if err := s.do(ctx, http.MethodGet, "/api/v1/message/"+url.PathEscape(id)+"/headers", nil, &m.Headers); err != nil {
		return Message{}, err
	}
	return m, nil
}

// Raw is one message's source as received.
func (s *Server) Raw(ctx context.Context, id string) (string, error) {
	var b bytes.Buffer
	if err := s.do(ctx, http.MethodGet, "/api/v1/message/"+url.PathEscape(id)+"/raw", nil, &b); err != nil {
		return "", err
	}
	return b.String(), nil
}

// DeleteAll empties the inbox.
func (s *Server) DeleteAll(ctx context.Context) error {
	return s.do(ctx, http.MethodDelete, "/api/v1/messages", nil, nil)
}

// Trigger is one of Mailpit's chaos triggers: the SMTP error code answered, and how often
// (0-100 percent).
type Trigger struct {
	ErrorCode   int `json:"ErrorCode"`
	Probability int `json:"Probability"`
}

// Chaos is the SMTP server's chaos triggers; a zero Trigger turns it off.
type Chaos struct {
	Sender         Trigger `json:"Sender"`
	Recipient      Trigger `json:"Recipient"`
	Authentication Trigger `json:"Authentication"`
}

// SetChaos sets the chaos triggers (Start with Options.Chaos).
func (s *Server) SetChaos(ctx context.Context, c Chaos) error {
	return s.do(ctx, http.MethodPut, "/api/v1/chaos", c, nil)
}

// WaitFor polls the inbox until it holds at least n messages, and returns them; it fails
// after timeout.
func (s *Server) WaitFor(ctx context.Context, n int, timeout time.Duration) ([]Summary, error) {
	deadline := time.Now().Add(timeout)
	for {
		ms, err := s.Messages(ctx)
		if err != nil {
			return nil, err
		}
		if len(ms) >= n || time.Now().After(deadline) {
			if len(ms) < n {
				return ms, fmt.Errorf("mailpit: %d messages after %s, want %d", len(ms), timeout, n)
			}
			return ms, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// do sends one API request with body as JSON (when not nil) and decodes the answer into out
// (a *bytes.Buffer takes it raw; nil drops it).
func (s *Server) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("mailpit: %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("mailpit: %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mailpit: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *bytes.Buffer:
		o.Write(b)
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("mailpit: %s %s: decoding %q: %w", method, path, b, err)
	}
	return nil
}
