package main

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// svgTexts parses the file as SVG and returns its root's name and every <text> element's
// content, and how many <path> elements it draws.
func svgTexts(t *testing.T, path string) (root string, texts []string, paths int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	inText := false
	var cur strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			switch el.Name.Local {
			case "text":
				inText = true
				cur.Reset()
			case "path":
				paths++
			}
		case xml.CharData:
			if inText {
				cur.Write(el)
			}
		case xml.EndElement:
			if el.Name.Local == "text" {
				inText = false
				texts = append(texts, strings.TrimSpace(cur.String()))
			}
		}
	}
	return root, texts, paths
}

// saleTimeline is a synthetic sale: 201s for 2 s, then 409s; a 503 burst at 2–3 s, an interval
// with no answer at 3.5 s.
func saleTimeline() timeline {
	tl := timeline{start: time.Unix(0, 0), interval: 500 * time.Millisecond}
	for i := 1; i <= 10; i++ {
		at := float64(i) / 2
		p := point{at: at, dt: 0.5, rates: map[string]float64{}, answered: 1000, p50: 0.002 + float64(i)/1e4, p99: 0.02}
		switch {
		case at <= 2:
			p.rates["201 created"] = 9000
		case at <= 3:
			p.rates["5xx error"] = 3000
		case at == 3.5:
			p.answered, p.p50, p.p99 = 0, math.NaN(), math.NaN()
		default:
			p.rates["409 sold out"] = 30000
		}
		tl.points = append(tl.points, p)
	}
	return tl
}

func TestScenarioChartIsAnSVGWithTheAnswersLatencyAndFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scenario-11.svg")
	w := &faultWindow{name: "redis-empty", from: 2, to: 3, recovered: 4}
	tl := saleTimeline()
	tl.paused = [][2]float64{{0, 0.4}, {9, 12}}
	if err := writeScenarioChart(path, "scenario 11: Redis SIGKILLed mid-sale & restarted", tl, w); err != nil {
		t.Fatal(err)
	}
	root, texts, paths := svgTexts(t, path)
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	for _, want := range []string{"scenario 11: Redis SIGKILLed mid-sale & restarted", "201 created", "409 sold out", "5xx error",
		"p50", "p99", "fault: redis-empty", "orders placed again, none refused", "answers/s", "latency, ms (service side)",
		"not sampled: MariaDB's statements counted (the average drawn)"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in the chart (texts: %q)", want, texts)
		}
	}
	for _, absent := range []string{"200 replayed", "4xx refused", "other routes 2xx"} {
		if slices.Contains(texts, absent) {
			t.Errorf("the chart names %q, which never answered", absent)
		}
	}
	// Lines: 3 kinds, p50 and p99 in two segments each (the gap), the band twice, the
	// recovery line twice; grids and axes add more.
	if paths < 3+4+2+2 {
		t.Errorf("%d paths, want at least %d", paths, 3+4+2+2)
	}
}

func TestScenarioChartWithoutFaultOrSamples(t *testing.T) {
	dir := t.TempDir()
	if err := writeScenarioChart(filepath.Join(dir, "a.svg"), "scenario 1", saleTimeline(), nil); err != nil {
		t.Fatal(err)
	}
	_, texts, _ := svgTexts(t, filepath.Join(dir, "a.svg"))
	for _, x := range texts {
		if strings.HasPrefix(x, "fault") || strings.HasPrefix(x, "not sampled") {
			t.Errorf("a chart without fault or pause names %q", x)
		}
	}
	// A load too short for one interval still draws (empty) panels.
	if err := writeScenarioChart(filepath.Join(dir, "b.svg"), "scenario 2", timeline{interval: time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	if root, _, _ := svgTexts(t, filepath.Join(dir, "b.svg")); root != "svg" {
		t.Fatalf("root %q", root)
	}
}

func TestCeilingsChartShowsTheRatesBesideTheCeilings(t *testing.T) {
	results := []scenarioResult{
		{sc: scenario{num: 1}, load: WrkResult{RPS: 30000, Requests: 300000}, created: 1000, payRate: 900,
			soldOut: &WrkResult{RPS: 38000}},
		{sc: scenario{num: 2}, load: WrkResult{RPS: 5000, Requests: 50000}, created: 49000, payRate: 1200},
		{sc: scenario{num: 10}, skipped: true},
	}
	bars := ratesOf(results)
	if len(bars) != 2 || bars[0].orders != 100 || bars[1].orders != 4900 || bars[0].soldOut != 38000 || bars[1].pay != 1200 {
		t.Fatalf("bars %+v", bars)
	}
	path := filepath.Join(t.TempDir(), "ceilings.svg")
	c := ceilings{hello: helloResult{WrkResult: WrkResult{RPS: 60000}}, insert: 6000, payTx: 2500}
	if err := writeCeilingsChart(path, bars, c); err != nil {
		t.Fatal(err)
	}
	root, texts, _ := svgTexts(t, path)
	if root != "svg" {
		t.Fatalf("root %q", root)
	}
	for _, want := range []string{"answers/s under load (wrk)", "sold-out answers/s", "orders placed/s", "payment callbacks/s",
		"ceiling: Fiber hello world 60,000/s", "ceiling: MariaDB single-row INSERT 6,000/s", "ceiling: raw pay transaction 2,500/s", "1", "2"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in the chart (texts: %q)", want, texts)
		}
	}
}

// TestSecondsTicksLabelWholeSeconds: a run's time axis is labelled in whole seconds at a
// readable step, never only at both ends.
func TestSecondsTicksLabelWholeSeconds(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 27.3, []string{"0", "5", "10", "15", "20", "25"}},
		{0, 3.2, []string{"0", "1", "2", "3"}},
		{0, 9.7, []string{"0", "2", "4", "6", "8"}},
		{0, 200, []string{"0", "30", "60", "90", "120", "150", "180"}},
	} {
		var got []string
		for _, tk := range (secondsTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ticks of [%g, %g]: labels %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}
