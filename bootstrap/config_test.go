package bootstrap_test

import (
	"io"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"cardshop/adapters/mysqlstore"
	"cardshop/application"
	"cardshop/bootstrap"
	"cardshop/domain"
)

// The tests' secrets: long enough and varied enough for the real adapters (checkSecrets).
const (
	adminToken    = "admin-token-0123456789-abcdefghijk"
	paymentSecret = "payment-secret-0123456789-abcdefgh"
	tokenSecret   = "token-secret-0123456789-abcdefghij"
)

var secrets = []string{
	"CARDSHOP_ADMIN_TOKEN=" + adminToken,
	"CARDSHOP_PAYMENT_SECRET=" + paymentSecret,
	"CARDSHOP_TOKEN_SECRET=" + tokenSecret,
}

func env(extra ...string) []string {
	return append(append([]string{"PATH=/usr/bin", "HOME=/root", "NOT_CARDSHOP_X=1", "CARDSHOPPING=1", "garbage"}, secrets...), extra...)
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := bootstrap.LoadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	// The use cases' settings: the application's defaults but the service's buyer cap, the
	// budget's window one order timeout, and every value spelled out.
	uc := application.DefaultConfig()
	uc.OrderTimeout, uc.IdempotencyTTL, uc.SaleStartMargin = 15*time.Minute, 10*time.Minute, 2*time.Second
	uc.BuyerCap, uc.BuyerWindow, uc.OrphanAfter = 100, 0, 2*time.Minute
	uc.NotificationRetention, uc.RefusedNotificationRetention = 90*24*time.Hour, 7*24*time.Hour
	uc.WebhookMaxBackoff, uc.PaymentCloseGrace = 10*time.Minute, 10*time.Minute
	uc.Currency = domain.Currency{Code: "CNY", Exponent: 2}
	want := bootstrap.Config{
		Config:   uc,
		Adapters: bootstrap.AdaptersMemory, HTTPAddr: "127.0.0.1:8080",
		AdminToken: adminToken, PaymentSecret: paymentSecret, TokenSecret: tokenSecret,
		SweepInterval: 30 * time.Second,
		RelayInterval: time.Second, StockEventsInterval: time.Second, ConsoleTimeZone: time.UTC, CallbackWindow: 5 * time.Minute, LogLevel: slog.LevelInfo, ShutdownGrace: 10 * time.Second, RequestTimeout: 5 * time.Second,
		MySQLDSN: "root@tcp(127.0.0.1:3306)/test?parseTime=true", RedisAddrs: []string{"127.0.0.1:6379"},
		AMQPURL: "amqp://guest:guest@127.0.0.1:5672/", AMQPPrefix: "cardshop", AMQPUnconfirmed: 4096,
		RedisAutoPipeline: true, SoldOutLease: 500 * time.Millisecond, RedisReplicaWait: 100 * time.Millisecond, MySQLConns: 64, LedgerBatch: true, LedgerBatchMax: 128, LedgerBatchLanes: 2,
		RatePerIP: 600, RatePerBuyer: 60, RateWindow: time.Minute, SMTPTLS: "starttls",
		WebhookTimeout: 10 * time.Second,
		Captcha:        "off", Storefront: true, ChannelsEvery: 3 * time.Second,
		PublicURL:    "http://127.0.0.1:8080",
		StripeAPIURL: "https://api.stripe.com",
		EpaySign:     "append", EpayType: "alipay", EpayMode: "redirect",
		AlipayURL: "https://openapi.alipay.com/gateway.do", AlipayMethod: "precreate", WechatURL: "https://api.mch.weixin.qq.com",
		AlertTelegramURL: "https://api.telegram.org", AlertWeComURL: "https://qyapi.weixin.qq.com",
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestLoadConfigValues(t *testing.T) {
	keys, hash := mysqlstore.GenerateKeyring()
	c, err := bootstrap.LoadConfig(env(
		"CARDSHOP_ADAPTERS=real", "CARDSHOP_HTTP_ADDR=:9000", "CARDSHOP_ORDER_TIMEOUT=2m",
		"CARDSHOP_IDEMPOTENCY_TTL=90s", "CARDSHOP_SWEEP_INTERVAL=5s", "CARDSHOP_RELAY_INTERVAL=250ms",
		"CARDSHOP_CALLBACK_WINDOW=1m", "CARDSHOP_SHUTDOWN_GRACE=3s", "CARDSHOP_LOG_LEVEL=debug",
		"CARDSHOP_REDIS_ADDRS= a:1 , ,b:2 ", "CARDSHOP_MIGRATE=true", "CARDSHOP_AMQP_URL=amqp://x/",
		"CARDSHOP_MYSQL_DSN=u@tcp(db:3306)/shop", "CARDSHOP_CODE_KEYS="+keys, "CARDSHOP_CODE_HASH_KEY="+hash,
		"CARDSHOP_TOKEN_SECRET=a=b=c=d=e=f=g=h=i=j=k=l=m=n=o=p=q",
		"CARDSHOP_BUYER_CAP=0", "CARDSHOP_STOCK_EVENTS_INTERVAL=0s", "CARDSHOP_TRUSTED_PROXIES= 10.0.0.0/8, 192.168.1.7 ,fd00::/8",
		"CARDSHOP_REDIS_PREFIX=shop-a",
	))
	if err != nil {
		t.Fatal(err)
	}
	if c.Adapters != "real" || c.HTTPAddr != ":9000" || c.OrderTimeout != 2*time.Minute || c.IdempotencyTTL != 90*time.Second ||
		c.SweepInterval != 5*time.Second || c.RelayInterval != 250*time.Millisecond || c.CallbackWindow != time.Minute ||
		c.ShutdownGrace != 3*time.Second || c.LogLevel != slog.LevelDebug || !reflect.DeepEqual(c.RedisAddrs, []string{"a:1", "b:2"}) ||
		!c.Migrate || c.AMQPURL != "amqp://x/" || c.MySQLDSN != "u@tcp(db:3306)/shop" || c.CodeKeys.Reveal() != keys || c.CodeHash.Reveal() != hash ||
		c.TokenSecret != "a=b=c=d=e=f=g=h=i=j=k=l=m=n=o=p=q" || c.BuyerCap != 0 || c.StockEventsInterval != 0 ||
		c.TrustedProxies.String() != "10.0.0.0/8,192.168.1.7,fd00::/8" || c.RedisPrefix != "shop-a" {
		t.Fatalf("config %+v", c)
	}
}

// CARDSHOP_REDIS_REPLICA_ACKS=auto asks one replica's acknowledgement behind Sentinel and none
// of a standalone Redis or a Cluster; a number is taken as given.
func TestRedisReplicaAcks(t *testing.T) {
	for _, tc := range []struct {
		given []string
		want  int
	}{
		{nil, 0},
		{[]string{"CARDSHOP_REDIS_MASTER=shop", "CARDSHOP_REDIS_ADDRS=s1:26379,s2:26379"}, 1},
		{[]string{"CARDSHOP_REDIS_MASTER=shop", "CARDSHOP_REDIS_ADDRS=s1:26379,s2:26379", "CARDSHOP_REDIS_REPLICA_ACKS=2"}, 2},
		{[]string{"CARDSHOP_REDIS_MASTER=shop", "CARDSHOP_REDIS_REPLICA_ACKS=0"}, 0},
		{[]string{"CARDSHOP_REDIS_ADDRS=a:1,b:2,c:3"}, 0},
		{[]string{"CARDSHOP_REDIS_REPLICA_ACKS=1"}, 1},
	} {
		c, err := bootstrap.LoadConfig(env(tc.given...))
		if err != nil || c.RedisReplicaAcks != tc.want {
			t.Errorf("%v: replica acks %d, %v; want %d", tc.given, c.RedisReplicaAcks, err, tc.want)
		}
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		mention string
	}{
		{"unknown variable", env("CARDSHOP_ORDER_TIMOUT=5m"), "CARDSHOP_ORDER_TIMOUT"},
		{"real adapters without code keys", env("CARDSHOP_ADAPTERS=real"), "CARDSHOP_CODE_KEYS"},
		{"unknown variable, empty", env("CARDSHOP_DEBUG="), "CARDSHOP_DEBUG"},
		{"duration without a unit", env("CARDSHOP_ORDER_TIMEOUT=15"), "CARDSHOP_ORDER_TIMEOUT"},
		{"negative duration", env("CARDSHOP_SWEEP_INTERVAL=-1s"), "CARDSHOP_SWEEP_INTERVAL"},
		{"zero duration", env("CARDSHOP_RELAY_INTERVAL=0s"), "CARDSHOP_RELAY_INTERVAL"},
		{"negative stock events interval", env("CARDSHOP_STOCK_EVENTS_INTERVAL=-1s"), "CARDSHOP_STOCK_EVENTS_INTERVAL"},
		{"unknown console time zone", env("CARDSHOP_CONSOLE_TIMEZONE=Mars/Olympus"), "CARDSHOP_CONSOLE_TIMEZONE"},
		{"the server's local zone", env("CARDSHOP_CONSOLE_TIMEZONE=Local"), "CARDSHOP_CONSOLE_TIMEZONE"},
		{"empty duration", env("CARDSHOP_CALLBACK_WINDOW="), "CARDSHOP_CALLBACK_WINDOW"},
		{"bogus adapters", env("CARDSHOP_ADAPTERS=bogus"), "CARDSHOP_ADAPTERS"},
		{"adapters in upper case", env("CARDSHOP_ADAPTERS=MEMORY"), "CARDSHOP_ADAPTERS"},
		{"bad log level", env("CARDSHOP_LOG_LEVEL=loud"), "CARDSHOP_LOG_LEVEL"},
		{"a trusted proxy that is no address", env("CARDSHOP_TRUSTED_PROXIES=10.0.0.1,caddy"), `"caddy" is not an IP address or a CIDR prefix`},
		{"a trusted prefix out of range", env("CARDSHOP_TRUSTED_PROXIES=10.0.0.0/33"), "CARDSHOP_TRUSTED_PROXIES"},
		{"no redis address", env("CARDSHOP_REDIS_ADDRS= , "), "CARDSHOP_REDIS_ADDRS"},
		{"ledger batch neither on nor off", env("CARDSHOP_LEDGER_BATCH=true"), "CARDSHOP_LEDGER_BATCH"},
		{"ledger batch wait over 2ms", env("CARDSHOP_LEDGER_BATCH_WAIT=3ms"), "CARDSHOP_LEDGER_BATCH_WAIT"},
		{"negative ledger batch wait", env("CARDSHOP_LEDGER_BATCH_WAIT=-1ms"), "CARDSHOP_LEDGER_BATCH_WAIT"},
		{"ledger batch of none", env("CARDSHOP_LEDGER_BATCH_MAX=0"), "CARDSHOP_LEDGER_BATCH_MAX"},
		{"no ledger batch lane", env("CARDSHOP_LEDGER_BATCH_LANES=0"), "CARDSHOP_LEDGER_BATCH_LANES"},
		{"17 ledger batch lanes", env("CARDSHOP_LEDGER_BATCH_LANES=17"), "CARDSHOP_LEDGER_BATCH_LANES"},
		{"negative unconfirmed closes", env("CARDSHOP_AMQP_UNCONFIRMED_CLOSES=-1"), "CARDSHOP_AMQP_UNCONFIRMED_CLOSES"},
		{"unconfirmed closes past the bound", env("CARDSHOP_AMQP_UNCONFIRMED_CLOSES=1048577"), "CARDSHOP_AMQP_UNCONFIRMED_CLOSES"},
		{"sold-out lease outliving a lost product's rebuild", env("CARDSHOP_SOLDOUT_LEASE=900ms"), "CARDSHOP_SOLDOUT_LEASE"},
		{"negative sold-out lease", env("CARDSHOP_SOLDOUT_LEASE=-1ms"), "CARDSHOP_SOLDOUT_LEASE"},
		{"replica acks with a Cluster", env("CARDSHOP_REDIS_ADDRS=a:1,b:2", "CARDSHOP_REDIS_REPLICA_ACKS=1"), "CARDSHOP_REDIS_REPLICA_ACKS"},
		{"replica acks not a number", env("CARDSHOP_REDIS_REPLICA_ACKS=all"), "CARDSHOP_REDIS_REPLICA_ACKS"},
		{"Redis prefix with a hash tag", env("CARDSHOP_REDIS_PREFIX={shop}"), "CARDSHOP_REDIS_PREFIX"},
		{"Redis prefix with a closing brace", env("CARDSHOP_REDIS_PREFIX=shop}"), "CARDSHOP_REDIS_PREFIX"},
		{"Redis prefix with a space", env("CARDSHOP_REDIS_PREFIX=my shop"), "CARDSHOP_REDIS_PREFIX"},
		{"Redis prefix with a star", env("CARDSHOP_REDIS_PREFIX=shop*"), "CARDSHOP_REDIS_PREFIX"},
		{"Redis prefix of 65", env("CARDSHOP_REDIS_PREFIX=" + strings.Repeat("s", 65)), "CARDSHOP_REDIS_PREFIX"},
		{"replica wait of nothing", env("CARDSHOP_REDIS_REPLICA_WAIT=0s"), "CARDSHOP_REDIS_REPLICA_WAIT"},
		{"replica wait over a second", env("CARDSHOP_REDIS_REPLICA_WAIT=2s"), "CARDSHOP_REDIS_REPLICA_WAIT"},
		{"bad bool", env("CARDSHOP_MIGRATE=maybe"), "CARDSHOP_MIGRATE"},
		{"negative buyer cap", env("CARDSHOP_BUYER_CAP=-1"), "CARDSHOP_BUYER_CAP"},
		{"buyer cap not a number", env("CARDSHOP_BUYER_CAP=lots"), "CARDSHOP_BUYER_CAP"},
		{"no admin token", []string{secrets[1], secrets[2]}, "CARDSHOP_ADMIN_TOKEN"},
		{"no payment secret", []string{secrets[0], secrets[2]}, "CARDSHOP_PAYMENT_SECRET"},
		{"no token secret", []string{secrets[0], secrets[1]}, "CARDSHOP_TOKEN_SECRET"},
		{"short admin token", env("CARDSHOP_ADMIN_TOKEN=short"), "CARDSHOP_ADMIN_TOKEN"},
		{"payment secret of 15", env("CARDSHOP_PAYMENT_SECRET=" + strings.Repeat("p", 15)), "CARDSHOP_PAYMENT_SECRET"},
		{"empty token secret", env("CARDSHOP_TOKEN_SECRET="), "CARDSHOP_TOKEN_SECRET"},
		{"nothing set", nil, "CARDSHOP_"},
		{"webhook without a secret", env("CARDSHOP_WEBHOOK_URL=https://shop.example/h"), "CARDSHOP_WEBHOOK_SECRET"},
		{"webhook with a short secret", env("CARDSHOP_WEBHOOK_URL=https://shop.example/h", "CARDSHOP_WEBHOOK_SECRET=short"), "CARDSHOP_WEBHOOK_SECRET"},
		{"webhook over plain http", env("CARDSHOP_WEBHOOK_URL=http://shop.example/h", "CARDSHOP_WEBHOOK_SECRET=webhook-secret-0123456789"), "CARDSHOP_WEBHOOK_URL"},
		{"webhook URL not absolute", env("CARDSHOP_WEBHOOK_URL=shop.example/h", "CARDSHOP_WEBHOOK_SECRET=webhook-secret-0123456789"), "CARDSHOP_WEBHOOK_URL"},
		{"zero webhook backoff", env("CARDSHOP_WEBHOOK_MAX_BACKOFF=0s"), "CARDSHOP_WEBHOOK_MAX_BACKOFF"},
		{"webhook timeout past the relay's claim", env("CARDSHOP_WEBHOOK_TIMEOUT=2m"), "CARDSHOP_WEBHOOK_TIMEOUT"},
		{"zero webhook timeout", env("CARDSHOP_WEBHOOK_TIMEOUT=0s"), "CARDSHOP_WEBHOOK_TIMEOUT"},
		{"unknown currency", env("CARDSHOP_CURRENCY=XYZ"), "CARDSHOP_CURRENCY"},
		{"public URL with a trailing slash", env("CARDSHOP_PUBLIC_URL=https://shop.example/"), "CARDSHOP_PUBLIC_URL"},
		{"public URL not http", env("CARDSHOP_PUBLIC_URL=ftp://shop.example"), "CARDSHOP_PUBLIC_URL"},
		{"dev payments with the real adapters", env("CARDSHOP_DEV_PAYMENTS=true", "CARDSHOP_ADAPTERS=real",
			"CARDSHOP_CODE_KEYS=1:x", "CARDSHOP_CODE_HASH_KEY=x"), "CARDSHOP_DEV_PAYMENTS"},
		{"a Stripe key without its webhook secret", env("CARDSHOP_STRIPE_SECRET_KEY=sk_test_0123456789abcdefghijKLMN"), "CARDSHOP_STRIPE_WEBHOOK_SECRETS"},
		{"an epay gateway without its key", env("CARDSHOP_EPAY_URL=https://pay.example", "CARDSHOP_EPAY_PID=1001"), "CARDSHOP_EPAY_KEY"},
		{"an epay gateway with a return URL it cannot sign", env("CARDSHOP_EPAY_URL=https://pay.example", "CARDSHOP_EPAY_PID=1001",
			"CARDSHOP_EPAY_KEY=epay-merchant-key-0123456789abcdef", "CARDSHOP_RETURN_URL=https://shop.example/o?no={order_no}"), "CARDSHOP_RETURN_URL"},
		{"Alipay without Alipay's public key", env("CARDSHOP_ALIPAY_APP_ID=2021", "CARDSHOP_ALIPAY_PRIVATE_KEY=/k.pem"), "CARDSHOP_ALIPAY_PUBLIC_KEY"},
		{"WeChat Pay without its APIv3 key", env("CARDSHOP_WECHAT_MCHID=1900", "CARDSHOP_WECHAT_APPID=wx1", "CARDSHOP_WECHAT_SERIAL=S",
			"CARDSHOP_WECHAT_PRIVATE_KEY=/k.pem", "CARDSHOP_WECHAT_PUBLIC_KEY=/w.pem"), "CARDSHOP_WECHAT_APIV3_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := bootstrap.LoadConfig(tt.environ)
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("error %q does not name %s", err, tt.mention)
			}
			for _, s := range []string{adminToken, paymentSecret, tokenSecret} {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error %q shows a secret", err)
				}
			}
		})
	}
}

