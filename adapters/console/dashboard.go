package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/application"
)

// Dashboard defaults: a snapshot every two seconds, at most 20 open streams per instance, and
// a stream ends after ten minutes (the browser reconnects, and the session is checked again).
const (
	DefaultDashboardEvery   = 2 * time.Second
	DefaultDashboardStreams = 20
	DefaultStreamLifetime   = 10 * time.Minute
)

// sampleTimeout bounds one reading of the dashboard's numbers.
const sampleTimeout = 3 * time.Second

// chart geometry, in the SVG's own units (its viewBox).
const chartW, chartH = 300.0, 80.0

// sampler reads the dashboard's numbers at most once per every, however many pages and streams
// ask: every open dashboard shares its last snapshot, so fifty open tabs cost the ledger what
// one does.
type sampler struct {
	catalogue *application.Catalogue
	guard     *application.Guard // nil: no bot defence panel
	checks    []webkit.ReadinessCheck
	queues    func(context.Context) (map[string]int64, error)
	every     time.Duration
	log       *slog.Logger

	mu    sync.Mutex
	taken time.Time // when last was read (monotonic), zero before the first reading
	last  dashView
}

// get returns a snapshot at most every old, reading a new one when the last is older. A reading
// runs detached from the asking request (bounded by sampleTimeout), so that one client going
// away does not spoil the snapshot of the others waiting on it.
func (s *sampler) get(ctx context.Context) dashView {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.taken.IsZero() && time.Since(s.taken) < s.every {
		return s.last
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sampleTimeout)
	defer cancel()
	s.last, s.taken = s.read(ctx), time.Now()
	return s.last
}

func (s *sampler) read(ctx context.Context) dashView {
	var (
		v  dashView
		wg sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		states, _ := webkit.CheckReadiness(ctx, s.checks, webkit.DefaultReadinessTimeout, s.log)
		for _, c := range s.checks {
			v.Ready = append(v.Ready, readyView{Name: c.Name, State: states[c.Name]})
		}
	}()
	if s.queues != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := s.queues(ctx)
			if err != nil {
				s.log.WarnContext(ctx, "console: queue backlog not read", "err", err)
				v.QueuesError = "The broker did not answer."
				return
			}
			for name, n := range q {
				v.Queues = append(v.Queues, queueView{Name: name, Messages: n})
			}
			sort.Slice(v.Queues, func(i, j int) bool { return v.Queues[i].Name < v.Queues[j].Name })
		}()
	}
	if s.guard != nil {
		counts := s.guard.Refusals()
		for _, r := range application.RefusalReasons() {
			v.Bot = append(v.Bot, botView{Reason: r, Count: counts[r]})
		}
	}
	d, err := s.catalogue.Dashboard(ctx)
	wg.Wait()
	if err != nil {
		s.log.ErrorContext(ctx, "console: dashboard not read", "err", err)
		v.Error = "console.money.dash_error" // a message id: the page and each stream show it in their language
		return v
	}
	v.fill(d)
	return v
}

// dashView is one snapshot as the page renders it and as the event stream sends it (JSON).
type dashView struct {
	// At is when the snapshot was read, and the text of it the stream sends: in UTC in the
	// shared snapshot, in the operator's zone in a stream's copy (dashView.in); the page renders
	// AtTime through when itself.
	AtTime      time.Time     `json:"-"`
	At          string        `json:"at"`
	Error       string        `json:"error,omitempty"`
	StepSeconds float64       `json:"step_seconds"`
	Products    []productView `json:"products"`
	Outbox      int64         `json:"outbox"`
	Webhook     int64         `json:"webhook"`
	Mail        int64         `json:"mail"`
	Overdue     string        `json:"overdue"` // "100+" past application.OverdueCap
	Queues      []queueView   `json:"queues"`
	QueuesError string        `json:"queues_error,omitempty"`
	Ready       []readyView   `json:"ready"`
	// Alerts counts the open alerts by kind, AlertsOpen all of them.
	Alerts     []alertView `json:"alerts"`
	AlertsOpen int64       `json:"alerts_open"`
	// Bot is the bot defence's refusals on this instance since its start, by reason (every
	// reason, zeros included; empty without a guard).
	Bot []botView `json:"bot"`
}

type botView struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

type alertView struct {
	Kind string `json:"kind"`
	Open int64  `json:"open"`
}

type productView struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Upcoming bool   `json:"upcoming"`
	// Threshold is the product's low-stock threshold (0: none).
	Threshold int       `json:"-"`
	StartsAt  time.Time `json:"-"`
	Starts    string    `json:"starts"`
	GateOK    bool      `json:"gate_ok"`
	Stock     int64     `json:"stock"`
	Held      int64     `json:"held"`
	Pending   int64     `json:"pending"`
	Paid      int64     `json:"paid"`
	// Success is the payment success rate as text ("67% of 3"), "—" before any is decided.
	Success string    `json:"success"`
	Orders  chartView `json:"orders"`
	SoldOut chartView `json:"sold_out"`
}

// chartView is one series drawn as an SVG polyline: its points in the chart's units, the top
// of its scale and its latest rate, both as text.
type chartView struct {
	Points string `json:"points"`
	Max    string `json:"max"`
	Last   string `json:"last"`
}

type queueView struct {
	Name     string `json:"name"`
	Messages int64  `json:"messages"`
}

type readyView struct {
	Name  string `json:"name"`
	State string `json:"state"` // ok, fail or timeout
}

