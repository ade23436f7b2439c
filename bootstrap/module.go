package bootstrap

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/fx"

	"cardshop/adapters/authtoken"
	"cardshop/adapters/captcha"
	"cardshop/adapters/console"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/memory"
	"cardshop/adapters/metrics"
	"cardshop/adapters/paysig"
	"cardshop/adapters/storefront"
	"cardshop/adapters/webhook"
	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// Module is the whole service for cfg: shared pieces plus the adapter set cfg names. A cfg
// that did not come through LoadConfig is held to the same rule on secrets: the real adapters
// never run with a published or obviously weak one.
func Module(cfg Config) fx.Option {
	if err := checkSecrets(cfg); err != nil {
		return fx.Error(err)
	}
	adapters := MemoryAdapters()
	if cfg.Adapters == AdaptersReal {
		adapters = RealAdapters()
	}
	return fx.Options(
		fx.Supply(cfg),
		fx.Provide(newLogger, newClock, newSigner, newTokens, newWebhook, newPaymentGateways, newChannelKit, newHumanCheck, newApp, appServices, appCoupons, newHTTP, newStreamsStop, newReports),
		alertChannels(),
		adapters,
		mailer(cfg),
		observability(),
		fx.Invoke(watchWebhook, watchMail, watchRefusedNotifications, watchBotRefusals, seedDemo, runWorkers, watchChannels, serveHTTP, servePprof),
	)
}

func newLogger(cfg Config) *slog.Logger {
	// Every line logged with a request's context carries its request id.
	return slog.New(httpapi.LogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel})))
}

// newClock is the wall clock, whichever adapter set runs, shifted by CARDSHOP_CLOCK_OFFSET
// (a test setting: instances that disagree about the time).
func newClock(cfg Config) domain.Clock {
	if cfg.ClockOffset != 0 {
		return offsetClock(cfg.ClockOffset)
	}
	return memory.SystemClock{}
}

// offsetClock is the wall clock plus a fixed offset.
type offsetClock time.Duration

func (o offsetClock) Now() time.Time { return time.Now().Add(time.Duration(o)) }

func newSigner(cfg Config) (*paysig.Signer, error) {
	return paysig.New(cfg.PaymentSecret.Reveal(), cfg.CallbackWindow)
}

func newTokens(cfg Config) (*authtoken.Issuer, error) { return authtoken.New(cfg.TokenSecret.Reveal()) }

// Consumer is how an adapter set delivers due order timeouts to the use case.
type Consumer interface {
	Consume(handler func(context.Context, domain.OrderNo) error)
}

// Webhook is the storefront's webhook, counted in the metrics; Notifier is nil when
// CARDSHOP_WEBHOOK_URL is not set.
type Webhook struct{ Notifier domain.Notifier }

func newWebhook(cfg Config, m *metrics.Metrics) (Webhook, error) {
	if cfg.WebhookURL == "" {
		return Webhook{}, nil
	}
	c, err := webhook.New(webhook.Config{URL: cfg.WebhookURL, Secret: cfg.WebhookSecret.Reveal(), Timeout: cfg.WebhookTimeout})
	if err != nil {
		return Webhook{}, err
	}
	return Webhook{Notifier: m.Notifier(c)}, nil
}

// watchMail exports the mail backlog when there is a mailer.
func watchMail(in mailWatch) {
	if in.Mailer != nil {
		in.Metrics.WatchMailBacklog(in.Relay.MailBacklog)
	}
}

// mailWatch is what watchMail takes: the mailer is optional.
type mailWatch struct {
	fx.In
	Metrics *metrics.Metrics
	Relay   *application.Relay
	Mailer  domain.Mailer `optional:"true"`
}

// watchWebhook exports the webhook backlog when there is a webhook.
func watchWebhook(cfg Config, m *metrics.Metrics, relay *application.Relay) {
	if cfg.WebhookURL != "" {
		m.WatchWebhookBacklog(relay.WebhookBacklog)
	}
}

// watchRefusedNotifications exports the payment notifications refused before verification.
func watchRefusedNotifications(m *metrics.Metrics, payments *application.Payments) {
	m.WatchRefusedNotifications(func(add func(provider, reason string, n int64)) {
		for k, n := range payments.RefusedNotifications() {
			add(string(k.Provider), k.Reason, n)
		}
	})
}

// HumanCheck is the buyers' human check; nil when CARDSHOP_CAPTCHA is off.
type HumanCheck struct{ Check domain.HumanCheck }

