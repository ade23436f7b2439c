package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// WrkResult is what one wrk run measured.
type WrkResult struct {
	RPS           float64
	Requests      int64
	P50, P90, P99 time.Duration
	Max           time.Duration // the slowest answer (wrk's thread stats)
	Status        map[int]int64 // response-code mix, counted by the Lua script's response()
	// Counts are the script's other tallies, "count <name> <n>" lines (script.lua's error codes
	// and Retry-After headers, etag.lua's revalidations), summed over the runs of a scenario.
	Counts       map[string]int64
	SocketErrors string // wrk's "Socket errors" line, if any
	Raw          string
}

// WrkRun describes one wrk invocation.
type WrkRun struct {
	Threads, Conns int
	Duration       time.Duration
	URL            string
	Script         string   // Lua script path, or "" for a plain GET
	Args           []string // passed to the script after "--"
}

var (
	reRPS     = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	reTotal   = regexp.MustCompile(`(\d+) requests in`)
	reLatency = regexp.MustCompile(`(?m)^\s+(50|90|99)%\s+([\d.]+)(us|ms|s)\s*$`)
	reMax     = regexp.MustCompile(`(?m)^\s+Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\s`)
	reStatus  = regexp.MustCompile(`(?m)^status (\d+) (\d+)$`)
	reCount   = regexp.MustCompile(`(?m)^count (\S+) (\d+)$`)
	reSocket  = regexp.MustCompile(`Socket errors:.*`)
)

// runWrk runs wrk with --latency and parses its report (and the status lines our Lua
// script prints in done()).
func runWrk(ctx context.Context, r WrkRun) (WrkResult, error) {
	args := []string{fmt.Sprintf("-t%d", r.Threads), fmt.Sprintf("-c%d", r.Conns),
		fmt.Sprintf("-d%ds", int(r.Duration.Seconds())), "--latency", "--timeout", "10s"}
	if r.Script != "" {
		args = append(args, "-s", r.Script)
	}
	args = append(args, r.URL)
	if len(r.Args) > 0 {
		args = append(append(args, "--"), r.Args...)
	}
	defer watchLoad(r.URL)() // the sampler reads the loaded instance's /metrics (sampler.go)
	cmd := exec.CommandContext(ctx, "wrk", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return WrkResult{}, fmt.Errorf("wrk %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return parseWrk(out.String())
}

func parseWrk(s string) (WrkResult, error) {
	res := WrkResult{Raw: s, Status: map[int]int64{}, Counts: map[string]int64{}}
	m := reRPS.FindStringSubmatch(s)
	if m == nil {
		return res, fmt.Errorf("wrk output has no Requests/sec:\n%s", s)
	}
	res.RPS, _ = strconv.ParseFloat(m[1], 64)
	if m := reTotal.FindStringSubmatch(s); m != nil {
		res.Requests, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reMax.FindStringSubmatch(s); m != nil {
		res.Max = wrkDuration(m[1], m[2])
	}
	for _, m := range reLatency.FindAllStringSubmatch(s, -1) {
		d := wrkDuration(m[2], m[3])
		switch m[1] {
		case "50":
			res.P50 = d
		case "90":
			res.P90 = d
		case "99":
			res.P99 = d
		}
	}
	for _, m := range reStatus.FindAllStringSubmatch(s, -1) {
		code, _ := strconv.Atoi(m[1])
		n, _ := strconv.ParseInt(m[2], 10, 64)
		res.Status[code] += n
	}
	for _, m := range reCount.FindAllStringSubmatch(s, -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		res.Counts[m[1]] += n
	}
	res.SocketErrors = reSocket.FindString(s)
	return res, nil
}

// wrkDuration is a latency of wrk's report: a number and its unit (us, ms or s).
func wrkDuration(v, unit string) time.Duration {
	f, _ := strconv.ParseFloat(v, 64)
	return time.Duration(f * float64(map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[unit]))
}

// ensureWrk installs wrk (and redis-benchmark, from redis-tools) from Debian's packages when
// they are missing.
func ensureWrk() error {
	var missing []string
	for bin, pkg := range map[string]string{"wrk": "wrk", "redis-benchmark": "redis-tools"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	fmt.Fprintf(os.Stderr, "installing %s with apt-get\n", strings.Join(missing, ", "))
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq"}, missing...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		return err
	}
	_, err := exec.LookPath("redis-benchmark")
	return err
}