func TestEnvNamesAreSortedAndKnown(t *testing.T) {
	names := bootstrap.EnvNames()
	provider := wellFormedProviderSettings(t)
	with := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, n+"="+provider[n])
		}
		return out
	}
	for i, n := range names {
		if !strings.HasPrefix(n, "CARDSHOP_") || (i > 0 && names[i-1] >= n) {
			t.Fatalf("EnvNames %v", names)
		}
		// Every listed name is accepted.
		given := []string{n + "=" + validValue(n)}
		if _, ok := provider[n]; ok { // a payment setting is checked by its adapter: well-formed
			given = with(n)
		}
		switch n {
		case "CARDSHOP_WEBHOOK_URL": // a webhook needs its secret
			given = append(given, "CARDSHOP_WEBHOOK_SECRET=webhook-secret-0123456789")
		case "CARDSHOP_STRIPE_SECRET_KEY", "CARDSHOP_STRIPE_WEBHOOK_SECRETS": // Stripe needs both
			given = with("CARDSHOP_STRIPE_SECRET_KEY", "CARDSHOP_STRIPE_WEBHOOK_SECRETS")
		case "CARDSHOP_EPAY_URL": // epay needs its merchant
			given = append(given, with("CARDSHOP_EPAY_PID", "CARDSHOP_EPAY_KEY")...)
		case "CARDSHOP_ALIPAY_APP_ID": // Alipay needs both keys
			given = append(given, with("CARDSHOP_ALIPAY_PRIVATE_KEY", "CARDSHOP_ALIPAY_PUBLIC_KEY")...)
		case "CARDSHOP_SMTP_ADDR": // mail needs its sender
			given = []string{"CARDSHOP_SMTP_ADDR=smtp.example:587", "CARDSHOP_SMTP_FROM=shop@shop.example"}
		case "CARDSHOP_CAPTCHA_SITE_KEY", "CARDSHOP_CAPTCHA_SECRET", "CARDSHOP_CAPTCHA_HOSTNAME", "CARDSHOP_CAPTCHA_VERIFY_URL":
			// settings of a provider, accepted alone (the check asks for them with CARDSHOP_CAPTCHA)
		case "CARDSHOP_WECHAT_MCHID": // WeChat Pay needs its merchant and WeChat's key
			given = append(given, with("CARDSHOP_WECHAT_APPID", "CARDSHOP_WECHAT_SERIAL", "CARDSHOP_WECHAT_PRIVATE_KEY",
				"CARDSHOP_WECHAT_APIV3_KEY", "CARDSHOP_WECHAT_PUBLIC_KEY_ID", "CARDSHOP_WECHAT_PUBLIC_KEY")...)
		}
		if _, err := bootstrap.LoadConfig(env(given...)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

func validValue(name string) string {
	switch {
	case strings.HasSuffix(name, "_TIMEOUT"), strings.HasSuffix(name, "_TTL"), strings.HasSuffix(name, "_INTERVAL"),
		strings.HasSuffix(name, "_WINDOW"), strings.HasSuffix(name, "_GRACE"), strings.HasSuffix(name, "_AFTER"),
		strings.HasSuffix(name, "_BACKOFF"), strings.HasSuffix(name, "_RETENTION"):
		return "1m"
	case name == "CARDSHOP_CLOCK_OFFSET":
		return "-3s"
	case name == "CARDSHOP_REDIS_REPLICA_ACKS":
		return "1"
	case name == "CARDSHOP_REDIS_REPLICA_WAIT":
		return "50ms"
	case name == "CARDSHOP_SALE_START_MARGIN":
		return "1s"
	case name == "CARDSHOP_AMQP_PREFIX":
		return "shop-1"
	case name == "CARDSHOP_REDIS_PREFIX":
		return "Shop-1.eu:blue_2"
	case name == "CARDSHOP_ADAPTERS":
		return "memory"
	case name == "CARDSHOP_LOG_LEVEL":
		return "warn"
	case name == "CARDSHOP_MIGRATE", name == "CARDSHOP_REDIS_AUTOPIPELINE", name == "CARDSHOP_DEV_PAYMENTS",
		name == "CARDSHOP_DEV_PAYMENTS_ALLOW_REAL", name == "CARDSHOP_EPAY_REFUNDS", name == "CARDSHOP_MAIL_CODES", name == "CARDSHOP_DEMO",
		name == "CARDSHOP_STOREFRONT":
		return "false"
	case name == "CARDSHOP_BLOCKLIST_EVERY", name == "CARDSHOP_CHANNELS_EVERY":
		return "5s"
	case name == "CARDSHOP_CAPTCHA":
		return "off"
	case name == "CARDSHOP_CAPTCHA_UNREACHABLE":
		return "allow"
	case name == "CARDSHOP_MAIL_ATTEMPTS", name == "CARDSHOP_ALERT_ATTEMPTS":
		return "5"
	case name == "CARDSHOP_ACCESS_LOG":
		return "true"
	case name == "CARDSHOP_ALERT_TELEGRAM_URL", name == "CARDSHOP_ALERT_WECOM_URL":
		return "https://proxy.example/alerts"
	case name == "CARDSHOP_SMTP_TLS":
		return "tls"
	case name == "CARDSHOP_CAPTCHA_VERIFY_URL":
		return "https://verify.example/siteverify"
	case name == "CARDSHOP_CURRENCY":
		return "USD"
	case name == "CARDSHOP_CONSOLE_TIMEZONE":
		return "Europe/Berlin"
	case name == "CARDSHOP_PUBLIC_URL":
		return "https://shop.example"
	case name == "CARDSHOP_RETURN_URL":
		return "https://shop.example/orders/{order_no}"
	case name == "CARDSHOP_ALIPAY_METHOD":
		return "page"
	case name == "CARDSHOP_STRIPE_API_URL", name == "CARDSHOP_EPAY_URL", name == "CARDSHOP_ALIPAY_URL", name == "CARDSHOP_WECHAT_URL":
		return "https://pay.example"
	case name == "CARDSHOP_EPAY_SIGN":
		return "ampkey"
	case name == "CARDSHOP_EPAY_MODE":
		return "api"
	case name == "CARDSHOP_EPAY_TYPE":
		return "wxpay"
	case name == "CARDSHOP_MYSQL_MAX_CONNS":
		return "16"
	case name == "CARDSHOP_LEDGER_BATCH":
		return "off"
	case name == "CARDSHOP_SOLDOUT_LEASE":
		return "250ms"
	case name == "CARDSHOP_LEDGER_BATCH_WAIT":
		return "1ms"
	case name == "CARDSHOP_LEDGER_BATCH_MAX":
		return "64"
	case name == "CARDSHOP_LEDGER_BATCH_LANES":
		return "3"
	case name == "CARDSHOP_AMQP_UNCONFIRMED_CLOSES":
		return "0"
	case name == "CARDSHOP_BUYER_CAP":
		return "25"
	case name == "CARDSHOP_RATE_PER_IP", name == "CARDSHOP_RATE_PER_BUYER":
		return "0"
	case name == "CARDSHOP_TRUSTED_PROXIES":
		return "10.0.0.0/8,::1"
	case name == "CARDSHOP_WEBHOOK_URL":
		return "https://shop.example/hooks/cardshop"
	case name == "CARDSHOP_REDIS_ADDRS", name == "CARDSHOP_PPROF_ADDR":
		return "r:6379"
	default:
		return "a-value-of-sixteen-or-more"
	}
}

func TestModuleValidates(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.ValidateApp(bootstrap.Module(cfg), fx.NopLogger); err != nil {
		t.Fatalf("memory adapter set: %v", err)
	}
	// A config that skipped LoadConfig (short secrets) does not build.
	bad := cfg
	bad.PaymentSecret = "short"
	if err := fx.New(bootstrap.Module(bad), fx.NopLogger).Err(); err == nil {
		t.Fatal("a short payment secret built an app")
	}
}

// CARDSHOP_BUYER_CAP reaches the use cases, with the order timeout as the budget's window.
func TestShopGetsTheBuyerBudget(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_BUYER_CAP=7", "CARDSHOP_ORDER_TIMEOUT=3m"))
	if err != nil {
		t.Fatal(err)
	}
	var shop *application.App
	app := fx.New(bootstrap.Module(cfg), fx.NopLogger, fx.Populate(&shop))
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	if got := shop.Config(); got.BuyerCap != 7 || got.BuyerWindow != 3*time.Minute || got.OrderTimeout != 3*time.Minute {
		t.Fatalf("shop config: buyer cap %d, window %v, order timeout %v; want 7, 3m, 3m", got.BuyerCap, got.BuyerWindow, got.OrderTimeout)
	}
}

// The notification log's retention settings reach the use cases.
func TestShopGetsTheNotificationRetention(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_NOTIFICATION_RETENTION=720h", "CARDSHOP_REFUSED_NOTIFICATION_RETENTION=36h"))
	if err != nil {
		t.Fatal(err)
	}
	var shop *application.App
	app := fx.New(bootstrap.Module(cfg), fx.NopLogger, fx.Populate(&shop))
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	if got := shop.Config(); got.NotificationRetention != 720*time.Hour || got.RefusedNotificationRetention != 36*time.Hour {
		t.Fatalf("shop config: retention %v, refused %v; want 720h, 36h", got.NotificationRetention, got.RefusedNotificationRetention)
	}
}

// configurationTable is the file whose table documents every setting.
const configurationTable = "../docs/CONFIGURATION.md"

// The configuration table of docs/CONFIGURATION.md is the reference: it lists every variable
// the service reads, nothing else, each with its real default ("—" for none).
func TestConfigurationTableIsComplete(t *testing.T) {
	table, err := os.ReadFile(configurationTable)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(CARDSHOP_[A-Z0-9_]+)` \\| ([^|]*) \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(table), -1) {
		if _, dup := documented[m[1]]; dup {
			t.Errorf("%s lists %s twice", configurationTable, m[1])
		}
		documented[m[1]] = strings.TrimSpace(m[2])
	}
	for _, name := range bootstrap.EnvNames() {
		got, ok := documented[name]
		if !ok {
			t.Errorf("%s lacks %s", configurationTable, name)
			continue
		}
		def, _ := bootstrap.EnvDefault(name)
		want := "`" + def + "`"
		if def == "" {
			if !strings.HasPrefix(got, "—") {
				t.Errorf("%s gives %s the default %q; it has none (write —)", configurationTable, name, got)
			}
		} else if got != want {
			t.Errorf("%s gives %s the default %s, the service uses %s", configurationTable, name, got, want)
		}
		delete(documented, name)
	}
	for name := range documented {
		t.Errorf("%s documents %s, which the service does not read", configurationTable, name)
	}
}

// TestCaptchaSettings: a provider needs its site key, secret and hostname; an unknown provider
// or policy is refused; CARDSHOP_CAPTCHA_UNREACHABLE=allow fails open; the blocklists' reload
// interval is read.
func TestCaptchaSettings(t *testing.T) {
	full := []string{"CARDSHOP_CAPTCHA=hcaptcha", "CARDSHOP_CAPTCHA_SITE_KEY=site", "CARDSHOP_CAPTCHA_SECRET=0xsecret",
		"CARDSHOP_CAPTCHA_HOSTNAME=shop.example", "CARDSHOP_CAPTCHA_UNREACHABLE=allow", "CARDSHOP_BLOCKLIST_EVERY=10s"}
	c, err := bootstrap.LoadConfig(env(full...))
	if err != nil {
		t.Fatal(err)
	}
	if c.Captcha != "hcaptcha" || c.CaptchaSiteKey != "site" || c.CaptchaSecret.Reveal() != "0xsecret" ||
		c.CaptchaHostname != "shop.example" || !c.HumanCheckFailOpen || c.BlocklistEvery != 10*time.Second {
		t.Fatalf("read %+v", c)
	}
	for i := 1; i < 4; i++ { // each of site key, secret and hostname left out
		partial := append(append([]string{}, full[:i]...), full[i+1:]...)
		if _, err := bootstrap.LoadConfig(env(partial...)); err == nil || !strings.Contains(err.Error(), "CARDSHOP_CAPTCHA") {
			t.Errorf("without %s: err = %v, want a refusal naming the captcha settings", full[i], err)
		}
	}
	for _, bad := range []string{"CARDSHOP_CAPTCHA=recaptcha", "CARDSHOP_CAPTCHA_UNREACHABLE=maybe", "CARDSHOP_BLOCKLIST_EVERY=soon"} {
		if _, err := bootstrap.LoadConfig(env(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestPublicURLFollowsTheListenAddress: without CARDSHOP_PUBLIC_URL, pay links, return and
// notify URLs point at CARDSHOP_HTTP_ADDR, a wildcard or empty host read as 127.0.0.1; a set
// CARDSHOP_PUBLIC_URL wins.
func TestPublicURLFollowsTheListenAddress(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, "http://127.0.0.1:8080"},
		{[]string{"CARDSHOP_HTTP_ADDR=127.0.0.1:9090"}, "http://127.0.0.1:9090"},
		{[]string{"CARDSHOP_HTTP_ADDR=:7070"}, "http://127.0.0.1:7070"},
		{[]string{"CARDSHOP_HTTP_ADDR=0.0.0.0:7071"}, "http://127.0.0.1:7071"},
		{[]string{"CARDSHOP_HTTP_ADDR=[::]:7072"}, "http://127.0.0.1:7072"},
		{[]string{"CARDSHOP_HTTP_ADDR=localhost:7073"}, "http://localhost:7073"},
		{[]string{"CARDSHOP_HTTP_ADDR=127.0.0.1:9090", "CARDSHOP_PUBLIC_URL=https://shop.example"}, "https://shop.example"},
	} {
		cfg, err := bootstrap.LoadConfig(env(c.env...))
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if cfg.PublicURL != c.want {
			t.Errorf("%v: public URL %q, want %q", c.env, cfg.PublicURL, c.want)
		}
	}
}

// CARDSHOP_TRUSTED_PROXIES reaches the API: behind the trusted 127.0.0.1 each forwarded client
// has a per-IP budget of its own, and a client's own X-Forwarded-For entries move it to none.
func TestTrustedProxiesReachTheAPI(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_TRUSTED_PROXIES=127.0.0.1,::1", "CARDSHOP_RATE_PER_IP=1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	c := runService(t, cfg, io.Discard)
	const path = "/api/orders/250301120000123412345678"
	for _, step := range []struct {
		forwarded string
		want      int
	}{
		{"198.51.100.1", 401},              // no token: refused, and counted
		{"198.51.100.1", 429},              // the same client again
		{"203.0.113.5, 198.51.100.1", 429}, // the same client, with a made-up entry of its own
		{"198.51.100.2", 401},              // another client behind the proxy
		{"2001:db8::7", 401},               // and one over IPv6
		{"198.51.100.1, 2001:db8::7", 429}, // the IPv6 client, claiming to be another
	} {
		if got, body := c.do("GET", path, "", "", "X-Forwarded-For", step.forwarded); got != step.want {
			t.Fatalf("X-Forwarded-For %q: %d %s, want %d", step.forwarded, got, body, step.want)
		}
	}
}

// A brace in CARDSHOP_REDIS_PREFIX is refused with the reason: the prefix sits outside the
// keys' hash tag.
func TestRedisPrefixWithABraceSaysWhy(t *testing.T) {
	_, err := bootstrap.LoadConfig(env("CARDSHOP_REDIS_PREFIX=shop{1}"))
	if err == nil || !strings.Contains(err.Error(), "CARDSHOP_REDIS_PREFIX") || !strings.Contains(err.Error(), "hash tag") {
		t.Fatalf("LoadConfig = %v; want an error naming CARDSHOP_REDIS_PREFIX and the hash tag", err)
	}
}
