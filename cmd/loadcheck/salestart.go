package main

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The start instant (scenario 8): a product whose sale window opens a few seconds after it is
// created, ordered from before the start until after it through two instances whose clocks
// are told to disagree (CARDSHOP_CLOCK_OFFSET). The gate judges the window by Redis's clock,
// so the checks read Redis's clock too, never an instance's.

// startPoll is how often the harness looks at the gate's holds and the order rows during the
// load: every hold lives at least CARDSHOP_ORPHAN_AFTER (10 s), so none is missed.
const startPoll = 20 * time.Millisecond

// saleRules returns the fields of the scenario's product JSON beyond the basic ones, and the
// start of its sale window by Redis's clock (zero when it has none).
func (e *env) saleRules(ctx context.Context, sc scenario) (string, time.Time, error) {
	var fields []string
	var startsAt time.Time
	if sc.startsIn > 0 {
		now, err := e.rdb.Time(ctx).Result()
		if err != nil {
			return "", startsAt, fmt.Errorf("redis TIME: %w", err)
		}
		// Whole milliseconds: the precision the gate and the ledger keep.
		startsAt = now.Add(sc.startsIn).UTC().Truncate(time.Millisecond)
		fields = append(fields, fmt.Sprintf(`"starts_at":%q`, startsAt.Format(time.RFC3339Nano)))
	}
	if sc.buyerLimit > 0 {
		fields = append(fields, fmt.Sprintf(`"buyer_limit":%d`, sc.buyerLimit))
	}
	return strings.Join(fields, ","), startsAt, nil
}

// clockInstanceConns is the MariaDB pool of each clock instance. They run beside the shared
// instance the scenario loads, whose pool (48, kept open 5 minutes after a load) may still be
// full, and the harness's: 48 more each would come close to MariaDB's 151 connections. A
// thousand orders need few; the refusals before the start need none.
const clockInstanceConns = 8

// startClockInstances starts one instance per clock offset, for this scenario only (the
// caller stops them).
func (e *env) startClockInstances(ctx context.Context, offsets []string) ([]*instance, error) {
	var out []*instance
	for i, off := range offsets {
		in, err := e.startInstance(ctx, "clock"+off, fmt.Sprintf("127.0.0.1:%d", 6081+i), "CARDSHOP_CLOCK_OFFSET="+off,
			fmt.Sprintf("CARDSHOP_MYSQL_MAX_CONNS=%d", clockInstanceConns))
		if err != nil {
			return out, err
		}
		out = append(out, in)
	}
	return out, nil
}

// loadAcrossStart runs wrk on POST /api/order from now (before startsAt) until the scenario's
// duration past it, one wrk per clock instance, while startWatch samples the gate and the
// ledger by Redis's clock; it adds the start's checks to res.
func (e *env) loadAcrossStart(ctx context.Context, sc scenario, insts []*instance, pid int64, startsAt time.Time, res *scenarioResult) (WrkResult, error) {
	now, err := e.rdb.Time(ctx).Result()
	if err != nil {
		return WrkResult{}, fmt.Errorf("redis TIME: %w", err)
	}
	lead := startsAt.Sub(now)
	if lead < time.Second {
		return WrkResult{}, fmt.Errorf("only %s was left before starts_at when the load was to begin (the product was created %s ahead): the pre-start phase would prove nothing",
			lead.Round(time.Millisecond), sc.startsIn)
	}
	w := &startWatch{pid: pid, startsAt: startsAt}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.run(wctx, e.db, e.rdb) })
	// wrk runs whole seconds: from now to at least the scenario's duration past the start.
	d := lead.Truncate(time.Second) + time.Second + e.o.duration
	runs, err := e.splitLoad(ctx, sc, insts, pid, d, "start")
	stop()
	wg.Wait()
	if err != nil {
		return WrkResult{}, err
	}
	load := mergeRuns(runs)
	fmt.Printf("   window    starts_at %s (Redis's clock); wrk ran %s from %s before it\n",
		startsAt.Format("15:04:05.000"), d, lead.Round(time.Millisecond))
	for i, in := range insts {
		fmt.Printf("             %-9s %s · %s\n", in.name, statusMix(runs[i].Status), refusalMix(runs[i].Counts))
	}
	if err := e.printFirstOrders(ctx, sc, insts, pid, startsAt); err != nil {
		return load, err
	}
	stock, err := e.rdb.Get(ctx, fmt.Sprintf("stock:product:{%d}", pid)).Int64()
	if err != nil {
		return load, fmt.Errorf("gate stock: %w", err)
	}
	res.extra = append(res.extra, w.checks()...)
	res.extra = append(res.extra, notStartedCheck(load), soldOutAfterStart(load, stock))
	return load, nil
}

