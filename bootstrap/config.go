package bootstrap

import (
	"cardshop/adapters/epay"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"cardshop/adapters/alertpush"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/mail"
	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/webhook"
	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// Adapter sets.
const (
	AdaptersMemory = "memory"
	AdaptersReal   = "real"
)

// Config is everything the service reads from its environment. Every variable is listed in
// the configuration table of docs/CONFIGURATION.md.
type Config struct {
	Adapters      string        // CARDSHOP_ADAPTERS: memory | real
	HTTPAddr      string        // CARDSHOP_HTTP_ADDR
	PprofAddr     string        // CARDSHOP_PPROF_ADDR: net/http/pprof on this address when set
	AdminToken    domain.Secret // CARDSHOP_ADMIN_TOKEN (required, >= 16 chars; real adapters: >= 32, not published)
	PaymentSecret domain.Secret // CARDSHOP_PAYMENT_SECRET (required, >= 16 chars; real adapters: >= 32, not published)
	TokenSecret   domain.Secret // CARDSHOP_TOKEN_SECRET (required, >= 16 chars; real adapters: >= 32, not published)
	// Config is the use cases' settings, as the application states them: the table binds
	// CARDSHOP_ORDER_TIMEOUT, _IDEMPOTENCY_TTL, _BUYER_CAP, _ORPHAN_AFTER,
	// _NOTIFICATION_RETENTION, _REFUSED_NOTIFICATION_RETENTION, _SALE_START_MARGIN,
	// _WEBHOOK_MAX_BACKOFF, _CURRENCY, _RETURN_URL, _PAYMENT_CLOSE_GRACE, _MAIL_CODES and
	// _MAIL_ATTEMPTS straight to its fields; the others keep application.DefaultConfig's
	// values. A buyer's budget lasts one order timeout (BuyerWindow zero). NotifyURL, OrderURL,
	// and ReturnURL when not set, follow from PublicURL, and OrderAccessKey from TokenSecret
	// (newApp).
	application.Config
	SweepInterval  time.Duration // CARDSHOP_SWEEP_INTERVAL
	RelayInterval  time.Duration // CARDSHOP_RELAY_INTERVAL
	CallbackWindow time.Duration // CARDSHOP_CALLBACK_WINDOW
	LogLevel       slog.Level    // CARDSHOP_LOG_LEVEL: debug | info | warn | error
	ShutdownGrace  time.Duration // CARDSHOP_SHUTDOWN_GRACE
	RequestTimeout time.Duration // CARDSHOP_REQUEST_TIMEOUT: the deadline of every /api request
	// ClockOffset is CARDSHOP_CLOCK_OFFSET: added to the wall clock; for tests of instances
	// whose clocks disagree (the load check's start-instant scenario). 0 in production.
	ClockOffset time.Duration
	// StockEventsInterval is CARDSHOP_STOCK_EVENTS_INTERVAL: how often the stock watch samples
	// the gate for low-stock, sold-out and restocked crossings; 0: never (no stock events).
	StockEventsInterval time.Duration
	// ConsoleTimeZone is CARDSHOP_CONSOLE_TIMEZONE: the zone the console shows and reads times
	// in until an operator picks another (per browser, on the console's settings page).
	ConsoleTimeZone *time.Location

	MySQLDSN   ConnString // CARDSHOP_MYSQL_DSN
	MySQLConns int        // CARDSHOP_MYSQL_MAX_CONNS: connection pool size
	RedisAddrs []string   // CARDSHOP_REDIS_ADDRS (comma-separated; several = cluster)
	// RedisAutoPipeline is CARDSHOP_REDIS_AUTOPIPELINE: batch concurrent reservations.
	RedisAutoPipeline bool
	// RedisMaster is CARDSHOP_REDIS_MASTER: the Sentinel master name; with it RedisAddrs are
	// the Sentinels' addresses and the client follows failovers.
	RedisMaster string
	// RedisPrefix is CARDSHOP_REDIS_PREFIX: the namespace of every Redis key of the shop
	// ("" for none), so that several shops share one Redis.
	RedisPrefix string
	// RedisReplicaAcks is CARDSHOP_REDIS_REPLICA_ACKS: how many replicas must acknowledge a
	// reservation within RedisReplicaWait (CARDSHOP_REDIS_REPLICA_WAIT) before it is answered.
	RedisReplicaAcks int
	RedisReplicaWait time.Duration
	// SoldOutLease is CARDSHOP_SOLDOUT_LEASE: the period of the gate's sold-out leases (0: none).
	SoldOutLease time.Duration
	AMQPURL      ConnString // CARDSHOP_AMQP_URL
	AMQPPrefix   string     // CARDSHOP_AMQP_PREFIX: name prefix of every exchange and queue
	// AMQPUnconfirmed is CARDSHOP_AMQP_UNCONFIRMED_CLOSES: how many placed orders may be
	// answered before the message that schedules their close is confirmed (0: none).
	AMQPUnconfirmed int
	Migrate         bool          // CARDSHOP_MIGRATE: apply migrations at start
	CodeKeys        domain.Secret // CARDSHOP_CODE_KEYS: "kid:base64key,..." AES-256 keys for codes at rest, first active
	CodeHash        domain.Secret // CARDSHOP_CODE_HASH_KEY: base64 secret of the codes' de-duplication HMAC

	// LedgerBatch is CARDSHOP_LEDGER_BATCH: write concurrent placed orders in shared
	// transactions (group commit); LedgerBatchWait (CARDSHOP_LEDGER_BATCH_WAIT) is how long a
	// batch that found others queued waits for more, LedgerBatchMax (CARDSHOP_LEDGER_BATCH_MAX)
	// the most orders one batch writes, LedgerBatchLanes (CARDSHOP_LEDGER_BATCH_LANES) how many
	// batches may run at once.
	LedgerBatch      bool
	LedgerBatchWait  time.Duration
	LedgerBatchMax   int
	LedgerBatchLanes int

	RatePerIP    int           // CARDSHOP_RATE_PER_IP: requests per window per client IP on /api (0 = off)
	RatePerBuyer int           // CARDSHOP_RATE_PER_BUYER: orders per window per buyer (0 = off)
	RateWindow   time.Duration // CARDSHOP_RATE_WINDOW: the window of both rate limits
	// TrustedProxies is CARDSHOP_TRUSTED_PROXIES: the reverse proxies whose X-Forwarded-For
	// names the client (webkit.ClientIP); none: the peer's address.
	TrustedProxies webkit.TrustedProxies

	WebhookURL     string        // CARDSHOP_WEBHOOK_URL: the storefront's endpoint for delivery events; empty = none
	WebhookSecret  domain.Secret // CARDSHOP_WEBHOOK_SECRET: signs webhook requests (required with a URL, >= 16 chars)
	WebhookTimeout time.Duration // CARDSHOP_WEBHOOK_TIMEOUT: one attempt

	// The order mail (mailer.go): SMTPAddr empty sends none.
	SMTPAddr     string        // CARDSHOP_SMTP_ADDR: the SMTP server's host:port; empty = no e-mail
	SMTPUser     string        // CARDSHOP_SMTP_USER: SMTP AUTH user; empty = no authentication
	SMTPPassword domain.Secret // CARDSHOP_SMTP_PASSWORD: SMTP AUTH password
	SMTPFrom     string        // CARDSHOP_SMTP_FROM: "shop@example.com" or "Card shop <shop@example.com>"
	SMTPTLS      string        // CARDSHOP_SMTP_TLS: starttls | tls | none
	// Captcha is CARDSHOP_CAPTCHA: the human check's provider, "off", "turnstile" or "hcaptcha";
	// the widget's site key, the secret, the site's hostname (a token solved elsewhere is
	// refused) and an override of the provider's siteverify URL (a simulator) go with it.
	// CARDSHOP_CAPTCHA_UNREACHABLE is Config.HumanCheckFailOpen ("allow") or not ("refuse").
	Captcha          string
	CaptchaSiteKey   string        // CARDSHOP_CAPTCHA_SITE_KEY
	CaptchaSecret    domain.Secret // CARDSHOP_CAPTCHA_SECRET
	CaptchaHostname  string        // CARDSHOP_CAPTCHA_HOSTNAME
	CaptchaVerifyURL string        // CARDSHOP_CAPTCHA_VERIFY_URL

	// ChannelsEvery is CARDSHOP_CHANNELS_EVERY: how often each instance reads the payment
	// channels configured in the console again (application.Channels.Reload).
	ChannelsEvery time.Duration

	PublicURL       string        // CARDSHOP_PUBLIC_URL: the shop's address as buyers and providers reach it
	DevPayments     bool          // CARDSHOP_DEV_PAYMENTS: the built-in dev provider (pay page with Pay/Fail buttons)
	Demo            bool          // CARDSHOP_DEMO: the demo shop's products and made-up codes at start (memory adapters only)
	Storefront      bool          // CARDSHOP_STOREFRONT: the built-in shop for buyers at /
	DevPaymentsReal bool          // CARDSHOP_DEV_PAYMENTS_ALLOW_REAL: allow the dev provider with the real adapters
	StripeKey       domain.Secret // CARDSHOP_STRIPE_SECRET_KEY: enables Stripe
	StripeWebhook   domain.Secret // CARDSHOP_STRIPE_WEBHOOK_SECRETS: whsec_… signing secret(s), comma-separated
	StripeAPIURL    string        // CARDSHOP_STRIPE_API_URL
	EpayURL         string        // CARDSHOP_EPAY_URL: the epay gateway's base URL; enables epay
	EpayPID         string        // CARDSHOP_EPAY_PID: merchant id
	EpayKey         domain.Secret // CARDSHOP_EPAY_KEY: merchant key
	EpaySign        string        // CARDSHOP_EPAY_SIGN: append | ampkey
	EpayType        string        // CARDSHOP_EPAY_TYPE: alipay | wxpay | qqpay | …
	EpayMode        string        // CARDSHOP_EPAY_MODE: redirect | api
	EpayRefunds     bool          // CARDSHOP_EPAY_REFUNDS: the gateway offers api.php?act=refund

	AlipayURL        string        // CARDSHOP_ALIPAY_URL: Alipay's gateway.do
	AlipayAppID      string        // CARDSHOP_ALIPAY_APP_ID: enables Alipay
	AlipaySellerID   string        // CARDSHOP_ALIPAY_SELLER_ID: checked in notifications when set
	AlipayPrivateKey domain.Secret // CARDSHOP_ALIPAY_PRIVATE_KEY: the app's RSA private key (PEM, or a file holding it)
	AlipayPublicKey  string        // CARDSHOP_ALIPAY_PUBLIC_KEY: Alipay's public key (PEM, or a file holding it)
	AlipayMethod     string        // CARDSHOP_ALIPAY_METHOD: precreate | page | wap

	WechatURL         string        // CARDSHOP_WECHAT_URL: WeChat Pay's API
	WechatMchID       string        // CARDSHOP_WECHAT_MCHID: enables WeChat Pay
	WechatAppID       string        // CARDSHOP_WECHAT_APPID
	WechatSerial      string        // CARDSHOP_WECHAT_SERIAL: the merchant certificate's serial number
	WechatPrivateKey  domain.Secret // CARDSHOP_WECHAT_PRIVATE_KEY: the merchant's private key (PEM, or a file holding it)
	WechatAPIv3Key    domain.Secret // CARDSHOP_WECHAT_APIV3_KEY: 32 bytes, decrypts notifications
	WechatPlatformPEM string        // CARDSHOP_WECHAT_PLATFORM_CERTS: WeChat Pay platform certificate(s) (PEM, or a file)
	WechatPubKeyID    string        // CARDSHOP_WECHAT_PUBLIC_KEY_ID: PUB_KEY_ID_… of WeChat Pay's public key
	WechatPubKeyPEM   string        // CARDSHOP_WECHAT_PUBLIC_KEY: WeChat Pay's public key (PEM, or a file)

	// The alert channels (alerts.go) are set in the console; these are the Bot API's and the
	// WeCom robots' base URLs (a proxy, a simulator). Config.AlertAttempts is
	// CARDSHOP_ALERT_ATTEMPTS.
	AlertTelegramURL string // CARDSHOP_ALERT_TELEGRAM_URL
	AlertWeComURL    string // CARDSHOP_ALERT_WECOM_URL
	// AccessLog is CARDSHOP_ACCESS_LOG: one log line per HTTP request (observe.go), the query
	// string never written.
	AccessLog bool
}

// maxWebhookTimeout bounds CARDSHOP_WEBHOOK_TIMEOUT: an attempt must end before the relay's
// claim on the message (application.WebhookLease) does, or another instance could send it too.
const maxWebhookTimeout = time.Minute

// defaultSoldOutLease is CARDSHOP_SOLDOUT_LEASE's default: units given back while a product
// is sold out become reservable within 0.625 s.
const defaultSoldOutLease = 500 * time.Millisecond

// maxUnconfirmedCloses bounds CARDSHOP_AMQP_UNCONFIRMED_CLOSES: each such order holds a few
// hundred bytes until its confirm, and a bound far above any confirm backlog protects nothing.
const maxUnconfirmedCloses = 1 << 20

// serviceBuyerCap is the service's CARDSHOP_BUYER_CAP default. The service caps each buyer
// (stock-lock abuse); application.DefaultConfig, for library users, has no cap.
const serviceBuyerCap = 100

// settings is the configuration table, in docs/CONFIGURATION.md's order: each variable bound
// to its field of c, with its default as the environment would give it ("" for none), the way
// flag.DurationVar binds a flag. The settings the use cases share take their defaults from
// application.DefaultConfig; the others are stated here.
func settings(c *Config) []setting {
	app := application.DefaultConfig()
	return []setting{
		{"CARDSHOP_ADAPTERS", AdaptersMemory, func(v string) error {
			if v != AdaptersMemory && v != AdaptersReal {
				return fmt.Errorf("want %q or %q, got %q", AdaptersMemory, AdaptersReal, v)
			}
			c.Adapters = v
			return nil
		}},
		stringVar(&c.HTTPAddr, "CARDSHOP_HTTP_ADDR", "127.0.0.1:8080"),
		secretVar(&c.AdminToken, "CARDSHOP_ADMIN_TOKEN"),
		secretVar(&c.PaymentSecret, "CARDSHOP_PAYMENT_SECRET"),
		secretVar(&c.TokenSecret, "CARDSHOP_TOKEN_SECRET"),
		durationVar(&c.OrderTimeout, "CARDSHOP_ORDER_TIMEOUT", app.OrderTimeout),
		durationVar(&c.IdempotencyTTL, "CARDSHOP_IDEMPOTENCY_TTL", app.IdempotencyTTL),
		rateVar(&c.RatePerIP, "CARDSHOP_RATE_PER_IP", 600),
		rateVar(&c.RatePerBuyer, "CARDSHOP_RATE_PER_BUYER", 60),
		durationVar(&c.RateWindow, "CARDSHOP_RATE_WINDOW", time.Minute),
		{"CARDSHOP_TRUSTED_PROXIES", "", func(v string) error {
			p, err := webkit.ParseTrustedProxies(v)
			c.TrustedProxies = p
			return err
		}},
		{"CARDSHOP_BUYER_CAP", strconv.Itoa(serviceBuyerCap), func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > 1_000_000_000 {
				return fmt.Errorf("want a number of units from 0 (no limit) to 1000000000, got %q", v)
			}
			c.BuyerCap = n
			return nil
		}},
		durationVar(&c.CallbackWindow, "CARDSHOP_CALLBACK_WINDOW", 5*time.Minute),
		durationVar(&c.SweepInterval, "CARDSHOP_SWEEP_INTERVAL", 30*time.Second),
		durationVar(&c.OrphanAfter, "CARDSHOP_ORPHAN_AFTER", app.OrphanAfter),
		durationVar(&c.NotificationRetention, "CARDSHOP_NOTIFICATION_RETENTION", app.NotificationRetention),
		durationVar(&c.RefusedNotificationRetention, "CARDSHOP_REFUSED_NOTIFICATION_RETENTION", app.RefusedNotificationRetention),
		durationVar(&c.RelayInterval, "CARDSHOP_RELAY_INTERVAL", time.Second),
		{"CARDSHOP_STOCK_EVENTS_INTERVAL", "1s", func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("want a duration such as 1s, or 0 (no stock events), got %q", v)
			}
			c.StockEventsInterval = d
			return nil
		}},
		{"CARDSHOP_CONSOLE_TIMEZONE", "UTC", func(v string) error {
			loc, err := time.LoadLocation(v)
			if err != nil || v == "" || v == "Local" {
				return fmt.Errorf("want a time zone name such as UTC or Europe/Berlin, got %q", v)
			}
			c.ConsoleTimeZone = loc
			return nil
		}},
		durationVar(&c.ShutdownGrace, "CARDSHOP_SHUTDOWN_GRACE", 10*time.Second),
		durationUpTo(&c.RequestTimeout, "CARDSHOP_REQUEST_TIMEOUT", httpapi.DefaultRequestTimeout, time.Minute,
			"a buyer or a provider waits it for an answer"),
		{"CARDSHOP_SALE_START_MARGIN", formatDuration(app.SaleStartMargin), func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > time.Hour {
				return fmt.Errorf("want a duration from 0 (the gate always decides) to 1h, got %q", v)
			}
			c.SaleStartMargin = d
			return nil
		}},
		{"CARDSHOP_CLOCK_OFFSET", "0s", func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < -time.Hour || d > time.Hour {
				return fmt.Errorf("want a signed duration within an hour, such as -3s, got %q", v)
			}
			c.ClockOffset = d
			return nil
		}},
		stringVar(&c.PprofAddr, "CARDSHOP_PPROF_ADDR", ""),
		{"CARDSHOP_LOG_LEVEL", strings.ToLower(slog.LevelInfo.String()), func(v string) error {
			return c.LogLevel.UnmarshalText([]byte(v))
		}},
		connVar(&c.MySQLDSN, "CARDSHOP_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test?parseTime=true"),
		{"CARDSHOP_MYSQL_MAX_CONNS", "64", func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 2 || n > 1000 {
				return fmt.Errorf("want a number from 2 to 1000, got %q", v)
			}
			c.MySQLConns = n
			return nil
		}},
		{"CARDSHOP_LEDGER_BATCH", "on", func(v string) error {
			switch v {
			case "on":
				c.LedgerBatch = true
			case "off":
				c.LedgerBatch = false
			default:
				return fmt.Errorf("want on or off, got %q", v)
			}
			return nil
		}},
		{"CARDSHOP_LEDGER_BATCH_WAIT", "0s", func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > mysqlstore.MaxBatchWait {
				return fmt.Errorf("want a duration from 0s to %s (every order of a batch waits it), got %q", mysqlstore.MaxBatchWait, v)
			}
			c.LedgerBatchWait = d
			return nil
		}},
		{"CARDSHOP_LEDGER_BATCH_MAX", "128", func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > mysqlstore.MaxBatchSize {
				return fmt.Errorf("want a number from 1 to %d, got %q", mysqlstore.MaxBatchSize, v)
			}
			c.LedgerBatchMax = n
			return nil
		}},
		{"CARDSHOP_LEDGER_BATCH_LANES", "2", func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 16 {
				return fmt.Errorf("want a number from 1 to 16, got %q", v)
			}
			c.LedgerBatchLanes = n
			return nil
		}},
		{"CARDSHOP_REDIS_ADDRS", "127.0.0.1:6379", func(v string) error {
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
		boolVar(&c.RedisAutoPipeline, "CARDSHOP_REDIS_AUTOPIPELINE", true),
		stringVar(&c.RedisMaster, "CARDSHOP_REDIS_MASTER", ""),
		{"CARDSHOP_REDIS_PREFIX", "", func(v string) error {
			if err := checkRedisPrefix(v); err != nil {
				return err
			}
			c.RedisPrefix = v
			return nil
		}},
		{"CARDSHOP_REDIS_REPLICA_ACKS", "auto", func(v string) error {
			if v == "auto" {
				c.RedisReplicaAcks = autoReplicaAcks
				return nil
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 16 {
				return fmt.Errorf("want auto (1 with CARDSHOP_REDIS_MASTER, else 0) or a number of replicas from 0 to 16, got %q", v)
			}
			c.RedisReplicaAcks = n
			return nil
		}},
		durationUpTo(&c.RedisReplicaWait, "CARDSHOP_REDIS_REPLICA_WAIT", 100*time.Millisecond, time.Second,
			"a reservation waits it for its replicas at most"),
		{"CARDSHOP_SOLDOUT_LEASE", formatDuration(defaultSoldOutLease), func(v string) error {
			// A lease lasts up to 1.25 periods, and must end before a product the gate lost is
			// rebuilt (RebuildDelay after the loss is seen): Redis restarted empty forgets it.
			most := app.RebuildDelay * 4 / 5
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > most {
				return fmt.Errorf("want a duration from 0 (no leases) to %s (a lease must end before a lost product is rebuilt), got %q", most, v)
			}
			c.SoldOutLease = d
			return nil
		}},
		connVar(&c.AMQPURL, "CARDSHOP_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
		{"CARDSHOP_AMQP_PREFIX", "cardshop", func(v string) error {
			if !validPrefix(v) {
				return fmt.Errorf("want 1 to 64 characters of a-z 0-9 . _ -, got %q", v)
			}
			c.AMQPPrefix = v
			return nil
		}},
		{"CARDSHOP_AMQP_UNCONFIRMED_CLOSES", "4096", func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > maxUnconfirmedCloses {
				return fmt.Errorf("want a number from 0 (every order waits for its confirm) to %d, got %q", maxUnconfirmedCloses, v)
			}
			c.AMQPUnconfirmed = n
			return nil
		}},
		boolVar(&c.Migrate, "CARDSHOP_MIGRATE", false),
		secretVar(&c.CodeKeys, "CARDSHOP_CODE_KEYS"),
		secretVar(&c.CodeHash, "CARDSHOP_CODE_HASH_KEY"),
		{"CARDSHOP_WEBHOOK_URL", "", func(v string) error {
			if v != "" {
				if err := webhook.CheckURL(v); err != nil {
					return err
				}
			}
			c.WebhookURL = v
			return nil
		}},
		secretVar(&c.WebhookSecret, "CARDSHOP_WEBHOOK_SECRET"),
		durationUpTo(&c.WebhookTimeout, "CARDSHOP_WEBHOOK_TIMEOUT", 10*time.Second, maxWebhookTimeout,
			fmt.Sprintf("an attempt must end well within the relay's %s claim", application.WebhookLease)),
		durationVar(&c.WebhookMaxBackoff, "CARDSHOP_WEBHOOK_MAX_BACKOFF", app.WebhookMaxBackoff),
		boolVar(&c.MailCodes, "CARDSHOP_MAIL_CODES", app.MailCodes),
		{"CARDSHOP_MAIL_ATTEMPTS", strconv.Itoa(app.MailAttempts), func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				return fmt.Errorf("want a number of attempts from 1 to 100, got %q", v)
			}
			c.MailAttempts = n
			return nil
		}},
		stringVar(&c.SMTPAddr, "CARDSHOP_SMTP_ADDR", ""),
		stringVar(&c.SMTPUser, "CARDSHOP_SMTP_USER", ""),
		secretVar(&c.SMTPPassword, "CARDSHOP_SMTP_PASSWORD"),
		stringVar(&c.SMTPFrom, "CARDSHOP_SMTP_FROM", ""),
		{"CARDSHOP_SMTP_TLS", string(mail.TLSStartTLS), func(v string) error {
			m, err := mail.ParseTLSMode(v)
			if err != nil {
				return fmt.Errorf("want starttls, tls or none, got %q", v)
			}
			c.SMTPTLS = string(m)
			return nil
		}},
		{"CARDSHOP_ALERT_ATTEMPTS", strconv.Itoa(app.AlertAttempts), func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				return fmt.Errorf("want a number of attempts from 1 to 100, got %q", v)
			}
			c.AlertAttempts = n
			return nil
		}},
		{"CARDSHOP_ALERT_TELEGRAM_URL", alertpush.DefaultTelegramURL, baseURL(&c.AlertTelegramURL)},
		{"CARDSHOP_ALERT_WECOM_URL", alertpush.DefaultWeComURL, baseURL(&c.AlertWeComURL)},
		boolVar(&c.AccessLog, "CARDSHOP_ACCESS_LOG", false),
		{"CARDSHOP_CURRENCY", app.Currency.Code, func(v string) error {
			cur, err := domain.ParseCurrency(v)
			if err != nil {
				return fmt.Errorf("want an ISO 4217 code such as CNY, USD, EUR, JPY, got %q", v)
			}
			c.Currency = cur
			return nil
		}},
		{"CARDSHOP_PUBLIC_URL", "", func(v string) error {
			if v == "" {
				c.PublicURL = "" // LoadConfig derives it from CARDSHOP_HTTP_ADDR
				return nil
			}
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" ||
				u.Fragment != "" || strings.HasSuffix(v, "/") {
				return fmt.Errorf("want an http(s) URL without query, fragment or trailing slash, got %q", v)
			}
			c.PublicURL = v
			return nil
		}},
		stringVar(&c.ReturnURL, "CARDSHOP_RETURN_URL", ""),
		{"CARDSHOP_CAPTCHA", "off", func(v string) error {
			if v != "off" && v != "turnstile" && v != "hcaptcha" {
				return fmt.Errorf(`want "off", "turnstile" or "hcaptcha", got %q`, v)
			}
			c.Captcha = v
			return nil
		}},
		stringVar(&c.CaptchaSiteKey, "CARDSHOP_CAPTCHA_SITE_KEY", ""),
		secretVar(&c.CaptchaSecret, "CARDSHOP_CAPTCHA_SECRET"),
		stringVar(&c.CaptchaHostname, "CARDSHOP_CAPTCHA_HOSTNAME", ""),
		stringVar(&c.CaptchaVerifyURL, "CARDSHOP_CAPTCHA_VERIFY_URL", ""),
		{"CARDSHOP_CAPTCHA_UNREACHABLE", "refuse", func(v string) error {
			if v != "refuse" && v != "allow" {
				return fmt.Errorf(`want "refuse" (fail closed) or "allow" (fail open, counted), got %q`, v)
			}
			c.HumanCheckFailOpen = v == "allow"
			return nil
		}},
		durationVar(&c.BlocklistEvery, "CARDSHOP_BLOCKLIST_EVERY", app.BlocklistEvery),
		durationVar(&c.ChannelsEvery, "CARDSHOP_CHANNELS_EVERY", application.DefaultChannelsEvery),
		durationVar(&c.PaymentCloseGrace, "CARDSHOP_PAYMENT_CLOSE_GRACE", app.PaymentCloseGrace),
		boolVar(&c.DevPayments, "CARDSHOP_DEV_PAYMENTS", false),
		boolVar(&c.Demo, "CARDSHOP_DEMO", false),
		boolVar(&c.Storefront, "CARDSHOP_STOREFRONT", true),
		boolVar(&c.DevPaymentsReal, "CARDSHOP_DEV_PAYMENTS_ALLOW_REAL", false),
		secretVar(&c.StripeKey, "CARDSHOP_STRIPE_SECRET_KEY"),
		secretVar(&c.StripeWebhook, "CARDSHOP_STRIPE_WEBHOOK_SECRETS"),
		stringVar(&c.StripeAPIURL, "CARDSHOP_STRIPE_API_URL", "https://api.stripe.com"),
		stringVar(&c.EpayURL, "CARDSHOP_EPAY_URL", ""),
		stringVar(&c.EpayPID, "CARDSHOP_EPAY_PID", ""),
		secretVar(&c.EpayKey, "CARDSHOP_EPAY_KEY"),
		stringVar(&c.EpaySign, "CARDSHOP_EPAY_SIGN", "append"),
		stringVar(&c.EpayType, "CARDSHOP_EPAY_TYPE", "alipay"),
		stringVar(&c.EpayMode, "CARDSHOP_EPAY_MODE", "redirect"),
		boolVar(&c.EpayRefunds, "CARDSHOP_EPAY_REFUNDS", false),
		stringVar(&c.AlipayURL, "CARDSHOP_ALIPAY_URL", "https://openapi.alipay.com/gateway.do"),
		stringVar(&c.AlipayAppID, "CARDSHOP_ALIPAY_APP_ID", ""),
		stringVar(&c.AlipaySellerID, "CARDSHOP_ALIPAY_SELLER_ID", ""),
		secretVar(&c.AlipayPrivateKey, "CARDSHOP_ALIPAY_PRIVATE_KEY"),
		stringVar(&c.AlipayPublicKey, "CARDSHOP_ALIPAY_PUBLIC_KEY", ""),
		stringVar(&c.AlipayMethod, "CARDSHOP_ALIPAY_METHOD", "precreate"),
		stringVar(&c.WechatURL, "CARDSHOP_WECHAT_URL", "https://api.mch.weixin.qq.com"),
		stringVar(&c.WechatMchID, "CARDSHOP_WECHAT_MCHID", ""),
		stringVar(&c.WechatAppID, "CARDSHOP_WECHAT_APPID", ""),
		stringVar(&c.WechatSerial, "CARDSHOP_WECHAT_SERIAL", ""),
		secretVar(&c.WechatPrivateKey, "CARDSHOP_WECHAT_PRIVATE_KEY"),
		secretVar(&c.WechatAPIv3Key, "CARDSHOP_WECHAT_APIV3_KEY"),
		stringVar(&c.WechatPlatformPEM, "CARDSHOP_WECHAT_PLATFORM_CERTS", ""),
		stringVar(&c.WechatPubKeyID, "CARDSHOP_WECHAT_PUBLIC_KEY_ID", ""),
		stringVar(&c.WechatPubKeyPEM, "CARDSHOP_WECHAT_PUBLIC_KEY", ""),
	}
}

