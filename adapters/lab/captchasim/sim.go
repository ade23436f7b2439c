// Package captchasim simulates the server side of two human-check providers, Cloudflare
// Turnstile and hCaptcha: an HTTP server speaking each one's siteverify dialect as their public
// documentation describes it, which issues tokens a test "solves" (Solve) and verifies them as
// the provider does: once (a second verification is refused), for 300 seconds, for the secret
// and site key they were issued under. An outage mode answers 5xx or hangs.
//
// Turnstile (POST /turnstile/v0/siteverify): form or JSON fields secret, response, remoteip,
// idempotency_key; the reply is JSON {success, error-codes, challenge_ts, hostname, action,
// cdata, messages}, "error-codes" always present; a used or expired token is
// "timeout-or-duplicate", except a retry with the idempotency_key of the first verification,
// which gets the first reply again; a response over 2048 characters is invalid.
//
// hCaptcha (POST /siteverify): form fields only, secret, response, remoteip, sitekey; the reply
// is JSON {success, challenge_ts, hostname, credit} or {success: false, error-codes}; a used
// token is "already-seen-response", an expired one "expired-input-response", a token issued
// for another site key "invalid-input-response", a sitekey the secret does not own
// "sitekey-secret-mismatch".
package captchasim

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Dialect is the provider a Sim speaks as.
type Dialect int

// The dialects.
const (
	Turnstile Dialect = iota + 1
	HCaptcha
)

// TokenLifetime is how long a token verifies after it was solved, for both providers.
const TokenLifetime = 300 * time.Second

// MaxTurnstileToken is the longest response Turnstile accepts.
const MaxTurnstileToken = 2048

// Outage is what the simulator does to every verification.
type Outage int

// The outage modes.
const (
	Up       Outage = iota // answers as the provider does
	Error5xx               // answers 500 (Turnstile: with its internal-error reply) or 503
	Hang                   // answers nothing until the request is given up or the Sim closes
)

// Config sets up a Sim.
type Config struct {
	Dialect Dialect
	Secret  string // the one secret the provider knows
	SiteKey string // the site key the secret owns
	// Now is the provider's clock; nil: time.Now. Tests move it to expire tokens.
	Now func() time.Time
}

// Sim is one provider's verification server.
type Sim struct {
	cfg  Config
	srv  *httptest.Server
	stop chan struct{}

	mu     sync.Mutex
	tokens map[string]*token
	outage Outage
	calls  int
}

type token struct {
	siteKey, hostname, action, cdata string
	solvedAt                         time.Time
	used                             bool
	idemKey                          string         // Turnstile: the idempotency key of the first verification
	first                            map[string]any // Turnstile: the first verification's reply
}

// New starts a Sim on loopback; Close stops it.
func New(cfg Config) *Sim {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sim{cfg: cfg, stop: make(chan struct{}), tokens: map[string]*token{}}
	mux := http.NewServeMux()
	switch cfg.Dialect {
	case Turnstile:
		mux.HandleFunc("/turnstile/v0/siteverify", s.turnstile)
	case HCaptcha:
		mux.HandleFunc("/siteverify", s.hcaptcha)
	default:
		panic("captchasim: unknown dialect")
	}
	s.srv = httptest.NewServer(s.outages(mux))
	return s
}

// VerifyURL is the siteverify endpoint to configure the adapter with.
func (s *Sim) VerifyURL() string {
	if s.cfg.Dialect == Turnstile {
		return s.srv.URL + "/turnstile/v0/siteverify"
	}
	return s.srv.URL + "/siteverify"
}

// Close releases hanging requests and stops the server.
func (s *Sim) Close() {
	close(s.stop)
	s.srv.Close()
}

// Solve is a browser solving the widget on hostname with the Sim's site key: a fresh token.
func (s *Sim) Solve(hostname string) string { return s.SolveFor(s.cfg.SiteKey, hostname, "", "") }

// SolveFor solves a widget of siteKey on hostname with Turnstile's action and cdata.
func (s *Sim) SolveFor(siteKey, hostname, action, cdata string) string {
	b := make([]byte, 48)
	_, _ = rand.Read(b)
	prefix := "0."
	if s.cfg.Dialect == HCaptcha {
		prefix = "P1_"
	}
	t := prefix + base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	s.tokens[t] = &token{siteKey: siteKey, hostname: hostname, action: action, cdata: cdata, solvedAt: s.cfg.Now()}
	s.mu.Unlock()
	return t
}

// SetOutage switches the outage mode.
func (s *Sim) SetOutage(o Outage) {
	s.mu.Lock()
	s.outage = o
	s.mu.Unlock()
}

// Calls counts the verification requests the Sim received (outages included).
func (s *Sim) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// outages counts every request and applies the outage mode before the dialect's handler.
func (s *Sim) outages(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls++
		o := s.outage
		s.mu.Unlock()
		switch o {
		case Up:
		case Error5xx:
			if s.cfg.Dialect == Turnstile {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(`{"success":false,"error-codes":["internal-error"],"messages":[]}`))
				return
			}
			http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
			return
		case Hang:
			select {
			case <-r.Context().Done():
			case <-s.stop:
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}
