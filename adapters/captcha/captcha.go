// Package captcha is the human check (domain.HumanCheck) on Cloudflare Turnstile or hCaptcha:
// a buyer's token is verified server side with the provider's siteverify API, and the answer is
// accepted only for this site (the configured hostname; for hCaptcha the site key too).
package captcha

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"cardshop/domain"
)

// Provider names a human-check provider.
type Provider string

// The providers.
const (
	Turnstile Provider = "turnstile"
	HCaptcha  Provider = "hcaptcha"
)

// The providers' verification endpoints.
const (
	TurnstileVerifyURL = "https://challenges.cloudflare.com/turnstile/v0/siteverify"
	HCaptchaVerifyURL  = "https://api.hcaptcha.com/siteverify"
)

// DefaultTimeout bounds one verification, retries included: a provider that does not answer
// within it counts as unreachable.
const DefaultTimeout = 3 * time.Second

// maxTurnstileToken is the longest token Turnstile issues; a longer one is refused unasked.
const maxTurnstileToken = 2048

// maxReply bounds a reply read from the provider.
const maxReply = 64 << 10

// The adapter's own codes in a verdict, beside the provider's.
const (
	CodeMissingResponse  = "missing-input-response"
	CodeInvalidResponse  = "invalid-input-response"
	CodeHostnameMismatch = "hostname-mismatch"
)

// Config sets up a Verifier.
type Config struct {
	Provider Provider
	Secret   domain.Secret // the site's secret key
	// SiteKey is the widget's site key: sent to hCaptcha, which refuses a token of another
	// site; shown by the pages (Widget). Required for hCaptcha.
	SiteKey string
	// Hostname is the site's host name: a token solved on another site is refused. Required.
	Hostname string
	// VerifyURL overrides the provider's endpoint (a simulator); empty: the provider's.
	VerifyURL string
	// Timeout bounds one verification; zero: DefaultTimeout.
	Timeout time.Duration
	// Client sends the requests; nil: a client of its own.
	Client *http.Client
}

// Verifier is a domain.HumanCheck on one provider. Safe for concurrent use.
type Verifier struct {
	cfg Config
}

var _ domain.HumanCheck = (*Verifier)(nil)