// newHumanCheck is the Turnstile or hCaptcha verifier CARDSHOP_CAPTCHA names.
func newHumanCheck(cfg Config) (HumanCheck, error) {
	if cfg.Captcha == "" || cfg.Captcha == "off" {
		return HumanCheck{}, nil
	}
	v, err := captcha.New(captcha.Config{Provider: captcha.Provider(cfg.Captcha), Secret: cfg.CaptchaSecret,
		SiteKey: cfg.CaptchaSiteKey, Hostname: cfg.CaptchaHostname, VerifyURL: cfg.CaptchaVerifyURL})
	if err != nil {
		return HumanCheck{}, err
	}
	return HumanCheck{Check: v}, nil
}

// watchBotRefusals exports the bot defence's refusals by reason.
func watchBotRefusals(m *metrics.Metrics, guard *application.Guard) {
	m.WatchBotRefusals(guard.Refusals)
}

type appIn struct {
	fx.In
	Cfg       Config
	Webhook   Webhook
	Ledger    domain.Ledger
	Gate      domain.StockGate
	Queue     domain.DelayQueue
	Publisher domain.EventPublisher
	Alerter   domain.Alerter
	Clock     domain.Clock
	Signer    *paysig.Signer
	Payments  paymentGateways
	Kit       *channelKit
	Log       *slog.Logger
	// Mailer sends guest orders' e-mails when a mail adapter provides one (SMTP); without one
	// no e-mail is recorded nor sent.
	Mailer domain.Mailer `optional:"true"`
	// AlertPusher pushes alerts to the channels set in the console (alerts.go).
	AlertPusher domain.AlertPusher
}

// OrderPagePath is the storefront's order page, opened with the order's access secret: the
// link of the order's e-mail.
const OrderPagePath = "/orders/{order_no}?key={key}"

func newApp(in appIn, human HumanCheck) (*application.App, error) {
	ac := in.Cfg.Config
	ac.NotifyURL = in.Cfg.PublicURL + httpapi.NotifyPath
	if ac.ReturnURL == "" {
		// Back to the shop's order page when the shop is on; else the API's order.
		ac.ReturnURL = in.Cfg.PublicURL + httpapi.OrderPath
		if in.Cfg.Storefront {
			ac.ReturnURL = in.Cfg.PublicURL + storefront.OrderPath
		}
	}
	ac.OrderURL = in.Cfg.PublicURL + OrderPagePath
	ac.OrderAccessKey = orderAccessKey(in.Cfg.TokenSecret)
	return application.New(ac, application.Deps{Ledger: in.Ledger, Gate: in.Gate, Queue: in.Queue,
		Publisher: in.Publisher, Notifier: in.Webhook.Notifier, Mailer: in.Mailer, Verifier: in.Signer,
		Gateways: in.Payments.all, Channels: in.Kit, Alerter: in.Alerter, HumanCheck: human.Check, AlertPusher: in.AlertPusher,
		Clock: in.Clock, Logger: in.Log})
}

// orderAccessKey derives the key of guest orders' access secrets from the token secret, with
// a label of its own: one secret less to configure, and the token secret itself is never used
// for anything but buyer tokens (a secret derived under another label tells nothing about it).
// Rotating the token secret changes the secrets of the e-mails sent from then on; those handed
// out before keep working (the ledger checks their hash).
func orderAccessKey(tokenSecret domain.Secret) domain.Secret {
	mac := hmac.New(sha256.New, []byte(tokenSecret.Reveal()))
	mac.Write([]byte("cardshop order access key v1"))
	return domain.Secret(hex.EncodeToString(mac.Sum(nil)))
}

// appServices provides each service of the App on its own, so that every adapter and worker
// takes only the services it calls.
func appServices(a *application.App) (*application.Sales, *application.Payments, *application.Catalogue,
	*application.Admin, *application.Relay, *application.Guard, *application.Channels) {
	return a.Sales, a.Payments, a.Catalogue, a.Admin, a.Relay, a.Guard, a.Channels
}

// appCoupons provides the coupons' admin use cases (the API's and the console's routes).
func appCoupons(a *application.App) *application.Coupons { return a.Coupons }

// newReports is the dashboard's money and the orders' export, on the adapters' sales report.
func newReports(cfg Config, report domain.SalesReport, ledger domain.Ledger, clock domain.Clock) (*application.Reports, error) {
	return application.NewReports(report, ledger, clock, cfg.Currency)
}

// workers are the services the background passes run.
type workers struct {
	fx.In
	Sales     *application.Sales
	Payments  *application.Payments
	Catalogue *application.Catalogue
	Relay     *application.Relay
	Mailer    domain.Mailer `optional:"true"` // nil: no mail relay
}

