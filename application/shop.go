package application

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"cardshop/domain"
)

// Config holds the business settings of the use cases. DefaultConfig gives the product's
// defaults.
type Config struct {
	// OrderTimeout is how long a PENDING order waits for payment.
	OrderTimeout time.Duration
	// IdempotencyTTL is how long the gate remembers an idempotency key. After
	// that a replay that can still reserve reaches the ledger's unique (buyer, key) and gets
	// the original order; one for a sold-out or frozen product gets that answer instead (the
	// sold-out path never reads the database).
	IdempotencyTTL time.Duration
	// ReplayWait is how long a replay waits for the original request's order to be written.
	ReplayWait time.Duration
	// SweepBatch is how many expired orders the sweeper reads at once.
	SweepBatch int
	// RelayBatch is how many outbox messages the relay reads at once.
	RelayBatch int
	// RebuildDelay is how long after the gate is found without a product its automatic rebuild
	// waits, so that reservations taken before the loss finish writing their orders.
	RebuildDelay time.Duration
	// OrphanAfter is how old a reservation still tracked by the gate must be before the sweeper
	// asks the ledger whether its order was written, and releases it when not (the service died
	// between the gate and the ledger). It must be far longer than any request: a reservation
	// whose order is still being written would be released under it. Zero means DefaultConfig's.
	OrphanAfter time.Duration
	// BuyerCap is how many units of one product one buyer may reserve per BuyerWindow (stock-lock
	// abuse: one buyer holding the whole stock unpaid for the order timeout); 0 = no limit.
	// Replays of a placed order do not count; refused and cancelled ones are not refunded.
	BuyerCap int64
	// BuyerWindow is how long a buyer's count lives from the first reservation of the window.
	// Zero means OrderTimeout.
	BuyerWindow time.Duration
	// WebhookMaxBackoff caps the wait between two attempts at a webhook message; zero means
	// DefaultConfig's.
	WebhookMaxBackoff time.Duration
	// Currency is the shop's currency: every price, order and payment is an amount of its
	// minor unit. A payment provider that cannot charge it is refused at start.
	Currency domain.Currency
	// NotifyURL is where a provider sends its notifications; "{provider}" in it is replaced by
	// the provider's name. The driving adapter that receives them states it.
	NotifyURL string
	// ReturnURL is where a provider sends the buyer back after paying; "{order_no}" in it is
	// replaced by the order number.
	ReturnURL string
	// PaymentCloseGrace is how long past an order's expiry the close keeps waiting for a
	// provider that cannot be reached to close (or report) the order's open payment; after it
	// the order closes anyway with an alert, and a payment that still arrives takes the
	// late-payment path.
	PaymentCloseGrace time.Duration
	// ProductCacheTTL is how long an instance places orders from its cached copy of a product
	// before reading it again: a change made through another instance reaches this one's
	// orders within it. Zero means DefaultConfig's.
	ProductCacheTTL time.Duration
	// SaleStartMargin: an order that this instance's clock places more than this long before
	// its product's sale starts is refused here, without a round trip to the gate (the pre-start
	// storm stays cheap). Closer to the start the gate decides by its own clock. 0 never refuses
	// here.
	SaleStartMargin time.Duration
	// CatalogueLevelsEvery is how old the public catalogue's stock may get before a request
	// refreshes it (one gate round trip for every product); zero means DefaultConfig's.
	CatalogueLevelsEvery time.Duration
	// CatalogueProductsEvery is how old the public catalogue's product list may get before a
	// request reads it again from the ledger; zero means DefaultConfig's.
	CatalogueProductsEvery time.Duration
	// NotificationRetention is how long the notification log keeps a verified notification;
	// RefusedNotificationRetention how long it keeps an aggregate of refused ones (counted
	// from its last refusal). PruneNotifications deletes older records. Zero means
	// DefaultConfig's.
	NotificationRetention        time.Duration
	RefusedNotificationRetention time.Duration
	// RefusedNotificationWindow is the window of the aggregates of notifications refused
	// before verification: one record per provider, address and window.
	// RefusedNotificationAddresses is how many addresses a window tracks one by one on this
	// instance; refusals from any other address share one record per provider. Zero means
	// DefaultConfig's.
	RefusedNotificationWindow    time.Duration
	RefusedNotificationAddresses int
	// OrderAccessKey derives the access secrets of guest orders (PlaceGuestOrder): at least 16
	// bytes, and never another secret reused (bootstrap derives it from the token secret with
	// a label of its own). Empty: no guest orders. Changing it changes the secrets the e-mails
	// carry from then on; the secrets already handed out keep working (the ledger checks their
	// hash).
	OrderAccessKey domain.Secret
	// OrderURL is the order page's link in an order's e-mail: "{order_no}" in it is replaced by
	// the order number, "{key}" by its access secret (".../orders/{order_no}?key={key}").
	OrderURL string
	// MailCodes puts an order's codes in its e-mail (then sending counts as the reveal,
	// recorded before the mail is sent); false sends only the link to the order page.
	MailCodes bool
	// MailAttempts is how many times the mail relay tries an order's e-mail before it raises
	// an alert (AlertMailFailed) and gives up; zero means DefaultConfig's.
	MailAttempts int
	// BlocklistEvery is how old an instance's compiled copy of the blocklists may get before a
	// check reads them again from the ledger (one read for every entry): a change made through
	// another instance is applied here within it. Zero means DefaultConfig's.
	BlocklistEvery time.Duration
	// HumanCheckFailOpen: when the human-check provider cannot be reached, let the buyer
	// through (and count it) instead of refusing the order.
	HumanCheckFailOpen bool
	// AlertAttempts is how many times the alert relay tries a push to a channel before it
	// gives up and records the error on the channel; zero means DefaultConfig's.
	AlertAttempts int
}