func (v *dashView) fill(d application.SaleDashboard) {
	v.AtTime, v.At, v.StepSeconds = d.At, whenIn(time.UTC)(d.At), application.RateStep.Seconds()
	v.Outbox, v.Webhook, v.Mail = d.Outbox, d.Webhook, d.Mail
	v.Overdue = strconv.Itoa(d.Overdue)
	if d.OverdueMore {
		v.Overdue += "+"
	}
	for kind, n := range d.OpenAlerts {
		v.Alerts = append(v.Alerts, alertView{Kind: kind, Open: n})
		v.AlertsOpen += n
	}
	sort.Slice(v.Alerts, func(i, j int) bool { return v.Alerts[i].Kind < v.Alerts[j].Kind })
	for _, p := range d.Products {
		pv := productView{ID: int64(p.Product.ID()), Name: p.Product.Name(), Upcoming: p.Upcoming,
			GateOK: p.GateOK, Stock: p.Gate.Stock, Threshold: p.Product.LowStockThreshold(), Held: p.Gate.Sold, Pending: p.Pending, Paid: p.Paid,
			Success: "—", Orders: chart(p.Orders.PerSecond()), SoldOut: chart(p.SoldOut.PerSecond())}
		if p.Upcoming {
			pv.StartsAt = p.Product.Sale().StartsAt
			pv.Starts = whenIn(time.UTC)(pv.StartsAt)
		}
		if rate, ok := p.PaymentSuccess(); ok {
			pv.Success = fmt.Sprintf("%.0f%% of %d", rate*100, p.PaidOrders+p.Unpaid)
		}
		v.Products = append(v.Products, pv)
	}
}

// in is the snapshot with its times as text in loc, for one operator's stream (the snapshot is
// shared: its copy's products are copied too).
func (v dashView) in(loc *time.Location) dashView {
	when := whenIn(loc)
	if !v.AtTime.IsZero() {
		v.At = when(v.AtTime)
	}
	v.Products = append([]productView(nil), v.Products...)
	for i := range v.Products {
		if v.Products[i].Upcoming {
			v.Products[i].Starts = when(v.Products[i].StartsAt)
		}
	}
	return v
}

// chart scales a series of rates into the chart's box: oldest at the left, zero at the bottom,
// the series' highest rate (at least 1/s) at the top.
func chart(rates []float64) chartView {
	top := 1.0
	for _, r := range rates {
		top = math.Max(top, r)
	}
	var b strings.Builder
	for i, r := range rates {
		x := chartW * float64(i) / float64(max(len(rates)-1, 1))
		y := chartH - chartH*r/top
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
	}
	out := chartView{Points: strings.TrimSpace(b.String()), Max: rate(top)}
	if len(rates) > 0 {
		out.Last = rate(rates[len(rates)-1])
	}
	return out
}

func rate(r float64) string {
	if r == math.Trunc(r) {
		return strconv.FormatFloat(r, 'f', 0, 64) + "/s"
	}
	return strconv.FormatFloat(r, 'f', 1, 64) + "/s"
}

// dashboard renders the live dashboard from the shared snapshot; its script (static/dashboard.js)
// then follows /console/dashboard/events.
//
// Above the live numbers it shows the shop's money (today, 7 and 30 days, the ?period= one
// detailed, read when the page is) and the products at or under their low-stock threshold.
func (k *console) dashboard(c *fiber.Ctx) error {
	period, err := application.ParseMoneyPeriod(c.Query("period"))
	if err != nil {
		return k.errorPage(c, fiber.StatusBadRequest, "console.money.bad_period")
	}
	live := k.dash.get(c.UserContext())
	page := dashPage{dashView: live, Money: k.money(c.UserContext(), period, k.zone(c))}
	for _, p := range live.Products {
		if p.Threshold > 0 && p.GateOK && p.Stock <= int64(p.Threshold) {
			page.LowStock = append(page.LowStock, p)
		}
	}
	return k.render(c, fiber.StatusOK, "dashboard", view{Title: "console.money.dashboard_title", Data: page})
}

// dashPage is the dashboard page: the live snapshot, the money (nil without reports) and the
// products on sale whose stock is at or under their low-stock threshold.
type dashPage struct {
	dashView
	Money    *moneyView
	LowStock []productView
}

// dashboardEvents streams a snapshot (event "snapshot", JSON dashView) every DashboardEvery
// until the client goes away, the service stops (Config.Stop), or the stream's lifetime ends
// (the browser's EventSource then reconnects, through the session check). At most
// DashboardStreams streams are open at once per instance; one more is answered 503.
func (k *console) dashboardEvents(c *fiber.Ctx) error {
	select {
	case k.streams <- struct{}{}:
	default:
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		return c.Status(fiber.StatusServiceUnavailable).SendString("too many open dashboards on this instance")
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set("X-Accel-Buffering", "no") // a proxy must pass each event on at once
	ctx := context.WithoutCancel(c.UserContext())
	loc, lang := k.zone(c), k.lang(c)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer func() { <-k.streams }()
		every := time.NewTicker(k.cfg.DashboardEvery)
		defer every.Stop()
		lifetime := time.NewTimer(k.cfg.StreamLifetime)
		defer lifetime.Stop()
		_, _ = w.WriteString("retry: 5000\n\n")
		for {
			snap := k.dash.get(ctx).in(loc)
			snap.Error = k.text(lang, snap.Error)
			b, err := json.Marshal(snap)
			if err != nil {
				k.log.Error("console: snapshot not encoded", "err", err)
				return
			}
			_, _ = w.WriteString("event: snapshot\ndata: ")
			_, _ = w.Write(b)
			_, _ = w.WriteString("\n\n")
			if w.Flush() != nil {
				return // the client went away
			}
			select {
			case <-every.C:
			case <-lifetime.C:
				return
			case <-k.cfg.Stop:
				return
			}
		}
	})
	return nil
}
