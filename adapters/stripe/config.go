package stripe

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"cardshop/domain"
)

// Name is the provider's name, as in the notify URL.
const Name domain.Provider = "stripe"

// DefaultBaseURL is Stripe's API.
const DefaultBaseURL = "https://api.stripe.com"

// DefaultTimeout bounds one API call when the configuration brings no HTTP client.
const DefaultTimeout = 10 * time.Second

// Config configures a Gateway.
type Config struct {
	// BaseURL is the API's address: DefaultBaseURL when empty. Plain http is allowed only to a
	// loopback address (a simulator): the key travels in every request.
	BaseURL string
	// SecretKey is the account's secret (sk_live_…, sk_test_…) or restricted (rk_…) key.
	SecretKey string
	// WebhookSecrets are the webhook endpoint's signing secrets (whsec_…): one, or the old and
	// the new while a secret rotates.
	WebhookSecrets []string
	// HTTPClient makes the API calls; it must have a Timeout. Nil: a client with DefaultTimeout.
	HTTPClient *http.Client
	// Clock gives now for expires_at and for a notification without an arrival time. Nil: the
	// wall clock.
	Clock domain.Clock
}

// Format prints the configuration without its secrets, for every verb.
func (c Config) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "stripe.Config{BaseURL:%q SecretKey:%s WebhookSecrets:%d}", c.BaseURL, redact(c.SecretKey), len(c.WebhookSecrets))
}

// LogValue logs the configuration without its secrets.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", c.BaseURL), slog.String("secret_key", redact(c.SecretKey)),
		slog.Int("webhook_secrets", len(c.WebhookSecrets)))
}

func redact(s string) string {
	if s == "" {
		return `""`
	}
	return domain.Redacted
}

var (
	keyShape     = regexp.MustCompile(`^(sk|rk)_(test|live)_[A-Za-z0-9]{20,247}$`)
	webhookShape = regexp.MustCompile(`^whsec_[A-Za-z0-9+/=_-]{20,250}$`)
	// documentedKeys are the secret keys printed in Stripe's public documentation and examples:
	// shaped like keys, secret to no one.
	documentedKeys = map[string]bool{"sk_test_4eC39HqLyjWDarjtT1zdp7dc": true, "sk_test_BQokikJOvBiI2HlWgH4olfQ2": true}
	placeholders   = []string{"xxxx", "XXXX", "your", "YOUR", "changeme", "CHANGEME", "placeholder", "PLACEHOLDER", "example", "EXAMPLE", "replace", "REPLACE", "secret", "SECRET", "dummy", "DUMMY"}
)

// checkSecret refuses a value that is not shaped like the secret or that is a placeholder: a
// part after the prefix made of one repeated character or spelling a placeholder word at its
// start. (A real secret is random: a placeholder word inside it is chance, so only a leading
// one counts.)
func checkSecret(what, v string, shape *regexp.Regexp, prefixParts int) error {
	if v == "" {
		return fmt.Errorf("stripe: the %s is empty", what)
	}
	if !shape.MatchString(v) {
		return fmt.Errorf("stripe: the %s is not shaped like one", what)
	}
	tail := v
	for range prefixParts {
		_, tail, _ = strings.Cut(tail, "_")
	}
	if strings.Count(tail, tail[:1]) == len(tail) {
		return fmt.Errorf("stripe: the %s is a placeholder", what)
	}
	for _, p := range placeholders {
		if strings.HasPrefix(tail, p) {
			return fmt.Errorf("stripe: the %s is a placeholder", what)
		}
	}
	return nil
}

// CheckSecretKey refuses a secret key New refuses (the error never quotes it).
func CheckSecretKey(s string) error {
	if err := checkSecret("secret key", s, keyShape, 2); err != nil {
		return err
	}
	if documentedKeys[s] {
		return errors.New("stripe: the secret key is the one printed in Stripe's documentation")
	}
	return nil
}

// CheckWebhookSecret refuses a webhook signing secret New refuses (the error never quotes it).
func CheckWebhookSecret(s string) error { return checkSecret("webhook secret", s, webhookShape, 1) }

// New returns the gateway. It refuses an empty, malformed, placeholder or documented key, a
// missing, malformed or placeholder webhook secret, a base URL that would send the key in
// clear to another host, and an HTTP client without a timeout.
func New(cfg Config) (*Gateway, error) {
	if err := CheckSecretKey(cfg.SecretKey); err != nil {
		return nil, err
	}
	if len(cfg.WebhookSecrets) == 0 {
		return nil, errors.New("stripe: no webhook signing secret")
	}
	g := &Gateway{key: domain.Secret(cfg.SecretKey), client: cfg.HTTPClient, clock: cfg.Clock}
	for i, s := range cfg.WebhookSecrets {
		if err := checkSecret(fmt.Sprintf("webhook secret #%d", i+1), s, webhookShape, 1); err != nil {
			return nil, err
		}
		g.whsecs = append(g.whsecs, domain.Secret(s))
	}
	u, err := baseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	g.base = u
	if g.client == nil {
		g.client = &http.Client{Timeout: DefaultTimeout}
	} else if g.client.Timeout <= 0 {
		return nil, errors.New("stripe: the HTTP client has no timeout")
	}
	if g.clock == nil {
		g.clock = wallClock{}
	}
	return g, nil
}

// CheckBaseURL refuses a base URL New refuses.
func CheckBaseURL(s string) error {
	_, err := baseURL(s)
	return err
}

// baseURL is the API's base URL: DefaultBaseURL when empty; https, or plain http to a loopback
// address (a simulator) only.
func baseURL(base string) (*url.URL, error) {
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, errors.New("stripe: the base URL is not an absolute http(s) URL without query or credentials")
	}
	switch u.Scheme {
	case "https":
	case "http":
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, errors.New("stripe: plain http is allowed to a loopback address only")
		}
	default:
		return nil, errors.New("stripe: the base URL is not an absolute http(s) URL")
	}
	return u, nil
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
