package bootstrap

import (
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"cardshop/adapters/webhook"
	"cardshop/application"
)

// Adapter sets.
const (
	AdaptersMemory = "memory"
	AdaptersReal   = "real"
)

// Config is everything the service reads from its environment. Every variable is listed in
// the README's configuration table.
type Config struct {
	Adapters       string        // CARDSHOP_ADAPTERS: memory | real
	HTTPAddr       string        // CARDSHOP_HTTP_ADDR
	PprofAddr      string        // CARDSHOP_PPROF_ADDR: net/http/pprof on this address when set
	AdminToken     Secret        // CARDSHOP_ADMIN_TOKEN (required, >= 16 chars)
	PaymentSecret  Secret        // CARDSHOP_PAYMENT_SECRET (required, >= 16 chars)
	TokenSecret    Secret        // CARDSHOP_TOKEN_SECRET (required, >= 16 chars)
	OrderTimeout   time.Duration // CARDSHOP_ORDER_TIMEOUT
	IdempotencyTTL time.Duration // CARDSHOP_IDEMPOTENCY_TTL
	BuyerCap       int64         // CARDSHOP_BUYER_CAP: units per buyer, product and order timeout; 0 = no limit
	SweepInterval  time.Duration // CARDSHOP_SWEEP_INTERVAL
	OrphanAfter    time.Duration // CARDSHOP_ORPHAN_AFTER
	RelayInterval  time.Duration // CARDSHOP_RELAY_INTERVAL
	CallbackWindow time.Duration // CARDSHOP_CALLBACK_WINDOW
	LogLevel       slog.Level    // CARDSHOP_LOG_LEVEL: debug | info | warn | error
	ShutdownGrace  time.Duration // CARDSHOP_SHUTDOWN_GRACE

	MySQLDSN   ConnString // CARDSHOP_MYSQL_DSN
	MySQLConns int        // CARDSHOP_MYSQL_MAX_CONNS: connection pool size
	RedisAddrs []string   // CARDSHOP_REDIS_ADDRS (comma-separated; several = cluster)
	// RedisAutoPipeline is CARDSHOP_REDIS_AUTOPIPELINE: batch concurrent reservations.
	RedisAutoPipeline bool
	AMQPURL           ConnString // CARDSHOP_AMQP_URL
	AMQPPrefix        string     // CARDSHOP_AMQP_PREFIX: name prefix of every exchange and queue
	Migrate           bool       // CARDSHOP_MIGRATE: apply migrations at start
	CodeKeys          Secret     // CARDSHOP_CODE_KEYS: "kid:base64key,..." AES-256 keys for codes at rest, first active
	CodeHash          Secret     // CARDSHOP_CODE_HASH_KEY: base64 secret of the codes' de-duplication HMAC

	RatePerIP    int           // CARDSHOP_RATE_PER_IP: requests per window per client IP on /api (0 = off)
	RatePerBuyer int           // CARDSHOP_RATE_PER_BUYER: orders per window per buyer (0 = off)
	RateWindow   time.Duration // CARDSHOP_RATE_WINDOW: the window of both rate limits

	WebhookURL        string        // CARDSHOP_WEBHOOK_URL: the storefront's endpoint for delivery events; empty = none
	WebhookSecret     Secret        // CARDSHOP_WEBHOOK_SECRET: signs webhook requests (required with a URL, >= 16 chars)
	WebhookTimeout    time.Duration // CARDSHOP_WEBHOOK_TIMEOUT: one attempt
	WebhookMaxBackoff time.Duration // CARDSHOP_WEBHOOK_MAX_BACKOFF: longest wait between two attempts
}

// maxWebhookTimeout bounds CARDSHOP_WEBHOOK_TIMEOUT: an attempt must end before the relay's
// claim on the message (application.WebhookLease) does, or another instance could send it too.
const maxWebhookTimeout = time.Minute

// envVar describes one variable: its default and how to store it.
type envVar struct {
	def string
	set func(c *Config, v string) error
}

func durationVar(dst func(*Config) *time.Duration) func(*Config, string) error {
	return durationUpTo(0, "", dst)
}

