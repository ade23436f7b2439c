package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// OrderOutcomes are the outcomes of POST /api/order: the values of cardshop_orders_total{outcome}.
var OrderOutcomes = []string{"created", "replayed", "sold_out", "frozen", "rejected", "error"}

// CallbackOutcomes are the outcomes of a payment callback: the values of cardshop_callbacks_total{outcome}.
var CallbackOutcomes = []string{"success", "invalid_signature", "amount_mismatch", "rejected", "error"}

// WebhookOutcomes are the outcomes of one webhook attempt: the values of
// cardshop_webhook_deliveries_total{outcome}.
var WebhookOutcomes = []string{"delivered", "failed"}

// BatchFallbackReasons are the reasons a group-committed batch of order writes fell back to
// single writes: the values of cardshop_ledger_batch_fallbacks_total{reason}.
var BatchFallbackReasons = []string{"duplicate_key", "unavailable", "error"}

// scrapeTimeout bounds a value read at scrape time (the outbox backlog): a slow database must
// not hold /metrics up.
const scrapeTimeout = 500 * time.Millisecond

// Metrics is one service instance's registry and collectors. It is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	orders      *prometheus.CounterVec
	callbacks   *prometheus.CounterVec
	requests    *prometheus.HistogramVec
	gate        *prometheus.HistogramVec
	ledgerTx    prometheus.Histogram
	batchSize   prometheus.Histogram
	batchWait   prometheus.Histogram
	batchFalls  *prometheus.CounterVec
	reconcileDs prometheus.Counter
	webhooks    *prometheus.CounterVec
	webhookTime prometheus.Histogram
	leaseAnswer prometheus.Counter
	leaseGrants *prometheus.CounterVec
}

// New returns the collectors on a new registry, with the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.orders = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cardshop_orders_total",
		Help: "Answers to POST /api/order by outcome: created, replayed, sold_out, frozen, rejected (other 4xx), error (5xx).",
	}, []string{"outcome"})
	m.callbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cardshop_callbacks_total",
		Help: "Answers to payment callbacks by outcome: success, invalid_signature, amount_mismatch, rejected (other 4xx), error (5xx).",
	}, []string{"outcome"})
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cardshop_http_request_duration_seconds",
		Help:    "HTTP request duration by route pattern, method and status class.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method", "status_class"})
	m.gate = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cardshop_gate_duration_seconds",
		Help:    "Duration of stock gate calls by operation (errors included).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"op"})
	m.ledgerTx = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cardshop_ledger_tx_duration_seconds",
		Help:    "Duration of ledger transactions (Atomically, retries and errors included).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cardshop_ledger_batch_size",
		Help:    "Placed orders written by one group-committed ledger transaction.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000},
	})
	m.batchWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cardshop_ledger_batch_wait_seconds",
		Help:    "Time a placed order's ledger write waited in the queue before its batch took it.",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25},
	})
	m.batchFalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cardshop_ledger_batch_fallbacks_total",
		Help: "Group-committed batches rolled back and written one order at a time, by reason: duplicate_key, unavailable, error.",
	}, []string{"reason"})
	m.reconcileDs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cardshop_reconcile_differences_total",
		Help: "Differences found by reconciliations, summed over every run.",
	})
	m.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cardshop_webhook_deliveries_total",
		Help: "Attempts to deliver an event to the storefront's webhook, by outcome: delivered (2xx) or failed (retried later).",
	}, []string{"outcome"})
	m.webhookTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cardshop_webhook_duration_seconds",
		Help:    "Duration of webhook attempts, failed ones included.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	m.leaseAnswer = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cardshop_gate_lease_answers_total",
		Help: "New orders the gate answered sold out under a sold-out lease, without a Redis round trip.",
	})
	m.leaseGrants = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cardshop_gate_leases_total",
		Help: "Sold-out leases asked of Redis by result: granted, or refused (the product has stock again, is frozen, fenced or outside its sale window).",
	}, []string{"result"})
	m.reg.MustRegister(m.orders, m.callbacks, m.requests, m.gate, m.ledgerTx, m.batchSize, m.batchWait, m.batchFalls, m.reconcileDs, m.webhooks, m.webhookTime,
		m.leaseAnswer, m.leaseGrants,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every outcome is exported from the start (at 0), so that rate() and alerts see a series
	// before its first event.
	for _, o := range OrderOutcomes {
		m.orders.WithLabelValues(o)
	}
	for _, o := range CallbackOutcomes {
		m.callbacks.WithLabelValues(o)
	}
	for _, o := range WebhookOutcomes {
		m.webhooks.WithLabelValues(o)
	}
	for _, r := range BatchFallbackReasons {
		m.batchFalls.WithLabelValues(r)
	}
	m.leaseGrants.WithLabelValues("granted")
	m.leaseGrants.WithLabelValues("refused")
	return m
}