// printFirstOrders prints when each clock instance's first order was created, as its
// created_at says (written by the instance's own clock) and less the instance's offset (the
// machine's clock, which is Redis's here: one host). It shows the offsets at work, and why the
// checks never judge the start by created_at: the −3s instance's orders say they were created
// before the start. (A wrk run's keys begin "lc-start<i>-": i is the instance.)
func (e *env) printFirstOrders(ctx context.Context, sc scenario, insts []*instance, pid int64, startsAt time.Time) error {
	first := map[string]int64{}
	err := query(ctx, e.db, "SELECT SUBSTRING_INDEX(idem_key, '-', 2), TIMESTAMPDIFF(MICROSECOND, ?, MIN(created_at)) "+
		"FROM orders WHERE product_id = ? GROUP BY 1", []any{startsAt.UTC().Format("2006-01-02 15:04:05.000000"), pid},
		func(r *sql.Rows) error {
			var run string
			var us int64
			if err := r.Scan(&run, &us); err != nil {
				return err
			}
			first[run] = us
			return nil
		})
	if err != nil {
		return fmt.Errorf("first orders: %w", err)
	}
	var parts []string
	for i, in := range insts {
		us, ok := first[fmt.Sprintf("lc-start%d", i)]
		if !ok {
			parts = append(parts, in.name+" none")
			continue
		}
		off, _ := time.ParseDuration(sc.clockOffsets[i])
		at := time.Duration(us) * time.Microsecond
		parts = append(parts, fmt.Sprintf("%s %+.3fs by its clock, %+.3fs less its offset", in.name, at.Seconds(), (at-off).Seconds()))
	}
	fmt.Printf("   created   first order's created_at − starts_at: %s\n", strings.Join(parts, " · "))
	return nil
}

// startWatch samples, by Redis's clock, what exists of the product's orders around the start.
//
// Two independent proofs that nothing was accepted before the start:
//   - the gate's holds: the reserve script scores each reservation with Redis's TIME (ms) in
//     holds:{pid}, and a hold stays there until the order is paid or the orphan sweep (after
//     10 s) settles it, so the lowest score seen while polling every startPoll is the first
//     reservation's time, by the clock the window is judged by;
//   - the order rows: until Redis's clock passes the start, the harness counts the product's
//     orders and then reads TIME. A row counted at a TIME before the start was committed
//     before it, whichever instance wrote it and whatever its own clock (and created_at,
//     which an instance writes by its own clock) said.
type startWatch struct {
	pid      int64
	startsAt time.Time

	firstHold  int64         // lowest hold score seen (ms, Redis's clock); 0: none seen
	preSamples int           // row counts taken before the start
	lastBefore time.Duration // how long before the start the last of them was taken
	early      []string      // row counts above 0 before the start
	started    bool          // Redis's clock passed the start: the row counts stop
}

func (w *startWatch) run(ctx context.Context, db *sql.DB, rdb *redis.Client) {
	holds := fmt.Sprintf("holds:{%d}", w.pid)
	for {
		if zs, err := rdb.ZRangeWithScores(ctx, holds, 0, 0).Result(); err == nil && len(zs) > 0 {
			if ms := int64(zs[0].Score); w.firstHold == 0 || ms < w.firstHold {
				w.firstHold = ms
			}
		}
		if !w.started {
			w.sampleRows(ctx, db, rdb)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(startPoll):
		}
	}
}