// durationUpTo reads a positive duration of at most max (0: no bound); why says why the bound.
func durationUpTo(max time.Duration, why string, dst func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration such as 15m or 500ms, got %q", v)
		}
		if max > 0 && d > max {
			return fmt.Errorf("want at most %s (%s), got %q", max, why, v)
		}
		*dst(c) = d
		return nil
	}
}

// rateVar reads a rate limit: requests per CARDSHOP_RATE_WINDOW, 0 = off.
func rateVar(dst func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1_000_000 {
			return fmt.Errorf("want a number from 0 (off) to 1000000, got %q", v)
		}
		*dst(c) = n
		return nil
	}
}

func stringVar(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

func secretVar(dst func(*Config) *Secret) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = Secret(v); return nil }
}

func connVar(dst func(*Config) *ConnString) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = ConnString(v); return nil }
}

var envVars = map[string]envVar{
	"CARDSHOP_ADAPTERS": {AdaptersMemory, func(c *Config, v string) error {
		if v != AdaptersMemory && v != AdaptersReal {
			return fmt.Errorf("want %q or %q, got %q", AdaptersMemory, AdaptersReal, v)
		}
		c.Adapters = v
		return nil
	}},
	"CARDSHOP_HTTP_ADDR":       {"127.0.0.1:8080", stringVar(func(c *Config) *string { return &c.HTTPAddr })},
	"CARDSHOP_ADMIN_TOKEN":     {"", secretVar(func(c *Config) *Secret { return &c.AdminToken })},
	"CARDSHOP_PPROF_ADDR":      {"", stringVar(func(c *Config) *string { return &c.PprofAddr })},
	"CARDSHOP_PAYMENT_SECRET":  {"", secretVar(func(c *Config) *Secret { return &c.PaymentSecret })},
	"CARDSHOP_TOKEN_SECRET":    {"", secretVar(func(c *Config) *Secret { return &c.TokenSecret })},
	"CARDSHOP_ORDER_TIMEOUT":   {"15m", durationVar(func(c *Config) *time.Duration { return &c.OrderTimeout })},
	"CARDSHOP_IDEMPOTENCY_TTL": {"10m", durationVar(func(c *Config) *time.Duration { return &c.IdempotencyTTL })},
	"CARDSHOP_BUYER_CAP": {"100", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1_000_000_000 {
			return fmt.Errorf("want a number of units from 0 (no limit) to 1000000000, got %q", v)
		}
		c.BuyerCap = n
		return nil
	}},
	"CARDSHOP_SWEEP_INTERVAL":  {"30s", durationVar(func(c *Config) *time.Duration { return &c.SweepInterval })},
	"CARDSHOP_ORPHAN_AFTER":    {"2m", durationVar(func(c *Config) *time.Duration { return &c.OrphanAfter })},
	"CARDSHOP_RELAY_INTERVAL":  {"1s", durationVar(func(c *Config) *time.Duration { return &c.RelayInterval })},
	"CARDSHOP_CALLBACK_WINDOW": {"5m", durationVar(func(c *Config) *time.Duration { return &c.CallbackWindow })},
	"CARDSHOP_SHUTDOWN_GRACE":  {"10s", durationVar(func(c *Config) *time.Duration { return &c.ShutdownGrace })},
	"CARDSHOP_LOG_LEVEL": {"info", func(c *Config, v string) error {
		return c.LogLevel.UnmarshalText([]byte(v))
	}},
	"CARDSHOP_MYSQL_DSN": {"root@tcp(127.0.0.1:3306)/test?parseTime=true", connVar(func(c *Config) *ConnString { return &c.MySQLDSN })},
	"CARDSHOP_MYSQL_MAX_CONNS": {"64", func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > 1000 {
			return fmt.Errorf("want a number from 2 to 1000, got %q", v)
		}
		c.MySQLConns = n
		return nil
	}},
	"CARDSHOP_REDIS_ADDRS": {"127.0.0.1:6379", func(c *Config, v string) error {
		c.RedisAddrs = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.RedisAddrs = append(c.RedisAddrs, a)
			}
		}
		if len(c.RedisAddrs) == 0 {
			return fmt.Errorf("want host:port[,host:port...]")
		}
		return nil
	}},
	"CARDSHOP_AMQP_URL": {"amqp://guest:guest@127.0.0.1:5672/", connVar(func(c *Config) *ConnString { return &c.AMQPURL })},
	"CARDSHOP_AMQP_PREFIX": {"cardshop", func(c *Config, v string) error {
		if !validPrefix(v) {
			return fmt.Errorf("want 1 to 64 characters of a-z 0-9 . _ -, got %q", v)
		}
		c.AMQPPrefix = v
		return nil
	}},
	"CARDSHOP_REDIS_AUTOPIPELINE": {"true", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		c.RedisAutoPipeline = b
		return nil
	}},
	"CARDSHOP_MIGRATE": {"false", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		c.Migrate = b
		return nil
	}},
	"CARDSHOP_CODE_KEYS":      {"", secretVar(func(c *Config) *Secret { return &c.CodeKeys })},
	"CARDSHOP_RATE_PER_IP":    {"600", rateVar(func(c *Config) *int { return &c.RatePerIP })},
	"CARDSHOP_RATE_PER_BUYER": {"60", rateVar(func(c *Config) *int { return &c.RatePerBuyer })},
	"CARDSHOP_RATE_WINDOW":    {"1m", durationVar(func(c *Config) *time.Duration { return &c.RateWindow })},
	"CARDSHOP_CODE_HASH_KEY":  {"", secretVar(func(c *Config) *Secret { return &c.CodeHash })},
	"CARDSHOP_WEBHOOK_URL": {"", func(c *Config, v string) error {
		if v != "" {
			if err := webhook.CheckURL(v); err != nil {
				return err
			}
		}
		c.WebhookURL = v
		return nil
	}},
	"CARDSHOP_WEBHOOK_SECRET": {"", secretVar(func(c *Config) *Secret { return &c.WebhookSecret })},
	"CARDSHOP_WEBHOOK_TIMEOUT": {"10s", durationUpTo(maxWebhookTimeout,
		fmt.Sprintf("an attempt must end well within the relay's %s claim", application.WebhookLease),
		func(c *Config) *time.Duration { return &c.WebhookTimeout })},
	"CARDSHOP_WEBHOOK_MAX_BACKOFF": {"10m", durationVar(func(c *Config) *time.Duration { return &c.WebhookMaxBackoff })},
}

