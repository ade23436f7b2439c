package main

// The pictures of the proof: each scenario's answers per second by status and its latency
// percentiles over the load (sampler.go's timeline), the chaos scenarios' fault window shaded,
// and the measured rates beside this machine's ceilings, drawn as SVG with gonum/plot into
// -charts (docs/charts in `make loadcheck` and `make chaos`, a temporary folder otherwise).

import (
	"context"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// sampleEvery is the sampler's interval: 500 ms, 250 ms in the short forms, whose loads last
// a few seconds.
func (e *env) sampleEvery() time.Duration {
	if e.o.short {
		return 250 * time.Millisecond
	}
	return 500 * time.Millisecond
}

// chartsDir is the folder the charts go to: -charts, created if missing, or a new temporary
// folder (kept, and named in the output) when -charts is empty.
func (e *env) chartsDir() (string, error) {
	if e.o.charts == "" {
		dir, err := os.MkdirTemp("", "cardshop-charts-")
		if err != nil {
			return "", err
		}
		e.o.charts = dir
		return dir, nil
	}
	return e.o.charts, os.MkdirAll(e.o.charts, 0o755)
}

// startSampler starts reading the /metrics of the instances sc loads: insts (with the retrying
// load balancer's scenario, the two instances behind it, never the balancer, which would hand
// the exposition of either) and whatever wrk loads meanwhile (the kill scenario's victim).
func (e *env) startSampler(ctx context.Context, sc scenario, insts []*instance) *sampler {
	var static []string
	for _, in := range insts {
		static = append(static, in.base)
	}
	exclude := ""
	if sc.fault == faultLB && e.lb != nil {
		exclude = e.lb.url
		static = []string{e.lbPair[0].base, e.lbPair[1].base}
	}
	s := newSampler(e.sampleEvery(), func() []string {
		out := slices.Clone(static)
		for _, u := range loadedURLs() {
			if u != exclude {
				out = append(out, u)
			}
		}
		return out
	})
	s.start(ctx)
	return s
}

// drawScenario writes the scenario's chart and says where.
func (e *env) drawScenario(tl timeline, res scenarioResult) error {
	dir, err := e.chartsDir()
	if err != nil {
		return err
	}
	var w *faultWindow
	if cr := res.chaos; cr != nil && !cr.injected.IsZero() {
		w = &faultWindow{name: cr.fault, from: tl.seconds(cr.injected), to: tl.seconds(cr.back)}
		if !cr.firstOK.IsZero() {
			w.recovered = tl.seconds(cr.firstOK)
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("scenario-%02d.svg", res.sc.num))
	if err := writeScenarioChart(path, fmt.Sprintf("scenario %d: %s", res.sc.num, res.sc.name), tl, w); err != nil {
		return fmt.Errorf("chart of scenario %d: %w", res.sc.num, err)
	}
	cost := ""
	if tl.reads > 0 {
		cost = fmt.Sprintf(", %d reads of %s on average", tl.reads, (tl.readTime / time.Duration(tl.reads)).Round(10*time.Microsecond))
	}
	fmt.Printf("   chart     %s (%d intervals of the instances' /metrics, every %s%s)\n", path, len(tl.points), tl.interval, cost)
	return nil
}

// faultWindow is a chaos scenario's fault on a chart's time axis (seconds since the sampler
// started): from its injection to the dependency answering again, and the first second with
// orders placed and none refused after it (0: none within the run).
type faultWindow struct {
	name      string
	from, to  float64
	recovered float64
}

// kindColors are the answer kinds' colours (answerKinds).
var kindColors = map[string]color.RGBA{
	"201 created": {0x1b, 0x9e, 0x47, 0xff}, "200 replayed": {0x66, 0xa6, 0x1e, 0xff}, "409 sold out": {0x37, 0x7e, 0xb8, 0xff},
	"423 frozen": {0x98, 0x4e, 0xa3, 0xff}, "4xx refused": {0xff, 0x7f, 0x00, 0xff}, "5xx error": {0xe4, 0x1a, 0x1c, 0xff},
	"other routes 2xx": {0x44, 0x44, 0x44, 0xff}, "other routes 3xx": {0x99, 0x99, 0x99, 0xff},
	"other routes 4xx": {0xa6, 0x56, 0x28, 0xff}, "other routes 5xx": {0xf7, 0x81, 0xbf, 0xff},
}

var faultColor = color.NRGBA{0xe4, 0x1a, 0x1c, 0x38}

func init() {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
}

// writeScenarioChart draws two panels over the same time axis: answers per second by kind, and
// the p50 and p99 latency (log scale), with w's window shaded when w is not nil.
func writeScenarioChart(path, title string, tl timeline, w *faultWindow) error {
	top, bottom := plot.New(), plot.New()
	top.Title.Text = title
	top.Y.Label.Text = "answers/s"
	bottom.X.Label.Text = fmt.Sprintf("seconds into the load (the instances' /metrics every %s)", tl.interval)
	bottom.Y.Label.Text = "latency, ms (service side)"
	top.X.Tick.Marker, bottom.X.Tick.Marker = secondsTicks{}, secondsTicks{}
	end := 1.0
	if n := len(tl.points); n > 0 {
		end = tl.points[n-1].at
	}
	if w != nil {
		end = max(end, w.to)
	}
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Min, p.X.Max = 0, end
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
	}

	// Answers: one line per kind that answered at all, the room above the highest for the legend.
	peak := 0.0
	var lines []*plotter.Line
	for _, kind := range answerKinds {
		xys, total := make(plotter.XYs, 0, len(tl.points)+1), 0.0
		if len(tl.points) > 0 {
			first := tl.points[0]
			xys = append(xys, plotter.XY{X: first.at - first.dt, Y: first.rates[kind]})
		}
		for _, p := range tl.points {
			xys = append(xys, plotter.XY{X: p.at, Y: p.rates[kind]})
			total += p.rates[kind] * p.dt
			peak = max(peak, p.rates[kind])
		}
		if total < 0.5 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		// A point is the rate over the interval that ends at it.
		l.Color, l.Width, l.StepStyle = kindColors[kind], vg.Points(1.2), plotter.PreStep
		lines = append(lines, l)
		top.Legend.Add(kind, l)
	}
	top.Y.Min, top.Y.Max = 0, max(peak, 1)*1.45
	top.Y.Tick.Marker = commaTicks{}
	if err := shadePauses(top, tl.paused, end, 0, top.Y.Max, true); err != nil {
		return err
	}
	if w != nil {
		if err := shade(top, w, 0, top.Y.Max, true); err != nil {
			return err
		}
	}
	for _, l := range lines {
		top.Add(l)
	}

	// Latency: p50 and p99 in ms, a gap where an interval had no answer.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range tl.points {
		for _, v := range []float64{p.p50, p.p99} {
			if !math.IsNaN(v) && v > 0 {
				lo, hi = min(lo, v*1e3), max(hi, v*1e3)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 10
	}
	bottom.Y.Scale, bottom.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	bottom.Y.Min, bottom.Y.Max = lo/1.5, hi*8
	if err := shadePauses(bottom, tl.paused, end, bottom.Y.Min, bottom.Y.Max, false); err != nil {
		return err
	}
	if w != nil {
		if err := shade(bottom, w, bottom.Y.Min, bottom.Y.Max, false); err != nil {
			return err
		}
	}
	for _, q := range []struct {
		name  string
		v     func(point) float64
		color color.RGBA
		dash  []vg.Length
	}{
		{"p50", func(p point) float64 { return p.p50 }, color.RGBA{0x37, 0x7e, 0xb8, 0xff}, nil},
		{"p99", func(p point) float64 { return p.p99 }, color.RGBA{0xe4, 0x1a, 0x1c, 0xff}, []vg.Length{vg.Points(4), vg.Points(2)}},
	} {
		for i, seg := range segments(tl.points, q.v) {
			l, err := plotter.NewLine(seg)
			if err != nil {
				return err
			}
			l.Color, l.Width, l.Dashes = q.color, vg.Points(1.2), q.dash
			bottom.Add(l)
			if i == 0 {
				bottom.Legend.Add(q.name, l)
			}
		}
	}
	return writeSVG(path, vg.Points(720), vg.Points(540), [][]*plot.Plot{{top}, {bottom}})
}

// shade adds w's window to p as a filled band from y0 to y1 (a legend entry when named), and
// the recovery as a vertical line.
func shade(p *plot.Plot, w *faultWindow, y0, y1 float64, named bool) error {
	band, err := plotter.NewPolygon(plotter.XYs{{X: w.from, Y: y0}, {X: w.to, Y: y0}, {X: w.to, Y: y1}, {X: w.from, Y: y1}})
	if err != nil {
		return err
	}
	band.Color, band.LineStyle.Width = faultColor, 0
	p.Add(band)
	if named {
		p.Legend.Add("fault: "+w.name, band)
	}
	if w.recovered > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: w.recovered, Y: y0}, {X: w.recovered, Y: y1}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = color.RGBA{0x1b, 0x9e, 0x47, 0xff}, []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		if named {
			p.Legend.Add("orders placed again, none refused", l)
		}
	}
	return nil
}