// Registry returns the instance's registry, for collectors of its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Order counts one answer to POST /api/order; outcome is one of OrderOutcomes.
func (m *Metrics) Order(outcome string) { m.orders.WithLabelValues(outcome).Inc() }

// Callback counts one answer to a payment callback; outcome is one of CallbackOutcomes.
func (m *Metrics) Callback(outcome string) { m.callbacks.WithLabelValues(outcome).Inc() }

// Request observes one HTTP request; route must be a route pattern, never the raw path.
func (m *Metrics) Request(route, method, statusClass string, d time.Duration) {
	m.requests.WithLabelValues(route, method, statusClass).Observe(d.Seconds())
}

// LedgerBatchSize observes the number of orders of one group-committed batch.
func (m *Metrics) LedgerBatchSize(n int) { m.batchSize.Observe(float64(n)) }

// LedgerBatchWait observes how long one order's write waited for its batch.
func (m *Metrics) LedgerBatchWait(d time.Duration) { m.batchWait.Observe(d.Seconds()) }

// LedgerBatchFallback counts one batch written one order at a time; reason is one of
// BatchFallbackReasons.
func (m *Metrics) LedgerBatchFallback(reason string) { m.batchFalls.WithLabelValues(reason).Inc() }

// GateLeaseAnswer counts one new order answered sold out under a sold-out lease.
func (m *Metrics) GateLeaseAnswer() { m.leaseAnswer.Inc() }

// GateLeaseGrant counts one sold-out lease asked of Redis: granted or refused.
func (m *Metrics) GateLeaseGrant(granted bool) {
	if granted {
		m.leaseGrants.WithLabelValues("granted").Inc()
	} else {
		m.leaseGrants.WithLabelValues("refused").Inc()
	}
}

// ReconcileDifferences adds the differences one reconciliation found.
func (m *Metrics) ReconcileDifferences(n int) {
	if n > 0 {
		m.reconcileDs.Add(float64(n))
	}
}

// WatchLedgerRetries exports cardshop_ledger_retries_total{reason}, read at scrape time:
// reasons maps each reason to a function returning how many transactions were run again for
// it since start.
func (m *Metrics) WatchLedgerRetries(reasons map[string]func() int64) {
	for reason, count := range reasons {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "cardshop_ledger_retries_total",
			Help:        "Ledger transactions run again, by reason.",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(count()) }))
	}
}

// WatchBotRefusals exports cardshop_bot_refusals_total{reason}, read at scrape time from
// refusals (this instance's counts since start, by reason: the blocklists' blocked_ip,
// blocked_email and blocked_domain, the human check's human_failed and human_unavailable, and
// human_passed_open for the buyers let through unchecked while it was unreachable). Every
// reason refusals gives at registration is exported, zero included.
func (m *Metrics) WatchBotRefusals(refusals func() map[string]int64) {
	for reason := range refusals() {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "cardshop_bot_refusals_total",
			Help:        "Buyers refused by the bot defence (or let through unchecked: human_passed_open), by reason.",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(refusals()[reason]) }))
	}
}

// SetBuildInfo exports cardshop_build_info, always 1, labelled with the binary's version, source
// commit and Go release: a dashboard tells which release each instance runs (and a rollout's
// progress) by it. Call it once.
func (m *Metrics) SetBuildInfo(version, commit, goVersion string) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "cardshop_build_info",
		Help:        "Always 1; the labels name the running binary's version, commit and Go release.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "goversion": goVersion},
	})
	g.Set(1)
	m.reg.MustRegister(g)
}

// WatchCloseConfirms exports cardshop_close_schedule_unconfirmed (placed orders answered
// before the broker confirmed the message that schedules their close, not confirmed yet) and
// cardshop_close_schedule_lost_total (such orders whose message then failed: the sweeper closes
// them), both read from confirms at scrape time.
func (m *Metrics) WatchCloseConfirms(confirms func() (unconfirmed, lost int64)) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cardshop_close_schedule_unconfirmed",
		Help: "Placed orders answered before the message scheduling their close was confirmed, still unconfirmed.",
	}, func() float64 { u, _ := confirms(); return float64(u) }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cardshop_close_schedule_lost_total",
		Help: "Placed orders answered before their close message was confirmed whose message then failed; the sweeper closes them.",
	}, func() float64 { _, l := confirms(); return float64(l) }))
}