// setting is one variable of the configuration table: its name, its default as the
// environment would give it ("" for none), and how a value is checked and stored.
type setting struct {
	name string
	def  string
	set  func(v string) error
}

func durationVar(p *time.Duration, name string, def time.Duration) setting {
	return durationUpTo(p, name, def, 0, "")
}

// durationUpTo reads a positive duration of at most max (0: no bound); why says why the bound.
func durationUpTo(p *time.Duration, name string, def, max time.Duration, why string) setting {
	return setting{name, formatDuration(def), func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration such as 15m or 500ms, got %q", v)
		}
		if max > 0 && d > max {
			return fmt.Errorf("want at most %s (%s), got %q", max, why, v)
		}
		*p = d
		return nil
	}}
}

// formatDuration writes d as a person would set it: 15m rather than time's 15m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// rateVar reads a rate limit: requests per CARDSHOP_RATE_WINDOW, 0 = off.
func rateVar(p *int, name string, def int) setting {
	return setting{name, strconv.Itoa(def), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1_000_000 {
			return fmt.Errorf("want a number from 0 (off) to 1000000, got %q", v)
		}
		*p = n
		return nil
	}}
}

func boolVar(p *bool, name string, def bool) setting {
	return setting{name, strconv.FormatBool(def), func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		*p = b
		return nil
	}}
}