type httpIn struct {
	fx.In
	Cfg       Config
	Sales     *application.Sales
	Pay       *application.Payments
	Catalogue *application.Catalogue
	Admin     *application.Admin
	Guard     *application.Guard
	Reports   *application.Reports
	Tokens    *authtoken.Issuer
	Clock     domain.Clock
	Limiter   webkit.Limiter
	Metrics   *metrics.Metrics
	Readiness Readiness
	Queues    QueueBacklog
	Stop      streamsStop
	Payments  paymentGateways
	Channels  *application.Channels
	Kit       *channelKit
	Log       *slog.Logger
	// AlertChannels runs the console's alert channels page (alerts.go).
	AlertChannels *application.AlertChannels
	Coupons       *application.Coupons
}

// streamsStop is closed when the service begins to stop, before the HTTP server's graceful
// shutdown: the console's dashboard streams end on it, so the shutdown does not wait on them.
type streamsStop chan struct{}

func newStreamsStop() streamsStop { return make(streamsStop) }

func newHTTP(in httpIn) (*fiber.App, error) {
	hc := httpapi.DefaultConfig(in.Cfg.AdminToken.Reveal())
	hc.RateLimits = httpapi.RateLimits{PerIP: in.Cfg.RatePerIP, PerBuyer: in.Cfg.RatePerBuyer, Window: in.Cfg.RateWindow, Limiter: in.Limiter}
	hc.Metrics, hc.Readiness = in.Metrics, in.Readiness
	hc.DevPay, hc.Replies = in.Payments.dev, withChannelReplies(in.Payments.replies, in.Kit)
	hc.RequestTimeout = in.Cfg.RequestTimeout
	hc.AccessLog = in.Cfg.AccessLog
	hc.TrustedProxies = in.Cfg.TrustedProxies
	// One recorder of refused tokens and logins for both doors: its bound per instance is one.
	hc.AuthFailures = webkit.NewAuthFailures(in.Admin, in.Limiter, in.Clock, in.Log)
	app := httpapi.New(hc, httpapi.Services{Sales: in.Sales, Payments: in.Pay, Catalogue: in.Catalogue, Admin: in.Admin,
		Guard: in.Guard, Reports: in.Reports, Coupons: in.Coupons},
		in.Tokens, in.Clock, in.Log)
	// The operator console shares the API's app (and its middleware) under /console; its
	// login attempts are limited per client IP by the API's limiter (on Redis with the real
	// adapters, so the budget holds across instances).
	console.Mount(app, console.Config{AdminToken: in.Cfg.AdminToken.Reveal(), TokenSecret: in.Cfg.TokenSecret.Reveal(),
		Limiter: in.Limiter, LoginsPerWindow: console.DefaultLoginsPerWindow, LoginWindow: console.DefaultLoginWindow,
		TimeZone: in.Cfg.ConsoleTimeZone, MaxImportBytes: hc.MaxImportBytes,
		Readiness: in.Readiness, Queues: in.Queues, Stop: in.Stop, AuthFailures: hc.AuthFailures},
		console.Services{Sales: in.Sales, Payments: in.Pay, Catalogue: in.Catalogue, Admin: in.Admin, Guard: in.Guard,
			Reports: in.Reports, AlertChannels: in.AlertChannels, Channels: in.Channels, Coupons: in.Coupons},
		in.Clock, in.Log)
	// The shop for buyers comes last: its not-found page answers every path left.
	if in.Cfg.Storefront {
		sc := storefrontConfig(in.Cfg, in.Limiter, in.Guard)
		sc.MorePayOrigins = func() []string { return in.Kit.payOrigins(in.Pay.Providers()) }
		if err := storefront.Mount(app, sc, in.Sales, in.Pay, in.Clock, in.Log); err != nil {
			return nil, err
		}
	}
	return app, nil
}