// WatchOutboxBacklog exports cardshop_outbox_backlog, read at scrape time with a short
// timeout; when backlog fails the gauge is left out of that scrape rather than reported wrong.
func (m *Metrics) WatchOutboxBacklog(backlog func(context.Context) (int64, error)) {
	m.reg.MustRegister(&scrapeGauge{
		desc: prometheus.NewDesc("cardshop_outbox_backlog", "Outbox messages not yet relayed.", nil, nil),
		read: unlabelled(backlog),
	})
}

// WatchWebhookBacklog exports cardshop_webhook_backlog (events not yet accepted by the
// storefront's webhook), read at scrape time like the outbox backlog.
func (m *Metrics) WatchWebhookBacklog(backlog func(context.Context) (int64, error)) {
	m.reg.MustRegister(&scrapeGauge{
		desc: prometheus.NewDesc("cardshop_webhook_backlog", "Webhook events not yet accepted by the storefront.", nil, nil),
		read: unlabelled(backlog),
	})
}

// WatchMailBacklog exports cardshop_mail_backlog (order e-mails not yet sent nor given up),
// read at scrape time like the webhook backlog.
func (m *Metrics) WatchMailBacklog(backlog func(context.Context) (int64, error)) {
	m.reg.MustRegister(&scrapeGauge{
		desc: prometheus.NewDesc("cardshop_mail_backlog", "Order e-mails not yet sent to buyers (nor given up).", nil, nil),
		read: unlabelled(backlog),
	})
}

// WatchDelayQueue exports cardshop_delay_queue_pending, read at scrape time.
func (m *Metrics) WatchDelayQueue(pending func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cardshop_delay_queue_pending",
		Help: "Order closes scheduled and not yet delivered (in-memory delay queue).",
	}, func() float64 { return float64(pending()) }))
}

// WatchQueueDepths exports cardshop_broker_queue_messages{queue}, the messages ready in each
// broker queue (the delay buckets, the timeouts queue, the delivered queue), read at scrape
// time with a short timeout; left out of a scrape whose read fails. The queues are the fixed
// topology's, so the label cannot grow.
func (m *Metrics) WatchQueueDepths(depths func(context.Context) (map[string]int, error)) {
	m.reg.MustRegister(&scrapeGauge{
		desc: prometheus.NewDesc("cardshop_broker_queue_messages",
			"Messages ready in each RabbitMQ queue of the service (a delay bucket's message carries a group of order closes).", []string{"queue"}, nil),
		read: func(ctx context.Context) (map[string]int64, error) {
			d, err := depths(ctx)
			out := make(map[string]int64, len(d))
			for q, n := range d {
				out[q] = int64(n)
			}
			return out, err
		},
	})
}

// WatchRefusedNotifications exports cardshop_payment_notifications_refused_total{provider,
// reason}: the payment notifications this instance refused before verification (a bad
// signature, an unparsable body), read at scrape time. read calls add once per provider and
// reason it counts; both come from small fixed sets (the enabled providers, the reasons).
func (m *Metrics) WatchRefusedNotifications(read func(add func(provider, reason string, n int64))) {
	m.reg.MustRegister(&refusedNotifications{read: read, desc: prometheus.NewDesc("cardshop_payment_notifications_refused_total",
		"Payment notifications refused before verification, by provider and reason (bad_signature, invalid, unavailable, other); "+
			"the notification log keeps them as one record per provider, sender address and minute.",
		[]string{"provider", "reason"}, nil)})
}

type refusedNotifications struct {
	desc *prometheus.Desc
	read func(add func(provider, reason string, n int64))
}

func (r *refusedNotifications) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r *refusedNotifications) Collect(ch chan<- prometheus.Metric) {
	r.read(func(provider, reason string, n int64) {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.CounterValue, float64(n), provider, reason)
	})
}

// scrapeGauge is a gauge read at scrape time, with a short timeout, from a call that may fail
// or be slow; a failed read leaves it out of that scrape. read returns one value per value of
// the gauge's one label, or under "" for a gauge without labels.
type scrapeGauge struct {
	desc *prometheus.Desc
	read func(context.Context) (map[string]int64, error)
}

// unlabelled adapts a single reading to scrapeGauge.read.
func unlabelled(read func(context.Context) (int64, error)) func(context.Context) (map[string]int64, error) {
	return func(ctx context.Context) (map[string]int64, error) {
		n, err := read(ctx)
		return map[string]int64{"": n}, err
	}
}

func (g *scrapeGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *scrapeGauge) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	values, err := g.read(ctx)
	if err != nil {
		return
	}
	for label, n := range values {
		if label == "" {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(n))
		} else {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(n), label)
		}
	}
}