// Defaults of the notification log's settings (see Config).
const (
	DefaultNotificationRetention        = 90 * 24 * time.Hour
	DefaultRefusedNotificationRetention = 7 * 24 * time.Hour
	DefaultRefusedNotificationWindow    = time.Minute
	DefaultRefusedNotificationAddresses = 100
)

// DefaultOrphanAfter is Config.OrphanAfter's default.
const DefaultOrphanAfter = 2 * time.Minute

// DefaultConfig returns the product's defaults, the one place they are stated: the service
// (package bootstrap) takes the defaults of the settings it reads from the environment from
// here, except the buyer cap: DefaultConfig has none, the service caps each buyer unless told
// otherwise (see its CARDSHOP_BUYER_CAP).
func DefaultConfig() Config {
	return Config{
		OrderTimeout:                 15 * time.Minute,
		IdempotencyTTL:               10 * time.Minute,
		ReplayWait:                   time.Second,
		SweepBatch:                   500,
		RelayBatch:                   500,
		RebuildDelay:                 time.Second,
		OrphanAfter:                  DefaultOrphanAfter,
		BuyerWindow:                  15 * time.Minute, // the order timeout
		WebhookMaxBackoff:            DefaultWebhookCap,
		Currency:                     domain.Currency{Code: "CNY", Exponent: 2},
		PaymentCloseGrace:            10 * time.Minute,
		ProductCacheTTL:              5 * time.Second,
		SaleStartMargin:              2 * time.Second,
		CatalogueLevelsEvery:         250 * time.Millisecond,
		CatalogueProductsEvery:       5 * time.Second,
		NotificationRetention:        DefaultNotificationRetention,
		RefusedNotificationRetention: DefaultRefusedNotificationRetention,
		RefusedNotificationWindow:    DefaultRefusedNotificationWindow,
		RefusedNotificationAddresses: DefaultRefusedNotificationAddresses,
		MailCodes:                    true,
		MailAttempts:                 DefaultMailAttempts,
		BlocklistEvery:               DefaultBlocklistEvery,
		AlertAttempts:                DefaultAlertAttempts,
	}
}

// Deps are the ports the use cases need.
type Deps struct {
	Ledger    domain.Ledger
	Gate      domain.StockGate
	Queue     domain.DelayQueue
	Publisher domain.EventPublisher
	// Notifier is the storefront's webhook; nil when none is configured, and then no webhook
	// messages are recorded.
	Notifier domain.Notifier
	Verifier domain.PaymentVerifier
	// Mailer sends guest orders' e-mails; nil when none is configured, and then no e-mail
	// messages are recorded.
	Mailer domain.Mailer
	// Gateways are the payment providers the environment configures, always offered (none:
	// buyers pay through the storefront, which calls the signed callback, or through the
	// channels configured in the console).
	Gateways []domain.PaymentGateway
	// Channels builds the providers an operator configures in the console (Channels); nil:
	// only Gateways.
	Channels ChannelKit
	// Alerter pages on an alert (a log line); the shop also records every alert in the
	// ledger's alert log, for operators to list and acknowledge.
	Alerter domain.Alerter
	// HumanCheck verifies the buyers' human-check tokens (Turnstile, hCaptcha); nil: none.
	HumanCheck domain.HumanCheck
	// AlertPusher pushes alerts to the channels admins configure (Telegram, WeCom, e-mail, a
	// signed webhook); nil: pushes wait in the outbox and tests fail.
	AlertPusher domain.AlertPusher
	Clock       domain.Clock
	Logger      *slog.Logger
}