// storefrontConfig is the shop's configuration: its CSRF key from the token secret, lookups
// limited by the API's limiter, checkouts by the API's per-IP limit, and the origins its pay forms may lead to (the providers'
// pay pages: browsers check a form's redirects against the CSP's form-action too).
func storefrontConfig(cfg Config, limiter webkit.Limiter, guard *application.Guard) storefront.Config {
	sc := storefront.Config{Secret: cfg.TokenSecret.Reveal(), Limiter: limiter,
		CheckoutsPerWindow: cfg.RatePerIP, CheckoutWindow: cfg.RateWindow}
	if guard != nil {
		sc.Screen = guardScreen{guard}
		if w, ok := guard.HumanWidget(); ok {
			sc.Widget = storefront.Widget{Provider: w.Provider, SiteKey: w.SiteKey}
		}
	}
	add := func(raw string) {
		if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Host != "" {
			sc.PayOrigins = append(sc.PayOrigins, u.Scheme+"://"+u.Host)
		}
	}
	if cfg.DevPayments {
		add(cfg.PublicURL)
	}
	if cfg.StripeKey != "" {
		add("https://checkout.stripe.com")
	}
	if cfg.EpayURL != "" {
		add(cfg.EpayURL)
	}
	if cfg.AlipayAppID != "" {
		add(cfg.AlipayURL)
	}
	return sc
}

// runWorkers starts the delay-queue consumer, the sweeper, the notification log's pruning (at
// the sweeper's interval), the outbox relay, the stock watch (unless turned off) and (with a
// webhook) the webhook relay with the service and stops them (waiting for a running pass)
// when it stops.
func runWorkers(lc fx.Lifecycle, cfg Config, w workers, consumer Consumer, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	every := func(name string, d time.Duration, run func(context.Context) (int, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				if n, err := run(ctx); err != nil && ctx.Err() == nil {
					log.Warn(name+" pass failed", "err", err)
				} else if n > 0 {
					log.Debug(name+" pass", "n", n)
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			consumer.Consume(w.Sales.CloseExpired)
			every("sweeper", cfg.SweepInterval, w.Sales.Sweep)
			every("notification log pruning", cfg.SweepInterval, w.Payments.PruneNotifications)
			every("outbox relay", cfg.RelayInterval, w.Relay.RelayOutbox)
			if cfg.StockEventsInterval > 0 {
				every("stock watch", cfg.StockEventsInterval, w.Catalogue.WatchStock)
			}
			if cfg.WebhookURL != "" {
				every("webhook relay", cfg.RelayInterval, w.Relay.RelayWebhooks)
			}
			if w.Mailer != nil {
				every("mail relay", cfg.RelayInterval, w.Relay.RelayMail)
			}
			every("alert relay", cfg.RelayInterval, w.Relay.RelayAlerts)
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			wg.Wait()
			return nil
		},
	})
}

// serveHTTP listens on cfg.HTTPAddr at start (a taken port fails the start) and shuts the
// server down gracefully at stop, letting requests in flight finish; the console's dashboard
// streams, which would never finish, are ended first (stop).
func serveHTTP(lc fx.Lifecycle, cfg Config, app *fiber.App, stop streamsStop, log *slog.Logger) {
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.HTTPAddr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
			}
			log.Info("cardshop listening", "addr", ln.Addr().String(), "adapters", cfg.Adapters)
			go func() {
				if err := app.Listener(ln); err != nil && !errors.Is(err, net.ErrClosed) {
					log.Error("http server stopped", "err", err)
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			close(stop)
			ctx, cancel := context.WithTimeout(ctx, cfg.ShutdownGrace)
			defer cancel()
			return app.ShutdownWithContext(ctx)
		},
	})
}

// servePprof serves net/http/pprof on cfg.PprofAddr (keep it on loopback) for profiling under
// load; nothing is served when it is empty.
func servePprof(lc fx.Lifecycle, cfg Config, log *slog.Logger) {
	if cfg.PprofAddr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: cfg.PprofAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.PprofAddr)
			if err != nil {
				return fmt.Errorf("pprof listen on %s: %w", cfg.PprofAddr, err)
			}
			log.Info("pprof listening", "addr", ln.Addr().String())
			go func() { _ = srv.Serve(ln) }()
			return nil
		},
		OnStop: func(ctx context.Context) error { return srv.Shutdown(ctx) },
	})
}

// guardScreen is the bot defence (blocklists, then the human check) as the shop's checkout
// asks it, before an order is reserved. A human check that cannot be reached (and the shop
// refuses then) is a "try again" page, as any outage: it wraps domain.ErrUnavailable.
type guardScreen struct{ g *application.Guard }

func (s guardScreen) Check(ctx context.Context, b storefront.BuyerCheck) error {
	err := s.g.Check(ctx, application.BuyerCheck{IP: b.IP, Email: b.Email, HumanToken: b.HumanToken})
	if errors.Is(err, domain.ErrHumanCheckUnavailable) && !errors.Is(err, domain.ErrUnavailable) {
		return fmt.Errorf("%w (%w)", err, domain.ErrUnavailable)
	}
	return err
}