// EnvNames lists every variable the service reads, sorted.
func EnvNames() []string {
	names := make([]string, 0, len(envVars))
	for n := range envVars {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// EnvDefault returns a variable's default ("" when it has none) and whether the service reads
// the variable at all.
func EnvDefault(name string) (string, bool) {
	v, ok := envVars[name]
	return v.def, ok
}

// LoadConfig reads the configuration from environ ("KEY=value" pairs, as os.Environ gives).
// An unknown CARDSHOP_ variable, a malformed value or a missing secret is an error, so a typo
// fails the start instead of silently running with a default.
func LoadConfig(environ []string) (Config, error) {
	given := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "CARDSHOP_") {
			continue
		}
		if _, known := envVars[k]; !known {
			return Config{}, fmt.Errorf("unknown setting %s (known: %s)", k, strings.Join(EnvNames(), ", "))
		}
		given[k] = v
	}
	var c Config
	for _, name := range EnvNames() {
		ev := envVars[name]
		v, ok := given[name]
		if !ok {
			v = ev.def
		}
		if err := ev.set(&c, v); err != nil {
			return Config{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	for name, v := range map[string]Secret{"CARDSHOP_ADMIN_TOKEN": c.AdminToken,
		"CARDSHOP_PAYMENT_SECRET": c.PaymentSecret, "CARDSHOP_TOKEN_SECRET": c.TokenSecret} {
		if len(v) < 16 {
			return Config{}, fmt.Errorf("%s must be set to at least 16 characters (the service refuses to run with guessable secrets)", name)
		}
	}
	if c.WebhookURL != "" && len(c.WebhookSecret) < 16 {
		return Config{}, fmt.Errorf("CARDSHOP_WEBHOOK_SECRET must be set to at least 16 characters with CARDSHOP_WEBHOOK_URL (the storefront checks the signature with it)")
	}
	if c.Adapters == AdaptersReal && (c.CodeKeys == "" || c.CodeHash == "") {
		return Config{}, fmt.Errorf("CARDSHOP_CODE_KEYS and CARDSHOP_CODE_HASH_KEY must be set with CARDSHOP_ADAPTERS=real (codes are encrypted at rest; see README)")
	}
	return c, nil
}

func validPrefix(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