// App holds the use cases, one service per kind of work; a driving adapter takes only the
// services it calls. Each service holds only the ports it uses, in three nested layers: Relay
// the outbox's (ledger, gate, broker, webhook, clock); Catalogue those and the stock steps and
// caches (gate changes, reconcile and rebuild, the product cache, the public catalogue);
// Sales and Payments those, the payment providers and the alerter, and the steps of an
// order's life they share (settle, fulfil, reserve and cancel, stock returns), with the delay
// queue Sales' own and the callback's verifier Payments'. Admin stands apart on the ledger and
// the clock. All are safe for concurrent use.
type App struct {
	Sales     *Sales     // placing, reading, closing and sweeping orders; fulfils; sold-out answers
	Payments  *Payments  // creating payments, notifications, the signed callback, refunds
	Catalogue *Catalogue // products, codes (import, void), freezes, the gate (reconcile, rebuild), stock watch, dashboard
	Admin     *Admin     // operators, sessions, the audit log, alerts
	Relay     *Relay     // the outbox, webhook and mail relays
	Guard     *Guard     // the bot defence: blocklists and the human check
	// AlertChannels runs the channels alerts are pushed to (the relay is Relay.RelayAlerts).
	AlertChannels *AlertChannels
	Channels      *Channels // the payment channels configured in the console
	Coupons       *Coupons  // the coupons: create, list with their uses, disable, enable

	core *core
}

// Sales places, reads, closes and sweeps orders, fulfils them, and answers the public
// catalogue and the sold-out rates.
type Sales struct {
	*core
	queue domain.DelayQueue // each order's close at its expiry
}

// Payments creates payments and applies what providers and the storefront report: provider
// notifications, the signed callback, refunds; and keeps the notification log.
type Payments struct {
	*core
	verifier domain.PaymentVerifier // the storefront's signed callback
	refused  refusedNotices         // this instance's notifications refused before verification (recordRefused)
}

// Catalogue runs products and their codes: create, update, freeze, import, void; and the gate:
// reconcile, rebuild, stock watch, the dashboard.
type Catalogue struct {
	*stock
	// fill fills a product's waiting orders (Sales' fillWaiting): the one step of an order's
	// life an import starts.
	fill func(context.Context, domain.ProductID) (FillReport, error)
}

// Admin runs operators and their sessions, the audit log and the alert log: the ledger and the
// clock are all it needs. Who may do what is ActionRole's table.
type Admin struct {
	ledger domain.Ledger
	clock  domain.Clock
}

// Relay carries the outbox to the gate, the broker, the storefront's webhook and the buyers'
// e-mail.
type Relay struct{ *outbox }

// outbox is what the relay needs: the outbox in the ledger and where its messages go.
type outbox struct {
	cfg      Config
	ledger   domain.Ledger
	gate     domain.StockGate
	pub      domain.EventPublisher
	notifier domain.Notifier // nil: no webhook
	mailer   domain.Mailer   // nil: no order e-mails
	pusher   domain.AlertPusher
	alerts   domain.Alerter
	clock    domain.Clock
	log      *slog.Logger
}

// stock is what Catalogue needs: the outbox, the steps that change or check the gate, and the
// caches of products and stock that every service reads.
type stock struct {
	*outbox

	// products caches products (price, tiers, limit) so that the hot path of placing an order,
	// and above all its sold-out answer, touches the gate only. A domain.Product is immutable,
	// so entries are shared; each expires Config.ProductCacheTTL after it was read from the
	// ledger, which bounds how long another instance's change (UpdateProduct) goes unseen.
	// Sale state (frozen) is enforced by the gate itself.
	products   sync.Map      // domain.ProductID -> cachedProduct
	productGen atomic.Uint64 // counts UpdateProduct calls: a read that raced one is not cached

	catalogue  catalogue   // the public catalogue's snapshot (Catalogue)
	stockWatch stockWatch  // WatchStock's product list
	rates      answerRates // this instance's sold-out answers per product (SoldOutAnswers)
	coupons    couponCache // the coupons orders name (couponFor)
}

// core is what Sales and Payments share: the stock layer, the payment providers and the
// alerter, and the steps of an order's life (settle, fulfil, reserve and cancel).
type core struct {
	*stock
	gateways atomic.Pointer[gatewaySet] // swapped whole when the console's channels change (Channels.Reload)
	alerts   domain.Alerter

	fills      sync.Map // domain.ProductID -> *fillRun: the product's fill of waiting orders (fillWaiting)
	rebuilding sync.Map // domain.ProductID -> true while an automatic gate rebuild is pending
	background sync.WaitGroup
}