// sampleRows counts the product's orders, then reads Redis's clock.
func (w *startWatch) sampleRows(ctx context.Context, db *sql.DB, rdb *redis.Client) {
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE product_id = ?", w.pid).Scan(&n); err != nil {
		return
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return
	}
	if !now.Before(w.startsAt) {
		w.started = true
		return
	}
	w.preSamples++
	w.lastBefore = w.startsAt.Sub(now)
	if n > 0 {
		w.early = append(w.early, fmt.Sprintf("%d orders %s before the start", n, w.lastBefore.Round(time.Millisecond)))
	}
}

// checks are startWatch's two proofs.
func (w *startWatch) checks() []Check {
	start := w.startsAt.UnixMilli()
	hold := Check{Name: "sale window: no reservation before starts_at by Redis's clock (the gate's holds)",
		OK: w.firstHold != 0 && w.firstHold >= start}
	if w.firstHold == 0 {
		hold.Detail = "no hold of the product was seen: nothing proves when the first reservation was taken"
	} else {
		hold.Detail = fmt.Sprintf("first reservation at starts_at %+dms (scores of holds:{%d}, polled every %s)", w.firstHold-start, w.pid, startPoll)
	}
	rows := Check{Name: "sale window: no order row existed before starts_at (counted, then Redis TIME read)",
		OK: w.preSamples > 0 && len(w.early) == 0,
		Detail: fmt.Sprintf("%d counts before the start, the last %s before it; counts above 0: %d%s",
			w.preSamples, w.lastBefore.Round(time.Millisecond), len(w.early), examples(w.early))}
	return []Check{hold, rows}
}

// notStartedCheck: before the start every order is refused with 409 sale_not_started and a
// Retry-After of whole seconds; after it the only refusal is 409 sold_out. (wrk cannot tell
// which answer came before the start; the refusals' codes say it.)
func notStartedCheck(r WrkResult) Check {
	ns := r.Counts["409:sale_not_started"]
	ra, bad := r.Counts["retry-after:409:sale_not_started"], r.Counts["bad-retry-after:409:sale_not_started"]
	other := answered(r) - r.Status[201] - ns - r.Counts["409:sold_out"]
	return Check{Name: "sale window: refused before the start with 409 sale_not_started and Retry-After; nothing else but 201 and 409 sold_out",
		OK: ns > 0 && ra == ns && bad == 0 && other == 0,
		Detail: fmt.Sprintf("409 sale_not_started %s, with a Retry-After of whole seconds %s, malformed %d; other answers %d (%s)",
			num(float64(ns)), num(float64(ra)), bad, other, refusalMix(r.Counts))}
}

// soldOutAfterStart: once open, the sale sells every unit (the gate's stock is 0 right after
// the load, the orders not yet paid or expired).
func soldOutAfterStart(r WrkResult, stock int64) Check {
	return Check{Name: "sale window: the product sells out after the start",
		OK:     stock == 0 && r.Status[201] > 0 && r.Counts["409:sold_out"] > 0,
		Detail: fmt.Sprintf("gate stock right after the load %d · 201 %s · 409 sold_out %s", stock, num(float64(r.Status[201])), num(float64(r.Counts["409:sold_out"])))}
}

// refusalMix lists the tallies of script.lua's "codes" mode: each status:code with how many
// carried a Retry-After, and the largest Retry-After.
func refusalMix(counts map[string]int64) string {
	var names []string
	for name := range counts {
		if !strings.Contains(name, "retry-after") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "no refusals"
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names)+1)
	for _, name := range names {
		p := strings.Replace(name, ":", " ", 1) + ": " + num(float64(counts[name]))
		if ra := counts["retry-after:"+name]; ra > 0 {
			p += fmt.Sprintf(" (Retry-After on %s)", num(float64(ra)))
		}
		if bad := counts["bad-retry-after:"+name]; bad > 0 {
			p += fmt.Sprintf(" (malformed Retry-After on %d)", bad)
		}
		parts = append(parts, p)
	}
	if m, ok := counts["max:retry-after"]; ok {
		parts = append(parts, "Retry-After up to "+strconv.FormatInt(m, 10)+" s")
	}
	return strings.Join(parts, " · ")
}
