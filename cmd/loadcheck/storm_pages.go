package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The built-in shop's pages in the refresh storm: the catalogue page (GET /) and the product
// page (GET /p/{id}) are rendered from the same catalogue snapshot as GET /api/products/{id},
// so each is held to the same rules, alone on one instance: no database statement beyond the
// idle baseline, at most one gate read per refresh interval, and (the full form) at least
// stormShare of the hello ceiling with the same wrk command.

// shopPage is one storefront page the storm reads.
type shopPage struct {
	name, path string
}

// shopPages are the storefront pages of product pid.
func shopPages(pid int64) []shopPage {
	return []shopPage{
		{name: "shop catalogue page", path: "/"},
		{name: "shop product page", path: fmt.Sprintf("/p/%d", pid)},
	}
}

// pageRun is a storefront page's catalogue-only run.
type pageRun struct {
	shopPage
	run WrkResult
	db  dbDelta
}

// stormPages reads each storefront page alone on the first instance, metered like the
// catalogue's own run, and adds its checks to res. idle is the storm's idle baseline.
func (e *env) stormPages(ctx context.Context, insts []*instance, pid int64, idle dbDelta, products int64, res *scenarioResult) ([]pageRun, error) {
	var out []pageRun
	for _, pg := range shopPages(pid) {
		if err := expectPage(ctx, insts[0], pg.path); err != nil {
			return out, err
		}
		pr := pageRun{shopPage: pg}
		wrk := WrkRun{Threads: e.o.threads, Conns: e.o.conns, Duration: e.o.duration, URL: insts[0].base + pg.path, Script: e.helloLua}
		quietEnd := quietSampling() // the sampler's reads of /metrics query the database (sampler.go)
		before, after, err := e.metered(ctx, insts, func() (err error) {
			pr.run, err = runWrk(ctx, wrk)
			return err
		})
		quietEnd()
		if err != nil {
			return out, err
		}
		pr.db = after.db.minus(before.db)
		e.reportPage(pr, idle, insts, before, after, products, res)
		out = append(out, pr)
	}
	return out, nil
}

// reportPage prints a storefront page's run and adds its checks.
func (e *env) reportPage(pr pageRun, idle dbDelta, insts []*instance, before, after meter, products int64, res *scenarioResult) {
	a := pr.run
	hello, which := e.ceil.hello.RPS, "the hello ceiling"
	if near := helloNear(*res); near.rate > 0 {
		hello, which = near.rate, "the hello server right before and after the catalogue's run"
	}
	ratio := a.RPS / hello
	fmt.Printf("   %-9s %s req/s alone on %s, %s (%.2f of %s) · p50 %s · p99 %s · %s\n",
		"shop", num(a.RPS), insts[0].name, pr.path, ratio, which, ms(a.P50), ms(a.P99), statusMix(a.Status))
	l := after.since(before)
	v := judgeStatements(idle.total(), e.o.duration, pr.db.total(), l)
	res.extra = append(res.extra, Check{Name: fmt.Sprintf("refresh storm: the %s (%s) makes no database statement (beyond the idle loops and the product-list reloads)", pr.name, pr.path),
		OK: v.excess <= v.allowed && answered(a) == a.Status[200] && a.Status[200] > 0,
		Detail: fmt.Sprintf("%+.1f statements beyond the idle baseline during %s requests (allowed %.1f); %s",
			v.excess, num(float64(a.Requests)), v.allowed, statusMix(a.Status))})
	fmt.Printf("             %s\n", redisReads(insts, before, after, products))
	res.extra = append(res.extra, gateReadCheck(pr.name+" alone", insts, before, after))
	// The ratio is a speed target, printed with the others by summary.go (PASS or MISS, never a
	// failure of the run).
}

// expectPage checks that a storefront page answers 200 with HTML: the storefront is on (the
// service's default) and the product is listed.
func expectPage(ctx context.Context, in *instance, path string) error {
	return untilListed(ctx, func() error { return getPage(ctx, in, path) })
}

func getPage(ctx context.Context, in *instance, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		return fmt.Errorf("GET %s answered %d (%s): %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), trim(string(b), 200))
	}
	return nil
}