// New checks deps and cfg and returns the App. A zero OrphanAfter or WebhookMaxBackoff takes
// DefaultConfig's; a zero BuyerWindow is the order timeout.
func New(cfg Config, d Deps) (*App, error) {
	if d.Ledger == nil || d.Gate == nil || d.Queue == nil || d.Publisher == nil || d.Verifier == nil ||
		d.Alerter == nil || d.Clock == nil {
		return nil, errors.New("application: every port is required")
	}
	if cfg.OrderTimeout <= 0 || cfg.IdempotencyTTL <= 0 || cfg.SweepBatch <= 0 || cfg.RelayBatch <= 0 {
		return nil, errors.New("application: timeouts and batch sizes must be positive")
	}
	if cfg.OrphanAfter < 0 || cfg.BuyerCap < 0 || cfg.BuyerWindow < 0 || cfg.WebhookMaxBackoff < 0 {
		return nil, errors.New("application: the orphan age, the buyer cap, the buyer window and the webhook backoff must not be negative")
	}
	// The settings a zero (or, where allowed, negative) value leaves at their default.
	def := DefaultConfig()
	def.BuyerWindow = cfg.OrderTimeout
	for _, d := range []struct{ v, def *time.Duration }{
		{&cfg.WebhookMaxBackoff, &def.WebhookMaxBackoff},
		{&cfg.OrphanAfter, &def.OrphanAfter},
		{&cfg.BuyerWindow, &def.BuyerWindow},
		{&cfg.PaymentCloseGrace, &def.PaymentCloseGrace},
		{&cfg.ProductCacheTTL, &def.ProductCacheTTL},
		{&cfg.CatalogueLevelsEvery, &def.CatalogueLevelsEvery},
		{&cfg.CatalogueProductsEvery, &def.CatalogueProductsEvery},
		{&cfg.NotificationRetention, &def.NotificationRetention},
		{&cfg.RefusedNotificationRetention, &def.RefusedNotificationRetention},
		{&cfg.RefusedNotificationWindow, &def.RefusedNotificationWindow},
		{&cfg.BlocklistEvery, &def.BlocklistEvery},
	} {
		if *d.v <= 0 {
			*d.v = *d.def
		}
	}
	if cfg.OrderAccessKey != "" && len(cfg.OrderAccessKey.Reveal()) < minAccessKey {
		return nil, errors.New("application: the order access key must be at least 16 bytes")
	}
	if cfg.MailAttempts <= 0 {
		cfg.MailAttempts = def.MailAttempts
	}
	if cfg.AlertAttempts <= 0 {
		cfg.AlertAttempts = def.AlertAttempts
	}
	if cfg.RefusedNotificationAddresses <= 0 {
		cfg.RefusedNotificationAddresses = def.RefusedNotificationAddresses
	}
	if cfg.Currency.IsZero() {
		cfg.Currency = def.Currency
	}
	gateways := make(map[domain.Provider]domain.PaymentGateway, len(d.Gateways)) // the environment's, fixed
	for _, g := range d.Gateways {
		if g == nil {
			return nil, errors.New("application: a nil payment gateway")
		}
		if _, dup := gateways[g.Provider()]; dup {
			return nil, fmt.Errorf("application: payment provider %q enabled twice", g.Provider())
		}
		if !g.Supports(cfg.Currency) {
			return nil, fmt.Errorf("application: payment provider %q cannot charge %s, the shop's currency", g.Provider(), cfg.Currency)
		}
		gateways[g.Provider()] = g
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	alerts := recordedAlerts{next: d.Alerter, ledger: d.Ledger, clock: d.Clock, log: d.Logger}
	o := &outbox{cfg: cfg, ledger: d.Ledger, gate: d.Gate, pub: d.Publisher, notifier: d.Notifier, mailer: d.Mailer,
		pusher: d.AlertPusher, alerts: alerts, clock: d.Clock, log: d.Logger}
	st := &stock{outbox: o}
	c := &core{stock: st, alerts: alerts}
	c.gateways.Store(newGatewaySet(gateways, nil))
	return &App{Sales: &Sales{core: c, queue: d.Queue}, Payments: &Payments{core: c, verifier: d.Verifier}, Catalogue: &Catalogue{stock: st, fill: c.fillWaiting}, Admin: &Admin{ledger: d.Ledger, clock: d.Clock},
		Relay: &Relay{o}, Guard: newGuard(cfg, d), Channels: newChannels(c, gateways, d.Channels), core: c,
		AlertChannels: &AlertChannels{ledger: d.Ledger, pusher: d.AlertPusher, clock: d.Clock},
		Coupons:       &Coupons{stock: st}}, nil
}

// Config returns the settings in force, defaults filled.
func (a *App) Config() Config { return a.core.cfg }

type cachedProduct struct {
	p       domain.Product
	expires time.Time
}

// product returns a product from the cache or, when absent or expired, the catalogue.
func (s *core) product(ctx context.Context, id domain.ProductID) (domain.Product, error) {
	if p, ok := s.cachedProduct(id); ok {
		return p, nil
	}
	now := s.clock.Now()
	gen := s.productGen.Load()
	p, err := s.ledger.Products().Product(ctx, id)
	if err != nil {
		return domain.Product{}, fmt.Errorf("load product: %w", err)
	}
	if s.productGen.Load() == gen {
		// Not when an update ran meanwhile: p may predate it and would outlive its Delete.
		s.products.Store(id, cachedProduct{p: p, expires: now.Add(s.cfg.ProductCacheTTL)})
	}
	return p, nil
}

// cachedProduct returns a product from the cache when it holds an unexpired copy; it never
// reads the ledger.
func (s *core) cachedProduct(id domain.ProductID) (domain.Product, bool) {
	if c, ok := s.products.Load(id); ok && s.clock.Now().Before(c.(cachedProduct).expires) {
		return c.(cachedProduct).p, true
	}
	return domain.Product{}, false
}

// detached returns a context that survives the caller's cancellation, for compensations and
// best-effort follow-ups that must not be abandoned half-way.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// withinDeadline is ctx without its cancellation, ending at its deadline when it has one
// (detached's 10 s when it has none): for best-effort work after a failure whose outcome a
// sweep settles anyway (a read-back, giving back a reservation of unknown outcome), which
// must not keep the request past its deadline when a dependency stalls.
func withinDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), dl)
	}
	return detached(ctx)
}