func stringVar(p *string, name, def string) setting {
	return setting{name, def, func(v string) error { *p = v; return nil }}
}

// secretVar reads a secret; a secret has no default.
func secretVar(p *domain.Secret, name string) setting {
	return setting{name, "", func(v string) error { *p = domain.Secret(v); return nil }}
}

func connVar(p *ConnString, name, def string) setting {
	return setting{name, def, func(v string) error { *p = ConnString(v); return nil }}
}

// EnvNames lists every variable the service reads, sorted.
func EnvNames() []string {
	var names []string
	for _, s := range settings(new(Config)) {
		names = append(names, s.name)
	}
	sort.Strings(names)
	return names
}

// EnvDefault returns a variable's default ("" when it has none) and whether the service reads
// the variable at all.
func EnvDefault(name string) (string, bool) {
	for _, s := range settings(new(Config)) {
		if s.name == name {
			return s.def, true
		}
	}
	return "", false
}

// LoadConfig reads the configuration from environ ("KEY=value" pairs, as os.Environ gives).
// An unknown CARDSHOP_ variable, a malformed value or a missing secret is an error, so a typo
// fails the start instead of silently running with a default; so is, with the real adapters,
// a published development secret or an obviously weak one (checkSecrets).
func LoadConfig(environ []string) (Config, error) {
	c := Config{Config: application.DefaultConfig()}
	c.BuyerWindow = 0 // one order timeout, whatever CARDSHOP_ORDER_TIMEOUT says
	table := map[string]setting{}
	for _, s := range settings(&c) {
		table[s.name] = s
	}
	given := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "CARDSHOP_") {
			continue
		}
		if _, known := table[k]; !known {
			return Config{}, fmt.Errorf("unknown setting %s (known: %s)", k, strings.Join(EnvNames(), ", "))
		}
		given[k] = v
	}
	// In name order, as flag.VisitAll: with several malformed values, the first name's is reported.
	for _, name := range EnvNames() {
		s := table[name]
		v, ok := given[name]
		if !ok {
			v = s.def
		}
		if err := s.set(v); err != nil {
			return Config{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	for name, v := range map[string]domain.Secret{"CARDSHOP_ADMIN_TOKEN": c.AdminToken,
		"CARDSHOP_PAYMENT_SECRET": c.PaymentSecret, "CARDSHOP_TOKEN_SECRET": c.TokenSecret} {
		if len(v) < 16 {
			return Config{}, fmt.Errorf("%s must be set to at least 16 characters (the service refuses to run with guessable secrets); run \"cardshop secrets\" to generate fresh values", name)
		}
	}
	if c.WebhookURL != "" && len(c.WebhookSecret) < 16 {
		return Config{}, fmt.Errorf("CARDSHOP_WEBHOOK_SECRET must be set to at least 16 characters with CARDSHOP_WEBHOOK_URL (the storefront checks the signature with it); run \"cardshop secrets\" to generate fresh values")
	}
	if err := checkMail(c); err != nil {
		return Config{}, err
	}
	if c.PublicURL == "" {
		c.PublicURL = LocalURL(c.HTTPAddr)
	}
	if c.Captcha != "off" && (c.CaptchaSiteKey == "" || c.CaptchaSecret == "" || c.CaptchaHostname == "") {
		return Config{}, fmt.Errorf("CARDSHOP_CAPTCHA=%s needs CARDSHOP_CAPTCHA_SITE_KEY, CARDSHOP_CAPTCHA_SECRET and CARDSHOP_CAPTCHA_HOSTNAME", c.Captcha)
	}
	if c.Demo && c.Adapters != AdaptersMemory {
		return Config{}, fmt.Errorf("CARDSHOP_DEMO fills the shop with made-up products and codes: it is for the memory adapters only, not CARDSHOP_ADAPTERS=%s", c.Adapters)
	}
	if c.DevPayments && c.Adapters == AdaptersReal && !c.DevPaymentsReal {
		return Config{}, fmt.Errorf("CARDSHOP_DEV_PAYMENTS pays orders with a button: it is refused with CARDSHOP_ADAPTERS=real unless CARDSHOP_DEV_PAYMENTS_ALLOW_REAL=true")
	}
	if (c.StripeKey == "") != (c.StripeWebhook == "") {
		return Config{}, fmt.Errorf("CARDSHOP_STRIPE_SECRET_KEY and CARDSHOP_STRIPE_WEBHOOK_SECRETS go together: Stripe is enabled with both")
	}
	if c.EpayURL != "" && (c.EpayPID == "" || c.EpayKey == "") {
		return Config{}, fmt.Errorf("CARDSHOP_EPAY_URL needs CARDSHOP_EPAY_PID and CARDSHOP_EPAY_KEY")
	}
	if c.EpayURL != "" {
		// Both are signed into every epay payment (notify_url, return_url).
		for name, v := range map[string]string{"CARDSHOP_PUBLIC_URL": c.PublicURL, "CARDSHOP_RETURN_URL": c.ReturnURL} {
			if err := epay.CheckSignable(name, v); err != nil {
				return Config{}, err
			}
		}
	}
	if c.AlipayAppID != "" && (c.AlipayPrivateKey == "" || c.AlipayPublicKey == "") {
		return Config{}, fmt.Errorf("CARDSHOP_ALIPAY_APP_ID needs CARDSHOP_ALIPAY_PRIVATE_KEY and CARDSHOP_ALIPAY_PUBLIC_KEY (Alipay's)")
	}
	if c.WechatMchID != "" {
		for name, v := range map[string]string{"CARDSHOP_WECHAT_APPID": c.WechatAppID, "CARDSHOP_WECHAT_SERIAL": c.WechatSerial,
			"CARDSHOP_WECHAT_PRIVATE_KEY": string(c.WechatPrivateKey), "CARDSHOP_WECHAT_APIV3_KEY": string(c.WechatAPIv3Key),
			"CARDSHOP_WECHAT_PLATFORM_CERTS or CARDSHOP_WECHAT_PUBLIC_KEY": c.WechatPlatformPEM + c.WechatPubKeyPEM} {
			if v == "" {
				return Config{}, fmt.Errorf("CARDSHOP_WECHAT_MCHID needs %s", name)
			}
		}
	}
	if c.RedisReplicaAcks == autoReplicaAcks {
		c.RedisReplicaAcks = 0
		if c.RedisMaster != "" {
			c.RedisReplicaAcks = 1
		}
	}
	if c.RedisReplicaAcks > 0 && c.RedisMaster == "" && len(c.RedisAddrs) > 1 {
		return Config{}, fmt.Errorf("CARDSHOP_REDIS_REPLICA_ACKS needs a standalone Redis or CARDSHOP_REDIS_MASTER: WAIT names no key, a Redis Cluster cannot route it")
	}
	if c.Adapters == AdaptersReal && (c.CodeKeys == "" || c.CodeHash == "") {
		return Config{}, fmt.Errorf("CARDSHOP_CODE_KEYS and CARDSHOP_CODE_HASH_KEY must be set with CARDSHOP_ADAPTERS=real (codes are encrypted at rest; run \"cardshop secrets\" to generate them)")
	}
	if err := checkSecrets(c); err != nil {
		return Config{}, err
	}
	// After the secrets' judgement: a weak key is told how to make a fresh one.
	if err := checkProviders(c); err != nil {
		return Config{}, err
	}
	return c, nil
}

// autoReplicaAcks is CARDSHOP_REDIS_REPLICA_ACKS=auto until LoadConfig resolves it.
const autoReplicaAcks = -1

// checkRedisPrefix accepts "" (no namespace) and 1 to 64 of A-Z a-z 0-9 . _ : -, the text
// every Redis key of the shop starts with (followed by ':'). A brace is refused by name: the
// prefix goes before the keys' {<pid>} hash tag, and a brace in it would make Redis Cluster
// hash the prefix instead, scattering a product's keys over slots its scripts cannot span.
func checkRedisPrefix(s string) error {
	switch {
	case s == "":
		return nil
	case strings.ContainsAny(s, "{}"):
		return fmt.Errorf("must not contain '{' or '}': the prefix goes outside the keys' {<product id>} hash tag, got %q", s)
	case len(s) > 64:
		return fmt.Errorf("want at most 64 characters, got %d", len(s))
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r)) {
			return fmt.Errorf("want empty (no namespace) or 1 to 64 characters of A-Z a-z 0-9 . _ : -, got %q", s)
		}
	}
	return nil
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

// LocalURL is the address a browser on this machine reaches the listen address addr at: http://
// and addr, with an empty or wildcard host (":8080", "0.0.0.0:8080", "[::]:8080") as
// 127.0.0.1. It is CARDSHOP_PUBLIC_URL's default, so that pay links and notify URLs follow
// CARDSHOP_HTTP_ADDR when no public address is set.
func LocalURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// baseURL sets *p to an http(s) base URL without query, fragment or trailing slash.
func baseURL(p *string) func(string) error {
	return func(v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" ||
			u.Fragment != "" || strings.HasSuffix(v, "/") {
			return fmt.Errorf("want an http(s) URL without query, fragment or trailing slash, got %q", v)
		}
		*p = v
		return nil
	}
}