var pauseColor = color.NRGBA{0x80, 0x80, 0x80, 0x30}

// shadePauses adds the sampler's pauses up to end to p as grey bands from y0 to y1, with one
// legend entry when named.
func shadePauses(p *plot.Plot, paused [][2]float64, end, y0, y1 float64, named bool) error {
	first := true
	for _, sp := range paused {
		from, to := sp[0], min(sp[1], end)
		if to <= from {
			continue
		}
		band, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: y0}, {X: to, Y: y0}, {X: to, Y: y1}, {X: from, Y: y1}})
		if err != nil {
			return err
		}
		band.Color, band.LineStyle.Width = pauseColor, 0
		p.Add(band)
		if named && first {
			p.Legend.Add("not sampled: MariaDB's statements counted (the average drawn)", band)
		}
		first = false
	}
	return nil
}

// segments are the runs of points whose v is a positive number, in ms: a line breaks where an
// interval had no answer.
func segments(points []point, v func(point) float64) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, p := range points {
		x := v(p)
		if math.IsNaN(x) || x <= 0 {
			if len(cur) > 0 {
				out, cur = append(out, cur), nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: p.at, Y: x * 1e3})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// writeSVG draws the plots as rows of one SVG file (fonts named, not embedded).
func writeSVG(path string, w, h vg.Length, rows [][]*plot.Plot) error {
	img := vgsvg.NewWith(vgsvg.UseWH(w, h), vgsvg.EmbedFonts(false))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: len(rows[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(rows, tiles, dc)
	for i, row := range rows {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// rateBar is one scenario's measured rates for the ceilings chart.
type rateBar struct {
	label                         string
	answers, soldOut, orders, pay float64
}

// ratesOf are the bars of the scenarios that ran: answers/s (wrk), the sold-out run's
// answers/s, orders placed/s (201s over the load's time) and payment callbacks/s.
func ratesOf(results []scenarioResult) []rateBar {
	var out []rateBar
	for _, r := range results {
		if r.skipped || r.load.RPS <= 0 {
			continue
		}
		b := rateBar{label: strconv.Itoa(r.sc.num), answers: r.load.RPS, pay: r.payRate}
		if r.load.Requests > 0 {
			b.orders = float64(r.created) / (float64(r.load.Requests) / r.load.RPS)
		}
		if r.soldOut != nil {
			b.soldOut = r.soldOut.RPS
		}
		out = append(out, b)
	}
	return out
}

// drawSummary writes the ceilings chart of the run: the measured rates per scenario beside the
// ceilings measured at its start.
func (e *env) drawSummary(results []scenarioResult) error {
	bars := ratesOf(results)
	if len(bars) == 0 {
		return nil
	}
	dir, err := e.chartsDir()
	if err != nil {
		return err
	}
	mode := "loadcheck"
	if e.o.chaos {
		mode = "chaos"
	}
	path := filepath.Join(dir, "ceilings-"+mode+".svg")
	if err := writeCeilingsChart(path, bars, e.ceil); err != nil {
		return fmt.Errorf("ceilings chart: %w", err)
	}
	fmt.Printf("\ncharts: %s (the run's scenarios and ceilings-%s.svg)\n", dir, mode)
	return nil
}

// writeCeilingsChart draws two panels of bars per scenario: answers per second against the
// hello ceiling, and orders and callbacks per second against MariaDB's INSERT and pay
// transaction ceilings, each ceiling a horizontal line.
func writeCeilingsChart(path string, bars []rateBar, c ceilings) error {
	names := make([]string, len(bars))
	for i, b := range bars {
		names[i] = b.label
	}
	top, bottom := plot.New(), plot.New()
	top.Title.Text = "measured rates beside this machine's ceilings (same run)"
	top.Y.Label.Text = "answers/s"
	bottom.Y.Label.Text = "per second"
	bottom.X.Label.Text = "scenario"
	width := vg.Points(max(4, min(40, 240/float64(len(bars)))))
	panel := func(p *plot.Plot, series []barSeries, lines []ceilingLine) error {
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.TextStyle.Font.Size = true, vg.Points(8)
		peak := 0.0
		for i, s := range series {
			vals := make(plotter.Values, len(bars))
			for j, b := range bars {
				vals[j] = s.v(b)
				peak = max(peak, vals[j])
			}
			bc, err := plotter.NewBarChart(vals, width)
			if err != nil {
				return err
			}
			bc.Color, bc.LineStyle.Width = s.color, 0
			bc.Offset = width * vg.Length(float64(i)-float64(len(series)-1)/2)
			p.Add(bc)
			p.Legend.Add(s.name, bc)
		}
		for _, cl := range lines {
			if cl.rate <= 0 {
				continue
			}
			peak = max(peak, cl.rate)
			l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: cl.rate}, {X: float64(len(bars)) - 0.5, Y: cl.rate}})
			if err != nil {
				return err
			}
			l.Color, l.Width, l.Dashes = cl.color, vg.Points(1.5), []vg.Length{vg.Points(5), vg.Points(3)}
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s %s/s", cl.name, num(cl.rate)), l)
		}
		p.NominalX(names...)
		p.X.Min, p.X.Max = -0.5, float64(len(bars))-0.5
		p.Y.Min, p.Y.Max = 0, max(peak, 1)*1.5
		p.Y.Tick.Marker = commaTicks{}
		return nil
	}
	grey := color.RGBA{0x44, 0x44, 0x44, 0xff}
	if err := panel(top, []barSeries{
		{"answers/s under load (wrk)", func(b rateBar) float64 { return b.answers }, color.RGBA{0x37, 0x7e, 0xb8, 0xff}},
		{"sold-out answers/s", func(b rateBar) float64 { return b.soldOut }, color.RGBA{0x98, 0x4e, 0xa3, 0xff}},
	}, []ceilingLine{{"ceiling: Fiber hello world", c.hello.RPS, grey}}); err != nil {
		return err
	}
	if err := panel(bottom, []barSeries{
		{"orders placed/s", func(b rateBar) float64 { return b.orders }, color.RGBA{0x1b, 0x9e, 0x47, 0xff}},
		{"payment callbacks/s", func(b rateBar) float64 { return b.pay }, color.RGBA{0xff, 0x7f, 0x00, 0xff}},
	}, []ceilingLine{
		{"ceiling: MariaDB single-row INSERT", c.insert, color.RGBA{0x1b, 0x9e, 0x47, 0xff}},
		{"ceiling: raw pay transaction", c.payTx, color.RGBA{0xff, 0x7f, 0x00, 0xff}},
	}); err != nil {
		return err
	}
	return writeSVG(path, vg.Points(720), vg.Points(540), [][]*plot.Plot{{top}, {bottom}})
}

// commaTicks are gonum's default ticks labelled with thousands separators.
type commaTicks struct{}

func (commaTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = num(t.Value)
		}
	}
	return ticks
}