// gateChangeMessage builds the outbox message that carries c to the gate after commit.
func gateChangeMessage(c domain.GateChange, at time.Time) (domain.OutboxMessage, error) {
	payload, err := encodeGateChange(c)
	if err != nil {
		return domain.OutboxMessage{}, err
	}
	return domain.OutboxMessage{Topic: domain.TopicGateChange, Key: c.Ref, Payload: payload, At: at}, nil
}

// applyGate applies a committed gate change right away. It is best effort: the outbox row
// written in the same transaction makes the relay apply it (once, by Ref) if this fails.
func (s *stock) applyGate(ctx context.Context, c domain.GateChange) {
	ctx, cancel := detached(ctx)
	defer cancel()
	if _, err := s.gate.Apply(ctx, c); err != nil {
		s.log.WarnContext(ctx, "gate change deferred to the outbox relay", "ref", c.Ref, "err", err)
	}
}

// releaseChange is the gate change that returns an order's held units to the stock.
// Its units also go back to the buyer's holding limit (the gate counts them only while the
// product has one), and the use of its coupon goes back with them, except on a refund: a
// refunded order keeps its coupon's use (docs/COUPONS.md).
func releaseChange(o domain.Order, t domain.FlowType) domain.GateChange {
	q := int64(o.Qty())
	c := domain.GateChange{Product: o.Product(), Ref: flowRef(o.No(), t), Stock: q, Sold: -q, Buyer: o.Buyer(), Held: -q}
	if o.Coupon() != "" && t != domain.FlowRefundRestore && t != domain.FlowRefundVoid {
		c.Coupon, c.CouponUses = o.Coupon(), -1
	}
	return c
}

// flowRef names the gate change that goes with an order's flow row of type t.
func flowRef(no domain.OrderNo, t domain.FlowType) string { return fmt.Sprintf("%s:%d", no, int(t)) }

// orderFlow is the flow row of type t for the order.
func orderFlow(o domain.Order, t domain.FlowType, at time.Time) domain.FlowEntry {
	return domain.FlowEntry{ProductID: o.Product(), Ref: string(o.No()), Type: t, Qty: int64(o.Qty()), At: at}
}

// recordStockReturn writes, inside tx, the order's flow row of type t and the outbox row that
// carries c to the gate after commit: every stock change caused by an order status change takes
// this road, so the flow and the gate can never disagree about it.
func recordStockReturn(ctx context.Context, tx domain.Store, o domain.Order, t domain.FlowType, c domain.GateChange, now time.Time) error {
	if err := tx.Flows().Append(ctx, orderFlow(o, t, now)); err != nil {
		return err
	}
	m, err := gateChangeMessage(c, now)
	if err != nil {
		return err
	}
	return tx.Outbox().Add(ctx, m)
}