// New checks cfg and returns the Verifier.
func New(cfg Config) (*Verifier, error) {
	switch cfg.Provider {
	case Turnstile:
		if cfg.VerifyURL == "" {
			cfg.VerifyURL = TurnstileVerifyURL
		}
	case HCaptcha:
		if cfg.VerifyURL == "" {
			cfg.VerifyURL = HCaptchaVerifyURL
		}
		if cfg.SiteKey == "" {
			return nil, errors.New("captcha: hcaptcha needs the site key")
		}
	default:
		return nil, fmt.Errorf("captcha: unknown provider %q (turnstile or hcaptcha)", cfg.Provider)
	}
	if cfg.Secret == "" {
		return nil, errors.New("captcha: the secret key is required")
	}
	if cfg.Hostname == "" {
		return nil, errors.New("captcha: the site's hostname is required (tokens of other sites are refused by it)")
	}
	if u, err := url.Parse(cfg.VerifyURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("captcha: the verify URL %q is not an http(s) URL", cfg.VerifyURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	cfg.Hostname = strings.ToLower(cfg.Hostname)
	return &Verifier{cfg: cfg}, nil
}

// Provider is the provider's name.
func (v *Verifier) Provider() Provider { return v.cfg.Provider }

// Widget is the provider and the site key, for the pages.
func (v *Verifier) Widget() domain.HumanWidget {
	return domain.HumanWidget{Provider: string(v.cfg.Provider), SiteKey: v.cfg.SiteKey}
}

// reply is siteverify's answer, in both dialects.
type reply struct {
	Success     bool     `json:"success"`
	ErrorCodes  []string `json:"error-codes"`
	ChallengeTS string   `json:"challenge_ts"`
	Hostname    string   `json:"hostname"`
}

// configCodes are the provider's codes that say the site's own set-up is wrong, or the
// provider failed: no buyer can pass then, so they count as the provider being unavailable.
var configCodes = []string{"missing-input-secret", "invalid-input-secret", "sitekey-secret-mismatch",
	"bad-request", "internal-error", "not-using-dummy-secret", "not-using-dummy-passcode"}

// Verify asks the provider about token (see domain.HumanCheck). An empty token, or a
// Turnstile token over 2048 characters, is refused without a call. A Turnstile verification
// that gets no answer is sent again with the same idempotency_key within the timeout, so the
// retry is not taken for a replay; hCaptcha has no such key and is asked once.
func (v *Verifier) Verify(ctx context.Context, token, remoteIP string) (domain.HumanVerdict, error) {
	if token == "" {
		return domain.HumanVerdict{Codes: []string{CodeMissingResponse}}, nil
	}
	if v.cfg.Provider == Turnstile && len(token) > maxTurnstileToken {
		return domain.HumanVerdict{Codes: []string{CodeInvalidResponse}}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	form := v.form(token, remoteIP)
	attempts := 1
	if v.cfg.Provider == Turnstile {
		attempts = 2
	}
	var r reply
	var err error
	for i := 0; i < attempts; i++ {
		if r, err = v.ask(ctx, form); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return domain.HumanVerdict{}, fmt.Errorf("%s siteverify: %w", v.cfg.Provider, errors.Join(domain.ErrHumanCheckUnavailable, err))
	}
	return v.verdict(r)
}

// form is the request's fields: the secret, the token, the buyer's address when it is one,
// and Turnstile's idempotency key or hCaptcha's site key.
func (v *Verifier) form(token, remoteIP string) url.Values {
	f := url.Values{"secret": {v.cfg.Secret.Reveal()}, "response": {token}}
	if a, err := netip.ParseAddr(strings.TrimSpace(remoteIP)); err == nil {
		f.Set("remoteip", a.Unmap().WithZone("").String())
	}
	switch v.cfg.Provider {
	case Turnstile:
		f.Set("idempotency_key", newUUID())
	case HCaptcha:
		f.Set("sitekey", v.cfg.SiteKey)
	}
	return f
}

// ask POSTs the form once and decodes a 200 reply; anything else is an error.
func (v *Verifier) ask(ctx context.Context, form url.Values) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.cfg.VerifyURL, strings.NewReader(form.Encode()))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := v.cfg.Client.Do(req)
	if err != nil {
		return reply{}, redact(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return reply{}, fmt.Errorf("read the reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return reply{}, fmt.Errorf("answered %d", resp.StatusCode)
	}
	var r reply
	if err := json.Unmarshal(body, &r); err != nil {
		return reply{}, fmt.Errorf("the reply is not siteverify's JSON: %w", err)
	}
	return r, nil
}

// verdict judges a reply: the provider's refusal of the site's own set-up is an error, a
// success for another host name is a refusal.
func (v *Verifier) verdict(r reply) (domain.HumanVerdict, error) {
	out := domain.HumanVerdict{Success: r.Success, Codes: r.ErrorCodes, Hostname: r.Hostname}
	if t, err := time.Parse(time.RFC3339, r.ChallengeTS); err == nil {
		out.ChallengeAt = t
	}
	if !r.Success {
		for _, c := range r.ErrorCodes {
			if slices.Contains(configCodes, c) {
				return domain.HumanVerdict{}, fmt.Errorf("%s siteverify refused the site's set-up (%s): %w",
					v.cfg.Provider, c, domain.ErrHumanCheckUnavailable)
			}
		}
		return out, nil
	}
	if !strings.EqualFold(r.Hostname, v.cfg.Hostname) {
		out.Success = false
		out.Codes = append(slices.Clone(out.Codes), CodeHostnameMismatch)
	}
	return out, nil
}

// redact drops the request's URL from a transport error: it holds no secret (the secret is in
// the body), but a proxy's error may echo the body; only the cause is kept.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// newUUID is a random (version 4) UUID: Turnstile's idempotency_key.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