// secondsTicks label whole seconds at a step of 1, 2, 5, 10, 15, 30 or 60 s, the smallest that
// gives at most 8 labels (gonum's default may label only both ends of a 27 s axis, "0.00" and
// "25.00"), with an unlabelled tick at each labelled step's fifth.
type secondsTicks struct{}

func (secondsTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 60.0
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60} {
		if (hi-lo)/s <= 8 {
			step = s
			break
		}
	}
	minor := step / 5
	if step == 15 || step == 30 {
		minor = step / 3
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/minor) * minor; v <= hi+1e-9; v += minor {
		t := plot.Tick{Value: v}
		if r := math.Mod(v, step); math.Abs(r) < 1e-9 || math.Abs(r-step) < 1e-9 {
			t.Label = strconv.FormatFloat(math.Round(v), 'f', 0, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// logTicks label 1, 2 and 5 times each power of ten on a log axis (gonum's label the powers
// only), with unlabelled ticks between.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for p := math.Floor(math.Log10(lo)); p <= math.Ceil(math.Log10(hi)); p++ {
		for m := 1; m < 10; m++ {
			v := float64(m) * math.Pow(10, p)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

type barSeries struct {
	name  string
	v     func(rateBar) float64
	color color.RGBA
}

type ceilingLine struct {
	name  string
	rate  float64
	color color.RGBA
}
